/*
 * norm_row.h - one row of LayerNorm / RMSNorm, forward and backward, and the
 * column-block reduction of their weight gradients: the arithmetic that
 * op_layernorm_*, op_rmsnorm_* (ops.c, ops_decoder.c) and the fused kernels
 * (ops_fused.c) share, so a fused kernel computes bit for bit what the
 * unfused composition does. Private to tensor/.
 */
#ifndef GRIT_TENSOR_NORM_ROW_H
#define GRIT_TENSOR_NORM_ROW_H

#include <math.h>

#define NORM_COLBLK 64

#if defined(__GNUC__)
#define NORM_INLINE static inline __attribute__((always_inline))
#else
#define NORM_INLINE static inline
#endif

/* LayerNorm of one row: o = (x - m) * r * w + b; returns m and r. */
NORM_INLINE void ln_row_fwd(float *o, float *mean, float *rstd, const float *xr,
                              const float *w, const float *b, int C, float eps)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int c = 0; c < C; c++)
        s += xr[c];
    float m = s / (float)C;
    float v = 0.0f;
#pragma omp simd reduction(+ : v)
    for (int c = 0; c < C; c++)
        v += (xr[c] - m) * (xr[c] - m);
    float r = 1.0f / sqrtf(v / (float)C + eps);
    for (int c = 0; c < C; c++)
        o[c] = (xr[c] - m) * r * w[c] + b[c];
    *mean = m;
    *rstd = r;
}

/* LayerNorm's output from saved statistics (a second norm of the same row). */
NORM_INLINE void ln_row_apply(float *o, const float *xr, float m, float r, const float *w,
                                const float *b, int C)
{
    for (int c = 0; c < C; c++)
        o[c] = (xr[c] - m) * r * w[c] + b[c];
}

/* RMSNorm of one row: o = w * (x * r); returns r. */
NORM_INLINE float rms_row_fwd(float *o, const float *xr, const float *w, int C, float eps)
{
    float v = 0.0f;
#pragma omp simd reduction(+ : v)
    for (int c = 0; c < C; c++)
        v += xr[c] * xr[c];
    float r = 1.0f / sqrtf(v / (float)C + eps);
    for (int c = 0; c < C; c++)
        o[c] = w[c] * (xr[c] * r);
    return r;
}

NORM_INLINE void rms_row_apply(float *o, const float *xr, float r, const float *w, int C)
{
    for (int c = 0; c < C; c++)
        o[c] = w[c] * (xr[c] * r);
}

/* The gradient row g: g0[c], or g0[c] + g1[c] when g1 is given (two consumers of
 * one norm's output, summed in that order). */
#define NORM_G(c) (g1 ? g0[c] + g1[c] : g0[c])

/* The backward's row sums run in NORM_LANES fixed lanes, added in order at the end: the
 * same bits however the compiler vectorizes each call site. (A plain simd reduction sums
 * in the order of the vector width gcc picks, and on AVX-512 CPUs it picked different
 * widths for the one-gradient and the two-gradient instances: the fused kernels then
 * differed from the unfused ones in the last bits.) */
#define NORM_LANES 16

/* d += LN'(g) for one row. */
NORM_INLINE void ln_row_bwd(float *d, const float *g0, const float *g1, const float *xr,
                              float m, float r, const float *w, int C)
{
    float la[NORM_LANES] = {0}, lb[NORM_LANES] = {0};
    int c = 0;
    for (; c + NORM_LANES <= C; c += NORM_LANES)
#pragma omp simd
        for (int j = 0; j < NORM_LANES; j++) {
            float gh = NORM_G(c + j) * w[c + j];
            la[j] += gh;
            lb[j] += gh * (xr[c + j] - m) * r;
        }
    for (int j = 0; c < C; c++, j++) {
        float gh = NORM_G(c) * w[c];
        la[j] += gh;
        lb[j] += gh * (xr[c] - m) * r;
    }
    float a = 0.0f, bsum = 0.0f;
    for (int j = 0; j < NORM_LANES; j++) {
        a += la[j];
        bsum += lb[j];
    }
    a /= (float)C;
    bsum /= (float)C;
    for (c = 0; c < C; c++) {
        float xh = (xr[c] - m) * r;
        d[c] += r * (NORM_G(c) * w[c] - a - xh * bsum);
    }
}

/* d += RMS'(g) for one row. */
NORM_INLINE void rms_row_bwd(float *d, const float *g0, const float *g1, const float *xr,
                               float r, const float *w, int C)
{
    float la[NORM_LANES] = {0};
    int c = 0;
    for (; c + NORM_LANES <= C; c += NORM_LANES)
#pragma omp simd
        for (int j = 0; j < NORM_LANES; j++)
            la[j] += NORM_G(c + j) * w[c + j] * xr[c + j] * r;
    for (int j = 0; c < C; c++, j++)
        la[j] += NORM_G(c) * w[c] * xr[c] * r;
    float a = 0.0f;
    for (int j = 0; j < NORM_LANES; j++)
        a += la[j];
    a /= (float)C;
    for (c = 0; c < C; c++)
        d[c] += r * (NORM_G(c) * w[c] - xr[c] * r * a);
}

/* Weight (and, for LayerNorm with db, bias) gradient over columns [c0, c1), rows in
 * order, in double: dw += sum_n g * xhat, db += sum_n g. mean NULL: RMSNorm. */
NORM_INLINE void norm_cols_wgrad(float *dw, float *db, const float *g0, const float *g1,
                                   const float *x, const float *mean, const float *rstd, int N,
                                   int C, int c0, int c1)
{
    double aw[NORM_COLBLK] = {0}, ab[NORM_COLBLK] = {0};
    for (int n = 0; n < N; n++) {
        const float *xr = x + (long)n * C;
        const float *r0 = g0 + (long)n * C, *r1 = g1 ? g1 + (long)n * C : NULL;
        float m = mean ? mean[n] : 0.0f, r = rstd[n];
        for (int c = c0; c < c1; c++) {
            float g = r1 ? r0[c] + r1[c] : r0[c];
            if (mean) {
                aw[c - c0] += (double)(g * ((xr[c] - m) * r));
                ab[c - c0] += (double)g;
            } else
                aw[c - c0] += (double)(g * (xr[c] * r));
        }
    }
    for (int c = c0; c < c1; c++) {
        dw[c] += (float)aw[c - c0];
        if (db)
            db[c] += (float)ab[c - c0];
    }
}

#endif
