/*
 * ops.h - CPU kernels for the transformer's non-matmul work, forward and backward.
 *
 * Conventions: row-major float32; N rows (tokens) of C columns. Backward
 * kernels *accumulate* (+=) into parameter gradients and into the input
 * gradient where noted, so callers zero what must start at zero.
 *
 * Determinism: every reduction has a fixed order that does not depend on
 * the thread count. Row-wise work is split over rows; reductions over rows
 * (bias and norm-weight gradients, embedding gradients) are split over
 * column blocks and summed row by row in order.
 *
 * Matrix products go through mm_* (OpenBLAS sgemm); see matmul.h.
 */
#ifndef GRIT_TENSOR_OPS_H
#define GRIT_TENSOR_OPS_H

#include <stdint.h>

#include "tensor/gemm_bf16.h"

/* out[n] = (x[n] - mean) * rstd * w + b; saves mean[n], rstd[n]. */
void op_layernorm_fwd(float *out, float *mean, float *rstd, const float *x,
                      const float *w, const float *b, int N, int C, float eps);
/* dx += LN'(dout); dw += sum_n dout*xhat; db += sum_n dout. */
void op_layernorm_bwd(float *dx, float *dw, float *db, const float *dout, const float *x,
                      const float *mean, const float *rstd, const float *w, int N, int C);

/* out = x[n] + bias (broadcast over rows); out may alias x. */
void op_add_bias(float *out, const float *x, const float *bias, int N, int C);
/* db[c] += sum_n d[n*ld + c]. */
void op_bias_grad(float *db, const float *d, int N, int C, int ld);
/* out = a + b + bias (rows of C). */
void op_add3_bias(float *out, const float *a, const float *b, const float *bias, int N, int C);

typedef enum op_act { OP_GELU = 0, OP_GELU_TANH = 1 } op_act;
void op_gelu_fwd(float *out, const float *x, long n, op_act act);
/* dx = dout * gelu'(x); dx may alias dout. */
void op_gelu_bwd(float *dx, const float *dout, const float *x, long n, op_act act);
/* op_gelu_bwd over [N, C] then op_bias_grad(db, dx, N, C, C), in one pass, same bits. */
void op_gelu_bwd_bias(float *dx, float *db, const float *dout, const float *x, int N, int C,
                      op_act act);

/* Rotary embedding, in place on q and k of every head in a fused qkv buffer
 * of rows [heads][3][hd] (row stride 3*C). Row n has position n % T. cos/sin
 * tables are [T][rot/2]. inverse=1 applies the transpose (for backward). */
void op_rotary(float *qkv, const float *cos_t, const float *sin_t, int N, int T,
               int heads, int hd, int rot, int inverse);

/* out[n] = wte[tok[n]]; dwte[tok[n]] += d[n] (deterministic order). */
void op_embed_fwd(float *out, const float *wte, const int32_t *tok, int N, int C);
void op_embed_bwd(float *dwte, const float *d, const int32_t *tok, int N, int C);

/* Tiled causal attention over a fused qkv buffer [B*T][heads][3][hd].
 * Memory: scratch of op_attention_scratch_floats() per call, linear in T.
 * out: [B*T][C]; lse: [B][heads][T] log-sum-exp of each query row. */
long op_attention_scratch_floats(int T, int nthreads);
void op_attention_fwd(float *out, float *lse, const float *qkv, int B, int T, int heads,
                      int hd, float *scratch);
/* dqkv is written in full (q, k and v parts). */
void op_attention_bwd(float *dqkv, const float *dout, const float *out, const float *lse,
                      const float *qkv, int B, int T, int heads, int hd, float *scratch);

/* Where heads sit in a fused q/k/v row of ld floats: query head h at
 * (h / group) * q_gstride + (h % group) * hd, its key/value head g = h / group
 * at k_base + g * kv_stride and v_base + g * kv_stride. group = heads / kv heads. */
typedef struct op_qkv_layout {
    int ld, group, q_gstride, k_base, v_base, kv_stride;
    /* Packed examples (SFT), borrowed, NULL for plain causal rows: seg[b*T + t] is the
     * position in row b where token t's example starts. Attention then sees keys
     * seg..t only, and rotary uses position t - seg (each example starts at 0). */
    const int32_t *seg;
} op_qkv_layout;
op_qkv_layout op_qkv_neox(int heads, int hd);
/* op_attention_fwd/bwd for any layout (GQA, MQA); dqkv's q, k and v parts are written in full. */
void op_attn_fwd(float *out, float *lse, const float *qkv, const op_qkv_layout *lay, int B,
                 int T, int heads, int hd, float *scratch);
