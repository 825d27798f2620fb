/*
 * gemm_bf16.c - bf16 GEMM backends: oneDNN matmul (AVX512-BF16 / AMX) or float32
 * widening onto OpenBLAS sgemm; the conversions; the planted bf16-accumulation
 * defect. Contracts and the choice of backend are in gemm_bf16.h.
 *
 * oneDNN: one matmul primitive per (transposes, M, N, K, leading dimensions, alpha,
 * beta), described with strided memory descriptors so views with a leading dimension
 * need no copies; beta != 0 is a sum post-op, alpha != 1 an output scale. The memory
 * objects are created with the primitive and re-pointed at each call.
 */
#include "tensor/gemm_bf16.h"

#include <cblas.h>
#include <cpuid.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/fault.h"

#ifdef GRIT_HAVE_DNNL
#include <dnnl.h>
#endif

void bf16_convert(bf16 *dst, const float *src, size_t n)
{
    long nn = (long)n;
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < nn; i++)
        dst[i] = bf16_from_f32(src[i]);
}

void bf16_convert_rows(bf16 *dst, const float *src, int rows, int cols, int ld)
{
    if (ld == cols) {
        bf16_convert(dst, src, (size_t)rows * (size_t)cols);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        const float *s = src + (long)r * ld;
        bf16 *d = dst + (long)r * cols;
        for (int c = 0; c < cols; c++)
            d[c] = bf16_from_f32(s[c]);
    }
}

static inline float round_bf16(float x) { return bf16_to_f32(bf16_from_f32(x)); }

void bf16_round(float *dst, const float *src, size_t n)
{
    long nn = (long)n;
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < nn; i++)
        dst[i] = round_bf16(src[i]);
}

void bf16_round_rows(float *dst, const float *src, int rows, int cols, int ld)
{
    if (ld == cols) {
        bf16_round(dst, src, (size_t)rows * (size_t)cols);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        const float *s = src + (long)r * ld;
        float *d = dst + (long)r * cols;
#pragma omp simd
        for (int c = 0; c < cols; c++)
            d[c] = round_bf16(s[c]);
    }
}

/* --- CPU features ------------------------------------------------------------- */

int gemm_bf16_cpu_has_avx512bf16(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(1, 0, &a, &b, &c, &d) || !(c & (1u << 27))) /* OSXSAVE */
        return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    if ((lo & 0xe6u) != 0xe6u) /* XMM, YMM, opmask, ZMM_Hi256, Hi16_ZMM saved by the OS */
        return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & (1u << 16))) /* AVX512F */
        return 0;
    if (a < 1 || !__get_cpuid_count(7, 1, &a, &b, &c, &d))
        return 0;
    return (a >> 5) & 1u; /* AVX512_BF16 */
}

int gemm_bf16_have_onednn(void)
{
#ifdef GRIT_HAVE_DNNL
    return 1;
#else
    return 0;
#endif
}

/* --- oneDNN ------------------------------------------------------------------- */

#ifdef GRIT_HAVE_DNNL
#define DN_CACHE 96

typedef struct dn_prim {
    char ta, tb;
    int M, N, K, lda, ldb, ldc;
    float alpha, beta;
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c;
} dn_prim;

typedef struct dn_state {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    int n;
    dn_prim p[DN_CACHE];
} dn_state;

static void dn_clear(dn_state *s)
{
    for (int i = 0; i < s->n; i++) {
        dnnl_primitive_destroy(s->p[i].prim);
        dnnl_memory_destroy(s->p[i].a);
        dnnl_memory_destroy(s->p[i].b);
        dnnl_memory_destroy(s->p[i].c);
    }
    s->n = 0;
}

static void dn_free(dn_state *s)
{
    if (!s)
        return;
    dn_clear(s);
    if (s->stream)
        dnnl_stream_destroy(s->stream);
    if (s->eng)
        dnnl_engine_destroy(s->eng);
    free(s);
}

