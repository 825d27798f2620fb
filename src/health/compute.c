/*
 * compute.c - the compute known-answer test (silent-data-corruption check),
 * the bitwise determinism digest and GEMM throughput.
 *
 * Known answers: seeded inputs (core/rng.h) go through the trainer's own
 * code paths - sgemm via tensor/matmul.h in all three shapes the model uses,
 * op_layernorm_fwd, op_attention_fwd/bwd and adamw_update - and every output
 * element is compared with a double-precision reference computed here.
 * Errors are measured in units of u = 2^-24 (fp32 unit roundoff):
 *   gemm       |c - ref| / ((K+2) u sum_k |a_ik b_kj|)  <= 1
 *              (the worst-case rounding bound of any summation order, so a
 *              correct sgemm can never exceed 1; typical values are ~0.01)
 *   layernorm  |y - ref| / (u (1 + |ref|))               <= LN_TOL_U
 *   attention  |o - ref| / (u (1 + max|ref|))            <= ATT_TOL_U (fwd and bwd)
 *   adamw      |p - ref| / (u (|p_0| + |update_ref|)), same for m and v
 *              relative to the sum of their terms's magnitudes <= ADAM_TOL_U
 * The constants are 15-70x the largest error seen on a healthy CPU (2.6, 7
 * and 9 u in quick mode) and far
 * below what a flipped exponent or high mantissa bit produces.
 *
 * Digest: the whole suite runs twice on the same inputs; the fp32 outputs of
 * both runs must be identical byte for byte (xxh3-64 over every buffer). A
 * flip of any single bit, even one too small for the tolerance above, shows
 * up here, and the first differing element and bit are named. When the
 * baseline holds a digest for the same thread count, it must match too.
 *
 * Throughput: best-of-trials GFLOP/s of a square sgemm (noise on a shared
 * node only ever slows a trial, so the best trial is the stable statistic),
 * failed when below baseline / slow_factor; skipped without a baseline. It
 * runs on gemm_threads threads, 1 by default: on a node whose cores are
 * shared, a multi-threaded OpenMP GEMM collapses (we measured 205 vs 14
 * GFLOP/s in back-to-back runs on 2 busy cores: one descheduled thread stalls
 * the team), while one thread gives the per-core rate within ~3%. A slow
 * clock, thermal throttling or a wrong BLAS kernel shows on every core.
 *
 * Faults: gemm_bitflip / layernorm_corrupt / attention_corrupt /
 * adamw_corrupt flip bit opts->fault_bit of one output element of the first
 * run; GRIT_HEALTH_SLOWDOWN (or slow_compute) stretches each timed trial.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/progress.h"
#include "core/rng.h"
#include "health/baseline.h"
#include "health/health.h"
#include "model/gptneox.h"
#include "tensor/matmul.h"
#include "tensor/ops.h"
#include "tensor/adamw.h"

#define U_F32 (1.0 / 16777216.0)
#define LN_TOL_U 64.0
#define ATT_TOL_U 512.0
#define ADAM_TOL_U 128.0

/* Problem sizes of the known-answer suite. */
typedef struct kat_dims {
    int gm, gn, gk;          /* gemm */
    int ln_n, ln_c;          /* layernorm */
    int ab, at, ah, ahd;     /* attention B, T, heads, head_dim */
    int an;                  /* adamw elements */
} kat_dims;

/* One run's outputs; inputs are shared between runs. */
typedef struct kat_out {
    float *c_nt, *c_nn, *c_tn;         /* [gm*gn] each */
    float *ln, *ln_mean, *ln_rstd;     /* [ln_n*ln_c], [ln_n], [ln_n] */
    float *att, *lse, *dqkv;           /* [B*T*C], [B*H*T], [B*T*3C] */
    float *p, *m, *v;                  /* adamw state after one step, [an] each */
} kat_out;

typedef struct kat_in {
    float *a, *b;                      /* gemm operands [gm*gk], [gn*gk] (also read as [gk*gn]) */
    float *at;                         /* [gk*gm] for mm_tn */
    float *x, *w, *bias;               /* layernorm */
    float *qkv, *dout;                 /* attention */
    float *p0, *g0, *m0, *v0;          /* adamw */
    float *scratch;
} kat_in;

typedef struct kat_buf { const char *name; size_t n; float *a, *b; } kat_buf;

