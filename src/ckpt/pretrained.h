/*
 * pretrained.h - a model's weights for inference, from a checkpoint step
 * folder or a run directory.
 *
 * PATH may be a run directory (it has ckpt/): its newest checkpoint that
 * verifies (ckpt_find over PATH/ckpt) is taken; otherwise a step folder (or any folder) holding model.safetensors and a
 * Hugging Face config.json (ckpt/hf.h), e.g. runs/x/ckpt/step_00001000 or an
 * exported/downloaded Pythia folder.
 * The model is
 * sized for B = 1, T = 1 (its activation buffers are unused by inference).
 *
 * Ownership: on success *m is initialised (gx_free it); on error it is freed.
 */
#ifndef GRIT_CKPT_PRETRAINED_H
#define GRIT_CKPT_PRETRAINED_H

#include <stddef.h>

#include "core/error.h"
#include "model/gptneox.h"

/* where (cap bytes) receives the folder actually loaded. */
grit_err pretrained_load(const char *path, gx_model *m, int nthreads, char *where, size_t cap);

#endif
