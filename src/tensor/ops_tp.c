/* ops_tp.c - vocabulary-parallel embedding and cross-entropy kernels (see ops_tp.h). */
#include "tensor/ops_tp.h"

#include <math.h>
#include <string.h>

#include "tensor/mathfn.h"

#define COLBLK 64

void op_embed_fwd_range(float *out, const float *wte, const int32_t *tok, int N, int C, int v0,
                        int nv)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        int t = tok[n] - v0;
        if (t >= 0 && t < nv)
            memcpy(out + (long)n * C, wte + (long)t * C, sizeof(float) * (size_t)C);
        else
            memset(out + (long)n * C, 0, sizeof(float) * (size_t)C);
    }
}

void op_embed_bwd_range(float *dwte, const float *d, const int32_t *tok, int N, int C, int v0,
                        int nv)
{
    int nblk = (C + COLBLK - 1) / COLBLK;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        int c0 = blk * COLBLK, c1 = c0 + COLBLK < C ? c0 + COLBLK : C;
        for (int n = 0; n < N; n++) {
            int t = tok[n] - v0;
            if (t < 0 || t >= nv)
                continue;
            float *dst = dwte + (long)t * C;
            const float *src = d + (long)n * C;
            for (int c = c0; c < c1; c++)
                dst[c] += src[c];
        }
    }
}

void op_xent_tp_local(const float *logits, const int32_t *targets, int M, int V, int v0,
                      float *mx, float *lt)
{
#pragma omp parallel for schedule(static)
    for (int m = 0; m < M; m++) {
        const float *row = logits + (long)m * V;
        float x = -INFINITY;
#pragma omp simd reduction(max : x)
        for (int j = 0; j < V; j++)
            x = row[j] > x ? row[j] : x;
        mx[m] = x;
        int t = targets[m] - v0;
        lt[m] = t >= 0 && t < V ? row[t] : 0.0f;
    }
}

void op_xent_tp_exp(float *logits, const float *mx, int M, int V, int keep, float *s)
{
#pragma omp parallel for schedule(static)
    for (int m = 0; m < M; m++) {
        s[m] = mf_exp_sum(logits + (long)m * V, V, mx[m], keep);
    }
}

void op_xent_tp_finish(float *logits, float *losses, const int32_t *targets, int M, int V,
                       int v0, const float *mx, const float *s, const float *lt,
                       float grad_scale)
{
#pragma omp parallel for schedule(static)
    for (int m = 0; m < M; m++) {
        float *row = logits + (long)m * V;
        if (targets[m] < 0) { /* masked (SFT prompt, padding): no loss, no gradient */
            if (grad_scale != 0.0f)
                memset(row, 0, sizeof(float) * (size_t)V);
            losses[m] = 0.0f;
            continue;
        }
        if (grad_scale != 0.0f) {
            float k = grad_scale / s[m];
#pragma omp simd
            for (int j = 0; j < V; j++)
                row[j] *= k;
            int t = targets[m] - v0;
            if (t >= 0 && t < V)
                row[t] -= grad_scale;
        }
        losses[m] = logf(s[m]) + mx[m] - lt[m];
    }
}

void op_xent_piece_stats(const float *logits, const int32_t *targets, int M, int nv, int v0,
                         double *mx, double *s, double *lt)
{
#pragma omp parallel for schedule(static)
    for (int m = 0; m < M; m++) {
        if (targets[m] < 0)
            continue;
        const float *row = logits + (long)m * nv;
        float pm = -INFINITY;
#pragma omp simd reduction(max : pm)
        for (int j = 0; j < nv; j++)
            pm = row[j] > pm ? row[j] : pm;
        double nm = (double)pm > mx[m] ? (double)pm : mx[m];
        float fm = (float)nm, acc = 0.0f;
#pragma omp simd reduction(+ : acc)
        for (int j = 0; j < nv; j++)
            acc += mf_exp(row[j] - fm);
        s[m] = s[m] * exp(mx[m] - nm) + (double)acc;
        mx[m] = nm;
        int t = targets[m] - v0;
        if (t >= 0 && t < nv)
            lt[m] = row[t];
    }
}

void op_xent_piece_grad(float *logits, const int32_t *targets, int M, int nv, int v0,
                        const double *mx, const double *s, float grad_scale)
{
#pragma omp parallel for schedule(static)
    for (int m = 0; m < M; m++) {
        float *row = logits + (long)m * nv;
        if (targets[m] < 0) {
            memset(row, 0, sizeof(float) * (size_t)nv);
            continue;
        }
        float fm = (float)mx[m], k = (float)(grad_scale / s[m]);
#pragma omp simd
        for (int j = 0; j < nv; j++)
            row[j] = mf_exp(row[j] - fm) * k;
        int t = targets[m] - v0;
        if (t >= 0 && t < nv)
            row[t] -= grad_scale;
    }
}
