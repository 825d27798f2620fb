/*
 * gptneox.h - the GPT-NeoX decoder (Pythia, GPT-NeoX-20B) as Hugging Face
 * transformers' GPTNeoXForCausalLM defines it, trained on the CPU.
 *
 * Memory: four blocks allocated once by gx_init() and never in the step
 * loop: parameters, gradients, AdamW m and v (each one allocation with the
 * same layout, tensors addressed by their Hugging Face names through
 * gx_model.tensors), and one activation block sized for (B, T).
 *
 * Parameter order (HF names; C hidden, I intermediate, V padded vocab):
 *   gpt_neox.embed_in.weight [V,C]
 *   per layer l: input_layernorm.{weight,bias} [C], post_attention_layernorm.{weight,bias} [C],
 *     attention.query_key_value.{weight [3C,C], bias [3C]} (rows [heads][3][hd]),
 *     attention.dense.{weight [C,C], bias [C]}, mlp.dense_h_to_4h.{weight [I,C], bias [I]},
 *     mlp.dense_4h_to_h.{weight [C,I], bias [C]}
 *   gpt_neox.final_layer_norm.{weight,bias} [C], embed_out.weight [V,C] (untied, no bias)
 *
 * Activation memory grows linearly with tokens per micro-batch (attention is
 * tiled; no T x T buffer): gx_act_bytes_per_token() gives the exact figure,
 * 4 * (L * (7C + 2I + heads + 4) + 9C + I + 4) bytes with parallel residual
 * (one more C per layer without), plus a fixed 512 x V logits chunk.
 */
#ifndef GRIT_MODEL_GPTNEOX_H
#define GRIT_MODEL_GPTNEOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "tensor/gemm_bf16.h"
#include "tensor/ops.h"

/* The decoder is assembled from options (model/family.h has the tables that
 * fill them for GPT-NeoX, Llama and Falcon). Every option's zero value is
 * GPT-NeoX's choice, so a gx_config written for GPT-NeoX before the options
 * existed still means exactly that model. */
typedef enum gx_family { GX_NEOX = 0, GX_LLAMA = 1, GX_FALCON = 2 } gx_family;
typedef enum gx_norm { GX_LAYERNORM = 0, GX_RMSNORM = 1 } gx_norm;
typedef enum gx_mlp { GX_MLP_GELU = 0, GX_MLP_SWIGLU = 1 } gx_mlp;
/* Row layout of the fused q/k/v projection output (and weight rows):
 *   GX_QKV_NEOX:    [heads][3][hd]                 (GPT-NeoX; Falcon without multi_query)
 *   GX_QKV_SPLIT:   [heads*hd | kv*hd | kv*hd]     (Llama q/k/v_proj back to back; Falcon 7B multi_query, kv = 1)
 *   GX_QKV_GROUPED: [kv][heads/kv + 2][hd]         (Falcon new_decoder_architecture) */
typedef enum gx_qkv { GX_QKV_NEOX = 0, GX_QKV_SPLIT = 1, GX_QKV_GROUPED = 2 } gx_qkv;
/* Hugging Face rope_scaling kinds (None, "linear", "dynamic" NTK, "llama3"). */
typedef enum gx_rope { GX_ROPE_NONE = 0, GX_ROPE_LINEAR, GX_ROPE_DYNAMIC, GX_ROPE_LLAMA3 } gx_rope;
/* Bits of gx_config.no_bias: projections without a bias. */
enum { GX_NOBIAS_QKV = 1, GX_NOBIAS_DENSE = 2, GX_NOBIAS_MLP = 4 };

