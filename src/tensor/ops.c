/*
 * ops.c - row-wise kernels: layer norm, bias, GELU, rotary, embedding, and
 * the cross-entropy rows of the LM head. See ops.h for the contracts.
 *
 * Reductions over rows (norm/bias/embedding gradients) run over column
 * blocks, each summing its rows in order in double precision, so results
 * do not depend on the number of threads.
 */
#include "tensor/ops.h"

#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <string.h>

#include "tensor/mathfn.h"
#include "tensor/norm_row.h"

#define COLBLK NORM_COLBLK

void op_layernorm_fwd(float *out, float *mean, float *rstd, const float *x,
                      const float *w, const float *b, int N, int C, float eps)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        ln_row_fwd(out + (long)n * C, mean + n, rstd + n, x + (long)n * C, w, b, C, eps);
}

void op_layernorm_bwd(float *dx, float *dw, float *db, const float *dout, const float *x,
                      const float *mean, const float *rstd, const float *w, int N, int C)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        ln_row_bwd(dx + (long)n * C, dout + (long)n * C, NULL, x + (long)n * C, mean[n], rstd[n],
                   w, C);
    int nblk = (C + COLBLK - 1) / COLBLK;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        int c0 = blk * COLBLK, c1 = c0 + COLBLK < C ? c0 + COLBLK : C;
        norm_cols_wgrad(dw, db, dout, NULL, x, mean, rstd, N, C, c0, c1);
    }
}

void op_add_bias(float *out, const float *x, const float *bias, int N, int C)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            out[(long)n * C + c] = x[(long)n * C + c] + bias[c];
}

void op_add3_bias(float *out, const float *a, const float *b, const float *bias, int N, int C)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            long i = (long)n * C + c;
            out[i] = a[i] + b[i] + bias[c];
        }
}

void op_bias_grad(float *db, const float *d, int N, int C, int ld)
{
    int nblk = (C + COLBLK - 1) / COLBLK;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        int c0 = blk * COLBLK, c1 = c0 + COLBLK < C ? c0 + COLBLK : C;
        double acc[COLBLK] = {0};
        for (int n = 0; n < N; n++)
            for (int c = c0; c < c1; c++)
                acc[c - c0] += (double)d[(long)n * ld + c];
        for (int c = c0; c < c1; c++)
            db[c] += (float)acc[c - c0];
    }
}

/* GELU: exact 0.5 x (1 + erf(x / sqrt 2)) via erfc; tanh form as x * sigmoid(2u). */
#define INV_SQRT2 0.70710678118654752f
#define INV_SQRT_2PI 0.39894228040143268f
#define SQRT_2_OVER_PI 0.79788456080286536f

/* Phi(v), the standard normal CDF, from erfc of |v| / sqrt 2. */
static inline float normal_cdf(float v)
{
    float e = 0.5f * mf_erfc_pos(fabsf(v) * INV_SQRT2);
    return v >= 0.0f ? 1.0f - e : e;
}

/* sigmoid(2u) with u = sqrt(2/pi) (v + 0.044715 v^3): gelu_tanh(v) = v * this. */
static inline float tanh_gate(float v)
{
    float u = SQRT_2_OVER_PI * (v + 0.044715f * v * v * v);
    return 1.0f / (1.0f + mf_exp(-2.0f * u));
}

void op_gelu_fwd(float *out, const float *x, long n, op_act act)
{
    if (act == OP_GELU) {
#pragma omp parallel for simd schedule(static)
        for (long i = 0; i < n; i++)
            out[i] = x[i] * normal_cdf(x[i]);
    } else {
#pragma omp parallel for simd schedule(static)
        for (long i = 0; i < n; i++)
            out[i] = x[i] * tanh_gate(x[i]);
    }
}

/* gelu'(v) of each form, multiplied into the incoming gradient. */
static inline float gelu_erf_bwd(float dout, float v)
{
    float pdf = INV_SQRT_2PI * mf_exp(-0.5f * v * v);
    return dout * (normal_cdf(v) + v * pdf);
}

static inline float gelu_tanh_bwd(float dout, float v)
{
    float du = SQRT_2_OVER_PI * (1.0f + 3.0f * 0.044715f * v * v);
    float s = tanh_gate(v);
    return dout * (s + v * s * (1.0f - s) * 2.0f * du);
}

void op_gelu_bwd(float *dx, const float *dout, const float *x, long n, op_act act)
{
    if (act == OP_GELU) {
#pragma omp parallel for simd schedule(static)
        for (long i = 0; i < n; i++)
            dx[i] = gelu_erf_bwd(dout[i], x[i]);
    } else {
#pragma omp parallel for simd schedule(static)
        for (long i = 0; i < n; i++)
            dx[i] = gelu_tanh_bwd(dout[i], x[i]);
    }
}

/* One pass: each thread takes a contiguous range of columns (wide, so the rows' segments
 * stream) and walks its rows in order, writing the gradient and summing it while it is in
 * registers (op_gelu_bwd then op_bias_grad read it twice). Each column's sum runs over the
 * rows in order whatever the ranges are, so the bits do not depend on the thread count. */