static grit_err dn_open(dn_state **out)
{
    dn_state *s = calloc(1, sizeof *s);
    if (!s)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    if (dnnl_engine_create(&s->eng, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&s->stream, s->eng, dnnl_stream_default_flags) != dnnl_success) {
        dn_free(s);
        return grit_errf(GRIT_EINVAL, "oneDNN: cannot create a CPU engine and stream");
    }
    *out = s;
    return GRIT_OK;
}

/* Strided 2-D descriptor of op(X) [rows, cols] for X stored row-major with ld. */
static dnnl_status_t dn_md(dnnl_memory_desc_t *md, int rows, int cols, char t, int ld,
                           dnnl_data_type_t dt)
{
    dnnl_dims_t dims = {rows, cols};
    dnnl_dims_t strides = {t == 'N' ? ld : 1, t == 'N' ? 1 : ld};
    return dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides);
}

static dn_prim *dn_get(dn_state *s, char ta, char tb, int M, int N, int K, int lda, int ldb,
                       int ldc, float alpha, float beta)
{
    for (int i = 0; i < s->n; i++) {
        dn_prim *p = &s->p[i];
        if (p->ta == ta && p->tb == tb && p->M == M && p->N == N && p->K == K &&
            p->lda == lda && p->ldb == ldb && p->ldc == ldc && p->alpha == alpha &&
            p->beta == beta)
            return p;
    }
    if (s->n == DN_CACHE) /* more shapes than any model has: start over */
        dn_clear(s);
    dn_prim *p = &s->p[s->n];
    memset(p, 0, sizeof *p);
    dnnl_memory_desc_t a_md, b_md, c_md;
    dnnl_matmul_desc_t md;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    int ok = dn_md(&a_md, M, K, ta, lda, dnnl_bf16) == dnnl_success &&
             dn_md(&b_md, K, N, tb, ldb, dnnl_bf16) == dnnl_success &&
             dn_md(&c_md, M, N, 'N', ldc, dnnl_f32) == dnnl_success &&
             dnnl_matmul_desc_init(&md, &a_md, &b_md, NULL, &c_md) == dnnl_success &&
             dnnl_primitive_attr_create(&attr) == dnnl_success;
    if (ok && alpha != 1.0f)
        ok = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha) == dnnl_success;
    if (ok && beta != 0.0f)
        ok = dnnl_post_ops_create(&po) == dnnl_success &&
             dnnl_post_ops_append_sum(po, beta) == dnnl_success &&
             dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
    ok = ok && dnnl_primitive_desc_create(&pd, &md, attr, s->eng, NULL) == dnnl_success &&
         dnnl_primitive_create(&p->prim, pd) == dnnl_success &&
         dnnl_memory_create(&p->a, &a_md, s->eng, DNNL_MEMORY_NONE) == dnnl_success &&
         dnnl_memory_create(&p->b, &b_md, s->eng, DNNL_MEMORY_NONE) == dnnl_success &&
         dnnl_memory_create(&p->c, &c_md, s->eng, DNNL_MEMORY_NONE) == dnnl_success;
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (po)
        dnnl_post_ops_destroy(po);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (!ok) {
        if (p->prim)
            dnnl_primitive_destroy(p->prim);
        dnnl_memory_destroy(p->a);
        dnnl_memory_destroy(p->b);
        dnnl_memory_destroy(p->c);
        return NULL;
    }
    *p = (dn_prim){ta, tb, M, N, K, lda, ldb, ldc, alpha, beta, p->prim, p->a, p->b, p->c};
    s->n++;
    return p;
}

