/* synthetic.c - deterministic synthetic token stream (see synthetic.h). */
#include "data/synthetic.h"

#include "core/rng.h"

void syn_fill(uint64_t seed, int K, long first, int n, int len, int32_t *out)
{
    for (int s = 0; s < n; s++) {
        rng_t r;
        rng_seed(&r, seed ^ 0x5eedda7aULL, (uint64_t)(first + s));
        long start = (long)rng_below(&r, (uint64_t)K);
        long stride = 1 + (long)rng_below(&r, 7);
        for (int i = 0; i < len; i++) {
            long tok = (start + (long)i * stride) % K;
            if (rng_below(&r, 10) == 0)
                tok = (long)rng_below(&r, (uint64_t)K);
            out[(long)s * len + i] = (int32_t)tok;
        }
    }
}
