/* dp.c - data-parallel gradient sync and ZeRO-1 (see dp.h). */
#include "train/dp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/async.h"
#include "core/progress.h"

static void on_grad_ready(void *ctx, size_t off, size_t n)
{
    dp_sync *p = ctx;
    dist *d = p->d;
    grit_err rc;
    if (!p->zero1) {
        rc = dist_iallreduce_sum(d, p->m->grads + off, n);
    } else if (d->nreqs >= DIST_MAX_REQS) {
        rc = GRIT_EINVAL;
    } else {
        /* ZeRO-1: the bucket [off, off + n) is reduce-scattered on its own; rank r gets
         * the part of it inside its shard, which lands at its place in g_shard */
        int *c = p->bucket_counts + (size_t)d->nreqs * (size_t)d->size;
        for (int r = 0; r < d->size; r++) {
            size_t a = (size_t)p->displs[r], b = a + (size_t)p->counts[r];
            a = a > off ? a : off;
            b = b < off + n ? b : off + n;
            c[r] = b > a ? (int)(b - a) : 0;
        }
        size_t at = off > p->lo ? off - p->lo : 0;
        if (at > p->hi - p->lo)
            at = p->hi - p->lo;
        rc = dist_ireduce_scatter_v(d, p->m->grads + off, p->g_shard + at, c);
    }
    /* a failed start is caught in dp_finish_grads: fewer requests than buckets */
    if (rc == GRIT_OK)
        p->started++;
    dist_progress(d);
}

grit_err dp_init(dp_sync *p, dist *d, gx_model *m, bool zero1)
{
    memset(p, 0, sizeof *p);
    p->d = d;
    p->m = m;
    p->zero1 = zero1 && d->size > 1;
    int W = d->size;
    size_t np = m->num_params;
    size_t per = ((np + (size_t)W - 1) / (size_t)W + 15) & ~(size_t)15;
    p->counts = calloc((size_t)W, sizeof(int));
    p->displs = calloc((size_t)W, sizeof(int));
    if (!p->counts || !p->displs)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    if (np > 0x7fffffffUL)
        return grit_errf(GRIT_EINVAL, "%zu parameters exceed one MPI message (2^31 floats)", np);
    for (int r = 0; r < W; r++) {
        size_t lo = per * (size_t)r < np ? per * (size_t)r : np;
        size_t hi = lo + per < np ? lo + per : np;
        p->displs[r] = (int)lo;
        p->counts[r] = (int)(hi - lo);
    }
    p->lo = (size_t)p->displs[d->rank];
    p->hi = p->lo + (size_t)p->counts[d->rank];
    if (p->zero1) {
        size_t n = p->hi - p->lo;
        p->m_shard = calloc(n ? n : 1, sizeof(float));
        p->v_shard = calloc(n ? n : 1, sizeof(float));
        p->g_shard = calloc(n ? n : 1, sizeof(float));
        p->bucket_counts = calloc((size_t)DIST_MAX_REQS * (size_t)W, sizeof(int));
        if (!p->m_shard || !p->v_shard || !p->g_shard || !p->bucket_counts)
            return grit_errf(GRIT_ENOMEM, "out of memory for the optimiser shard");
        gx_drop_optim_state(m);
    }
    if (W > 1) { /* the cost an un-overlapped all-reduce would add to every step */
        double best = 1e30;
        for (int k = 0; k < 3; k++) {
            double t0 = now_seconds();
            grit_err rc = p->zero1 ? dist_reduce_scatter_v(d, m->grads, p->g_shard, p->counts)
                                   : dist_allreduce_sum(d, m->grads, np);
            if (rc != GRIT_OK)
                return rc;
            best = fmin(best, now_seconds() - t0);
        }
        p->ar_blocking_s = best;
        gx_zero_grad(m);
    }
    return GRIT_OK;
}

void dp_free(dp_sync *p)
{
    if (!p)
        return;
    if (p->m)
        p->m->grad_ready = NULL;
    free(p->counts);
    free(p->displs);
    free(p->m_shard);
    free(p->v_shard);
    free(p->g_shard);
    free(p->bucket_counts);
    memset(p, 0, sizeof *p);
}

void dp_arm(dp_sync *p)
{
    p->started = 0;
    if (p->d->size > 1) {
        p->m->grad_ready = on_grad_ready;
        p->m->grad_ctx = p;
    }
}

grit_err dp_finish_grads(dp_sync *p, double *norm)
{
    gx_model *m = p->m;
    p->m->grad_ready = NULL;
    p->wait_s = 0;
    if (p->d->size == 1) {
        *norm = optim_grad_norm(m);
        return GRIT_OK;
    }
    double t0 = now_seconds();
    int expect = p->started;
    grit_err rc = dist_wait_all(p->d);
    p->wait_s = now_seconds() - t0;
    if (rc != GRIT_OK)
        return rc;
    if (expect != m->cfg.layers + 2) /* every bucket: head, each layer, embedding */
        return grit_errf(GRIT_EIO, "rank %d: %d of %d gradient reductions could not be started",
                         p->d->rank, expect, m->cfg.layers + 2);
    if (!p->zero1) {
        *norm = optim_grad_norm(m);
        return GRIT_OK;
    }
    size_t n = p->hi - p->lo;
    memcpy(m->grads + p->lo, p->g_shard, n * sizeof(float));
    double local = 0, parts[1024];
    for (size_t i = 0; i < n; i++)
        local += (double)p->g_shard[i] * p->g_shard[i];
    if (p->d->size > 1024)
        return grit_errf(GRIT_EINVAL, "world size above 1024");
    if ((rc = dist_allgather_f64(p->d, &local, parts, 1)) != GRIT_OK)
        return rc;
    double s = 0;
    for (int r = 0; r < p->d->size; r++)
        s += parts[r];
    *norm = sqrt(s);
    return GRIT_OK;
}

grit_err dp_step(dp_sync *p, const optim_cfg *o, long t, double lr, float clip)
{
    if (!p->zero1) {
        optim_adamw(p->m, o, t, lr, clip);
        return GRIT_OK;
    }
    optim_adamw_range(p->m, o, t, lr, clip, p->lo, p->hi, p->m_shard, p->v_shard);
    return dist_allgather_v(p->d, p->m->params, p->counts, p->displs);
}

grit_err dp_gather_moments(dp_sync *p, float *mm, float *vv, int root)
{
    size_t np = p->m->num_params;
    if (!p->zero1) {
        if (p->d->rank == root) {
            ckpt_copy_parallel(mm, p->m->adam_m, np);
            ckpt_copy_parallel(vv, p->m->adam_v, np);
        }
        return GRIT_OK;
    }
    int n = (int)(p->hi - p->lo);
    grit_err rc = dist_gather_v(p->d, p->m_shard, n, mm, p->counts, p->displs, root);
    if (rc == GRIT_OK)
        rc = dist_gather_v(p->d, p->v_shard, n, vv, p->counts, p->displs, root);
    return rc;
}

void dp_set_moments(dp_sync *p, const float *mm, const float *vv)
{
    if (!p->zero1)
        return; /* the full arrays are the model's own */
    memcpy(p->m_shard, mm + p->lo, (p->hi - p->lo) * sizeof(float));
    memcpy(p->v_shard, vv + p->lo, (p->hi - p->lo) * sizeof(float));
}

double dp_optim_bytes(const dp_sync *p)
{
    size_t n = p->zero1 ? p->hi - p->lo : p->m->num_params;
    return 2.0 * 4.0 * (double)n;
}