static float *falloc(size_t n, int *bad)
{
    float *p = calloc(n ? n : 1, sizeof(float));
    if (!p)
        *bad = 1;
    return p;
}

static void fill_normal(float *x, size_t n, rng_t *r, double scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(rng_normal(r) * scale);
}

static void flip_bit(float *x, int bit)
{
    uint32_t w;
    memcpy(&w, x, 4);
    w ^= 1u << bit;
    memcpy(x, &w, 4);
}

static void run_suite(const kat_dims *d, const kat_in *in, kat_out *o)
{
    mm_nt(d->gm, d->gn, d->gk, 1.0f, in->a, d->gk, in->b, d->gk, 0.0f, o->c_nt, d->gn);
    mm_nn(d->gm, d->gn, d->gk, 1.0f, in->a, d->gk, in->b, d->gn, 0.0f, o->c_nn, d->gn);
    mm_tn(d->gm, d->gn, d->gk, 1.0f, in->at, d->gm, in->b, d->gn, 0.0f, o->c_tn, d->gn);
    op_layernorm_fwd(o->ln, o->ln_mean, o->ln_rstd, in->x, in->w, in->bias, d->ln_n, d->ln_c,
                     1e-5f);
    op_attention_fwd(o->att, o->lse, in->qkv, d->ab, d->at, d->ah, d->ahd, in->scratch);
    op_attention_bwd(o->dqkv, in->dout, o->att, o->lse, in->qkv, d->ab, d->at, d->ah, d->ahd,
                     in->scratch);
    /* AdamW: the trainer's update (tensor/adamw.h), with weight decay. */
    memcpy(o->p, in->p0, sizeof(float) * (size_t)d->an);
    memcpy(o->m, in->m0, sizeof(float) * (size_t)d->an);
    memcpy(o->v, in->v0, sizeof(float) * (size_t)d->an);
    adamw_cfg oc = {.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
    adamw_update(&oc, 7, 3e-4, 0.75f, true, d->an, o->p, in->g0, o->m, o->v);
}

/* ---- double-precision references ----------------------------------------- */

/* Max over elements of |c - ref| / ((K+2) u sum|a b|); *at receives the index. */
static double gemm_err(const float *c, int M, int N, int K, const float *A, long sam, long sak,
                       const float *B, long sbk, long sbn, long *at)
{
    double worst = 0.0;
    *at = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0.0, sa = 0.0;
            for (int k = 0; k < K; k++) {
                double p = (double)A[i * sam + k * sak] * (double)B[k * sbk + j * sbn];
                s += p;
                sa += fabs(p);
            }
            double e = fabs((double)c[(long)i * N + j] - s) / ((K + 2) * U_F32 * sa + 1e-300);
            if (!(e <= worst)) { /* NaN counts as worst */
                worst = isnan(e) ? INFINITY : e;
                *at = (long)i * N + j;
            }
        }
    return worst;
}

static double layernorm_err(const kat_dims *d, const kat_in *in, const float *y, long *at)
{
    double worst = 0.0;
    *at = 0;
    int N = d->ln_n, C = d->ln_c;
    for (int n = 0; n < N; n++) {
        const float *x = in->x + (long)n * C;
        double mu = 0.0, var = 0.0;
        for (int c = 0; c < C; c++)
            mu += x[c];
        mu /= C;
        for (int c = 0; c < C; c++)
            var += (x[c] - mu) * (x[c] - mu);
        double r = 1.0 / sqrt(var / C + 1e-5);
        for (int c = 0; c < C; c++) {
            double ref = (x[c] - mu) * r * in->w[c] + in->bias[c];
            double e = fabs(y[(long)n * C + c] - ref) / (U_F32 * (1.0 + fabs(ref)));
            if (!(e <= worst)) {
                worst = isnan(e) ? INFINITY : e;
                *at = (long)n * C + c;
            }
        }
    }
    return worst;
}

/* Attention forward and backward in double with full T x T matrices;
 * returns the worst normalised error over out and dqkv. */
