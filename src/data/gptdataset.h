/*
 * gptdataset.h - Megatron's GPT sample order over an indexed dataset:
 * train/valid/test split, doc index, sample index, shuffle index, and the
 * blending index of several datasets.
 *
 * A sample is seq_len + 1 consecutive tokens of the document stream; samples
 * overlap by one token (the last target of one is the first input of the
 * next) and run across document boundaries. Exactly as Megatron's
 * megatron/data/gpt_dataset.py (_build_index_mappings) and helpers.cpp
 * (build_sample_idx, build_blending_indices) build them, with numpy's
 * RandomState(seed) shuffles (mt19937.h), so the same seed gives the same
 * samples in the same order as a Megatron run over the same files:
 *
 *   split    "969,30,1" -> document bounds, get_train_valid_test_split_
 *            (weights normalised, each share round()ed half-to-even, the
 *            rounding excess taken off every bound).
 *   epochs   E = fewest passes with (E * tokens_per_epoch - 1) / seq_len
 *            >= num_samples.
 *   doc_idx  the split's documents repeated E times, shuffled as one array;
 *            when E > 1 and the last epoch supplies fewer than
 *            int(0.80 * samples_per_epoch) samples, the first E-1 epochs and
 *            the last one are shuffled separately ("separate last epoch").
 *   sample_idx  (n + 1) rows (position in doc_idx, token offset): sample s
 *            starts at row s and ends (inclusive) at row s+1's token;
 *            n = (E * tokens_per_epoch - 1) / seq_len.
 *   shuffle_idx a permutation of [0, n): one shuffle, or with a separate
 *            last epoch two (the first E-1 epochs' samples, then the rest).
 *   sample i = the tokens of sample_idx row shuffle_idx[i].
 *   blend    sample i of a blend comes from the dataset whose achieved share
 *            lags its weight most (weight * max(i, 1) - used, first on ties),
 *            and is that dataset's next unused sample.
 *
 * Every index is in memory (12-16 bytes per sample, 4 per document and
 * epoch), built in O(documents * epochs + samples); nothing is cached on
 * disk. Ownership: gpt_index_build fills a caller-owned struct whose arrays
 * gpt_index_free releases (a zeroed struct frees as a no-op).
 */
#ifndef GRIT_DATA_GPTDATASET_H
#define GRIT_DATA_GPTDATASET_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/indexed.h"

/* Megatron's get_train_valid_test_split_: "a,b,c" (or "a/b/c"; missing
 * shares are 0, extra ones ignored) over n documents -> bounds[0..3],
 * bounds[0] = 0, bounds[3] = n; split k is documents [bounds[k], bounds[k+1]).
 * GRIT_EINVAL (with context) for a malformed string or shares summing <= 0. */
grit_err gpt_split(const char *spec, size_t n, size_t bounds[4]);

typedef struct gpt_index {
    int32_t *doc_idx;     /* [n_doc] document ids (sequence numbers), shuffled */
    size_t n_doc;
    int64_t *sample_idx;  /* [n_samples + 1][2]: doc_idx position, token offset */
    int64_t *shuffle_idx; /* [n_samples] */
    int64_t n_samples;
    int64_t tokens_per_epoch;
    int num_epochs;
    int separate_last_epoch;
    int seq_len;
} gpt_index;

/* Builds the index of documents [doc_begin, doc_end) of sizes[] for at least
 * num_samples samples of seq_len + 1 tokens. GRIT_EINVAL for an empty
 * range, no tokens, or a seed numpy would refuse is the caller's to check
 * (seed is already 32-bit here). */
grit_err gpt_index_build(gpt_index *g, const int32_t *sizes, size_t doc_begin, size_t doc_end,
                         int64_t num_samples, int seq_len, uint32_t seed);
void gpt_index_free(gpt_index *g);

/* Copies sample i (0 <= i < n_samples) of r as seq_len + 1 tokens. */
grit_err gpt_sample(const idx_reader *r, const gpt_index *g, int64_t i, int32_t *out);

/* Megatron's blend weights: w1 = raw / sum(raw) (Python float sum) sizes each
 * dataset's sample count, ceil(total * w1 * 1.005); w2 = w1 / numpy.sum(w1)
 * drives build_blending_indices. GRIT_EINVAL if a weight is negative or the
 * sum is not positive. */
grit_err gpt_blend_weights(const double *raw, int k, double *w1, double *w2);
int64_t gpt_blend_samples(double w1, int64_t total);

/* build_blending_indices: for i in [0, size): which[i] = dataset, at[i] =
 * its sample index. k <= 255. */
void gpt_blend_build(const double *w2, int k, int64_t size, uint8_t *which, int64_t *at);

#endif
