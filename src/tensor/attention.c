/*
 * attention.c - causal multi-head attention in query tiles, forward and backward.
 *
 * The fused qkv buffer holds, for each token row, [heads][3][hd] (q, k, v
 * per head, Hugging Face GPT-NeoX order); a head's Q, K and V are strided
 * views (leading dimension 3*C) handed to sgemm without copies.
 *
 * Tiling: queries are processed in blocks of QB rows. A block needs scores
 * only against the keys up to its last row (causality), so the scratch is
 * QB x T floats per thread: memory grows linearly with T, and no T x T
 * matrix ever exists. The forward pass keeps the log-sum-exp of each row;
 * the backward pass recomputes P = exp(S - lse) tile by tile (the
 * FlashAttention recipe, with full rows per tile instead of online softmax,
 * which is exact and simpler at these lengths).
 *
 * Parallelism: one (batch, head) pair per task, static schedule; within a
 * pair the query blocks run in order, so dK/dV accumulate in a fixed order
 * and results do not depend on the thread count. sgemm runs single-threaded
 * inside the parallel region (OpenBLAS OpenMP build).
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "tensor/mathfn.h"
#include "tensor/matmul.h"
#include "tensor/ops.h"

#define QB 128

long op_attention_scratch_floats(int T, int nthreads)
{
    int qb = T < QB ? T : QB;
    return 2L * qb * T * nthreads;
}

/* Row r of S (query i = i0 + r) has i+1 valid keys. Converts scores to P in place. */
static void softmax_rows(float *S, float *lse, int i0, int qb, int kv, float scale)
{
    for (int r = 0; r < qb; r++) {
        float *row = S + (long)r * kv;
        int len = i0 + r + 1;
        float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
        for (int j = 0; j < len; j++)
            mx = row[j] > mx ? row[j] : mx;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int j = 0; j < len; j++) {
            float e = mf_exp((row[j] - mx) * scale);
            row[j] = e;
            s += e;
        }
        float inv = 1.0f / s;
        for (int j = 0; j < len; j++)
            row[j] *= inv;
        for (int j = len; j < kv; j++)
            row[j] = 0.0f;
        lse[r] = mx * scale + logf(s);
    }
}

void op_attention_fwd(float *out, float *lse, const float *qkv, int B, int T, int heads,
                      int hd, float *scratch)
{
    int C = heads * hd, ld = 3 * C, qbmax = T < QB ? T : QB;
    float scale = 1.0f / sqrtf((float)hd);
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * heads; bh++) {
        int b = bh / heads, h = bh % heads;
        float *S = scratch + 2L * qbmax * T * omp_get_thread_num();
        const float *Q = qkv + (long)b * T * ld + (long)h * 3 * hd;
        const float *K = Q + hd, *V = Q + 2 * hd;
        float *O = out + (long)b * T * C + (long)h * hd;
        float *L = lse + (long)bh * T;
        for (int i0 = 0; i0 < T; i0 += qbmax) {
            int qb = T - i0 < qbmax ? T - i0 : qbmax, kv = i0 + qb;
            mm_nt(qb, kv, hd, 1.0f, Q + (long)i0 * ld, ld, K, ld, 0.0f, S, kv);
            softmax_rows(S, L + i0, i0, qb, kv, scale);
            mm_nn(qb, hd, kv, 1.0f, S, kv, V, ld, 0.0f, O + (long)i0 * C, C);
        }
    }
}

void op_attention_bwd(float *dqkv, const float *dout, const float *out, const float *lse,
                      const float *qkv, int B, int T, int heads, int hd, float *scratch)
{
    int C = heads * hd, ld = 3 * C, qbmax = T < QB ? T : QB;
    float scale = 1.0f / sqrtf((float)hd);
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * heads; bh++) {
        int b = bh / heads, h = bh % heads;
        float *P = scratch + 2L * qbmax * T * omp_get_thread_num();
        float *dP = P + (long)qbmax * T;
        long base = (long)b * T * ld + (long)h * 3 * hd;
        const float *Q = qkv + base, *K = Q + hd, *V = Q + 2 * hd;
        float *dQ = dqkv + base, *dK = dQ + hd, *dV = dQ + 2 * hd;
        const float *O = out + (long)b * T * C + (long)h * hd;
        const float *dO = dout + (long)b * T * C + (long)h * hd;
        const float *L = lse + (long)bh * T;
        for (int t = 0; t < T; t++) {
            memset(dK + (long)t * ld, 0, sizeof(float) * (size_t)hd);
            memset(dV + (long)t * ld, 0, sizeof(float) * (size_t)hd);
        }
        for (int i0 = 0; i0 < T; i0 += qbmax) {
            int qb = T - i0 < qbmax ? T - i0 : qbmax, kv = i0 + qb;
            mm_nt(qb, kv, hd, 1.0f, Q + (long)i0 * ld, ld, K, ld, 0.0f, P, kv);
            mm_nt(qb, kv, hd, 1.0f, dO + (long)i0 * C, C, V, ld, 0.0f, dP, kv);
            for (int r = 0; r < qb; r++) {
                float *p = P + (long)r * kv, *dp = dP + (long)r * kv;
                const float *o = O + (long)(i0 + r) * C, *dor = dO + (long)(i0 + r) * C;
                int len = i0 + r + 1;
                float l = L[i0 + r], D = 0.0f;
                for (int d = 0; d < hd; d++)
                    D += o[d] * dor[d];
#pragma omp simd
                for (int j = 0; j < len; j++) {
                    float pj = mf_exp(p[j] * scale - l);
                    p[j] = pj;
                    dp[j] = pj * (dp[j] - D) * scale;
                }
                for (int j = len; j < kv; j++)
                    p[j] = dp[j] = 0.0f;
            }
            /* dQ = dS . K; dK += dS^T . Q; dV += P^T . dO  (dS already scaled) */
            mm_nn(qb, hd, kv, 1.0f, dP, kv, K, ld, 0.0f, dQ + (long)i0 * ld, ld);
            mm_tn(kv, hd, qb, 1.0f, dP, kv, Q + (long)i0 * ld, ld, 1.0f, dK, ld);
            mm_tn(kv, hd, qb, 1.0f, P, kv, dO + (long)i0 * C, C, 1.0f, dV, ld);
        }
    }
}
