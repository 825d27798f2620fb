/* mt19937.c - numpy-compatible MT19937 and shuffle (see mt19937.h). */
#include "data/mt19937.h"

#define MT_M 397
#define MT_UPPER 0x80000000u
#define MT_LOWER 0x7fffffffu
#define MT_MATRIX 0x9908b0dfu

void mt_seed(mt19937 *m, uint32_t seed)
{
    m->key[0] = seed;
    for (int i = 1; i < MT_N; i++) {
        uint32_t p = m->key[i - 1];
        m->key[i] = 1812433253u * (p ^ (p >> 30)) + (uint32_t)i;
    }
    m->pos = MT_N;
}

void mt_seed_array(mt19937 *m, const uint32_t *init_key, size_t n)
{
    mt_seed(m, 19650218u);
    uint32_t *mt = m->key;
    size_t i = 1, j = 0;
    size_t k = MT_N > n ? MT_N : n;
    for (; k; k--) {
        mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1664525u)) + init_key[j] + (uint32_t)j;
        i++;
        j++;
        if (i >= MT_N) {
            mt[0] = mt[MT_N - 1];
            i = 1;
        }
        if (j >= n)
            j = 0;
    }
    for (k = MT_N - 1; k; k--) {
        mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1566083941u)) - (uint32_t)i;
        i++;
        if (i >= MT_N) {
            mt[0] = mt[MT_N - 1];
            i = 1;
        }
    }
    mt[0] = 0x80000000u; /* non-zero initial state */
    m->pos = MT_N;
}

static void mt_generate(mt19937 *m)
{
    uint32_t *k = m->key, y;
    int i;
    for (i = 0; i < MT_N - MT_M; i++) {
        y = (k[i] & MT_UPPER) | (k[i + 1] & MT_LOWER);
        k[i] = k[i + MT_M] ^ (y >> 1) ^ (-(y & 1u) & MT_MATRIX);
    }
    for (; i < MT_N - 1; i++) {
        y = (k[i] & MT_UPPER) | (k[i + 1] & MT_LOWER);
        k[i] = k[i + (MT_M - MT_N)] ^ (y >> 1) ^ (-(y & 1u) & MT_MATRIX);
    }
    y = (k[MT_N - 1] & MT_UPPER) | (k[0] & MT_LOWER);
    k[MT_N - 1] = k[MT_M - 1] ^ (y >> 1) ^ (-(y & 1u) & MT_MATRIX);
    m->pos = 0;
}

uint32_t mt_next32(mt19937 *m)
{
    if (m->pos >= MT_N)
        mt_generate(m);
    uint32_t y = m->key[m->pos++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

uint64_t mt_next64(mt19937 *m)
{
    uint64_t hi = mt_next32(m);
    return hi << 32 | mt_next32(m);
}

uint64_t mt_interval(mt19937 *m, uint64_t max)
{
    if (max == 0)
        return 0;
    uint64_t mask = max, v;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    mask |= mask >> 32;
    if (max <= 0xffffffffu) {
        while ((v = (mt_next32(m) & mask)) > max)
            ;
    } else {
        while ((v = (mt_next64(m) & mask)) > max)
            ;
    }
    return v;
}

void mt_shuffle_i32(mt19937 *m, int32_t *x, size_t n)
{
    for (size_t i = n > 0 ? n - 1 : 0; i >= 1; i--) {
        size_t j = (size_t)mt_interval(m, i);
        int32_t t = x[j];
        x[j] = x[i];
        x[i] = t;
    }
}

void mt_shuffle_i64(mt19937 *m, int64_t *x, size_t n)
{
    for (size_t i = n > 0 ? n - 1 : 0; i >= 1; i--) {
        size_t j = (size_t)mt_interval(m, i);
        int64_t t = x[j];
        x[j] = x[i];
        x[i] = t;
    }
}
