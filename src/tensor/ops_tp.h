/*
 * ops_tp.h - the kernels tensor parallelism adds (model/tp.h): a vocabulary-parallel
 * embedding and cross-entropy, where each rank holds rows [v0, v0 + nv) of the
 * vocabulary. Same conventions as ops.h (row-major fp32, fixed reduction orders).
 *
 * The cross-entropy is split at the two points where the full softmax needs
 * every rank (the caller reduces in between, so the [M, V] logits never exist
 * on one rank):
 *   1. op_xent_tp_local: each row's local max and, on the rank owning the
 *      target, the target logit (0 elsewhere)        -> all-reduce max / sum
 *   2. op_xent_tp_exp:   exp(logit - global max) in place, local sums  -> sum
 *   3. op_xent_tp_finish: loss = log(sum) + max - target logit, and the
 *      logits become (softmax - onehot) * grad_scale, as op_xent_rows; a row
 *      whose target is negative (masked) has loss 0 and a zero gradient row.
 */
#ifndef GRIT_TENSOR_OPS_TP_H
#define GRIT_TENSOR_OPS_TP_H

#include <stdint.h>

/* out[n] = wte[tok[n] - v0] for tokens in [v0, v0 + nv), else 0. */
void op_embed_fwd_range(float *out, const float *wte, const int32_t *tok, int N, int C, int v0,
                        int nv);
/* dwte[tok[n] - v0] += d[n] for tokens in range (deterministic order). */
void op_embed_bwd_range(float *dwte, const float *d, const int32_t *tok, int N, int C, int v0,
                        int nv);

void op_xent_tp_local(const float *logits, const int32_t *targets, int M, int V, int v0,
                      float *mx, float *lt);
/* With keep != 0 the logits are replaced by exp(logit - mx). */
void op_xent_tp_exp(float *logits, const float *mx, int M, int V, int keep, float *s);
void op_xent_tp_finish(float *logits, float *losses, const int32_t *targets, int M, int V,
                       int v0, const float *mx, const float *s, const float *lt,
                       float grad_scale);

/* The cross-entropy over vocabulary pieces that one rank visits in turn (ZeRO-2/3's
 * chunked head, model/gptneox.h vpieces): logits [M, nv] of rows [v0, v0 + nv) for M rows
 * whose running statistics are mx[M], s[M] (double; start at -inf and 0) and lt[M] (the
 * target logit, set by the piece holding it). stats: the online softmax update
 * s = s exp(mx - mx') + sum exp(logit - mx') with mx' the new max (masked rows untouched);
 * grad: the logits become (exp(logit - mx) / s - onehot) * grad_scale (zero rows masked). */
void op_xent_piece_stats(const float *logits, const int32_t *targets, int M, int nv, int v0,
                         double *mx, double *s, double *lt);
void op_xent_piece_grad(float *logits, const int32_t *targets, int M, int nv, int v0,
                        const double *mx, const double *s, float grad_scale);

#endif
