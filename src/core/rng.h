/*
 * rng.h - small deterministic random numbers (splitmix64 seeding, xoshiro256**).
 *
 * Every random choice grit makes (weight init, synthetic data, shuffles)
 * comes from an rng_t seeded from the config's seed plus a stream id, so
 * results are a pure function of (seed, stream) and independent of threads.
 */
#ifndef GRIT_CORE_RNG_H
#define GRIT_CORE_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct rng_t {
    uint64_t s[4];
} rng_t;

static inline uint64_t rng_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline void rng_seed(rng_t *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xd1b54a32d192ed03ULL);
    for (int i = 0; i < 4; i++)
        r->s[i] = rng_splitmix64(&x);
}

static inline uint64_t rng_next(rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t res = ((s[1] * 5) << 7 | (s[1] * 5) >> 57) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return res;
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double rng_uniform(rng_t *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

/* Uniform integer in [0, n) (n > 0), without modulo bias worth noticing for n << 2^64. */
static inline uint64_t rng_below(rng_t *r, uint64_t n) { return rng_next(r) % n; }

/* Standard normal via Box-Muller (one value per call; simple and deterministic). */
static inline double rng_normal(rng_t *r)
{
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Two independent standard normals from one Box-Muller draw. */
static inline void rng_normal2(rng_t *r, double *z1, double *z2)
{
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    double rad = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
    *z1 = rad * cos(th);
    *z2 = rad * sin(th);
}

#endif
