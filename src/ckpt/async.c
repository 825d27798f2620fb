/* async.c - background checkpoint writer with snapshot buffers (see async.h). */
#include "ckpt/async.h"

#include <stdlib.h>
#include <string.h>

#include "core/progress.h"

static void run_job(ckpt_async *a)
{
    size_t n = a->m->num_params;
    ckpt_result r = {.step = a->st.step};
    double t0 = now_seconds();
    r.rc = ckpt_save(a->s, a->m, a->snap, a->snap + n, a->snap + 2 * n, &a->st, &r.bytes);
    r.seconds = now_seconds() - t0;
    if (r.rc != GRIT_OK)
        snprintf(r.err, sizeof r.err, "%s", grit_errmsg());
    else if (ckpt_prune(a->s, a->keep_last, a->keep_every, a->st.step, &r.pruned) != GRIT_OK)
        snprintf(r.err, sizeof r.err, "retention: %s", grit_errmsg());
    r.prune_seconds = now_seconds() - t0 - r.seconds;
    pthread_mutex_lock(&a->mu);
    a->res = r;
    a->res_ready = 1;
    pthread_mutex_unlock(&a->mu);
}

static void *worker(void *arg)
{
    ckpt_async *a = arg;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (!a->job && !a->quit)
            pthread_cond_wait(&a->cv, &a->mu);
        if (!a->job && a->quit)
            break;
        pthread_mutex_unlock(&a->mu);
        run_job(a);
        pthread_mutex_lock(&a->mu);
        a->job = 0;
        a->busy = 0;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

grit_err ckpt_async_init(ckpt_async *a, store *s, const gx_model *m, bool async, int keep_last,
                         long keep_every)
{
    memset(a, 0, sizeof *a);
    a->s = s;
    a->m = m;
    a->async = async;
    a->keep_last = keep_last;
    a->keep_every = keep_every;
    a->snap = malloc(sizeof(float) * 3 * m->num_params);
    if (!a->snap)
        return grit_errf(GRIT_ENOMEM, "out of memory for the checkpoint snapshot (%.0f MiB)",
                         3.0 * 4 * (double)m->num_params / 1048576);
    /* touch every page now, so the first save's copy does not pay ~1 page fault per 4 KiB */
    size_t total = 3 * m->num_params;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < 64; c++) {
        size_t lo = total * (size_t)c / 64, hi = total * (size_t)(c + 1) / 64;
        memset(a->snap + lo, 0, (hi - lo) * sizeof(float));
    }
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    if (async) {
        if (pthread_create(&a->th, NULL, worker, a) != 0) {
            free(a->snap);
            return grit_errf(GRIT_ENOMEM, "cannot start the checkpoint writer thread");
        }
        a->started = 1;
    }
    return GRIT_OK;
}

void ckpt_async_wait(ckpt_async *a)
{
    pthread_mutex_lock(&a->mu);
    while (a->busy)
        pthread_cond_wait(&a->cv, &a->mu);
    pthread_mutex_unlock(&a->mu);
}

grit_err ckpt_async_save(ckpt_async *a, const gx_model *m, const ckpt_state *st, double *stall)
{
    double t0 = now_seconds();
    ckpt_async_wait(a);
    size_t n = m->num_params;
    /* the copy is the whole stall of an async save: spread it over the threads */
    ckpt_copy_parallel(a->snap, m->params, n);
    ckpt_copy_parallel(a->snap + n, m->adam_m, n);
    ckpt_copy_parallel(a->snap + 2 * n, m->adam_v, n);
    grit_err rc = ckpt_async_start(a, st);
    *stall = now_seconds() - t0;
    return rc;
}

void ckpt_copy_parallel(float *dst, const float *src, size_t n)
{
    enum { CHUNKS = 64 };
#pragma omp parallel for schedule(static)
    for (int c = 0; c < CHUNKS; c++) {
        size_t lo = n * (size_t)c / CHUNKS, hi = n * (size_t)(c + 1) / CHUNKS;
        memcpy(dst + lo, src + lo, (hi - lo) * sizeof(float));
    }
}

float *ckpt_async_begin(ckpt_async *a)
{
    ckpt_async_wait(a);
    return a->snap;
}

grit_err ckpt_async_start(ckpt_async *a, const ckpt_state *st)
{
    a->st = *st;
    if (!a->async) {
        run_job(a);
        return GRIT_OK;
    }
    pthread_mutex_lock(&a->mu);
    a->busy = a->job = 1;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    return GRIT_OK;
}

int ckpt_async_poll(ckpt_async *a, ckpt_result *out)
{
    pthread_mutex_lock(&a->mu);
    int ready = a->res_ready;
    if (ready) {
        *out = a->res;
        a->res_ready = 0;
    }
    pthread_mutex_unlock(&a->mu);
    return ready;
}

void ckpt_async_free(ckpt_async *a)
{
    if (!a || !a->snap)
        return;
    if (a->started) {
        pthread_mutex_lock(&a->mu);
        a->quit = 1;
        pthread_cond_broadcast(&a->cv);
        pthread_mutex_unlock(&a->mu);
        pthread_join(a->th, NULL);
    }
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    free(a->snap);
    memset(a, 0, sizeof *a);
}