typedef struct gx_config {
    int hidden;        /* C */
    int layers;        /* L */
    int heads;         /* heads; head_dim = C / heads */
    int intermediate;  /* I */
    int vocab;         /* V, already padded */
    int max_positions; /* rotary table length, >= seq_len */
    double rotary_pct; /* fraction of head_dim rotated */
    double rotary_base;
    double ln_eps;
    op_act act;
    bool parallel_residual;
    /* --- options beyond GPT-NeoX (zero = GPT-NeoX) --- */
    gx_family family;
    gx_norm norm;       /* RMSNorm has a weight only */
    gx_mlp mlp;         /* SwiGLU: down(silu(gate(x)) * up(x)); act is unused */
    int kv_heads;       /* key/value heads (GQA, MQA when 1); 0 = heads */
    gx_qkv qkv;
    int no_bias;        /* GX_NOBIAS_* bits */
    bool tied;          /* LM head shares the input embedding (no separate tensor) */
    bool shared_norm;   /* parallel block with one norm feeding attention and MLP (Falcon 7B) */
    gx_rope rope;
    double rope_factor, rope_low, rope_high; /* llama3: factor, low/high_freq_factor */
    int rope_orig_max;  /* llama3: original_max_position_embeddings */
    double init_std;    /* N(0, init_std) for matrices when family != GX_NEOX (HF initializer_range) */
} gx_config;

/* Numerics of the step (gx_set_precision). GX_BF16: the GEMMs of the linear layers
 * and the LM head take bf16 weights (a copy of the float32 master weights, made at
 * the start of each gx_step) and bf16 activations, and accumulate and write float32;
 * everything else (norms, attention, softmax and loss statistics, reductions,
 * gradients, the optimiser) stays float32. */
typedef enum gx_precision { GX_FP32 = 0, GX_BF16 = 1 } gx_precision;

/* kv heads in effect (kv_heads, or heads when 0). */
static inline int gx_kv_heads(const gx_config *c) { return c->kv_heads > 0 ? c->kv_heads : c->heads; }

/* Fills cfg with a named Pythia shape; GRIT_ENOTFOUND for an unknown name. */
grit_err gx_preset(const char *name, gx_config *cfg);
/* Names accepted by gx_preset, NULL-terminated. */
extern const char *const gx_preset_names[];
/* Checks shapes are consistent; message names the offending field. */
grit_err gx_config_check(const gx_config *cfg);

/* Which gx_weights/gx_layer pointer a tensor binds to (GX_SLOT_NONE: the
 * continuation of the previous slot, e.g. k_proj after q_proj). */
enum {
    GX_SLOT_NONE = -1, GX_SLOT_LN1_W = 0, GX_SLOT_LN1_B, GX_SLOT_LN2_W, GX_SLOT_LN2_B,
    GX_SLOT_QKV_W, GX_SLOT_QKV_B, GX_SLOT_DENSE_W, GX_SLOT_DENSE_B, GX_SLOT_FC_W, GX_SLOT_FC_B,
    GX_SLOT_PROJ_W, GX_SLOT_PROJ_B, GX_SLOT_EMBED, GX_SLOT_LNF_W, GX_SLOT_LNF_B, GX_SLOT_HEAD
};

typedef struct gx_tensor {
    char name[96];
    bool norm_weight; /* a norm's scale: initialised to 1 */
    signed char slot; /* GX_SLOT_* */
    int layer;        /* -1 outside the layers */
    size_t offset; /* in floats from the block start */
    size_t numel;
    int ndim;
    int shape[2];
    bool decay; /* weight decay applies (weights and embeddings, not biases/norms) */
    /* the last pipeline stage's copy of a tied input embedding (its LM head): the same
     * name and values as the first stage's tensor; its gradient is added to that one's
     * (train/dp.c), it counts once in the gradient norm and is written once */
    bool tied_copy;
    /* Replicated kv heads (model/tp.h): bit s set when segment s is a copy of a kv head
     * whose first replica is another rank: not counted in the gradient norm, not written
     * to checkpoints (all segments set: the whole tensor is such a copy) */
    unsigned char kv_copy;
    /* Tensor parallelism (model/tp.h): which part of the whole Hugging Face tensor
     * (gshape) this rank holds. split -1: all of it (replicated on every TP rank);
     * 0: rows, 1: columns, as nseg runs {global start, local start, count} along
     * that dimension. With one TP rank every tensor is whole. */
    int gshape[2];
    signed char split, nseg;
    int seg[3][3];
} gx_tensor;

