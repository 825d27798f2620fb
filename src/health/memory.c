/*
 * memory.c - the memory check: allocate a fraction of the available memory,
 * write and verify patterns, measure copy bandwidth.
 *
 * Size: mem_fraction x MemAvailable (/proc/meminfo), capped at
 * mem_max_bytes and at least 1 MiB. Patterns, each written over the whole
 * buffer and then read back and compared word by word (64-bit words):
 *   address-in-address  word i holds its own address, then its complement
 *                       (catches address-line faults: a word written via a
 *                       wrong address shows another word's address)
 *   walking ones/zeros  word i holds 1 << (i mod 64), then the complement
 *                       (every data line toggled against its neighbours)
 *   random              xoshiro256** stream, regenerated to verify
 * The first bad word is reported with its offset, expected and actual value
 * and the differing bits. Bandwidth: best of 3 memcpy passes of half the
 * buffer onto the other half, counted as bytes read + bytes written,
 * held to an absolute floor (min_mem_gbps) and, when the baseline has one,
 * to baseline / (2 x slow_factor) - copy bandwidth on a shared node is
 * noisier than sgemm, hence the wider band.
 *
 * Faults: memory_corrupt flips bit fault_bit of one word after the
 * address-in-address pattern is written; slow_memory (or
 * GRIT_HEALTH_SLOWDOWN) scales the timed copies' measured durations.
 */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/bigalloc.h"
#include "core/progress.h"
#include "core/rng.h"
#include "health/baseline.h"
#include "health/health.h"

typedef enum { PAT_ADDR, PAT_ADDR_INV, PAT_WALK1, PAT_WALK0, PAT_RANDOM, PAT_COUNT } mem_pat;
static const char *const pat_names[PAT_COUNT] = {
    "address-in-address", "address-in-address (inverted)", "walking ones", "walking zeros",
    "random"};

static inline uint64_t pat_word(mem_pat p, const uint64_t *w, size_t i)
{
    switch (p) {
    case PAT_ADDR: return (uint64_t)(uintptr_t)&w[i];
    case PAT_ADDR_INV: return ~(uint64_t)(uintptr_t)&w[i];
    case PAT_WALK1: return 1ull << (i & 63);
    case PAT_WALK0: return ~(1ull << (i & 63));
    default: return 0;
    }
}

/* Writes pattern p; returns the number of bad words on verify and describes
 * the first into why. */
static size_t run_pattern(mem_pat p, uint64_t *w, size_t n, uint64_t seed, const health_opts *o,
                          char *why, size_t cap)
{
    rng_t rg;
    if (p == PAT_RANDOM) {
        rng_seed(&rg, seed, 99);
        for (size_t i = 0; i < n; i++)
            w[i] = rng_next(&rg);
        rng_seed(&rg, seed, 99);
    } else {
        for (size_t i = 0; i < n; i++)
            w[i] = pat_word(p, w, i);
    }
    if (p == PAT_ADDR && health_fault_on(o, HF_MEMORY_CORRUPT))
        w[n / 2 + 3] ^= 1ull << o->fault_bit;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t want = p == PAT_RANDOM ? rng_next(&rg) : pat_word(p, w, i);
        if (w[i] != want) {
            if (!bad) {
                uint64_t x = w[i] ^ want;
                snprintf(why, cap, "%s: word at offset 0x%zx expected 0x%016llx, read "
                         "0x%016llx (%d bit(s) differ, lowest bit %d)", pat_names[p],
                         i * sizeof(uint64_t), (unsigned long long)want,
                         (unsigned long long)w[i], __builtin_popcountll(x), __builtin_ctzll(x));
            }
            bad++;
        }
    }
    return bad;
}

grit_err health_check_memory(health_report *r, const health_opts *o)
{
    uint64_t avail = (uint64_t)big_mem_available();
    double want = o->mem_fraction * (double)avail;
    size_t bytes = want > (double)o->mem_max_bytes ? o->mem_max_bytes : (size_t)want;
    if (bytes < ((size_t)1 << 20))
        bytes = (size_t)1 << 20;
    bytes &= ~(size_t)4095;
    size_t n = bytes / sizeof(uint64_t);
    health_result *pr = health_add(r, "memory.patterns");
    health_result *br = health_add(r, "memory.bandwidth");
    if (!pr || !br)
        return grit_errf(GRIT_ENOMEM, "health report full");
    uint64_t *w = NULL;
    if (posix_memalign((void **)&w, 4096, bytes) != 0 || !w) {
        health_set(pr, HEALTH_ERROR, "cannot allocate %zu bytes for the memory test", bytes);
        health_set(br, HEALTH_ERROR, "not measured: no buffer");
        return GRIT_OK;
    }
    size_t bad = 0;
    char why[256] = "";
    int passes = o->mode == HEALTH_DEEP ? 2 : 1;
    for (int pass = 0; pass < passes && !bad; pass++)
        for (int p = 0; p < PAT_COUNT && !bad; p++)
            bad = run_pattern((mem_pat)p, w, n, o->seed + (uint64_t)pass, o, why, sizeof why);
    health_judge(pr, (double)bad, HEALTH_CMP_LE, 0.0, "bad words");
    if (bad)
        snprintf(pr->reason, sizeof pr->reason, "%s; %zu bad word(s) in %.1f MiB", why, bad,
                 bytes / 1048576.0);
    else
        snprintf(pr->reason, sizeof pr->reason,
                 "%.1f MiB (%.2f%% of %.1f GiB available) x %d patterns x %d pass(es) verified",
                 bytes / 1048576.0, 100.0 * (double)bytes / (double)(avail ? avail : 1),
                 avail / 1073741824.0, PAT_COUNT, passes);

    /* Bandwidth: best of 3 copies of half onto the other half. */
    double slow = o->slowdown;
    if (health_fault_on(o, HF_SLOW_MEMORY) && slow == 1.0)
        slow = 1000.0;
    size_t half = bytes / 2;
    double best = 0.0;
    for (int k = 0; k < 3; k++) {
        double t0 = now_seconds();
        memcpy((char *)w + (k & 1 ? 0 : half), (char *)w + (k & 1 ? half : 0), half);
        double dt = now_seconds() - t0;
        dt *= slow; /* scaled, not slept: a 1000x slower copy would take minutes */
        double gbps = 2.0 * (double)half / dt / 1e9;
        best = gbps > best ? gbps : best;
    }
    free(w);
    double thr = o->min_mem_gbps, base;
    int has_base = health_baseline_get(o->baseline, "memory.bandwidth", &base) && base > 0;
    if (has_base && base / (2.0 * o->slow_factor) > thr)
        thr = base / (2.0 * o->slow_factor);
    health_judge(br, best, HEALTH_CMP_GE, thr, "GB/s");
    if (br->verdict == HEALTH_FAIL)
        snprintf(br->reason, sizeof br->reason,
                 "memcpy bandwidth %.2f GB/s below %.2f GB/s (%s)", best, thr,
                 has_base ? "baseline / (2 x slow factor)" : "--min-mem-gbps floor");
    else
        snprintf(br->reason, sizeof br->reason, "memcpy best of 3, read+write bytes");
    return GRIT_OK;
}
