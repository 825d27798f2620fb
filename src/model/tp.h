/*
 * tp.h - tensor parallelism (Megatron style) for the decoder core.
 *
 * A TP group of `tp` ranks runs every layer together; rank r holds:
 *   - attention: heads [r H/tp, (r+1) H/tp) and kv heads [r kv/tp, ...): the rows
 *     of the fused q/k/v (column parallel: whole heads, or whole kv groups in
 *     Falcon's grouped layout; Llama's q, k and v each sliced), its columns of the
 *     output projection (row parallel: partial sums, all-reduced). kv heads are
 *     split when tp divides them; when they divide tp (multi-query: one kv head;
 *     grouped with fewer kv heads than ranks) each rank holds one kv head, the one
 *     its query heads use, shared by tp / kv ranks (replicas): the backward sums
 *     the replicas' key/value gradients (one all-reduce of [kv, N, 2 hd]) so every
 *     replica holds the same gradient of its k/v rows, and only the first replica
 *     adds their part of the input gradient, counts them in the gradient norm and
 *     writes them to checkpoints (gx_tensor.kv_copy).
 *   - MLP: intermediate columns [r I/tp, ...) of up (and gate), the same columns of
 *     down (row parallel, all-reduced).
 *   - vocabulary rows [r V/tp, ...) of the input embedding (each rank looks up the
 *     tokens it owns, zeros elsewhere, all-reduced) and of the LM head; the
 *     cross-entropy is vocabulary parallel (tensor/ops_tp.h): per-row max and
 *     sum of exponentials are all-reduced, the [N, V] logits are never gathered.
 *   - norms and the biases added after a row-parallel all-reduce: whole copies,
 *     whose gradients come out identical on every TP rank (their inputs are).
 * Communication per layer and micro-batch: forward two all-reduces of [N, C]
 * (attention out, MLP out), backward two (the inputs of q/k/v and up), plus the
 * embedding's and the head's; each is a hook (gx_model.tp_reduce) so model/
 * needs no MPI.
 *
 * Every tensor keeps its Hugging Face name; gx_tensor.{gshape,split,seg} say which
 * slice of the whole tensor a rank holds, so weights are drawn whole and sliced
 * (identical start in every layout) and gathered back to whole tensors for
 * model.safetensors and checkpoints (any layout resumes any other).
 * At tp 1 none of this runs: the single-rank step is unchanged, bit for bit.
 *
 * Sequence parallelism (Megatron's, GX_SEQ_PAR; "parallel": {"sequence": true}): the
 * regions between the row-parallel output and the next column-parallel input (residual
 * stream, norms, their statistics, the sequential block's mid) hold 1/tp of the token rows
 * on each rank (rows [s0, s0 + ns) of the micro-batch's N = B*T, flattened batch-major).
 * A norm's output is all-gathered before the column-parallel product (forward, and again
 * in the backward for the weight gradient, so only the rank's rows are stored); a
 * row-parallel product's partial sums are reduce-scattered instead of all-reduced; the
 * residual gradient is all-gathered before the backward of a block's products and their
 * input gradients reduce-scattered. The norms' weight gradients cover the rank's rows and
 * are summed over the group per layer. The embedding's lookup is reduce-scattered and the
 * final norm's output gathered for the vocabulary-parallel head. Same bytes on the wire as
 * the all-reduces it replaces (an all-reduce is a reduce-scatter plus an all-gather) plus
 * one all-gather of [N, C] per norm in the backward; pipeline stages exchange [ns, C].
 */
#ifndef GRIT_MODEL_TP_H
#define GRIT_MODEL_TP_H

#include <stddef.h>

#include "model/gptneox.h"

/* GRIT_EINVAL naming the numbers unless tp divides heads, kv heads, intermediate
 * size and vocab. */
grit_err gx_tp_check(const gx_config *c, int tp);
/* kv heads one TP rank holds (kv / tp, or 1 when tp > kv), the first of them (global
 * index) on rank r, and how many ranks share each (1: split, tp / kv: replicated). */