/* Pointers into one block (params or grads) for one layer. */
typedef struct gx_layer {
    float *ln1_w, *ln1_b, *ln2_w, *ln2_b;
    float *qkv_w, *qkv_b, *dense_w, *dense_b;
    float *fc_w, *fc_b, *proj_w, *proj_b;
} gx_layer;

typedef struct gx_weights {
    float *embed_in, *lnf_w, *lnf_b, *embed_out;
    gx_layer *layer; /* [L] */
} gx_weights;

/* Per-layer stored activations, all [N = B*T rows]. */
typedef struct gx_layer_acts {
    float *ln1, *ln1_mean, *ln1_rstd; /* [N,C], [N], [N] */
    float *qkv;                       /* [N,3C] after bias and rotary */
    float *att, *lse;                 /* [N,C] pre-dense; [B,heads,T] */
    float *mid;                       /* [N,C] x + attn (sequential residual only) */
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fc, *gelu;                 /* [N,I] pre- and post-activation */
} gx_layer_acts;

typedef struct gx_model {
    gx_config cfg;
    int B, T;                   /* micro-batch shape the buffers are sized for */
    size_t num_params;
    int num_tensors;
    gx_tensor *tensors;         /* [num_tensors] in block order */
    float *params, *grads, *adam_m, *adam_v; /* each [num_params] */
    gx_weights w, g;            /* views into params and grads */

    /* activations and scratch (one block) */
    float *act_block;
    size_t act_floats;
    float **resid;              /* [L+1] of [N,C]: resid[0] embeddings, resid[l+1] layer l out */
    gx_layer_acts *acts;        /* [L] */
    float *lnf, *lnf_mean, *lnf_rstd;
    float *dres, *dtmp, *dln, *datt, *dqkv, *dfc; /* backward scratch */
    float *otmp;                /* the forward's [N,C] scratch (dtmp, or its own under recompute) */
    bool recompute;             /* full activation recomputation (gx_set_recompute) */
    int32_t *inp, *tgt;         /* [N] input and target ids of the micro-batch */
    float *logits;              /* [chunk, V] */
    float *losses;              /* [N] */
    float *att_scratch;
    float *rope_cos, *rope_sin; /* [rope_len, rot/2] */
    int rot, chunk, nthreads;
    int tpl;                    /* tensors per layer: layer l's are tensors[1 + tpl*l ...] */
    int qkv_dim;                /* rows of the fused q/k/v projection: (heads + 2 kv) * hd */
    float *zeros;               /* [max(C, qkv_dim, 2I)] zero bias for projections without one */

    /* If set, called during backward each time a contiguous range of m->grads
     * [off, off + n) is final for this micro-batch (LM head and final norm, then
     * each layer from the last, then the input embedding): lets data-parallel
     * training start reducing gradients while backward goes on. */
    void (*grad_ready)(void *ctx, size_t off, size_t n);
    void *grad_ctx;
    /* If set, called (with grad_ctx) just before backward first writes the gradients of
     * the range [off, off + n) that grad_ready later reports: gradient sharding (ZeRO-2,
     * train/dp.h) points those tensors' gradients into a window here (gx_bind_grads). */
    void (*grad_begin)(void *ctx, size_t off, size_t n);
    /* If set, called (with grad_ctx) before the forward or backward reads the weights of
     * the range [off, off + n) (a gradient bucket's): parameter sharding (ZeRO-3) gathers
     * them into a window and points the tensors there (gx_bind_params). */
    void (*param_begin)(void *ctx, size_t off, size_t n);

    /* Tensor parallelism (model/tp.h): tp ranks of which this is tp_rank (1 and 0
     * without it). This rank's share: nh of the heads, nkv kv heads, ni of the
     * intermediate columns, nv vocabulary rows from v0; hd = hidden / heads. */
    int tp, tp_rank, hd, nh, nkv, ni, nv, v0;
    /* kv heads: kv_head the first one this rank holds (global index); kv_rep ranks share
     * each (1: split over the ranks; > 1: replicated, model/tp.h); kv_buf [kv N 2 hd]
     * for the replicas' gradient sum */
    int kv_head, kv_rep;
    float *kv_buf;
    op_qkv_layout lay;          /* q/k/v layout of this rank's heads */
    float *tp_tmp;              /* [3 chunk] vocabulary-parallel softmax statistics */
    /* In-place reduction over the TP group (set by the trainer when tp > 1);
     * returns non-zero on failure, which is kept in tp_failed (sticky) and makes
     * gx_step return NAN. */
    int (*tp_reduce)(void *ctx, float *buf, size_t n, int max);
    void *tp_ctx;
    int tp_failed;
    /* Sequence parallelism (model/tp.h; GX_SEQ_PAR): the residual stream, the norms'
     * outputs and statistics hold token rows [s0, s0 + ns) of the N = B*T (ns = N / tp;
     * without it ns = N, s0 = 0). lnx: a norm's output gathered [N, C]; dyf: the residual
     * gradient gathered [N, C] (it is dres, which the forward's partial sums use too:
     * otmp); dln_l, datt_l, o_l (= dln_l): reduce-scattered rows [ns, C]; nrm_g [4 C]: a layer's norm-weight
     * gradients before their sum over the group. The hooks: tp_gather, in place, buf holds
     * tp blocks of n floats, block r from rank r; tp_scatter: block r of buf [tp n] summed
     * over the group into rank r's out [n]. Non-zero return: failure (tp_failed). */
    bool sp;
    int ns, s0;
    float *lnx, *dyf, *dln_l, *datt_l, *o_l, *nrm_g;
    int (*tp_gather)(void *ctx, float *buf, size_t n);
    int (*tp_scatter)(void *ctx, const float *buf, float *out, size_t n);
    /* Vocabulary pieces (gx_set_vocab_pieces; ZeRO-2/3 at one TP rank): the input embedding
     * and the head are gathered and their gradients reduced vpieces times, vrows rows each,
     * so a ZeRO window holds a piece, not a [V, C] tensor. The head then runs two passes
     * over the pieces (the softmax statistics online, vstat [3 N] doubles; then the
     * logits again for the gradients). zwin_w, zwin_g: the window the last param_begin /
     * grad_begin filled (set by the hooks), where a piece's weights / gradients are. */
    int vpieces, vrows;
    double *vstat;
    float *zwin_w, *zwin_g;
    const int32_t *seg;         /* packed-example starts during a gx_step_ex call, else NULL */
    /* Pipeline parallelism (gx_init_stage, gx_stage_step): stage pp_rank of pp holds the
     * nl layers from global layer l0 (1, 0, 0 and cfg.layers without it), the input
     * embedding on the first stage, the final norm and head on the last. Tensor names
     * keep global layer numbers; layer arrays (w.layer, acts, resid) are the stage's.
     * lt0: index of the first layer tensor (1 after the embedding, 0 without it). */
    int pp, pp_rank, l0, nl, lt0;
    /* bf16 mixed precision (gx_set_precision; all NULL/0 in fp32) */
    gx_precision prec;
    bf16 *params_h;             /* [num_params] bf16 copy of the GEMM weights (gx_step) */
    /* without a parameter block (ZeRO-3: a bucket at a time in param_begin's window) the
     * bf16 copy is of the window instead: win_h [win_cap] holds the GEMM weights of the
     * win_fn floats at win_f the last param_begin gathered */
    bf16 *win_h;
    size_t win_cap, win_fn;
    const float *win_f;
    bf16 *opa, *opb;            /* bf16 copies of activation operands */
    size_t opa_n, opb_n;
    /* what opa (opa_r) holds when the last gx__mm (or gx__opa_hold) left an activation
     * there: its source and stored shape, for gx__mm_again; NULL otherwise */
    const float *opa_src;
    int opa_rows, opa_cols, opa_ld;
    /* where the GEMMs run as fp32 sgemm (no AVX512-BF16: gx_bf16_rounds), the copies hold
     * the bf16 values as float32 instead, so sgemm reads them with no widening pass:
     * params_r / win_r in place of params_h / win_h, opa_r / opb_r of opa / opb (the bf16
     * pointers are then NULL) */
    bool rounds;
    float *params_r, *win_r, *opa_r, *opb_r;
    gemm_bf16_ctx *gemm;
    grit_err gemm_err;          /* sticky: first bf16 GEMM failure in gx_step (loss is NaN) */
} gx_model;

