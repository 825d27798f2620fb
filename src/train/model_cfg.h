/*
 * model_cfg.h - the decoder options of a training config's "model" section
 * (family, GQA, norms, MLP, biases, tying, rope scaling); docs/models.md.
 * Internal to train/: config.c calls these beside its GPT-NeoX shape fields.
 */
#ifndef GRIT_TRAIN_MODEL_CFG_H
#define GRIT_TRAIN_MODEL_CFG_H

#include <jansson.h>

#include "core/jcfg.h"
#include "model/gptneox.h"

/* Keys train__model_options reads (NULL-terminated), for jcfg_only. */
extern const char *const train__model_option_keys[];

/* Reads the option fields of obj into m. has_preset: m already holds a
 * preset's options; otherwise a "family" resets them to that family's. */
grit_err train__model_options(const jcfg *j, json_t *obj, bool has_preset, gx_config *m);

/* Adds the option fields to a dumped "model" object (nothing for GPT-NeoX, so
 * its dump and config fingerprint are what they were before the options). */
void train__model_options_dump(json_t *model, const gx_config *m);

#endif
