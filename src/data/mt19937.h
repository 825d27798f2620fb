/*
 * mt19937.h - numpy's legacy RandomState generator, bit for bit: MT19937
 * seeded as RandomState(seed) seeds it, and the bounded-integer rule that
 * RandomState.shuffle / permutation use.
 *
 * Why: Megatron builds its sample order with numpy.random.RandomState(seed)
 * shuffles. Reproducing that order exactly (same seed -> same batches as a
 * Megatron run) needs the same generator, the same seeding and the same
 * rejection rule, not merely "a good shuffle".
 *
 * What numpy does (numpy/random/_mt19937.pyx, mtrand.pyx, distributions.c):
 *   - RandomState(int s), 0 <= s < 2^32: the reference init_genrand(s)
 *     (mt_seed). An array seed uses init_by_array (mt_seed_array).
 *   - shuffle(x) of a 1-D array of n items: for i = n-1 down to 1,
 *     j = interval(i), swap x[i], x[j].
 *   - interval(max): mask = smallest 2^k-1 >= max; draw (32-bit outputs when
 *     max fits 32 bits, else 64-bit outputs built high word first) and AND
 *     with mask until the value is <= max. No modulo, no multiply.
 *
 * The state is a plain struct (caller-owned, no allocation). Not
 * thread-safe: one generator per thread.
 */
#ifndef GRIT_DATA_MT19937_H
#define GRIT_DATA_MT19937_H

#include <stddef.h>
#include <stdint.h>

#define MT_N 624

typedef struct mt19937 {
    uint32_t key[MT_N];
    int pos;
} mt19937;

/* init_genrand(seed): numpy RandomState(seed) for an integer seed. */
void mt_seed(mt19937 *m, uint32_t seed);

/* init_by_array(key, n): numpy RandomState([k0, k1, ...]). */
void mt_seed_array(mt19937 *m, const uint32_t *init_key, size_t n);

uint32_t mt_next32(mt19937 *m);
/* High word first, as numpy's mt19937_next64. */
uint64_t mt_next64(mt19937 *m);

/* numpy's legacy random_interval: uniform in [0, max] by masked rejection. */
uint64_t mt_interval(mt19937 *m, uint64_t max);

/* RandomState.shuffle of a 1-D array of n elements of the given type. */
void mt_shuffle_i32(mt19937 *m, int32_t *x, size_t n);
void mt_shuffle_i64(mt19937 *m, int64_t *x, size_t n);

#endif