/* Allocates everything for micro-batches of B sequences of T tokens, using
 * nthreads for sizing per-thread scratch. A model that cannot fit in this
 * machine's available memory (family.h gx_memory_estimate) fails with GRIT_ENOMEM,
 * naming its parameter count and estimate, before allocating anything. Weights are zero until
 * gx_init_weights() or a load. gx_free(NULL) is a no-op. */
grit_err gx_init(gx_model *m, const gx_config *cfg, int B, int T, int nthreads);
/* The same for tensor-parallel rank tp_rank of tp (model/tp.h): only this rank's
 * slices are allocated; the model's divisibility by tp is checked (GRIT_EINVAL). */
grit_err gx_init_tp(gx_model *m, const gx_config *cfg, int B, int T, int nthreads, int tp,
                    int tp_rank);
/* gx_init_tp with full activation recomputation chosen at allocation (gx_set_recompute). */
grit_err gx_init_tp_rc(gx_model *m, const gx_config *cfg, int B, int T, int nthreads, int tp,
                       int tp_rank, bool recompute);
/* gx_init_stage's flags: blocks not to allocate, because ZeRO keeps a shard of them
 * (train/dp.h): the weights (ZeRO-3), the gradients (ZeRO-2), the AdamW moments (ZeRO-1);
 * their pointers stay NULL and the memory check does not count them. GX_SEQ_PAR: sequence
 * parallelism (tp > 1; model/tp.h): the norm and residual regions hold this rank's rows
 * only; B * T must be divisible by tp (GRIT_EINVAL naming the numbers). */
