/*
 * faults.h - fault injection inside a training process (tests and demos): the
 * injection point of GRIT_FAULTS (core/fault.h). Nothing here decides anything about
 * the run; the step policies are in policy.h.
 *
 * GRIT_FAULTS is a comma list of KIND:key=value[:key=value...]; a fault applies
 * to this process when its rank= or node= matches (or neither is given):
 *   kill:step=S          SIGKILL this process after step S (node=X: every rank
 *                        of node X, i.e. the node dies: first it creates the
 *                        marker GRIT_FAULT_NODE_DOWN names, {node} replaced by X,
 *                        so that the node's health check fails from then on)
 *   hang:step=S          SIGSTOP this process after step S (a hung rank)
 *   slow:factor=F        every step takes F times as long (a straggler)
 *   nan:step=S           the loss of step S becomes NaN
 *   spike:step=S         the loss step S reports to the supervisor is 100x (the
 *                        update itself is unchanged: a stand-in for a bad batch)
 *   val_spike:step=S     the validation loss of step S reported to the supervisor is
 *                        100x (metrics.jsonl keeps the true value)
 * Before a fault fires, the heartbeat client reports it (EV1 kind=fault_KIND),
 * so the supervisor can measure detection latency.
 */
#ifndef GRIT_TRAIN_FAULTS_H
#define GRIT_TRAIN_FAULTS_H

#include <stdbool.h>

#include "core/error.h"
#include "heartbeat/hb.h"

#define FAULTS_MAX 16

typedef struct fault {
    char kind[16];
    long step;
    double factor;
    char node[64]; /* node=X given: the fault is the whole node's */
} fault;

typedef struct faults {
    fault f[FAULTS_MAX];
    int n;
    char down[1024]; /* GRIT_FAULT_NODE_DOWN, "" when not set */
} faults;

/* Parses the environment for this rank/node; errors name the bad entry. */
grit_err faults_init(faults *fs, int rank, const char *node);

/* True when the loss of step (1-based) must be replaced by NaN. */
bool faults_nan_at(const faults *fs, long step);
/* Factor for the loss step reports (100 for an injected spike, else 1). */
double faults_spike(const faults *fs, const char *kind, long step);
/* After this rank's forward/backward (compute_time seconds), before the gradient
 * exchange: a slow rank takes factor x as long, as a slow node would. */
void faults_slow_compute(const faults *fs, double compute_time);
/* After step finished (step_time seconds): hangs or dies as configured. */
void faults_after_step(const faults *fs, hb_client *hb, long step, double step_time);

#endif
