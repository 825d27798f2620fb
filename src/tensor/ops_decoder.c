/*
 * ops_decoder.c - the kernels that Llama- and Falcon-family blocks need beside
 * GPT-NeoX's (ops.c): RMSNorm, SwiGLU, and rotary embedding over any fused
 * q/k/v layout (grouped-query and multi-query included). Contracts in ops.h.
 *
 * Same rules as ops.c: rows are split over threads, reductions over rows run
 * over column blocks summing rows in order in double, so results do not depend
 * on the number of threads.
 */
#include <math.h>
#include <string.h>

#include "tensor/mathfn.h"
#include "tensor/norm_row.h"
#include "tensor/ops.h"

#define COLBLK NORM_COLBLK

void op_rmsnorm_fwd(float *out, float *rstd, const float *x, const float *w, int N, int C,
                    float eps)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        rstd[n] = rms_row_fwd(out + (long)n * C, x + (long)n * C, w, C, eps);
}

void op_rmsnorm_bwd(float *dx, float *dw, const float *dout, const float *x, const float *rstd,
                    const float *w, int N, int C)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        rms_row_bwd(dx + (long)n * C, dout + (long)n * C, NULL, x + (long)n * C, rstd[n], w, C);
    int nblk = (C + COLBLK - 1) / COLBLK;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        int c0 = blk * COLBLK, c1 = c0 + COLBLK < C ? c0 + COLBLK : C;
        norm_cols_wgrad(dw, NULL, dout, NULL, x, NULL, rstd, N, C, c0, c1);
    }
}

static inline float sigmoid(float v) { return 1.0f / (1.0f + mf_exp(-v)); }

void op_swiglu_fwd(float *out, const float *gu, int N, int I)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (long)n * 2 * I, *u = g + I;
        float *o = out + (long)n * I;
#pragma omp simd
        for (int i = 0; i < I; i++)
            o[i] = g[i] * sigmoid(g[i]) * u[i];
    }
}

void op_swiglu_bwd(float *dgu, const float *dout, const float *gu, int N, int I)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (long)n * 2 * I, *u = g + I, *d = dout + (long)n * I;
        float *dg = dgu + (long)n * 2 * I, *du = dg + I;
#pragma omp simd
        for (int i = 0; i < I; i++) {
            float s = sigmoid(g[i]), silu = g[i] * s;
            du[i] = d[i] * silu;
            dg[i] = d[i] * u[i] * (s + g[i] * s * (1.0f - s));
        }
    }
}

static inline void rotate(float *v, const float *cs, const float *sn, int r2, float sgn)
{
    for (int i = 0; i < r2; i++) {
        float x1 = v[i], x2 = v[i + r2], s = sgn * sn[i];
        v[i] = x1 * cs[i] - x2 * s;
        v[i + r2] = x2 * cs[i] + x1 * s;
    }
}

void op_rotary_lay(float *qkv, const float *cos_t, const float *sin_t, const op_qkv_layout *lay,
                   int N, int T, int heads, int hd, int rot, int inverse)
{
    int r2 = rot / 2, G = lay->group, kvh = heads / G;
    float sgn = inverse ? -1.0f : 1.0f;
    if (r2 == 0)
        return;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        int pos = n % T - (lay->seg ? lay->seg[n] : 0);
        const float *cs = cos_t + (long)pos * r2, *sn = sin_t + (long)pos * r2;
        float *row = qkv + (long)n * lay->ld;
        for (int h = 0; h < heads; h++)
            rotate(row + (long)(h / G) * lay->q_gstride + (long)(h % G) * hd, cs, sn, r2, sgn);
        for (int g = 0; g < kvh; g++)
            rotate(row + lay->k_base + (long)g * lay->kv_stride, cs, sn, r2, sgn);
    }
}