enum { GX_NO_PARAMS = 1u, GX_NO_GRADS = 2u, GX_NO_OPTIM = 4u, GX_SEQ_PAR = 8u };
grit_err gx_init_stage_f(gx_model *m, const gx_config *cfg, int B, int T, int nthreads, int tp,
                         int tp_rank, bool recompute, int pp, int pp_rank, unsigned flags);
/* gx_init_tp_rc for pipeline stage pp_rank of pp (gx_stage_step): layers split evenly
 * (cfg.layers divisible by pp), only this stage's tensors allocated. With tied embeddings
 * the last stage holds a copy of the embedding as its head (gx_tensor.tied_copy). */
grit_err gx_init_stage(gx_model *m, const gx_config *cfg, int B, int T, int nthreads, int tp,
                       int tp_rank, bool recompute, int pp, int pp_rank);
void gx_free(gx_model *m);

/* Full activation recomputation: one layer's activations are kept instead of every
 * layer's (the layer inputs resid[0..L] stay), and the backward recomputes each layer's
 * forward from its input just before that layer's backward; results are bitwise those
 * without it (the same kernels on the same inputs), for about one more forward per step.
 * Reallocates the activation block: call after gx_init and before gx_set_precision;
 * gx_init_tp_rc allocates the smaller block from the start, so the larger one
 * never counts in the peak. */
grit_err gx_set_recompute(gx_model *m, bool full);

/* Switches the step's numerics (GX_FP32 is gx_init's). GX_BF16 allocates the bf16
 * weight copy and operand buffers and picks the GEMM backend (tensor/gemm_bf16.h);
 * *note (may be NULL) receives a static line for the run's log saying which backend
 * and why, starting with "warning:" when this CPU cannot run bf16 natively. Master
 * weights, gradients and AdamW state stay float32, so checkpoints are unchanged. */
