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
 * Packed sequences (SFT): with lay->seg set, query row t of a sequence sees
 * only keys seg[t]..t (seg[t] = first position of its example), so examples
 * packed into one row never attend to each other; keys before seg[t] get
 * probability exactly 0 in both passes.
 *
 * Grouped-query and multi-query attention: op_qkv_layout says where each
 * query head and its shared key/value head sit in a row, so GPT-NeoX's
 * [heads][3][hd], Llama's q|k|v and Falcon's grouped rows need no copies.
 *
 * Parallelism: forward, one (batch, head) pair per task; backward, one
 * (batch, kv head) per task with its query heads and query blocks in order,
 * so dK/dV accumulate in a fixed order and results do not depend on the
 * thread count. sgemm runs single-threaded
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

/* Row r of S (query i = i0 + r) has valid keys lo..i (lo = seg[r], or 0 without
 * packed segments). Converts scores to P in place. Inlined into op_attn_fwd's parallel
 * body on every CPU (gcc kept it a call when compiling for AVX-512), where
 * unit.vectorized looks for its vector loops. */
static inline __attribute__((always_inline)) void softmax_rows(float *S, float *lse, int i0,
                                                               int qb, int kv, float scale,
                                                               const int32_t *seg)
{
    for (int r = 0; r < qb; r++) {
        float *row = S + (long)r * kv;
        int len = i0 + r + 1, lo = seg ? seg[r] : 0;
        for (int j = 0; j < lo; j++)
            row[j] = 0.0f;
        float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
        for (int j = lo; j < len; j++)
            mx = row[j] > mx ? row[j] : mx;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int j = lo; j < len; j++) {
            float e = mf_exp((row[j] - mx) * scale);
            row[j] = e;
            s += e;
        }
        float inv = 1.0f / s;
        for (int j = lo; j < len; j++)
            row[j] *= inv;
        for (int j = len; j < kv; j++)
            row[j] = 0.0f;
        lse[r] = mx * scale + logf(s);
    }
}

op_qkv_layout op_qkv_neox(int heads, int hd)
{
    return (op_qkv_layout){.ld = 3 * heads * hd, .group = 1, .q_gstride = 3 * hd,
                           .k_base = hd, .v_base = 2 * hd, .kv_stride = 3 * hd};
}

/* Offsets of query head h and of its key/value head inside a row. */
static inline long q_off(const op_qkv_layout *l, int h, int hd)
{
    return (long)(h / l->group) * l->q_gstride + (long)(h % l->group) * hd;
}

void op_attn_fwd(float *out, float *lse, const float *qkv, const op_qkv_layout *lay, int B,
                 int T, int heads, int hd, float *scratch)
{
    int C = heads * hd, ld = lay->ld, qbmax = T < QB ? T : QB;
    float scale = 1.0f / sqrtf((float)hd);
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < B * heads; bh++) {
        int b = bh / heads, h = bh % heads, g = h / lay->group;
        float *S = scratch + 2L * qbmax * T * omp_get_thread_num();
        const float *row = qkv + (long)b * T * ld;
        const float *Q = row + q_off(lay, h, hd);
        const float *K = row + lay->k_base + (long)g * lay->kv_stride;
        const float *V = row + lay->v_base + (long)g * lay->kv_stride;
        float *O = out + (long)b * T * C + (long)h * hd;
        float *L = lse + (long)bh * T;
        for (int i0 = 0; i0 < T; i0 += qbmax) {
            int qb = T - i0 < qbmax ? T - i0 : qbmax, kv = i0 + qb;
            mm_nt(qb, kv, hd, 1.0f, Q + (long)i0 * ld, ld, K, ld, 0.0f, S, kv);
            softmax_rows(S, L + i0, i0, qb, kv, scale,
                         lay->seg ? lay->seg + (long)b * T + i0 : NULL);
            mm_nn(qb, hd, kv, 1.0f, S, kv, V, ld, 0.0f, O + (long)i0 * C, C);
        }
    }
}