static double attention_err(const kat_dims *d, const kat_in *in, const kat_out *o, long *at,
                            const char **which)
{
    int B = d->ab, T = d->at, H = d->ah, HD = d->ahd, C = H * HD;
    double scale = 1.0 / sqrt((double)HD), worst = 0.0;
    double *P = malloc(sizeof(double) * (size_t)T * T), *dP = malloc(sizeof(double) * (size_t)T * T);
    double *O = malloc(sizeof(double) * (size_t)T * HD);
    double *ref = malloc(sizeof(double) * (size_t)B * T * 3 * C);
    double *refo = malloc(sizeof(double) * (size_t)B * T * C);
    *at = 0;
    *which = "out";
    if (!P || !dP || !O || !ref || !refo) {
        worst = NAN;
        goto out;
    }
#define Q(b, t, h, k) ((double)in->qkv[((long)(b) * T + (t)) * 3 * C + (h) * 3 * HD + (k)])
#define DO(b, t, h, k) ((double)in->dout[((long)(b) * T + (t)) * C + (h) * HD + (k)])
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            for (int i = 0; i < T; i++) {
                double mx = -INFINITY, s = 0.0;
                for (int j = 0; j <= i; j++) {
                    double v = 0.0;
                    for (int k = 0; k < HD; k++)
                        v += Q(b, i, h, k) * Q(b, j, h, HD + k);
                    P[i * T + j] = v * scale;
                    mx = fmax(mx, P[i * T + j]);
                }
                for (int j = 0; j <= i; j++)
                    s += (P[i * T + j] = exp(P[i * T + j] - mx));
                for (int j = 0; j <= i; j++)
                    P[i * T + j] /= s;
                for (int k = 0; k < HD; k++) {
                    double acc = 0.0;
                    for (int j = 0; j <= i; j++)
                        acc += P[i * T + j] * Q(b, j, h, 2 * HD + k);
                    O[i * HD + k] = acc;
                    refo[((long)b * T + i) * C + h * HD + k] = acc;
                }
            }
            for (int i = 0; i < T; i++) {
                double D = 0.0;
                for (int k = 0; k < HD; k++)
                    D += DO(b, i, h, k) * O[i * HD + k];
                for (int j = 0; j <= i; j++) {
                    double v = 0.0;
                    for (int k = 0; k < HD; k++)
                        v += DO(b, i, h, k) * Q(b, j, h, 2 * HD + k);
                    dP[i * T + j] = P[i * T + j] * (v - D) * scale;
                }
            }
            for (int t = 0; t < T; t++)
                for (int k = 0; k < HD; k++) {
                    double q = 0.0, kk = 0.0, v = 0.0;
                    for (int j = 0; j <= t; j++)
                        q += dP[t * T + j] * Q(b, j, h, HD + k);
                    for (int i = t; i < T; i++) {
                        kk += dP[i * T + t] * Q(b, i, h, k);
                        v += P[i * T + t] * DO(b, i, h, k);
                    }
                    long base = ((long)b * T + t) * 3 * C + h * 3 * HD;
                    ref[base + k] = q;
                    ref[base + HD + k] = kk;
                    ref[base + 2 * HD + k] = v;
                }
        }
#undef Q
#undef DO
    double mo = 0.0, mg = 0.0;
    long no = (long)B * T * C, ng = (long)B * T * 3 * C;
    for (long i = 0; i < no; i++)
        mo = fmax(mo, fabs(refo[i]));
    for (long i = 0; i < ng; i++)
        mg = fmax(mg, fabs(ref[i]));
    for (long i = 0; i < no; i++) {
        double e = fabs(o->att[i] - refo[i]) / (U_F32 * (1.0 + mo));
        if (!(e <= worst)) {
            worst = isnan(e) ? INFINITY : e;
            *at = i;
            *which = "out";
        }
    }
    for (long i = 0; i < ng; i++) {
        double e = fabs(o->dqkv[i] - ref[i]) / (U_F32 * (1.0 + mg));
        if (!(e <= worst)) {
            worst = isnan(e) ? INFINITY : e;
            *at = i;
            *which = "dqkv";
        }
    }
out:
    free(P);
    free(dP);
    free(O);
    free(ref);
    free(refo);
    return worst;
}