grit_err gx_set_precision(gx_model *m, gx_precision p, const char **note);
/* Bytes gx_set_precision(GX_BF16) allocates beside the weights' copy for a rank of
 * tensor-parallel degree tp with N token rows per micro-batch: the operand buffers, bf16,
 * or float32 where the copies are rounded floats (gx_bf16_rounds). */
double gx_bf16_buffer_bytes(const gx_config *c, int tp, size_t N, bool rounds);
/* True when bf16 here runs its GEMMs as fp32 sgemm on bf16-rounded float32 copies (a CPU
 * without AVX512-BF16, a build without oneDNN, or GRIT_BF16_GEMM=fp32; not under the
 * planted accumulation fault, which needs the widening path): the weights' copy then
 * takes 4 bytes a parameter, not 2. */
bool gx_bf16_rounds(void);
/* "fp32" / "bf16"; GRIT_EINVAL naming the expected values for anything else. */
const char *gx_precision_name(gx_precision p);
grit_err gx_precision_parse(const char *name, gx_precision *out);

/* GPT-NeoX: Pythia initialisation: small_init N(0, sqrt(2/(5C))) for embeddings
 * and linear weights, wang_init N(0, 2/(L sqrt(C))) for attention.dense and
 * mlp.dense_4h_to_h. Llama and Falcon: N(0, init_std) (HF initializer_range).
 * Zero biases, unit norm weights. Deterministic in seed. */
void gx_init_weights(gx_model *m, uint64_t seed);
/* The same initial values for the flat range [lo, hi) only, into out (hi - lo floats):
 * ZeRO-3's shard without the whole block. */
void gx_init_weights_range(const gx_model *m, uint64_t seed, size_t lo, size_t hi, float *out);

/* Looks a tensor up by HF name; NULL if absent. */
const gx_tensor *gx_find(const gx_model *m, const char *name);
/* The largest tensor's element count (at least 1): a buffer for any one tensor. */
size_t gx_max_numel(const gx_model *m);

/* Forward and backward on one micro-batch. tokens is [B, T+1]: inputs are
 * columns 0..T-1, targets 1..T. Gradients are *accumulated* into m->grads
 * with dloss scaled by grad_scale (e.g. 1/grad_accum); grad_scale 0 runs the
 * forward only. If logits_out is non-NULL it receives [B*T, V] logits (one TP rank
 * only: with tp > 1 the logits are never gathered and logits_out is ignored).
 * Returns the mean cross-entropy over the B*T positions. */
float gx_step(gx_model *m, const int32_t *tokens, float grad_scale, float *logits_out);

/* What a supervised fine-tuning micro-batch adds to the tokens (all borrowed):
 *   mask  [B, T+1] or NULL: mask[b][t] != 0 when token t of row b is a target
 *         whose loss counts (a response token); column 0 is never a target.
 *   seg   [B, T] or NULL: seg[b][t] = position in row b where input token t's
 *         example starts. Packed examples then never attend to each other and
 *         each one's rotary positions start at 0, as if it ran alone.
 *   denom the number the summed loss is divided by (e.g. the counted targets of
 *         the whole global batch, all micro-batches and ranks); 0 = the counted
 *         targets of this micro-batch. */
typedef struct gx_batch {
    const uint8_t *mask;
    const int32_t *seg;
    double denom;
} gx_batch;

/* gx_step with a loss mask and packed examples: returns the sum of the
 * counted targets' cross-entropy divided by denom, and accumulates
 * grad_scale times its gradient. sft NULL is exactly gx_step. */
float gx_step_ex(gx_model *m, const int32_t *tokens, const gx_batch *sft, float grad_scale,
                 float *logits_out);