/* One query head's backward; dK/dV accumulate (the caller zeroes them once per kv head). */
static void head_bwd(float *dqkv, const float *dout, const float *out, const float *lse,
                     const float *qkv, const op_qkv_layout *lay, int b, int h, int heads, int T,
                     int hd, float *P)
{
    int C = heads * hd, ld = lay->ld, qbmax = T < QB ? T : QB, g = h / lay->group;
    float scale = 1.0f / sqrtf((float)hd);
    float *dP = P + (long)qbmax * T;
    long rb = (long)b * T * ld, qo = q_off(lay, h, hd);
    long ko = lay->k_base + (long)g * lay->kv_stride, vo = lay->v_base + (long)g * lay->kv_stride;
    const float *Q = qkv + rb + qo, *K = qkv + rb + ko, *V = qkv + rb + vo;
    float *dQ = dqkv + rb + qo, *dK = dqkv + rb + ko, *dV = dqkv + rb + vo;
    const float *O = out + (long)b * T * C + (long)h * hd;
    const float *dO = dout + (long)b * T * C + (long)h * hd;
    const float *L = lse + ((long)b * heads + h) * T;
    for (int i0 = 0; i0 < T; i0 += qbmax) {
        int qb = T - i0 < qbmax ? T - i0 : qbmax, kv = i0 + qb;
        mm_nt(qb, kv, hd, 1.0f, Q + (long)i0 * ld, ld, K, ld, 0.0f, P, kv);
        mm_nt(qb, kv, hd, 1.0f, dO + (long)i0 * C, C, V, ld, 0.0f, dP, kv);
        for (int r = 0; r < qb; r++) {
            float *p = P + (long)r * kv, *dp = dP + (long)r * kv;
            const float *o = O + (long)(i0 + r) * C, *dor = dO + (long)(i0 + r) * C;
            int len = i0 + r + 1, lo = lay->seg ? lay->seg[(long)b * T + i0 + r] : 0;
            float l = L[i0 + r], D = 0.0f;
            for (int d = 0; d < hd; d++)
                D += o[d] * dor[d];
            for (int j = 0; j < lo; j++)
                p[j] = dp[j] = 0.0f;
#pragma omp simd
            for (int j = lo; j < len; j++) {
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

/* One task per (batch, kv head): its query heads run in order, so the shared dK/dV
 * accumulate in a fixed order whatever the thread count. */
void op_attn_bwd(float *dqkv, const float *dout, const float *out, const float *lse,
                 const float *qkv, const op_qkv_layout *lay, int B, int T, int heads, int hd,
                 float *scratch)
{
    int ld = lay->ld, qbmax = T < QB ? T : QB, G = lay->group, kvh = heads / G;
#pragma omp parallel for schedule(static)
    for (int bg = 0; bg < B * kvh; bg++) {
        int b = bg / kvh, g = bg % kvh;
        float *P = scratch + 2L * qbmax * T * omp_get_thread_num();
        long rb = (long)b * T * ld;
        float *dK = dqkv + rb + lay->k_base + (long)g * lay->kv_stride;
        float *dV = dqkv + rb + lay->v_base + (long)g * lay->kv_stride;
        for (int t = 0; t < T; t++) {
            memset(dK + (long)t * ld, 0, sizeof(float) * (size_t)hd);
            memset(dV + (long)t * ld, 0, sizeof(float) * (size_t)hd);
        }
        for (int j = 0; j < G; j++)
            head_bwd(dqkv, dout, out, lse, qkv, lay, b, g * G + j, heads, T, hd, P);
    }
}

void op_attention_fwd(float *out, float *lse, const float *qkv, int B, int T, int heads,
                      int hd, float *scratch)
{
    op_qkv_layout lay = op_qkv_neox(heads, hd);
    op_attn_fwd(out, lse, qkv, &lay, B, T, heads, hd, scratch);
}

void op_attention_bwd(float *dqkv, const float *dout, const float *out, const float *lse,
                      const float *qkv, int B, int T, int heads, int hd, float *scratch)
{
    op_qkv_layout lay = op_qkv_neox(heads, hd);
    op_attn_bwd(dqkv, dout, out, lse, qkv, &lay, B, T, heads, hd, scratch);
}
