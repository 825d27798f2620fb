/*
 * emit.h - what a training run tells the world, step by step: metrics.jsonl and
 * TensorBoard scalars (rank 0), and heartbeats to the supervisor (every rank,
 * when supervised).
 *
 * metrics.jsonl: one JSON object per optimiser step, keys in a fixed order
 * (docs/formats.md); a resumed run first keeps the lines of the steps the
 * checkpoint covers and rewrites the rest, so the file never holds a step twice.
 * Heartbeats: heartbeat/hb.h; one rank per machine (local rank 0) also samples the
 * machine's energy (obs/meter.h) on the heartbeat thread.
 *
 * Failures to write TensorBoard only warn (training goes on without it); a failure
 * to create or close metrics.jsonl is an error. Without a supervisor, or on ranks
 * other than 0 for the files, the calls are no-ops.
 */
#ifndef GRIT_TRAIN_EMIT_H
#define GRIT_TRAIN_EMIT_H

#include <stdbool.h>
#include <stdio.h>

#include "core/error.h"
#include "heartbeat/hb.h"
#include "obs/meter.h"
#include "obs/tb.h"

typedef struct emitter {
    FILE *mf;        /* run_dir/metrics.jsonl (rank 0), else NULL */
    tb_writer *tb;   /* run_dir/tb (rank 0), NULL when it could not be opened */
    hb_client *hb;   /* NULL unless supervised */
    obs_meter *meter; /* the heartbeat thread's energy meter, NULL when not measuring */
    char run_dir[1024];
} emitter;

/* One step's row of metrics.jsonl; a negative comm_wait_s / ckpt_stall_s / epochs
 * leaves that key out, as does has_val false for val_loss / val_ppl. */
typedef struct emit_row {
    long step;
    double loss, grad_norm, lr, tokens, tokens_per_s, step_time_s;
    double comm_wait_s, ckpt_stall_s, epochs;
    double dp_bytes, tp_bytes; /* collective payload bytes this step (comm.h), < 0: no group */
    double pp_bytes, pp_wait_s; /* pipeline: bytes this stage sent, time blocked in exchanges
                                   (train/pipeline.h); < 0: no pipeline */
    bool has_val;            /* a validation ran at this step (train/validate.h) */
    double val_loss, val_ppl;
} emit_row;

/* Rank 0 (leader): opens metrics.jsonl (start > 0: keeping the lines of steps <=
 * start, appending after them) and the TensorBoard log (a failure is reported on log,
 * may be NULL, and ignored). Other ranks: only zeroes e. */
grit_err emit_open(emitter *e, const char *run_dir, bool leader, long start, FILE *log);

/* Starts the heartbeat client (a no-op unless supervised: GRIT_SUP_ADDR); with
 * measure, it also samples this machine's energy. */
void emit_heartbeat_start(emitter *e, int rank, const char *node, bool measure);

/* Appends row to metrics.jsonl and TensorBoard (rank 0). */
void emit_metrics(emitter *e, const emit_row *row);

/* A finished step to the supervisor (every rank): the loss it should see. */
void emit_beat(emitter *e, long step, double loss, double grad_norm, double step_time,
               double comm_time);

/* A worker event (EV1 kind=kind) to the supervisor. */
void emit_worker_event(emitter *e, const char *kind, long step, const char *detail);

/* The end of a run that finished: the last energy sample and beat, then "done". */
void emit_done(emitter *e, long step);

/* The heartbeat client for code that reports through it directly (fault injection). */
hb_client *emit_hb(emitter *e);

/* Stops the heartbeats, closes TensorBoard and metrics.jsonl (an error when that
 * final write fails). Safe on a zeroed emitter. */
grit_err emit_close(emitter *e);

#endif