/* One pipeline stage's part of gx_step_ex (gx_init_stage; the schedule is
 * train/pipeline.h). tokens and sft as for gx_step_ex (every stage gets the micro-batch:
 * the first embeds its inputs, the last scores its targets). in: [B*T, hidden], the
 * previous stage's output (ignored on the first stage).
 *   not the last stage, dout NULL: forward only; out receives the stage output.
 *   not the last stage, dout given (the gradient of the stage output, grad_scale already
 *   in it): the forward again from in (nothing of the earlier forward is kept, so a
 *   stage holds one micro-batch's activations however many are in flight), then the
 *   backward; gradients accumulate as in gx_step_ex, din receives the gradient of in.
 *   the last stage: forward, loss and (grad_scale != 0) backward; din as above; returns
 *   the loss.
 * din is ignored on the first stage (its backward ends in the embedding). With pp 1
 * (one stage, first and last) this is gx_step_ex. Returns 0 on stages without the
 * loss, NAN when a TP reduction failed. */
float gx_stage_step(gx_model *m, const int32_t *tokens, const gx_batch *sft, const float *in,
                    const float *dout, float grad_scale, float *out, float *din,
                    float *logits_out);

/* End of stage layer l's tensors in the block: the next layer's start, the head bucket's,
 * or the block's end on a stage without the head (layer l's gradient bucket is
 * [tensors[lt0 + tpl l].offset, gx_layer_end)). */
size_t gx_layer_end(const gx_model *m, int l);

void gx_zero_grad(gx_model *m);

/* Frees the AdamW moment arrays (ZeRO-1 keeps only a shard of them elsewhere). */
void gx_drop_optim_state(gx_model *m);
/* Frees what only the step uses: the activation block, the gradients and the bf16 copies;
 * the weights and AdamW state stay (a run's end, before the final weights are gathered, so
 * that gather does not come on top of them). No gx_step after it; gx_free as usual. */
void gx_release_step(gx_model *m);
/* Vocabulary pieces (gx_model.vpieces): how many pieces of at most `bucket` floats a
 * [rows, C] vocabulary tensor is cut into (1: it fits); gx_set_vocab_pieces switches the
 * step to them (tp 1; tied embeddings on one stage only; GRIT_EINVAL otherwise, GRIT_ENOMEM). Without ZeRO's
 * hooks the pieces are read from and written to the whole blocks (tests/unit/model). */
int gx_vocab_pieces(size_t rows, int C, size_t bucket);
grit_err gx_set_vocab_pieces(gx_model *m, int pieces);
/* The largest layer's bucket (the flat range of one layer's tensors), and the largest
 * bucket a step reports to the ZeRO hooks: the head's (final norm and head), a layer's,
 * the input embedding's; with vocabulary pieces the embedding's and head's pieces and the
 * final norm's bucket instead. ZeRO's windows are this size. */
size_t gx_layer_bucket_max(const gx_model *m);
size_t gx_bucket_max(const gx_model *m);
/* Frees the gradient block (ZeRO-2 keeps a shard elsewhere and lends backward one bucket's
 * window at a time through grad_begin + gx_bind_grads); gx_zero_grad is then a no-op. */
void gx_drop_grads(gx_model *m);
/* Points the gradients of the tensors inside the flat range [off, off + n) at base
 * (base[0] is offset off). */
void gx_bind_grads(gx_model *m, size_t off, size_t n, float *base);
/* The same for the weights (ZeRO-3's window); gx_drop_params frees the parameter block
 * (ZeRO-3 keeps a shard) and leaves the weight pointers NULL until a param_begin (in bf16
 * the block's bf16 copy becomes a window's: GRIT_ENOMEM if that fails). */
void gx_bind_params(gx_model *m, size_t off, size_t n, float *base);
grit_err gx_drop_params(gx_model *m);

/* Bytes of activations stored per token (excluding the fixed-size scratch). */
size_t gx_act_bytes_per_token(const gx_config *cfg);

/* FLOPs of one forward+backward per token at sequence length T (matmuls and attention). */
double gx_flops_per_token(const gx_config *cfg, int T);

#endif
