/*
 * pipeline.h - the 1F1B pipeline schedule over a pipeline group (comm/grid.h ppc).
 *
 * Stage s of P (the group's rank) holds a gx_model built with gx_init_stage. A step
 * runs M micro-batches, one-forward-one-backward (PipeDream-flush, as Megatron-LM's
 * non-interleaved schedule):
 *
 *   warm-up   min(P - s - 1, M) forwards: receive the input, run, send the output;
 *   steady    forward of the next micro-batch, then backward of the oldest in flight:
 *             the output goes forward and the gradient of it comes back in one paired
 *             exchange, the gradient of the input goes back with the next input;
 *   cool-down the remaining backwards.
 *
 * The last stage runs each micro-batch's forward, loss and backward in one call, so
 * micro-batch i's backward starts on it right after its forward. Micro-batches finish
 * their backward in order 0 .. M-1 on every stage, so gradients accumulate in the order
 * of a single rank's gradient accumulation: the result is bitwise the single-rank
 * step's (tested). A stage keeps the input of each micro-batch in flight (at most P - s
 * of them, [B*T, hidden] each) and recomputes its forward before the backward
 * (gx_stage_step): its activation memory is one micro-batch's whatever P and M are,
 * for one more forward per micro-batch on every stage but the last.
 *
 * Point to point messages go through comm_sendrecv under the group's deadline: a dead
 * or hung neighbour is GRIT_EIO naming the peer within comm.timeout_s, never a hang.
 * The bubble: each stage idles (P - 1) of its (M + P - 1) slots; the measured time
 * blocked in exchanges is reported per step (pp_sched.wait_s).
 */
#ifndef GRIT_TRAIN_PIPELINE_H
#define GRIT_TRAIN_PIPELINE_H

#include <stdint.h>

#include "comm/comm.h"
#include "model/gptneox.h"

typedef struct pp_sched {
    comm *pp;              /* borrowed: the pipeline group, rank = stage */
    gx_model *m;           /* borrowed: this stage */
    int stages, stage, micro;
    int slots;             /* stage inputs kept: micro-batches in flight at most */
    float *ring;           /* [slots][B*T*hidden] inputs of micro-batches in flight */
    float *out, *grad;     /* [B*T*hidden]: output sent / gradient received; gradient sent */
    float *dsend;
    /* after each pp_step */
    double wait_s;         /* time blocked in point-to-point exchanges */
    double step_s;         /* the step's wall time */
    unsigned long long bytes; /* payload bytes this stage sent */
    /* Called once, before the last micro-batch's backward on this stage (the trainer
     * arms its overlapped data-parallel reductions there: dp_arm); NULL: none. */
    void (*before_last_bwd)(void *ctx);
    void *ctx;
} pp_sched;

/* A schedule of `micro` micro-batches per step for stage pp->rank of pp->size, which m
 * must be (m->pp, m->pp_rank). */
grit_err pp_init(pp_sched *s, comm *pp, gx_model *m, int micro);
void pp_free(pp_sched *s);

/* One step's forwards and backwards. tok[i]: micro-batch i's tokens ([B, T+1], every
 * stage gets them); sft: NULL or [micro] (as gx_step_ex); grad_scale as gx_step_ex's
 * (e.g. 1 / (micro x data-parallel ranks)). Gradients accumulate into m->grads.
 * *loss_sum: the sum of the micro-batches' losses, the last stage's, on every stage (one
 * broadcast over the group). Errors: GRIT_EIO when an exchange failed or missed its
 * deadline (the peer is named), GRIT_EINVAL for a NaN from a failed TP reduction. */
grit_err pp_step(pp_sched *s, const int32_t *const *tok, const gx_batch *sft, float grad_scale,
                 double *loss_sum);

/* The idle fraction of an ideal 1F1B step: (P - 1) / (M + P - 1). */
double pp_bubble(int stages, int micro);

#endif
