/* async.c - background checkpoint writer with snapshot buffers (see async.h). */
#include "ckpt/async.h"

#include <stdlib.h>
#include <string.h>

#include "core/bigalloc.h"
#include "core/progress.h"

enum { JOB_SAVE = 1, JOB_PART, JOB_COMMIT };

/* This rank's part of a sharded save: its shard (rank 0: and model, config, state). */
static void run_part(ckpt_async *a)
{
    float *mm, *vv;
    ckpt_async_moments(a, &mm, &vv);
    a->npart = 0;
    a->part_err[0] = '\0';
    if (a->mp)
        a->part_rc = ckpt_put_mp(a->s, a->st.step, a->m, a->snap, mm, vv, &a->part[0]);
    else
        a->part_rc = ckpt_put_shard(a->s, a->st.step, a->rank, a->world, a->lo, a->hi, mm, vv,
                                    &a->part[0]);
    if (a->part_rc == GRIT_OK && a->rank == 0)
        a->part_rc = a->mp ? ckpt_put_meta(a->s, &a->m->cfg, &a->st, &a->part[1])
                           : ckpt_put_model(a->s, a->m, a->snap, &a->st, &a->part[1]);
    if (a->part_rc == GRIT_OK)
        a->npart = a->rank == 0 ? (a->mp ? 3 : 4) : 1;
    else
        snprintf(a->part_err, sizeof a->part_err, "%s", grit_errmsg());
}

static void run_job(ckpt_async *a, int job)
{
    if (job == JOB_PART) {
        run_part(a);
        return;
    }
    size_t n = a->m->num_params;
    ckpt_result r = {.step = a->st.step};
    double t0 = now_seconds();
    if (job == JOB_SAVE) {
        r.rc = ckpt_save(a->s, a->m, a->snap, a->snap + n, a->snap + 2 * n, &a->st, &r.bytes);
    } else {
        r.rc = ckpt_commit(a->s, a->st.step, a->files, a->nfiles, &a->m->cfg, &r.bytes);
        t0 = a->t_part; /* the save's time includes writing the parts */
    }
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
        int job = a->job;
        pthread_mutex_unlock(&a->mu);
        run_job(a, job);
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
    return ckpt_async_init_rank(a, s, m, async, keep_last, keep_every, 0, 1, 0, m->num_params);
}

grit_err ckpt_async_init_mp(ckpt_async *a, store *s, const gx_model *m, bool async, int keep_last,
                            long keep_every, int rank)
{
    /* as one rank holding its whole (sliced) model, then marked as a part writer */
    grit_err rc = ckpt_async_init_rank(a, s, m, async, keep_last, keep_every, 0, 1, 0,
                                       m->num_params);
    a->mp = 1;
    a->rank = rank;
    return rc;
}

grit_err ckpt_async_init_rank(ckpt_async *a, store *s, const gx_model *m, bool async,
                              int keep_last, long keep_every, int rank, int world, size_t slo,
                              size_t shi)
{
    memset(a, 0, sizeof *a);
    a->s = s;
    a->m = m;
    a->async = async;
    a->keep_last = keep_last;
    a->keep_every = keep_every;
    a->rank = rank;
    a->world = world;
    a->lo = world > 1 ? slo : 0;
    a->hi = world > 1 ? shi : m->num_params;
    size_t total = (rank == 0 ? m->num_params : 0) + 2 * (a->hi - a->lo);
    a->snap = big_alloc_untouched(sizeof(float) * (total ? total : 1)); /* huge pages */
    if (!a->snap)
        return grit_errf(GRIT_ENOMEM, "out of memory for the checkpoint snapshot (%.0f MiB)",
                         4.0 * (double)total / 1048576);
    /* touch every page now, so the first save's copy does not pay ~1 page fault per 4 KiB */
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

float *ckpt_async_params(ckpt_async *a) { return a->rank == 0 || a->mp ? a->snap : NULL; }

void ckpt_async_moments(ckpt_async *a, float **mm, float **vv)
{
    size_t n = a->hi - a->lo;
    *mm = a->snap + (a->rank == 0 || a->mp ? a->m->num_params : 0);
    *vv = *mm + n;
}

static void submit(ckpt_async *a, int job)
{
    if (!a->async) {
        run_job(a, job);
        return;
    }
    pthread_mutex_lock(&a->mu);
    a->busy = 1;
    a->job = job;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

grit_err ckpt_async_start(ckpt_async *a, const ckpt_state *st)
{
    a->st = *st;
    a->t_part = now_seconds();
    submit(a, a->world > 1 || a->mp ? JOB_PART : JOB_SAVE);
    return GRIT_OK;
}

int ckpt_async_busy(ckpt_async *a)
{
    pthread_mutex_lock(&a->mu);
    int b = a->busy;
    pthread_mutex_unlock(&a->mu);
    return b;
}

grit_err ckpt_async_part(ckpt_async *a, const ckpt_file **files, int *n, const char **err)
{
    ckpt_async_wait(a);
    *files = a->part;
    *n = a->npart;
    *err = a->part_err;
    return a->part_rc;
}

grit_err ckpt_async_commit(ckpt_async *a, long step, const ckpt_file *files, int n)
{
    ckpt_async_wait(a);
    ckpt_file *f = realloc(a->files, sizeof *f * (size_t)(n ? n : 1));
    if (!f)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    memcpy(f, files, sizeof *f * (size_t)n);
    a->files = f;
    a->nfiles = n;
    a->st.step = step;
    submit(a, JOB_COMMIT);
    return GRIT_OK;
}

void ckpt_async_fail(ckpt_async *a, long step, const char *why)
{
    ckpt_async_wait(a);
    ckpt_abandon(a->s, step);
    ckpt_result r = {.step = step, .rc = GRIT_EIO, .seconds = now_seconds() - a->t_part};
    snprintf(r.err, sizeof r.err, "%s", why);
    pthread_mutex_lock(&a->mu);
    a->res = r;
    a->res_ready = 1;
    pthread_mutex_unlock(&a->mu);
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
    free(a->files);
    memset(a, 0, sizeof *a);
}
