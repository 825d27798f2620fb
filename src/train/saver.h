/*
 * saver.h - a rank's side of checkpointing during training: where to resume from,
 * when a save is due, the snapshot, and the rank-level commit.
 *
 * One rank (world 1): rank 0 snapshots parameters and moments and hands them to
 * the async writer (ckpt/async.h), which writes and commits step_N.
 * Many ranks: rank 0 makes step_N.tmp/; every rank snapshots its moment range (rank
 * 0 also the parameters) and its writer writes its part; once every part is durable
 * (learnt for free in the step's loss all-reduce, or at the next save's gate) each
 * rank's file entry or error is gathered to rank 0, which commits or abandons the
 * save. Before a new save, the gate makes rank 0 report the previous one and every
 * rank learns whether the run may go on (checkpoint.on_error).
 *
 * Every finished save is an event (ckpt_saved / ckpt_failed) on rank 0. Resume: rank
 * 0 finds and verifies the newest good checkpoint (older ones when the newest does not
 * verify), every rank loads it; or init_from's weights; or nothing.
 */
#ifndef GRIT_TRAIN_SAVER_H
#define GRIT_TRAIN_SAVER_H

#include <stdbool.h>
#include <stdio.h>

#include "ckpt/async.h"
#include "ckpt/safetensors.h"
#include "ckpt/store.h"
#include "comm/comm.h"
#include "core/events.h"
#include "train/config.h"
#include "train/dp.h"

typedef struct saver {
    const train_cfg *cfg; /* borrowed */
    comm *d;              /* borrowed */
    events *ev;           /* borrowed; rank 0's events.jsonl (other ranks: closed, no-op) */
    FILE *log;            /* rank 0's progress log, else NULL */
    store *ck;            /* the checkpoint store, NULL when neither saving nor resuming */
    ckpt_async ca;
    bool on;              /* this run saves checkpoints */
    bool ca_on;           /* this rank runs a writer (rank 0, or every rank when world > 1,
                             or replica 0's ranks under model parallelism) */
    bool parts;           /* saves are committed from parts gathered over w */
    int saves, failures;
    long pending;         /* world > 1: step of a save whose parts are being written, else -1 */
    double stall_total, last_stall; /* last_stall: of the save in flight */
    double last_save;     /* when the last save started (for interval_minutes) */
    double last_seconds;  /* rank 0: how long the last finished save took (0: none yet) */
    /* Who decides and writes: world rank 0 (leader), its decisions broadcast over w (the
     * world). Without model parallelism d is the world. Under tensor and/or pipeline
     * parallelism (saver_set_mp) d is the data-parallel group, tpc the TP group, ppc the
     * pipeline group: each column's DP rank 0 gathers its moments (ZeRO shards) and writes
     * its slices as one model-parallel shard (ckpt.h), in parallel with the others; a
     * resume assembles whole tensors from the shards one at a time and keeps its stage's
     * slices, so any layout resumes any other (docs/parallel.md). */
    comm *w, *tpc, *ppc;
    int leader;
    gx_model full;        /* tp > 1: the whole model's tensor table (no buffers) */
    gx_tensor *full_t;
} saver;

/* Opens the store when the run saves or resumes; rank 0 aborts uploads an earlier run
 * left unfinished. */
grit_err saver_open(saver *s, const train_cfg *cfg, comm *d, events *ev, FILE *log);

/* Model parallelism (tensor and/or pipeline): world, this rank's TP and pipeline groups
 * (either may be a group of one) and its model (slices of its stage's tensors); call after
 * saver_open, before saver_restore. Checkpoints are then written as model-parallel shards
 * by replica 0's ranks (ckpt.h). */
grit_err saver_set_mp(saver *s, comm *world, comm *tpc, comm *ppc, const gx_model *m);

/* The whole model's weights (model parallelism: sv->full's table) written by the leader to
 * path (safetensors, durable), a tensor at a time: nobody holds the whole model. For model
 * parallelism and for ZeRO-3; collective over every rank (ZeRO-3: each data-parallel group
 * gathers a tensor's shards first; then replica 0's ranks its slices). */
grit_err saver_write_weights(saver *s, const gx_model *m, dp_sync *dp, const char *path);
/* safetensors entries (F32, data unset) for a tensor table (malloc'd; NULL: no memory). */
st_entry *saver_entries(const gx_tensor *t, int nt);

/* Restores the newest good checkpoint (or init_from) into m and dp; *start: first step
 * to run; *tokens: tokens consumed so far; *loaded: whether the weights came from a
 * file (else the caller initialises them). fp: this config's fingerprint. */
grit_err saver_restore(saver *s, gx_model *m, dp_sync *dp, const char *fp, long *start,
                       double *tokens, bool *loaded);

/* Starts this rank's writer (after restore; nothing of this run is in flight); now:
 * the run's start, from which interval_minutes counts. */
grit_err saver_start(saver *s, const gx_model *m, const dp_sync *dp, double now);

/* 1.0 when this rank's part of the save in flight is written (to add to the step's
 * all-reduce), else 0.0. */
double saver_part_written(saver *s);

/* After the step's all-reduce: parts_written is the sum of saver_part_written over
 * the ranks; all of them written: commit now. */
grit_err saver_parts_agreed(saver *s, double parts_written);

/* Rank 0 reports the saves that finished since the last call. */
grit_err saver_poll(saver *s);

/* Whether a save is due after 1-based step (every rank gets rank 0's answer when the
 * interval is in minutes). */
grit_err saver_due(saver *s, long step, int *due);

/* Saves state st (the step's); *stall: seconds the training thread was held. */
grit_err saver_save(saver *s, gx_model *m, dp_sync *dp, const ckpt_state *st, double *stall);

/* At the end of a run: commits the last save and (rank 0) waits for it and reports. */
grit_err saver_finish(saver *s);

/* Stops the writer and closes the store. Safe on a zeroed saver. */
void saver_close(saver *s);

#endif