int gx_tp_kv_local(const gx_config *c, int tp);
int gx_tp_kv_head0(const gx_config *c, int tp, int r);
int gx_tp_kv_rep(const gx_config *c, int tp);
/* Backward of replicated kv heads (kv_rep > 1): dqkv [N, qkv_dim] rows: sums the
 * replicas' key/value columns over the TP group; clear: zeroes them (a non-first
 * replica, before the input gradient). */
void gx__tp_kv_sum(gx_model *m, float *dqkv, int N);
/* Whether element k of tensor t (its local index) lies in a segment flagged kv_copy. */
bool gx_tp_is_kv_copy(const gx_tensor *t, size_t k);
void gx__tp_kv_clear(gx_model *m, float *dqkv, int N);
/* Parameters one TP rank holds (gx_param_count at tp 1). */
size_t gx_tp_param_count(const gx_config *c, int tp);
/* Activation bytes per token on one TP rank (gx_act_bytes_per_token at tp 1). */
size_t gx_tp_act_bytes_per_token(const gx_config *c, int tp);
/* The same with or without full activation recomputation (gx_set_recompute). */
size_t gx_act_bytes_layout(const gx_config *c, int tp, bool recompute);
/* ... and with or without sequence parallelism (GX_SEQ_PAR): per token of the micro-batch,
 * the norm and residual regions divided by tp. */
size_t gx_act_bytes_sp(const gx_config *c, int tp, bool recompute, bool sp);
/* gx_memory_estimate for one TP rank. */
size_t gx_tp_memory_estimate(const gx_config *c, int B, int T, int tp);
size_t gx_tp_memory_estimate_rc(const gx_config *c, int B, int T, int tp, bool recompute);
size_t gx_tp_memory_estimate_sp(const gx_config *c, int B, int T, int tp, bool recompute,
                                bool sp);

/* Copies between a whole tensor (full, gshape) and a rank's slice (local, shape):
 * to_full 0: full -> local; 1: local -> full (only the slice's elements). */
void gx_tp_slice_copy(const gx_tensor *t, const float *full, float *local, int to_full);

/* The tensor table of TP rank r of tp (tp 1: the whole model's), as gx_init_tp
 * builds it: *out (caller frees), *n tensors, *np floats in the block. */
grit_err gx_tp_layout(const gx_config *c, int tp, int r, gx_tensor **out, int *n, size_t *np);
/* The same for TP rank r of pipeline stage s of pp (gx_init_stage's table). */
grit_err gx_stage_layout(const gx_config *c, int tp, int r, int pp, int s, gx_tensor **out,
                         int *n, size_t *np);
/* Whole-model parameter block (the tp 1 layout) from the blocks of every TP rank,
 * parts[r * part_n ...] (part_n = each rank's num_params). */
grit_err gx_tp_assemble(const gx_config *c, int tp, const float *parts, size_t part_n,
                        float *full);

/* --- internal to model/ (gptneox_step.c) ---------------------------------------- */
/* In-place sum (max != 0: maximum) over the TP group; no-op at tp 1. */
void gx__tp_reduce(gx_model *m, float *buf, size_t n, int max);
/* Sequence parallelism (m->sp): a [ns, C] row block of this rank gathered into full
 * [N, C] (returned); without it local itself. */
const float *gx__sp_full(gx_model *m, const float *local, float *full);
/* The group's sum of a row-parallel partial [N, C]: without sequence parallelism
 * all-reduced in place (returned: part); with it this rank's rows reduce-scattered into
 * out [ns, C] (returned). */
const float *gx__sp_sum(gx_model *m, float *part, float *out);
/* Sequence parallelism: m->nrm_g's four [C] blocks (norm-weight gradients of this rank's
 * rows, zeroed by gx__sp_norm_begin) summed over the group and added to dst[i] (NULL:
 * skipped). */
void gx__sp_norm_begin(gx_model *m);
void gx__sp_norm_end(gx_model *m, float *d0, float *d1, float *d2, float *d3);

/* Vocabulary-parallel cross-entropy of M rows of this rank's logits [M, nv]:
 * losses[M], and logits -> dlogits (grad_scale != 0). */
void gx__tp_xent(gx_model *m, float *logits, float *losses, const int32_t *tgt, int M,
                 float grad_scale);

#endif
