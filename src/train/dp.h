/*
 * dp.h - data-parallel gradient synchronisation and ZeRO-1, over comm.h.
 *
 * Every rank runs the same model on its slice of the global batch. With
 * ZeRO-1 off, gradients are summed with all-reduces that start during the
 * last micro-batch's backward, one per layer-sized bucket as the model
 * reports it final (gx_model.grad_ready), and are progressed between layers;
 * every rank then holds the full averaged gradient and applies the same
 * AdamW. With ZeRO-1 on, the flat parameter block is split into one
 * contiguous shard per rank: gradients are reduce-scattered bucket by bucket as
 * backward produces them (same hook, fixed order), each rank keeps
 * AdamW moments for its shard only (memory / world size), updates its shard
 * and the shards are all-gathered back into every rank's parameters.
 *
 * The global gradient norm is computed the same way on every rank (ZeRO:
 * per-rank partial sums gathered and added in rank order), so clipping and
 * the update are identical everywhere.
 */
#ifndef GRIT_TRAIN_DP_H
#define GRIT_TRAIN_DP_H

#include <stdbool.h>
#include <stdint.h>

#include "ckpt/store.h"
#include "comm/comm.h"
#include "model/gptneox.h"
#include "train/optim.h"

/* Gradient reductions (ZeRO-0/1: nonblocking, started as backward finishes each bucket) in
 * flight at once; a further bucket first waits for the oldest. */
#define DP_IN_FLIGHT 2

typedef struct dp_sync {
    comm *d;               /* borrowed: the data-parallel group */
    comm *tp;              /* borrowed: the tensor-parallel group (NULL: none); dp_set_tp */
    comm *pp;              /* borrowed: the pipeline group (NULL: none); dp_set_pp */
    float *tied_buf;       /* tied embeddings across stages: the other stage's gradient */
    bool tied_now;         /* ZeRO-1: the first stage's deferred embedding bucket starting */
    gx_model *m;           /* borrowed */
    bool zero1;
    bool zero2;            /* gradients sharded too: no gradient block, one bucket's window */
    float *win, *rs;       /* ZeRO-2: [win_n] the bucket backward writes; its reduced part */
    size_t win_n;
    int *zc;               /* ZeRO-2: [world] one bucket's reduce-scatter counts */
    bool zero3;            /* parameters sharded too: no parameter block, one bucket's window */
    float *p_shard, *pwin; /* ZeRO-3: this rank's parameters [lo, hi); the gathered bucket */
    int *pc, *pd;          /* ZeRO-3: [world] one bucket's all-gather counts and places */
    grit_err z2_rc;        /* ZeRO-2/3: the first failed collective of the step, and why */
    char z2_err[256];
    size_t lo, hi;         /* this rank's shard of the flat block (ZeRO-1) */
    int *counts, *displs;  /* [world] shard sizes and starts, in floats */
    float *m_shard, *v_shard, *g_shard; /* ZeRO-1 state */
    int *bucket_counts;    /* ZeRO-1: [COMM_MAX_REQS][world] per-bucket reduce-scatter counts */
    int started;           /* reductions started this step (one per gradient bucket) */
    /* Sparse input embedding: its gradient is non-zero only in the rows of tokens
     * seen this step, so that bucket is reduced as the packed union of every rank's
     * rows (the last bucket of backward, the one nothing can hide). */
    size_t embed_n;        /* elements of the input embedding (flat block [0, embed_n)) */
    unsigned char *rows;   /* [vocab] rows used this step, any rank */
    int *row_idx, nrows;   /* those rows, ascending; 0: reduce the bucket densely */
    float *pack;           /* [nrows * hidden] */
    double pre_wait_s;     /* time in the row union exchange, this step */
    double ar_blocking_s;  /* measured cost of one blocking all-reduce of all gradients */
    double wait_s;         /* time the training thread spent in gradient communication,
                              this step (in the hooks, the row union and the final wait) */
    double hook_s;         /* of which in the grad_ready hook */
} dp_sync;

grit_err dp_init(dp_sync *p, comm *d, gx_model *m, bool zero1, bool zero2, bool zero3);
/* ZeRO-3, once the weights are loaded or initialised: keeps this rank's shard and frees the
 * model's parameter block (the forward and backward gather each bucket as they reach it).
 * A no-op otherwise. */
grit_err dp_shard_params(dp_sync *p);
/* The initial weights (gx_init_weights); ZeRO-3 on a lean model: only the shard's. */
void dp_init_weights(dp_sync *p, uint64_t seed);
/* The weights of checkpoint dir (ckpt_load, weights only); ZeRO-3 on a lean model: only
 * the shard's elements, one tensor at a time (ckpt_load_each). */
grit_err dp_load_params(dp_sync *p, store *ck, const char *dir);
/* The whole parameter block on root (out: num_params floats there; ignored elsewhere):
 * ZeRO-3 gathers the shards (collective over the group), otherwise root copies its own. */
grit_err dp_gather_params(dp_sync *p, float *out, int root);
/* The weights of the flat range [off, off + n) (a tensor) on rank root (out: n floats
 * there); every rank of the data-parallel group calls it (ZeRO-3: a gather of the shards'
 * parts of it). */
grit_err dp_gather_range(dp_sync *p, size_t off, size_t n, float *out, int root);
/* Under tensor parallelism (m->tp > 1): the TP group, for the gradient norm. Each
 * rank's sum of squares of its slices is added over the group in rank order; the
 * replicated tensors (norms, row-parallel biases: identical on every TP rank) are
 * counted once. The sparse embedding reduction is off (vocabulary rows are split). */
void dp_set_tp(dp_sync *p, comm *tp);
/* Under pipeline parallelism (m->pp > 1): the pipeline group; the gradient norm adds each
 * stage's sum of squares in stage order, so every rank clips by the whole model's norm. */
void dp_set_pp(dp_sync *p, comm *pp);
void dp_free(dp_sync *p);
/* Bytes this rank holds for weights, gradients and AdamW state (blocks, shards and ZeRO's
 * windows, as allocated). */
size_t dp_state_bytes(const dp_sync *p);

/* Every step, before forward (all ranks): the step's tokens on this rank (n
 * int32, any superset of the embedding inputs); agrees on the rows of the input
 * embedding whose gradient is reduced. */
grit_err dp_set_tokens(dp_sync *p, const int32_t *tok, size_t n);

/* Call before the last micro-batch's forward/backward of a step: arms the
 * overlapped all-reduces (world > 1, ZeRO-1 off). */
void dp_arm(dp_sync *p);

/* Around a forward outside a step (validation): ZeRO-3's weight gathers armed, then
 * disarmed with the first failure, if any, returned (no-ops without ZeRO-3). */
void dp_forward_begin(dp_sync *p);
grit_err dp_forward_end(dp_sync *p);

/* After backward: completes the reductions; *norm = global gradient L2 norm. */
grit_err dp_finish_grads(dp_sync *p, double *norm);

/* The AdamW update (and, for ZeRO-1, the all-gather of parameters). */
grit_err dp_step(dp_sync *p, const optim_cfg *o, long t, double lr, float clip);

/* Full AdamW moments on root (ZeRO-1: gathered from the shards; otherwise copied):
 * mm/vv are num_params floats, written on root only. Checkpoints of world > 1 do
 * not use it: every rank writes its own shard (train.c, ckpt.h). */
grit_err dp_gather_moments(dp_sync *p, float *mm, float *vv, int root);

/* Bytes of AdamW state this rank holds. */
double dp_optim_bytes(const dp_sync *p);

#endif
