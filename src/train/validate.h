/*
 * validate.h - held-out loss during training ("eval" in the training config).
 *
 * Every eval.interval_steps optimiser steps (and, with eval.at_checkpoint, at
 * every checkpoint step) the trainer scores a fixed held-out set with the
 * weights it has just updated: the mean next-token loss over eval.samples
 * sequences of seq_len + 1 tokens, and its perplexity exp(loss).
 *
 * The held-out set, fixed for the whole run (and for a resumed one):
 *   "megatron"   the valid split of data.paths[0] (data.split, Megatron's
 *                get_train_valid_test_split_): its documents in order, as one
 *                token stream cut into windows of seq_len + 1 tokens that share
 *                their boundary token (window w = tokens [w*T, (w+1)*T]); the
 *                first eval.samples windows. An empty valid split, or one
 *                shorter than the windows asked for, is an error at start.
 *   "synthetic"  samples 0 .. samples-1 of the synthetic stream drawn with
 *                seed ^ VALIDATE_SYN_SALT: the training distribution, other
 *                sequences.
 *
 * What it does not touch: the training weights (read only), gradients, the
 * optimiser, the data order (a pure function of the step) and every RNG. Its
 * forward is the inference path (model/gptneox_infer.h, a KV cache state of
 * its own), so a run with validation ends with weights bitwise equal to one
 * without. The same held-out set on any layout: window j is scored by rank
 * j % world, every rank's per-window losses are summed into one array (each
 * slot has one non-zero term, so the sum is exact) and the mean is taken in
 * window order, so the value is bitwise the same for every data-parallel width.
 *
 * Under tensor or pipeline parallelism the inference path (which needs whole weights)
 * is not used: the windows go through the training forward of the rank's slices
 * (gx_stage_step with grad_scale 0: vocabulary-parallel loss, no backward, no gradient
 * or weight written; stage to stage over the pipeline group), micro_batch windows per
 * call, in the run's precision. Every rank of a TP group and every stage holds the same
 * windows; the value differs from the TP=1 one only by float summation order
 * (tests/integration/tp.sh bounds it) and equals it bitwise with pipeline stages alone.
 * ZeRO-3 (parameters sharded over the data-parallel ranks) goes the same way: its hooks
 * gather each bucket's weights for the forward, and every rank makes the same number of
 * forward calls (a rank whose windows ran out scores a window it ignores).
 *
 * Memory: validate_open allocates the rank's windows, the inference state
 * (cache for seq_len positions) and a [rows][vocab] logits block once;
 * validate_run allocates nothing. Ownership: validate_open / validate_close
 * (a zeroed or closed validator closes as a no-op).
 */
#ifndef GRIT_TRAIN_VALIDATE_H
#define GRIT_TRAIN_VALIDATE_H

#include <stdbool.h>
#include <stdint.h>

#include "comm/comm.h"
#include "model/gptneox_infer.h"
#include "train/config.h"

#define VALIDATE_SYN_SALT 0x76616c6964ULL /* "valid" */

typedef struct validator {
    bool on;           /* eval.interval_steps > 0 or eval.at_checkpoint */
    int interval;      /* eval.interval_steps (0: only at checkpoints) */
    bool at_ckpt;
    int n, T, rank, world;
    int32_t *tok;      /* [n][T + 1] the windows (only this rank's are filled) */
    double *loss;      /* [n] per-window mean loss */
    float *logits;     /* [rows][vocab] */
    gxi_state s;       /* the inference state (tensor parallel 1) */
    gx_model *m;       /* TP > 1, PP > 1 or ZeRO-3: the training model, forward only */
    int32_t *batch;    /* [m->B][T + 1] windows of one such forward */
    comm *pp;          /* pipeline parallel > 1: the pipeline group (validate_set_pp) */
    float *act;        /* [m->B * T][hidden] a stage's input / output */
} validator;

/* Builds the held-out set for this rank (rank of world) and the inference state
 * over m's weights (borrowed: validate_run reads them as they are then). Does
 * nothing (v->on false) when validation is not configured. Errors name the
 * dataset and what is short. */
grit_err validate_open(validator *v, const train_cfg *cfg, const gx_model *m, int rank,
                       int world);

/* True when step (the optimiser steps done) gets a validation; ckpt_step: a
 * checkpoint is saved at that step. */
bool validate_due(const validator *v, long step, bool ckpt_step);

/* Scores the held-out set on every rank of d (a collective: all ranks call it)
 * and returns the mean loss and exp(loss) to every rank. */
grit_err validate_run(validator *v, comm *d, double *loss, double *ppl);
/* Pipeline stages: the forward goes stage to stage over pp (before the first run). */
void validate_set_pp(validator *v, comm *pp);

void validate_close(validator *v);

#endif