#define GELU_BIAS_MAXW 1024
void op_gelu_bwd_bias(float *dx, float *db, const float *dout, const float *x, int N, int C,
                      op_act act)
{
    int per = (C + omp_get_max_threads() - 1) / omp_get_max_threads();
    int W = (per + COLBLK - 1) / COLBLK * COLBLK;
    W = W > GELU_BIAS_MAXW ? GELU_BIAS_MAXW : W;
    int nblk = (C + W - 1) / W;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        int c0 = blk * W, w = C - c0 < W ? C - c0 : W;
        double acc[GELU_BIAS_MAXW];
        for (int j = 0; j < w; j++)
            acc[j] = 0.0;
        for (int n = 0; n < N; n++) {
            long i0 = (long)n * C + c0;
            if (act == OP_GELU) {
#pragma omp simd
                for (int j = 0; j < w; j++) {
                    float d = gelu_erf_bwd(dout[i0 + j], x[i0 + j]);
                    dx[i0 + j] = d;
                    acc[j] += (double)d;
                }
            } else {
#pragma omp simd
                for (int j = 0; j < w; j++) {
                    float d = gelu_tanh_bwd(dout[i0 + j], x[i0 + j]);
                    dx[i0 + j] = d;
                    acc[j] += (double)d;
                }
            }
        }
        for (int j = 0; j < w; j++)
            db[c0 + j] += (float)acc[j];
    }
}

void op_rotary(float *qkv, const float *cos_t, const float *sin_t, int N, int T,
               int heads, int hd, int rot, int inverse)
{
    int r2 = rot / 2;
    long C3 = 3L * heads * hd;
    float sgn = inverse ? -1.0f : 1.0f;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *cs = cos_t + (long)(n % T) * r2, *sn = sin_t + (long)(n % T) * r2;
        for (int h = 0; h < heads; h++) {
            for (int part = 0; part < 2; part++) {
                float *v = qkv + n * C3 + (long)h * 3 * hd + (long)part * hd;
                for (int i = 0; i < r2; i++) {
                    float x1 = v[i], x2 = v[i + r2], s = sgn * sn[i];
                    v[i] = x1 * cs[i] - x2 * s;
                    v[i + r2] = x2 * cs[i] + x1 * s;
                }
            }
        }
    }
}

void op_embed_fwd(float *out, const float *wte, const int32_t *tok, int N, int C)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        memcpy(out + (long)n * C, wte + (long)tok[n] * C, sizeof(float) * (size_t)C);
}

void op_embed_bwd(float *dwte, const float *d, const int32_t *tok, int N, int C)
{
    int nblk = (C + COLBLK - 1) / COLBLK;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        int c0 = blk * COLBLK, c1 = c0 + COLBLK < C ? c0 + COLBLK : C;
        for (int n = 0; n < N; n++) {
            float *dst = dwte + (long)tok[n] * C;
            const float *src = d + (long)n * C;
            for (int c = c0; c < c1; c++)
                dst[c] += src[c];
        }
    }
}

/* One row's maximum, the exponentials (into row when keep_e), their sum and the loss.
 * Inlined: each caller's loops vectorize in its own OpenMP body (unit.vectorized). */
static inline __attribute__((always_inline)) float xent_row_stats(float *row, int t, int V,
                                                                  bool keep_e, float *sum)
{
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < V; j++)
        mx = row[j] > mx ? row[j] : mx;
    float lt = row[t], s = mf_exp_sum(row, V, mx, keep_e);
    *sum = s;
    return logf(s) + mx - lt;
}

void op_xent_rows(float *logits, float *losses, const int32_t *targets, int M, int V,
                  float grad_scale)
{
#pragma omp parallel for schedule(static)
    for (int m = 0; m < M; m++) {
        float *row = logits + (long)m * V;
        if (targets[m] < 0) {
            losses[m] = 0.0f;
            if (grad_scale != 0.0f)
                memset(row, 0, sizeof(float) * (size_t)V);
            continue;
        }
        int t = targets[m];
        float s;
        losses[m] = xent_row_stats(row, t, V, grad_scale != 0.0f, &s);
        if (grad_scale == 0.0f)
            continue;
        float k = grad_scale / s;
#pragma omp simd
        for (int j = 0; j < V; j++)
            row[j] *= k;
        row[t] -= grad_scale;
    }
}

void op_xent_rows_bf16(float *logits, bf16 *out_h, float *out_r, float *losses,
                       const int32_t *targets, int M, int V, float grad_scale)
{
#pragma omp parallel for schedule(static)
    for (int m = 0; m < M; m++) {
        float *row = logits + (long)m * V;
        bf16 *oh = out_h ? out_h + (long)m * V : NULL;
        float *orr = out_r ? out_r + (long)m * V : NULL;
        if (targets[m] < 0) {
            losses[m] = 0.0f;
            if (oh)
                memset(oh, 0, sizeof(bf16) * (size_t)V);
            else
                memset(orr, 0, sizeof(float) * (size_t)V);
            continue;
        }
        int t = targets[m];
        float s;
        losses[m] = xent_row_stats(row, t, V, true, &s);
        float k = grad_scale / s;
        volatile float pt = row[t] * k; /* rounded before the subtraction, as op_xent_rows */
        float gt = pt - grad_scale;
        if (oh) {
#pragma omp simd
            for (int j = 0; j < V; j++)
                oh[j] = bf16_from_f32(row[j] * k);
            oh[t] = bf16_from_f32(gt);
        } else {
#pragma omp simd
            for (int j = 0; j < V; j++)
                orr[j] = bf16_to_f32(bf16_from_f32(row[j] * k));
            orr[t] = bf16_to_f32(bf16_from_f32(gt));
        }
    }
}
