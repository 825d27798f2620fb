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
    float *snap;           /* [3 * num_params]: params, m, v */
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

/* memcpy of n floats spread over the OpenMP threads (snapshot copies). */
void ckpt_copy_parallel(float *dst, const float *src, size_t n);

/* Non-blocking: 1 and *out filled if a save finished since the last poll. */
int ckpt_async_poll(ckpt_async *a, ckpt_result *out);
/* Blocks until no save is running. */
void ckpt_async_wait(ckpt_async *a);
void ckpt_async_free(ckpt_async *a);

#endif
