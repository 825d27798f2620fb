/*
 * data.h - where the trainer's tokens come from.
 *
 * One interface over every data source, so the training loop does not know
 * which it reads: sample i (a global index over the whole run, counted in
 * sequences of seq_len + 1 tokens) is a pure function of the config and i.
 * A data-parallel rank asks for its own slice of each global batch; a
 * resumed run asks for the samples from trainer_state's next_sample on.
 *
 * Sources: "synthetic" (data/synthetic.h). The Megatron .bin/.idx loader
 * plugs in here.
 */
#ifndef GRIT_TRAIN_DATA_H
#define GRIT_TRAIN_DATA_H

#include <stdint.h>

#include "core/error.h"
#include "train/config.h"

typedef struct train_data {
    const train_cfg *cfg; /* borrowed */
} train_data;

grit_err train_data_open(train_data *d, const train_cfg *cfg);

/* Fills out[n][len] with samples first .. first+n-1 (len = seq_len + 1). */
grit_err train_data_fill(train_data *d, long first, int n, int len, int32_t *out);

/* Passes over the data consumed after `samples` samples (0 for endless sources). */
double train_data_epochs(const train_data *d, long samples);

void train_data_close(train_data *d);

#endif