static grit_err dn_gemm(dn_state *s, char ta, char tb, int M, int N, int K, float alpha,
                        const bf16 *A, int lda, const bf16 *B, int ldb, float beta, float *C,
                        int ldc)
{
    dn_prim *p = dn_get(s, ta, tb, M, N, K, lda, ldb, ldc, alpha, beta);
    if (!p)
        return grit_errf(GRIT_EINVAL, "oneDNN: no bf16 matmul for %c%c M=%d N=%d K=%d", ta, tb,
                         M, N, K);
    dnnl_memory_set_data_handle(p->a, (void *)A);
    dnnl_memory_set_data_handle(p->b, (void *)B);
    dnnl_memory_set_data_handle(p->c, C);
    dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_SRC, p->a}, {DNNL_ARG_WEIGHTS, p->b}, {DNNL_ARG_DST, p->c}};
    if (dnnl_primitive_execute(p->prim, s->stream, 3, args) != dnnl_success ||
        dnnl_stream_wait(s->stream) != dnnl_success)
        return grit_errf(GRIT_EINVAL, "oneDNN: bf16 matmul %c%c M=%d N=%d K=%d failed", ta, tb,
                         M, N, K);
    return GRIT_OK;
}
#endif

/* --- context ------------------------------------------------------------------- */

int gemm_bf16_fault_planted(void) { return !strcmp(fault_spec(FAULT_BF16_ACCUM), "1"); }

int gemm_bf16_widens(void)
{
    const char *want = getenv("GRIT_BF16_GEMM");
    return (want && !strcmp(want, "fp32")) || !gemm_bf16_cpu_has_avx512bf16() ||
           !gemm_bf16_have_onednn() || gemm_bf16_fault_planted();
}

grit_err gemm_bf16_init(gemm_bf16_ctx *g, size_t max_a, size_t max_b)
{
    memset(g, 0, sizeof *g);
    const char *want = getenv("GRIT_BF16_GEMM");
    if (!want || !*want)
        want = "auto";
    if (strcmp(want, "auto") && strcmp(want, "onednn") && strcmp(want, "fp32"))
        return grit_errf(GRIT_EINVAL, "GRIT_BF16_GEMM: expected auto, onednn or fp32, got \"%s\"",
                         want);
    const char *fs = fault_spec(FAULT_BF16_ACCUM);
    if (*fs && strcmp(fs, "0") && strcmp(fs, "1"))
        return grit_errf(GRIT_EINVAL, "GRIT_FAULT_BF16_ACCUM: expected 0 or 1, got \"%s\"", fs);
    g->fault_accum = !strcmp(fs, "1");
    int cpu = gemm_bf16_cpu_has_avx512bf16(), lib = gemm_bf16_have_onednn();
    if (!strcmp(want, "onednn") && !(cpu && lib))
        return grit_errf(GRIT_EINVAL, "GRIT_BF16_GEMM=onednn: %s",
                         !lib ? "grit was built without oneDNN (install libdnnl-dev and rebuild)"
                              : "this CPU has no AVX512-BF16");
    g->backend = strcmp(want, "fp32") && cpu && lib ? GEMM_BF16_ONEDNN : GEMM_BF16_FP32;
    if (g->backend == GEMM_BF16_ONEDNN)
        snprintf(g->why, sizeof g->why, "bf16 GEMMs: oneDNN on AVX512-BF16");
    else if (!strcmp(want, "fp32"))
        snprintf(g->why, sizeof g->why, "bf16 GEMMs: fp32 sgemm on bf16-rounded operands "
                                        "(GRIT_BF16_GEMM=fp32)");
    else
        snprintf(g->why, sizeof g->why,
                 "warning: bf16 GEMMs run as fp32 sgemm on bf16-rounded operands (%s): "
                 "correct but no faster than fp32",
                 !cpu ? "this CPU has no AVX512-BF16" : "grit was built without oneDNN");
#ifdef GRIT_HAVE_DNNL
    if (g->backend == GEMM_BF16_ONEDNN) {
        grit_err rc = dn_open((dn_state **)&g->dnnl);
        if (rc != GRIT_OK)
            return rc;
    }
#endif
    if (g->backend == GEMM_BF16_FP32 || g->fault_accum) {
        g->fa = malloc(sizeof(float) * (max_a ? max_a : 1));
        g->fb = malloc(sizeof(float) * (max_b ? max_b : 1));
        g->fa_n = max_a;
        g->fb_n = max_b;
        if (!g->fa || !g->fb) {
            gemm_bf16_free(g);
            return grit_errf(GRIT_ENOMEM, "out of memory for the bf16 GEMM scratch");
        }
    }
    return GRIT_OK;
}

