/*
 * train.h - the training loop.
 *
 * train_run() owns one run: it creates the run directory, writes the
 * resolved config.json, builds the model, and for each optimiser step
 * accumulates gradients over grad_accum micro-batches, clips, applies
 * AdamW, appends a line to metrics.jsonl and updates the progress line.
 * It stops with GRIT_ENUMERIC on a non-finite loss or gradient norm. At the
 * end it writes model.safetensors (HF names) and prints a summary table.
 * A SIGTERM/SIGINT (core/stopsig.h, installed by the caller) on any rank stops every
 * rank after the same step, with a final checkpoint when one can be finished within
 * GRIT_STOP_GRACE seconds; train_run then returns GRIT_OK with res->stopped_by set and
 * writes no final weights (a rerun resumes).
 * Nothing is allocated inside the step loop.
 */
#ifndef GRIT_TRAIN_TRAIN_H
#define GRIT_TRAIN_TRAIN_H

#include <stdio.h>

#include "comm/comm.h"
#include "train/config.h"

typedef struct train_result {
    long steps;
    double final_loss, seconds, tokens_per_s;
    int stopped_by; /* 0: ran to the end; else the signal (SIGTERM, SIGINT) that stopped it */
} train_result;

/* log: where progress and the summary go (NULL for silence). d: the data-parallel
 * world (comm_init'ed; size 1 without MPI). Only rank 0 writes the run directory. */
grit_err train_run(const train_cfg *cfg, comm *d, FILE *log, train_result *res);

/* Failure classes: the cause of an error that a retry would repeat - "config" (a
 * config error, a checkpoint of another config), "disk_full" (ENOSPC, EDQUOT, however
 * it surfaced), "bad_input" (a data file or every checkpoint unusable as it is) - or
 * NULL for one that may be transient (a dead peer, a crash, an I/O error). msg: the
 * error's context (grit_errmsg). train_run sends the cause to the supervisor (worker
 * event "fatal") and records a "train_failed" event; grit train exits 3 for these. */
const char *train_fail_cause(grit_err rc, const char *msg);

/* Writes the model's parameters as safetensors (HF names), durably. */
grit_err train_save_weights(const gx_model *m, const char *path);
/* The same in BF16 (each weight rounded to nearest even; the model keeps F32). */
grit_err train_save_weights_bf16(const gx_model *m, const char *path);

/* Peak resident set size of this process in MiB. */
double train_peak_rss_mib(void);

#endif