static double adamw_err(const kat_dims *d, const kat_in *in, const kat_out *o, long *at)
{
    const double b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, lr = 3e-4, clip = 0.75f;
    const long t = 7;
    double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t), worst = 0.0;
    *at = 0;
    for (long i = 0; i < d->an; i++) {
        double g = (double)in->g0[i] * clip;
        double m = b1 * in->m0[i] + (1.0 - b1) * g;
        double v = b2 * in->v0[i] + (1.0 - b2) * g * g;
        double upd = lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps);
        double p = in->p0[i] * (1.0 - lr * wd) - upd;
        double e = fabs(o->p[i] - p) / (U_F32 * (fabs((double)in->p0[i]) + fabs(upd)));
        /* m and v: relative to the magnitudes summed (m can cancel to ~0). */
        e = fmax(e, fabs(o->m[i] - m) /
                        (U_F32 * (b1 * fabs((double)in->m0[i]) + (1.0 - b1) * fabs(g) + 1e-30)));
        e = fmax(e, fabs(o->v[i] - v) / (U_F32 * (b2 * in->v0[i] + (1.0 - b2) * g * g + 1e-30)));
        if (!(e <= worst)) {
            worst = isnan(e) ? INFINITY : e;
            *at = i;
        }
    }
    return worst;
}

/* ---- digest --------------------------------------------------------------- */

/* Compares two runs' buffers bit for bit; on a difference describes the first
 * differing element into why. Returns the number of differing elements. */
static long compare_runs(const kat_buf *bufs, int nb, char *why, size_t cap)
{
    long diff = 0;
    why[0] = '\0';
    for (int k = 0; k < nb; k++) {
        const uint32_t *a = (const uint32_t *)(const void *)bufs[k].a;
        const uint32_t *b = (const uint32_t *)(const void *)bufs[k].b;
        for (size_t i = 0; i < bufs[k].n; i++) {
            uint32_t x = a[i] ^ b[i];
            if (!x)
                continue;
            if (!diff) {
                int nbits = __builtin_popcount(x), bit = __builtin_ctz(x);
                if (nbits == 1)
                    snprintf(why, cap, "%s[%zu] differs between two identical runs: 0x%08x vs "
                             "0x%08x (bit %d flipped)", bufs[k].name, i, a[i], b[i], bit);
                else
                    snprintf(why, cap, "%s[%zu] differs between two identical runs: 0x%08x vs "
                             "0x%08x (%d bits differ, lowest bit %d)", bufs[k].name, i, a[i],
                             b[i], nbits, bit);
            }
            diff++;
        }
    }
    return diff;
}

static uint64_t digest_of(const kat_buf *bufs, int nb, int second)
{
    XXH3_state_t *st = XXH3_createState();
    if (!st)
        return 0;
    XXH3_64bits_reset(st);
    for (int k = 0; k < nb; k++)
        XXH3_64bits_update(st, second ? bufs[k].b : bufs[k].a, bufs[k].n * sizeof(float));
    uint64_t h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return h;
}

/* ---- throughput ------------------------------------------------------------ */

static void spin_until(double t) { while (now_seconds() < t) { } }

/* Best GFLOP/s over trials of `calls` sgemm calls of size n; *trials_out the count. */
static double gemm_gflops(const health_opts *o, int n, float *A, float *Bm, float *Cm,
                          int *trials_out)
{
    int calls = 4, min_trials = o->mode == HEALTH_DEEP ? 20 : 8;
    double budget = o->mode == HEALTH_DEEP ? o->deep_seconds : 0.6;
    double flops = 2.0 * n * n * (double)n * calls, best = 0.0;
    double t_start = now_seconds();
    int trials = 0, saved = omp_get_max_threads();
    if (o->gemm_threads > 0)
        omp_set_num_threads(o->gemm_threads);
    mm_nn(n, n, n, 1.0f, A, n, Bm, n, 0.0f, Cm, n); /* warm-up: thread pool, caches */
    while (trials < min_trials || (now_seconds() - t_start < budget && trials < 100000)) {
        double t0 = now_seconds();
        for (int c = 0; c < calls; c++)
            mm_nn(n, n, n, 1.0f, A, n, Bm, n, 0.0f, Cm, n);
        double dt = now_seconds() - t0;
        if (o->slowdown > 1.0) {
            spin_until(t0 + dt * o->slowdown);
            dt *= o->slowdown;
        }
        double g = flops / dt / 1e9;
        best = g > best ? g : best;
        trials++;
        if (o->mode != HEALTH_DEEP && now_seconds() - t_start > 3.0)
            break;
    }
    omp_set_num_threads(saved);
    *trials_out = trials;
    return best;
}

/* ---- the check ------------------------------------------------------------- */

