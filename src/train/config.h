/*
 * config.h - the training configuration: parse, validate, resolve, write.
 *
 * A config file is a JSON object:
 *   {"model": "pythia-14m" | {"preset": "...", <overrides>} | {<every field>},
 *    "optim": {...}, "seed": 1234, "threads": 2,
 *    "data": {"source": "synthetic", "synthetic_vocab": 512},
 *    "run_dir": "runs/demo", "log_every": 1}
 * Every unknown field, wrong type and out-of-range value is an error naming
 * the file, line:column, field and what was expected (core/jcfg.h). The
 * resolved config (every default filled in) is what the run directory keeps.
 */
#ifndef GRIT_TRAIN_CONFIG_H
#define GRIT_TRAIN_CONFIG_H

#include <stdint.h>

#include "core/error.h"
#include "model/gptneox.h"
#include "train/optim.h"

typedef struct train_cfg {
    char preset[32];       /* "" when every field was given */
    gx_config model;
    int vocab_divisor;     /* make_vocab_size_divisible_by */
    optim_cfg optim;
    uint64_t seed;
    int threads;
    char data_source[16];  /* "synthetic" */
    int synthetic_vocab;   /* tokens used by the synthetic stream */
    char run_dir[1024];
    int log_every;
} train_cfg;

/* Defaults for everything (model pythia-14m). */
void train_cfg_defaults(train_cfg *c);

/* Parses path over the defaults. */
grit_err train_cfg_load(train_cfg *c, const char *path);
/* Same, from a string; name is used in messages. */
grit_err train_cfg_load_string(train_cfg *c, const char *name, const char *text);

/* The resolved config as JSON text (caller frees). */
char *train_cfg_dump(const train_cfg *c);

#endif
