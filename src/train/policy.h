/*
 * policy.h - the step policies of a training run: what happens to a step whose
 * numbers are bad, and to a batch the supervisor told us to skip.
 *
 * NaN guard: a step whose loss or global gradient norm is not finite stops the run
 * with GRIT_ENUMERIC before its update, after telling the supervisor (EV1 kind=nan)
 * and events.jsonl (numeric_error). The supervisor rolls back to the last
 * checkpoint; the same step failing again means its batch is bad, and it relaunches
 * with that step in GRIT_SKIP_STEPS.
 * Skip-bad-batch: a step listed in GRIT_SKIP_STEPS (comma list of 1-based steps)
 * runs forward and backward as usual (so data order, loss and timing stay those of
 * the step) but applies no update; it is an event (batch_skipped) and a worker event.
 */
#ifndef GRIT_TRAIN_POLICY_H
#define GRIT_TRAIN_POLICY_H

#include <stdbool.h>

#include "core/error.h"
#include "core/events.h"
#include "train/emit.h"

typedef struct policy {
    long *skip; /* steps whose update is skipped, ascending order not required */
    int nskip;
} policy;

/* Reads the steps to skip from skip_steps (GRIT_SKIP_STEPS; NULL or "": none).
 * GRIT_EINVAL naming the entry when one is not a positive step number. */
grit_err policy_init(policy *p, const char *skip_steps);
void policy_free(policy *p);

/* The NaN guard for 1-based step: GRIT_OK when loss and norm are finite; otherwise
 * reports it (worker event, numeric_error event) and returns GRIT_ENUMERIC. */
grit_err policy_guard(emitter *em, events *ev, long step, double loss, double norm);

/* True when step's update must be skipped; reports the skip. */
bool policy_skip(const policy *p, emitter *em, events *ev, long step);

#endif