void gemm_bf16_free(gemm_bf16_ctx *g)
{
    if (!g)
        return;
#ifdef GRIT_HAVE_DNNL
    dn_free(g->dnnl);
#endif
    free(g->fa);
    free(g->fb);
    memset(g, 0, sizeof *g);
}

/* --- fallback and planted defect --------------------------------------------------- */

/* dst = X [rows, cols] (stored with ld) widened to float32, packed. */
static void widen(float *dst, const bf16 *X, int rows, int cols, int ld)
{
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            dst[(long)r * cols + c] = bf16_to_f32(X[(long)r * ld + c]);
}

/* dst = op(X) [rows, cols] widened and packed, transposing when t == 'T'. */
static void widen_op(float *dst, const bf16 *X, int rows, int cols, char t, int ld)
{
    if (t == 'N') {
        widen(dst, X, rows, cols, ld);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            dst[(long)r * cols + c] = bf16_to_f32(X[(long)c * ld + r]);
}

/* The planted defect: each output's running sum is a bf16, rounded after every term. */
static void accum_in_bf16(const float *a, const float *b, int M, int N, int K, float alpha,
                          float beta, float *C, int ldc)
{
#pragma omp parallel for schedule(static)
    for (int i = 0; i < M; i++) {
        float *c = C + (long)i * ldc;
        float acc[256];
        for (int n0 = 0; n0 < N; n0 += 256) {
            int nb = N - n0 < 256 ? N - n0 : 256;
            for (int j = 0; j < nb; j++)
                acc[j] = 0.0f;
            for (int k = 0; k < K; k++) {
                float av = a[(long)i * K + k];
                const float *br = b + (long)k * N + n0;
#pragma omp simd
                for (int j = 0; j < nb; j++)
                    acc[j] = round_bf16(acc[j] + av * br[j]);
            }
            for (int j = 0; j < nb; j++)
                c[n0 + j] = alpha * acc[j] + (beta != 0.0f ? beta * c[n0 + j] : 0.0f);
        }
    }
}

grit_err gemm_bf16(gemm_bf16_ctx *g, char ta, char tb, int M, int N, int K, float alpha,
                   const bf16 *A, int lda, const bf16 *B, int ldb, float beta, float *C,
                   int ldc)
{
    if (M <= 0 || N <= 0)
        return GRIT_OK;
    if (g->backend == GEMM_BF16_ONEDNN && !g->fault_accum) {
#ifdef GRIT_HAVE_DNNL
        if (K > 0)
            return dn_gemm(g->dnnl, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
    }
    if ((size_t)M * (size_t)K > g->fa_n || (size_t)K * (size_t)N > g->fb_n)
        return grit_errf(GRIT_EINVAL, "bf16 GEMM %c%c M=%d N=%d K=%d exceeds the scratch of %zu "
                         "and %zu elements", ta, tb, M, N, K, g->fa_n, g->fb_n);
    if (g->fault_accum) {
        widen_op(g->fa, A, M, K, ta, lda);
        widen_op(g->fb, B, K, N, tb, ldb);
        accum_in_bf16(g->fa, g->fb, M, N, K, alpha, beta, C, ldc);
        return GRIT_OK;
    }
    /* as stored: op(A) is A [M,K] or A [K,M] transposed; likewise B */
    int ar = ta == 'N' ? M : K, ac = ta == 'N' ? K : M;
    int br = tb == 'N' ? K : N, bc = tb == 'N' ? N : K;
    widen(g->fa, A, ar, ac, lda);
    widen(g->fb, B, br, bc, ldb);
    cblas_sgemm(CblasRowMajor, ta == 'N' ? CblasNoTrans : CblasTrans,
                tb == 'N' ? CblasNoTrans : CblasTrans, M, N, K, alpha, g->fa, ac, g->fb, bc,
                beta, C, ldc);
    return GRIT_OK;
}
