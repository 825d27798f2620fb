/*
 * optim.h - learning-rate schedule, global gradient-norm clipping and AdamW applied
 * to a model's parameter tensors (the element-wise update is tensor/adamw.h).
 *
 * Semantics match torch.optim.AdamW and torch.nn.utils.clip_grad_norm_
 * (docs/parity.md states them exactly); the tests hold us to them.
 */
#ifndef GRIT_TRAIN_OPTIM_H
#define GRIT_TRAIN_OPTIM_H

#include "model/gptneox.h"

typedef struct optim_cfg {
    int micro_batch, grad_accum, seq_len;
    double lr, min_lr;
    int warmup_steps, total_steps;
    double beta1, beta2, eps, weight_decay, grad_clip;
    int global_batch;  /* sequences per optimiser step over all ranks (0: micro x accum x world) */
    bool zero1;        /* shard AdamW moments across data-parallel ranks */
    bool zero2;        /* also shard the gradients ("parallel": {"zero": 2}; implies zero1) */
    bool zero3;        /* and the parameters ("zero": 3; implies zero2) */
} optim_cfg;

/* LR for optimiser step s (0-based): linear warmup to lr over warmup_steps,
 * then cosine decay to min_lr at total_steps (held there after). */
double optim_lr(const optim_cfg *o, long step);

/* L2 norm of all gradients; fixed-order, thread-count independent. */
double optim_grad_norm(const gx_model *m);
/* The L2 norm of g[0, n) in a fixed summation order (optim_grad_norm's). */
double optim_grad_norm_n(const float *g, size_t n);

/* One AdamW update at 1-based step t with learning rate lr; gradients are
 * first multiplied by clip_coef. Decay only on tensors marked decay. */
void optim_adamw(gx_model *m, const optim_cfg *o, long t, double lr, float clip_coef);

/* AdamW on the flat range [lo, hi) of the parameter block only, with weights w,
 * gradients g and moments mm/vv indexed from lo (ZeRO: each rank updates its shard; w is
 * m->params + lo, or ZeRO-3's parameter shard). Decay per tensor as optim_adamw. */
void optim_adamw_range(gx_model *m, const optim_cfg *o, long t, double lr, float clip_coef,
                       size_t lo, size_t hi, float *w, const float *g, float *mm, float *vv);

/* Coefficient torch's clip_grad_norm_ applies: min(1, clip / (norm + 1e-6)). */
float optim_clip_coef(const optim_cfg *o, double norm);

#endif