static void kat_result(health_report *r, const char *name, double err, double tol,
                       const char *what, long at)
{
    health_result *res = health_add(r, "%s", name);
    if (!res)
        return;
    health_judge(res, err, HEALTH_CMP_LE, tol, "u");
    if (res->verdict == HEALTH_FAIL)
        snprintf(res->reason, sizeof res->reason,
                 "%s[%ld] is %.3g u away from the double-precision reference, tolerance %.0f u "
                 "(silent data corruption)", what, at, err, tol);
    else
        snprintf(res->reason, sizeof res->reason, "max error %.3g u (u = 2^-24)", err);
}

grit_err health_check_compute(health_report *r, const health_opts *o)
{
    if (o->threads > 0)
        omp_set_num_threads(o->threads);
    int nthreads = omp_get_max_threads();
    r->threads = nthreads;
    int deep = o->mode == HEALTH_DEEP;
    kat_dims d = {.gm = deep ? 320 : 160, .gn = deep ? 288 : 144, .gk = deep ? 352 : 176,
                  .ln_n = 64, .ln_c = 256, .ab = deep ? 2 : 1, .at = deep ? 160 : 80,
                  .ah = 4, .ahd = 32, .an = 4096};
    int C = d.ah * d.ahd, bad = 0;
    size_t ng = (size_t)d.gm * d.gn, nqkv = (size_t)d.ab * d.at * 3 * C;
    kat_in in = {0};
    kat_out run[2];
    memset(run, 0, sizeof run);
    in.a = falloc((size_t)d.gm * d.gk, &bad);
    in.b = falloc((size_t)d.gk * d.gn, &bad);
    in.at = falloc((size_t)d.gk * d.gm, &bad);
    in.x = falloc((size_t)d.ln_n * d.ln_c, &bad);
    in.w = falloc((size_t)d.ln_c, &bad);
    in.bias = falloc((size_t)d.ln_c, &bad);
    in.qkv = falloc(nqkv, &bad);
    in.dout = falloc((size_t)d.ab * d.at * C, &bad);
    in.p0 = falloc((size_t)d.an, &bad);
    in.g0 = falloc((size_t)d.an, &bad);
    in.m0 = falloc((size_t)d.an, &bad);
    in.v0 = falloc((size_t)d.an, &bad);
    in.scratch = falloc((size_t)op_attention_scratch_floats(d.at, nthreads), &bad);
    for (int k = 0; k < 2; k++) {
        kat_out *x = &run[k];
        x->c_nt = falloc(ng, &bad);
        x->c_nn = falloc(ng, &bad);
        x->c_tn = falloc(ng, &bad);
        x->ln = falloc((size_t)d.ln_n * d.ln_c, &bad);
        x->ln_mean = falloc((size_t)d.ln_n, &bad);
        x->ln_rstd = falloc((size_t)d.ln_n, &bad);
        x->att = falloc((size_t)d.ab * d.at * C, &bad);
        x->lse = falloc((size_t)d.ab * d.ah * d.at, &bad);
        x->dqkv = falloc(nqkv, &bad);
        x->p = falloc((size_t)d.an, &bad);
        x->m = falloc((size_t)d.an, &bad);
        x->v = falloc((size_t)d.an, &bad);
    }
    int tn = deep ? 1024 : 384; /* throughput matrix size */
    float *TA = falloc((size_t)tn * tn, &bad), *TB = falloc((size_t)tn * tn, &bad);
    float *TC = falloc((size_t)tn * tn, &bad);
    if (bad) {
        health_result *res = health_add(r, "compute.kat");
        if (res)
            health_set(res, HEALTH_ERROR, "cannot allocate the compute test buffers");
        goto out;
    }

    rng_t rg;
    rng_seed(&rg, o->seed, 1);
    fill_normal(in.a, (size_t)d.gm * d.gk, &rg, 1.0);
    fill_normal(in.b, (size_t)d.gk * d.gn, &rg, 1.0);
    for (int i = 0; i < d.gm; i++) /* in.at holds A transposed: same products for mm_tn */
        for (int k = 0; k < d.gk; k++)
            in.at[(long)k * d.gm + i] = in.a[(long)i * d.gk + k];
    fill_normal(in.x, (size_t)d.ln_n * d.ln_c, &rg, 2.0);
    for (int c = 0; c < d.ln_c; c++) {
        in.x[c] += 3.0f; /* an offset row: the mean matters */
        in.w[c] = (float)(1.0 + 0.1 * rng_normal(&rg));
        in.bias[c] = (float)(0.1 * rng_normal(&rg));
    }
    fill_normal(in.qkv, nqkv, &rg, 1.0);
    fill_normal(in.dout, (size_t)d.ab * d.at * C, &rg, 1.0);
    fill_normal(in.p0, (size_t)d.an, &rg, 0.05);
    fill_normal(in.g0, (size_t)d.an, &rg, 0.01);
    fill_normal(in.m0, (size_t)d.an, &rg, 0.001);
    for (long i = 0; i < d.an; i++)
        in.v0[i] = (float)(1e-5 * rng_uniform(&rg));
    fill_normal(TA, (size_t)tn * tn, &rg, 1.0);
    fill_normal(TB, (size_t)tn * tn, &rg, 1.0);

    run_suite(&d, &in, &run[0]);
    run_suite(&d, &in, &run[1]);

    /* Injected corruption: one bit of one output element of the first run. */
    long gidx = (long)(d.gm / 3) * d.gn + d.gn / 2;
    if (health_fault_on(o, HF_GEMM_BITFLIP))
        flip_bit(&run[0].c_nt[gidx], o->fault_bit);
    if (health_fault_on(o, HF_LAYERNORM_CORRUPT))
        flip_bit(&run[0].ln[(long)d.ln_n / 2 * d.ln_c + 7], o->fault_bit);
    if (health_fault_on(o, HF_ATTENTION_CORRUPT))
        flip_bit(&run[0].att[(long)d.at / 2 * C + 5], o->fault_bit);
    if (health_fault_on(o, HF_ADAMW_CORRUPT))
        flip_bit(&run[0].p[d.an / 2], o->fault_bit);

    kat_out *x = &run[0];
    long at;
    double e, e2;
    long at2;
    char what[64];
    /* gemm: nt reads B as [N,K]; nn and tn read it as [K,N]. */
    e = gemm_err(x->c_nt, d.gm, d.gn, d.gk, in.a, d.gk, 1, in.b, 1, d.gk, &at);
    snprintf(what, sizeof what, "sgemm_nt C");
    e2 = gemm_err(x->c_nn, d.gm, d.gn, d.gk, in.a, d.gk, 1, in.b, d.gn, 1, &at2);
    if (!(e2 <= e)) {
        e = e2;
        at = at2;
        snprintf(what, sizeof what, "sgemm_nn C");
    }
    e2 = gemm_err(x->c_tn, d.gm, d.gn, d.gk, in.at, 1, d.gm, in.b, d.gn, 1, &at2);
    if (!(e2 <= e)) {
        e = e2;
        at = at2;
        snprintf(what, sizeof what, "sgemm_tn C");
    }
    {
        char w2[96];
        snprintf(w2, sizeof w2, "%s[%ld][%ld]", what, at / d.gn, at % d.gn);
        health_result *res = health_add(r, "compute.gemm_kat");
        if (res) {
            health_judge(res, e, HEALTH_CMP_LE, 1.0, "x bound");
            if (res->verdict == HEALTH_FAIL)
                snprintf(res->reason, sizeof res->reason,
                         "%s is %.3g x the worst-case fp32 rounding bound (K+2)u sum|ab| away "
                         "from the double-precision reference (silent data corruption)",
                         w2, e);
            else
                snprintf(res->reason, sizeof res->reason,
                         "%dx%dx%d in 3 shapes; max error %.3g x bound", d.gm, d.gn, d.gk, e);
        }
    }
    e = layernorm_err(&d, &in, x->ln, &at);
    snprintf(what, sizeof what, "layernorm out");
    kat_result(r, "compute.layernorm_kat", e, LN_TOL_U, what, at);
    const char *which;
    e = attention_err(&d, &in, x, &at, &which);
    snprintf(what, sizeof what, "attention %s", which);
    kat_result(r, "compute.attention_kat", e, ATT_TOL_U, what, at);
    e = adamw_err(&d, &in, x, &at);
    snprintf(what, sizeof what, "adamw param");
    kat_result(r, "compute.adamw_kat", e, ADAM_TOL_U, what, at);

    /* Digest: run 0 vs run 1, bit for bit. */
    {
        kat_buf bufs[] = {
            {"sgemm_nt C", ng, run[0].c_nt, run[1].c_nt},
            {"sgemm_nn C", ng, run[0].c_nn, run[1].c_nn},
            {"sgemm_tn C", ng, run[0].c_tn, run[1].c_tn},
            {"layernorm out", (size_t)d.ln_n * d.ln_c, run[0].ln, run[1].ln},
            {"attention out", (size_t)d.ab * d.at * C, run[0].att, run[1].att},
            {"attention dqkv", nqkv, run[0].dqkv, run[1].dqkv},
            {"adamw param", (size_t)d.an, run[0].p, run[1].p},
            {"adamw m", (size_t)d.an, run[0].m, run[1].m},
            {"adamw v", (size_t)d.an, run[0].v, run[1].v},
        };
        int nb = (int)(sizeof bufs / sizeof bufs[0]);
        char why[256];
        long diff = compare_runs(bufs, nb, why, sizeof why);
        uint64_t h0 = digest_of(bufs, nb, 0), h1 = digest_of(bufs, nb, 1);
        snprintf(r->digest, sizeof r->digest, "%016llx", (unsigned long long)h1);
        health_result *res = health_add(r, "compute.digest");
        if (res) {
            health_judge(res, (double)diff, HEALTH_CMP_LE, 0.0, "elements");
            const struct health_baseline *bl = o->baseline;
            if (diff)
                snprintf(res->reason, sizeof res->reason, "%.200s; %ld element(s) differ "
                         "(xxh3 %016llx vs %016llx)", why, diff, (unsigned long long)h0,
                         (unsigned long long)h1);
            else if (bl && bl->digest[0] && bl->threads == nthreads &&
                     strcmp(bl->digest, r->digest)) {
                health_set(res, HEALTH_FAIL,
                           "xxh3 %s differs from the baseline's %s for the same thread count "
                           "(%d): the kernels no longer compute the same bits", r->digest,
                           bl->digest, nthreads);
            } else
                snprintf(res->reason, sizeof res->reason, "two runs bitwise identical, xxh3 %s%s",
                         r->digest,
                         bl && bl->digest[0] && bl->threads == nthreads ? ", matches baseline" : "");
        }
    }

    /* Throughput. */
    {
        int trials = 0, gthreads = o->gemm_threads > 0 ? o->gemm_threads : nthreads;
        double g = gemm_gflops(o, tn, TA, TB, TC, &trials);
        health_result *res = health_add(r, "compute.gemm_gflops");
        double base;
        if (res && health_baseline_get(o->baseline, "compute.gemm_gflops", &base) && base > 0) {
            health_judge(res, g, HEALTH_CMP_GE, base / o->slow_factor, "GFLOP/s");
            if (res->verdict == HEALTH_FAIL)
                snprintf(res->reason, sizeof res->reason,
                         "sgemm %d^3 on %d thread(s), best of %d trials %.1f GFLOP/s is %.2fx "
                         "slower than the baseline %.1f (flagged beyond %.2fx)", tn,
                         gthreads, trials, g, base / g, base, o->slow_factor);
            else
                snprintf(res->reason, sizeof res->reason,
                         "%d thread(s), best of %d trials, %.2fx baseline %.1f", gthreads,
                         trials, g / base, base);
        } else if (res) {
            res->measured = g;
            snprintf(res->unit, sizeof res->unit, "GFLOP/s");
            health_set(res, HEALTH_SKIP,
                       "no baseline to compare with (measured %.1f GFLOP/s on %d thread(s), "
                       "best of %d trials; record one with --write-baseline FILE)", g, gthreads,
                       trials);
        }
    }
out:
    for (int k = 0; k < 2; k++) {
        kat_out *y = &run[k];
        float *ptrs[] = {y->c_nt, y->c_nn, y->c_tn, y->ln, y->ln_mean, y->ln_rstd,
                         y->att, y->lse, y->dqkv, y->p, y->m, y->v};
        for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
            free(ptrs[i]);
    }
    float *iptrs[] = {in.a, in.b, in.at, in.x, in.w, in.bias, in.qkv, in.dout,
                      in.p0, in.g0, in.m0, in.v0, in.scratch, TA, TB, TC};
    for (size_t i = 0; i < sizeof iptrs / sizeof iptrs[0]; i++)
        free(iptrs[i]);
    return GRIT_OK;
}
