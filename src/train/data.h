/*
 * data.h - where the trainer's tokens come from.
 *
 * One interface over every data source, so the training loop does not know
 * which it reads: sample i (a global index over the whole run, counted in
 * sequences of seq_len + 1 tokens) is a pure function of the config and i.
 * A data-parallel rank asks for its own slice of each global batch; a
 * resumed run asks for the samples from trainer_state's next_sample on.
 *
 * Sources:
 *   "synthetic"  data/synthetic.h, endless.
 *   "megatron"   one or several .bin/.idx prefixes (data/indexed.h). Each
 *                is split by documents ("969,30,1"; the training split is
 *                read), indexed for total_steps x global batch samples in
 *                Megatron's exact order (data/gptdataset.h, seed = config
 *                seed), and several prefixes are blended by weight the way
 *                Megatron's BlendableDataset does. Everything is built in
 *                train_data_open; fill only copies tokens (no allocation).
 *   "sft"        one prefix from `grit tokenize --sft` (data/sft.h): rows of
 *                examples, packed or padded, with a loss mask and segment
 *                starts (train_data_fill_sft); the split is over examples.
 *
 * The loader's whole state is the sample position, which checkpoints keep
 * as trainer_state's next_sample: a resumed run asks for the samples from
 * there and sees exactly the batches an uninterrupted run would have seen.
 */
#ifndef GRIT_TRAIN_DATA_H
#define GRIT_TRAIN_DATA_H

#include <stdint.h>

#include "core/error.h"
#include "train/config.h"

struct train_megatron;
struct sft_set;

typedef struct train_data {
    const train_cfg *cfg;      /* borrowed */
    struct train_megatron *mg; /* "megatron" source state (owned), else NULL */
    struct sft_set *sft;       /* "sft" source state (owned), else NULL */
} train_data;

/* Opens the configured source; errors name the file and what is wrong.
 * train_data_close frees what open allocated, also after a failed open. */
grit_err train_data_open(train_data *d, const train_cfg *cfg);

/* Fills out[n][len] with samples first .. first+n-1 (len = seq_len + 1).
 * "megatron": GRIT_EINVAL past the samples the index holds (at least
 * total_steps x micro_batch x grad_accum) or for a token id >= the model's
 * vocabulary. */
grit_err train_data_fill(train_data *d, long first, int n, int len, int32_t *out);

/* "sft": also fills mask[n][len] (1 = the target's loss counts) and
 * seg[n][len - 1] (start of each input token's example in its row). */
grit_err train_data_fill_sft(train_data *d, long first, int n, int len, int32_t *out,
                             uint8_t *mask, int32_t *seg);

/* Passes over the data consumed after `samples` samples (0 for endless
 * sources): tokens read / tokens in the training split; for a blend, the
 * largest such figure among its datasets. */
double train_data_epochs(const train_data *d, long samples);

void train_data_close(train_data *d);

#endif
