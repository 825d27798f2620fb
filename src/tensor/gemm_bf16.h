/*
 * gemm_bf16.h - bf16 matrix products with float32 accumulation and float32
 * output, and the float32 <-> bf16 conversions that feed them.
 *
 *   gemm_bf16(g, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc):
 *     C[M,N] = alpha * op(A)[M,K] . op(B)[K,N] + beta * C   (row-major, as cblas_sgemm)
 *   with A and B in bf16 (the upper half of an IEEE float32), C in float32.
 *
 * Backends, chosen once by gemm_bf16_init():
 *   GEMM_BF16_ONEDNN  oneDNN's matmul primitive (Debian libdnnl-dev), when grit was
 *                     built with it and the CPU has AVX512-BF16 (cpuid leaf 7.1 EAX
 *                     bit 5, with the OS saving AVX-512 state);
 *   GEMM_BF16_FP32    every other CPU (or GRIT_BF16_GEMM=fp32): the bf16 operands are
 *                     widened to float32 (exactly: bf16 is a float32 with a short
 *                     mantissa) and multiplied with OpenBLAS sgemm. The decoder
 *                     (model/gx_prec.c) skips this step: on such CPUs it keeps its
 *                     operands as bf16-rounded float32 (bf16_round) and calls sgemm
 *                     itself, with the same numbers.
 * Both compute the same mathematical product: a product of two bf16 values is exact
 * in float32, and the sums are float32; only the order of the sums differs, so the
 * backends agree to float32 rounding, not bit for bit. For a fixed backend, shape and
 * thread count the result is bitwise reproducible.
 *
 * Not for use inside an OpenMP parallel region and not thread-safe: one context per
 * caller thread (the model's step loop owns one). Primitives are created on the first
 * call of each shape and cached (a model has a few dozen shapes); the fallback's
 * float32 scratch is sized by gemm_bf16_init and never grows.
 *
 * Planted defect (tests only, core/fault.h): GRIT_FAULT_BF16_ACCUM=1 makes every
 * product accumulate in bf16 (the running sum rounded to bf16 after each term), the
 * classic mixed-precision bug; the accuracy guard test must catch it.
 */
#ifndef GRIT_TENSOR_GEMM_BF16_H
#define GRIT_TENSOR_GEMM_BF16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/error.h"

typedef uint16_t bf16;

/* float32 -> bf16, rounded to nearest even; NaN stays a (quiet) NaN. */
static inline bf16 bf16_from_f32(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (bf16)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (bf16)(u >> 16);
}

static inline float bf16_to_f32(bf16 h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* dst[i] = bf16(src[i]) for n elements (OpenMP over the range). */
void bf16_convert(bf16 *dst, const float *src, size_t n);
/* A rows x cols block with leading dimension ld into packed dst (ld = cols). */
void bf16_convert_rows(bf16 *dst, const float *src, int rows, int cols, int ld);
/* The same roundings kept in float32 (dst = bf16_to_f32(bf16_from_f32(src)), one pass):
 * operands for sgemm that hold exactly the bf16 values. */
void bf16_round(float *dst, const float *src, size_t n);
void bf16_round_rows(float *dst, const float *src, int rows, int cols, int ld);

typedef enum gemm_bf16_backend { GEMM_BF16_FP32 = 0, GEMM_BF16_ONEDNN = 1 } gemm_bf16_backend;

typedef struct gemm_bf16_ctx {
    gemm_bf16_backend backend;
    int fault_accum;      /* GRIT_FAULT_BF16_ACCUM planted */
    char why[160];        /* why this backend (for the run's log) */
    float *fa, *fb;       /* fallback / fault scratch: widened A and B */
    size_t fa_n, fb_n;
    void *dnnl;           /* oneDNN engine, stream, primitive cache (gemm_bf16.c) */
} gemm_bf16_ctx;

/* True when this CPU runs AVX512-BF16 instructions (cpuid and XCR0). */
int gemm_bf16_cpu_has_avx512bf16(void);
/* True when grit was built with oneDNN. */
int gemm_bf16_have_onednn(void);

/* True when gemm_bf16_init would widen the operands to fp32 (no AVX512-BF16 or no oneDNN,
 * GRIT_BF16_GEMM=fp32, or the planted accumulation fault): its scratch is then allocated. */
int gemm_bf16_widens(void);
/* True when the planted bf16-accumulation fault is on (GRIT_FAULT_BF16_ACCUM=1). */
int gemm_bf16_fault_planted(void);

/* Chooses the backend (GRIT_BF16_GEMM=auto|onednn|fp32, default auto) and allocates
 * scratch for operands of up to max_a and max_b elements (any layout). Asking for
 * onednn where it cannot run is GRIT_EINVAL naming the reason. g->why says what was
 * chosen and why; a CPU without AVX512-BF16 is a warning the caller should print. */
grit_err gemm_bf16_init(gemm_bf16_ctx *g, size_t max_a, size_t max_b);
void gemm_bf16_free(gemm_bf16_ctx *g);

/* C = alpha op(A) op(B) + beta C; ta, tb 'N' or 'T'. Operands larger than the scratch
 * given to init, or a oneDNN failure, are GRIT_EINVAL with the shape. */
grit_err gemm_bf16(gemm_bf16_ctx *g, char ta, char tb, int M, int N, int K, float alpha,
                   const bf16 *A, int lda, const bf16 *B, int ldb, float beta, float *C,
                   int ldc);

#endif