void op_attn_bwd(float *dqkv, const float *dout, const float *out, const float *lse,
                 const float *qkv, const op_qkv_layout *lay, int B, int T, int heads, int hd,
                 float *scratch);
/* op_rotary for any layout: rotates the q of every head and the k of every kv head. */
void op_rotary_lay(float *qkv, const float *cos_t, const float *sin_t, const op_qkv_layout *lay,
                   int N, int T, int heads, int hd, int rot, int inverse);

/* RMSNorm (Llama): out[n] = x[n] * rstd * w, rstd = 1/sqrt(mean(x^2) + eps); saves rstd[n].
 * Backward: dx += RMS'(dout); dw += sum_n dout * x * rstd. (ops_decoder.c) */
void op_rmsnorm_fwd(float *out, float *rstd, const float *x, const float *w, int N, int C,
                    float eps);
void op_rmsnorm_bwd(float *dx, float *dw, const float *dout, const float *x, const float *rstd,
                    const float *w, int N, int C);

/* SwiGLU over rows of gu = [gate (I) | up (I)]: out[n] = silu(gate) * up, [N, I].
 * Backward writes dgu [N, 2I] from dout [N, I]. (ops_decoder.c) */
void op_swiglu_fwd(float *out, const float *gu, int N, int inter);
void op_swiglu_bwd(float *dgu, const float *dout, const float *gu, int N, int inter);

/* Fused kernels (ops_fused.c): one pass over the rows where the unfused composition
 * takes two or three, with the same float operations in the same order, so the
 * results are bitwise those of the composition (tests/unit/tensor/test_fused.c).
 * A norm: LayerNorm (rms 0: weight w, bias b, saves mean and rstd) or RMSNorm
 * (rms 1: weight w, saves rstd; b and mean unused). */
typedef struct op_norm {
    int rms;
    float eps;
    const float *w, *b;
    float *mean, *rstd;
} op_norm;
/* Two norms of the same x (GPT-NeoX, Falcon 40B: attention and MLP norms of the block
 * input): the statistics once, out1 = norm1(x), out2 = norm2(x); p2's mean/rstd get
 * copies of p1's. Equal to op_layernorm_fwd/op_rmsnorm_fwd for each (same eps). */
void op_norm2_fwd(const op_norm *p1, float *out1, const op_norm *p2, float *out2,
                  const float *x, int N, int C);
/* Residual epilogue of the attention branch: t = x + o + db (op_add3_bias); mid = t
 * when mid is given; y = t + pb when pb is given, else y = t; nout = norm(t) when p
 * is given (the sequential block's second norm). */
void op_resid_fwd(float *y, float *mid, const float *x, const float *o, const float *db,
                  const float *pb, const op_norm *p, float *nout, int N, int C);
/* Gradient into one norm's input: dout (plus dout_b when given, summed first: two
 * consumers of one norm's output) and the norm's weight (and bias) gradients. */
typedef struct op_norm_grad {
    const float *dout, *dout_b;
    float *dw, *db;
} op_norm_grad;
/* dx += norm'(g) for one norm (op_layernorm_bwd or op_rmsnorm_bwd by p1->rms), or for
 * two norms of the same x (p2 given: the second's term added after the first's, as two
 * op_*norm_bwd calls in that order). p->mean, p->rstd: the statistics the forward saved. */
void op_norm2_bwd(float *dx, const float *x, int N, int C, const op_norm *p1,
                  const op_norm_grad *g1, const op_norm *p2, const op_norm_grad *g2);

/* Cross-entropy over logits rows [M][V] in place: returns per-row loss in
 * losses[m] and replaces logits with (softmax - onehot) * grad_scale (when
 * grad_scale != 0; with 0 the logits are left as they were). A row whose
 * target is negative (masked: SFT prompt tokens, padding) has loss 0 and,
 * with grad_scale != 0, a zero gradient row. */
void op_xent_rows(float *logits, float *losses, const int32_t *targets, int M, int V,
                  float grad_scale);

/* The same losses, the gradient (grad_scale != 0) written rounded to bf16 into out_h
 * (bf16 bits) or, with out_h NULL, into out_r (bf16 values as float32) instead of in
 * place: bit for bit op_xent_rows's gradient rounded, in one pass from the logits to the
 * bf16 head's GEMM operand. logits is scratch afterwards. */
void op_xent_rows_bf16(float *logits, bf16 *out_h, float *out_r, float *losses,
                       const int32_t *targets, int M, int V, float grad_scale);

#endif
