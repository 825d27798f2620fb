/*
 * async.h - checkpoint saves that do not stall training.
 *
 * ckpt_async_save() copies parameters and AdamW moments into snapshot
 * buffers allocated once (3 x num_params floats) at the step boundary, then
 * a background thread runs ckpt_save() and the retention policy while
 * training goes on. A save that arrives while the previous one is still
 * running waits for it first; the stall (copy + wait) is returned so the
 * trainer can report it. With async off the whole save runs in the caller.
 *
 * Completed saves are reported exactly once through ckpt_async_poll().
 *
 * Data-parallel runs (world > 1) use one instance per rank and the sharded
 * protocol of ckpt.h: the snapshot holds this rank's moments [lo, hi) (and, on
 * rank 0, the parameters); ckpt_async_start writes this rank's part (its
 * shard; rank 0 also model, config and state) without committing;
 * ckpt_async_part gives the part's files once ckpt_async_busy is 0; the caller
 * gathers them to rank 0, which commits with ckpt_async_commit (or reports a
 * failed part with ckpt_async_fail). The result comes through ckpt_async_poll
 * on rank 0.
 *
 * Model parallelism (ckpt_async_init_mp): the snapshot holds this rank's slices
 * (params, m, v: 3 x its num_params) and its part is its model-parallel shard (the
 * world's rank 0 also config and state); gathered and committed as above.
 */
#ifndef GRIT_CKPT_ASYNC_H
#define GRIT_CKPT_ASYNC_H

#include <pthread.h>
#include <stdbool.h>

#include "ckpt/ckpt.h"

typedef struct ckpt_result {
    long step;
    grit_err rc;
    char err[512];
    double bytes, seconds; /* seconds: the save itself (durable when it ends) */
    double prune_seconds;  /* retention afterwards */
    int pruned;
} ckpt_result;

typedef struct ckpt_async {
    store *s;              /* borrowed */
    const gx_model *m;     /* layout (tensor table); borrowed */
    bool async;
    int keep_last;
    long keep_every;
    int rank, world;
    int mp;                /* model-parallel shard writer (ckpt_async_init_mp) */
    size_t lo, hi;         /* world > 1: this rank's element range of the moments */
    float *snap;           /* world 1: params, m, v (3 x num_params); else [params on
                              rank 0], m[lo, hi), v[lo, hi) */
    double t_part;         /* when the current sharded save started */
    ckpt_file part[4];     /* this rank's files of that save: shard, then rank 0's 3 */
    int npart;
    grit_err part_rc;
    char part_err[400];
    ckpt_file *files;      /* rank 0: what the commit lists */
    int nfiles;
    ckpt_state st;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started, busy, job, quit;
    ckpt_result res;
    int res_ready;         /* a result not yet polled */
} ckpt_async;

grit_err ckpt_async_init(ckpt_async *a, store *s, const gx_model *m, bool async, int keep_last,
                         long keep_every);
/* The same for rank `rank` of `world` (> 1) holding moments [lo, hi). */
grit_err ckpt_async_init_rank(ckpt_async *a, store *s, const gx_model *m, bool async,
                              int keep_last, long keep_every, int rank, int world, size_t lo,
                              size_t hi);
/* A model-parallel writer: m is this rank's model (its slices), rank its world rank. */
grit_err ckpt_async_init_mp(ckpt_async *a, store *s, const gx_model *m, bool async, int keep_last,
                            long keep_every, int rank);
/* Snapshots m's state as checkpoint st->step and starts writing it (after
 * waiting for a save still running: callers that must see its result first
 * call ckpt_async_wait and ckpt_async_poll before). *stall is the time the
 * caller was blocked here. */
grit_err ckpt_async_save(ckpt_async *a, const gx_model *m, const ckpt_state *st, double *stall);
/* The two halves of ckpt_async_save for callers that fill the snapshot
 * themselves (e.g. gathering ZeRO shards into it): begin waits for a running
 * save and returns the snapshot (params, m, v: 3 x num_params floats); start
 * writes it as checkpoint st->step. */
float *ckpt_async_begin(ckpt_async *a);
grit_err ckpt_async_start(ckpt_async *a, const ckpt_state *st);

/* Where the snapshot keeps parameters (world 1 and rank 0) and moments. */
float *ckpt_async_params(ckpt_async *a);
void ckpt_async_moments(ckpt_async *a, float **mm, float **vv);
/* 1 while a save (or a part of one) is being written. */
int ckpt_async_busy(ckpt_async *a);
/* World > 1, not busy: this rank's part of the last save (*files: npart entries). */
grit_err ckpt_async_part(ckpt_async *a, const ckpt_file **files, int *n, const char **err);
/* Rank 0: commits checkpoint `step` listing files[n] (copied), then retention. */
grit_err ckpt_async_commit(ckpt_async *a, long step, const ckpt_file *files, int n);
/* Rank 0: the save of `step` failed on some rank (why): removes its temp directory
 * and reports the failure through ckpt_async_poll. */
void ckpt_async_fail(ckpt_async *a, long step, const char *why);

/* memcpy of n floats spread over the OpenMP threads (snapshot copies). */
void ckpt_copy_parallel(float *dst, const float *src, size_t n);

/* Non-blocking: 1 and *out filled if a save finished since the last poll. */
int ckpt_async_poll(ckpt_async *a, ckpt_result *out);
/* Blocks until no save is running. */
void ckpt_async_wait(ckpt_async *a);
void ckpt_async_free(ckpt_async *a);

#endif
