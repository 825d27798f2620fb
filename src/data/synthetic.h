/*
 * synthetic.h - a deterministic, learnable synthetic token stream.
 *
 * Always available (no files needed), so training, tests and benchmarks
 * run anywhere. Sample i (0-based, global over the whole run) is a pure
 * function of (seed, i): an arithmetic progression modulo K tokens
 * (start and stride drawn per sample) with 10% of positions replaced by
 * random tokens. A model can learn it, so the loss visibly falls, and the
 * data order is a pure function of (seed, step), as resumption requires.
 */
#ifndef GRIT_DATA_SYNTHETIC_H
#define GRIT_DATA_SYNTHETIC_H

#include <stdint.h>

/* Writes n samples of len tokens each, samples first..first+n-1, into out[n][len];
 * tokens are in [0, K). */
void syn_fill(uint64_t seed, int K, long first, int n, int len, int32_t *out);

#endif
