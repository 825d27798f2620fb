/* dp.c - data-parallel gradient sync and ZeRO-1 (see dp.h). */
#include "train/dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/async.h"
#include "ckpt/ckpt.h"
#include "core/progress.h"
#include "model/tp.h"

enum { DP_TIED_TAG = 4545 };

/* Packs the embedding rows some rank used this step (p->row_idx) into p->pack. */
static void pack_rows(dp_sync *p)
{
    size_t C = (size_t)p->m->cfg.hidden;
    for (int i = 0; i < p->nrows; i++)
        memcpy(p->pack + (size_t)i * C, p->m->grads + (size_t)p->row_idx[i] * C, C * sizeof(float));
}

/* After the packed all-reduce: the summed rows back into the full gradient (ZeRO-1:
 * into this rank's shard, whose other embedding rows are exactly zero). */
static void unpack_rows(dp_sync *p)
{
    size_t C = (size_t)p->m->cfg.hidden;
    if (!p->zero1) {
        for (int i = 0; i < p->nrows; i++)
            memcpy(p->m->grads + (size_t)p->row_idx[i] * C, p->pack + (size_t)i * C,
                   C * sizeof(float));
        return;
    }
    size_t lo = p->lo, hi = p->hi, end = p->embed_n < hi ? p->embed_n : hi;
    if (lo >= end)
        return; /* no embedding row in this shard */
    memset(p->g_shard, 0, (end - lo) * sizeof(float));
    for (int i = 0; i < p->nrows; i++) {
        size_t a = (size_t)p->row_idx[i] * C, b = a + C;
        size_t x = a > lo ? a : lo, y = b < end ? b : end;
        if (x < y)
            memcpy(p->g_shard + (x - lo), p->pack + (size_t)i * C + (x - a), (y - x) * sizeof(float));
    }
}

/* Each rank's part of bucket [off, off + n): counts[r] elements, starting at displs[r]
 * within the bucket (displs may be NULL), the bucket cut by the ranks' shards. */
static void bucket_parts(const dp_sync *p, size_t off, size_t n, int *counts, int *displs)
{
    for (int r = 0; r < p->d->size; r++) {
        size_t a = (size_t)p->displs[r], b = a + (size_t)p->counts[r];
        a = a > off ? a : off;
        b = b < off + n ? b : off + n;
        counts[r] = b > a ? (int)(b - a) : 0;
        if (displs)
            displs[r] = b > a ? (int)(a - off) : 0;
    }
}

/* Where bucket [off, ...)'s part inside this rank's shard starts in the shard (its end when
 * the bucket lies past the shard: that part is empty then). */
static size_t shard_at(const dp_sync *p, size_t off)
{
    size_t at = off > p->lo ? off - p->lo : 0;
    return at > p->hi - p->lo ? p->hi - p->lo : at;
}

/* ZeRO-1 with tied embeddings over pipeline stages (tied_grads_zero1). */
static bool tied_zero1(const dp_sync *p)
{
    return p->zero1 && !p->zero2 && p->pp && p->m->cfg.tied;
}

static void on_grad_ready(void *ctx, size_t off, size_t n)
{
    dp_sync *p = ctx;
    comm *d = p->d;
    grit_err rc;
    if (tied_zero1(p) && p->m->pp_rank == 0 && off == 0 && !p->tied_now)
        return; /* the embedding's: after the last stage's part is added (dp_finish_grads) */
    double t0 = now_seconds();
    /* at most DP_IN_FLIGHT reductions at once: each holds the MPI library's temporaries
     * (Open MPI: twice its bucket for a reduce-scatter), which with every bucket of a
     * backward in flight reached twice the gradient block on rank 0 */
    if ((rc = comm_wait_oldest(d, DP_IN_FLIGHT - 1)) != GRIT_OK) {
        p->hook_s += now_seconds() - t0;
        return; /* caught in dp_finish_grads: fewer requests than buckets */
    }
    if (p->nrows > 0 && off == 0 && n == p->embed_n) {
        /* the input embedding: only rows of tokens some rank saw are non-zero */
        pack_rows(p);
        rc = comm_iallreduce_sum(d, p->pack, (size_t)p->nrows * (size_t)p->m->cfg.hidden);
    } else if (!p->zero1) {
        rc = comm_iallreduce_sum(d, p->m->grads + off, n);
    } else if (d->nreqs >= COMM_MAX_REQS) {
        rc = GRIT_EINVAL;
    } else {
        /* ZeRO-1: the bucket [off, off + n) is reduce-scattered on its own; rank r gets
         * the part of it inside its shard, which lands at its place in g_shard */
        int *c = p->bucket_counts + (size_t)d->nreqs * (size_t)d->size;
        bucket_parts(p, off, n, c, NULL);
        rc = comm_ireduce_scatter_v(d, p->m->grads + off, p->g_shard + shard_at(p, off), c);
    }
    /* a failed start is caught in dp_finish_grads: fewer requests than buckets */
    if (rc == GRIT_OK)
        p->started++;
    comm_progress(d);
    /* starting and progressing can run whole rounds of the reduction on this thread */
    p->hook_s += now_seconds() - t0;
}

/* ZeRO-2: before backward writes bucket [off, off + n), its gradients go to the window. */
static void z2_begin(void *ctx, size_t off, size_t n)
{
    dp_sync *p = ctx;
    memset(p->win, 0, n * sizeof(float));
    gx_bind_grads(p->m, off, n, p->win);
    p->m->zwin_g = p->win; /* a vocabulary piece's rows (no whole tensor to bind) */
}

/* ZeRO-2: bucket [off, off + n) of this micro-batch is final in the window: reduce-scatter
 * it (rank r gets the part inside its shard) and add this rank's part to its shard, so the
 * window is free for the next bucket. Blocking; a failure is kept for dp_finish_grads. */
static void z2_ready(void *ctx, size_t off, size_t n)
{
    dp_sync *p = ctx;
    comm *d = p->d;
    double t0 = now_seconds();
    if (p->z2_rc != GRIT_OK)
        return;
    bucket_parts(p, off, n, p->zc, NULL);
    grit_err rc = comm_reduce_scatter_v(d, p->win, p->rs, p->zc);
    if (rc != GRIT_OK) {
        snprintf(p->z2_err, sizeof p->z2_err, "%s", grit_errmsg());
        p->z2_rc = rc;
        return;
    }
    size_t at = shard_at(p, off), k = (size_t)p->zc[d->rank];
    for (size_t i = 0; i < k; i++)
        p->g_shard[at + i] += p->rs[i];
    p->started++;
    p->hook_s += now_seconds() - t0;
}

/* ZeRO-3: before the forward or backward reads bucket [off, off + n)'s weights, every
 * rank's part of it (inside its parameter shard) is all-gathered into the window, which
 * the bucket's tensors then point at. A failure is kept for dp_finish_grads; the window is
 * bound anyway (its numbers are then stale, and the step is refused). */
static void z3_param_begin(void *ctx, size_t off, size_t n)
{
    dp_sync *p = ctx;
    comm *d = p->d;
    double t0 = now_seconds();
    if (p->z2_rc == GRIT_OK) {
        bucket_parts(p, off, n, p->pc, p->pd);
        if (p->pc[d->rank] > 0)
            memcpy(p->pwin + p->pd[d->rank],
                   p->p_shard + (off + (size_t)p->pd[d->rank] - p->lo),
                   sizeof(float) * (size_t)p->pc[d->rank]);
        grit_err rc = comm_allgather_v(d, p->pwin, p->pc, p->pd);
        if (rc != GRIT_OK) {
            snprintf(p->z2_err, sizeof p->z2_err, "%s", grit_errmsg());
            p->z2_rc = rc;
        }
    }
    gx_bind_params(p->m, off, n, p->pwin);
    p->m->zwin_w = p->pwin; /* a vocabulary piece's rows (no whole tensor to bind) */
    p->hook_s += now_seconds() - t0;
}

grit_err dp_init(dp_sync *p, comm *d, gx_model *m, bool zero1, bool zero2, bool zero3)
{
    memset(p, 0, sizeof *p);
    p->d = d;
    p->m = m;
    p->zero3 = zero3 && d->size > 1;
    p->zero2 = (zero2 || zero3) && d->size > 1;
    p->zero1 = (zero1 || zero2) && d->size > 1;
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
        p->bucket_counts = calloc((size_t)COMM_MAX_REQS * (size_t)W, sizeof(int));
        if (!p->m_shard || !p->v_shard || !p->g_shard || !p->bucket_counts)
            return grit_errf(GRIT_ENOMEM, "out of memory for the optimiser shard");
        gx_drop_optim_state(m);
    }
    const char *sp = getenv("GRIT_DP_SPARSE_EMBED"); /* "0": dense, for comparisons */
    if (W > 1 && m->num_tensors > 1 && !m->cfg.tied && m->tp <= 1 && m->pp_rank == 0 &&
        !p->zero2 && !(sp && !strcmp(sp, "0"))) {
        /* sparse reduction of the input embedding (not when the LM head shares it:
         * then every row has a gradient) */
        p->embed_n = m->tensors[1].offset;
        p->rows = calloc((size_t)m->cfg.vocab, 1);
        p->row_idx = calloc((size_t)m->cfg.vocab, sizeof(int));
        p->pack = malloc(sizeof(float) * (p->embed_n ? p->embed_n : 1));
        if (!p->rows || !p->row_idx || !p->pack)
            return grit_errf(GRIT_ENOMEM, "out of memory");
    }
    if (W > 1 && m->grads) {
        /* what an un-overlapped reduction of every gradient would cost: bucket-sized pieces, as
         * the step reduces them (one collective over the whole block would make MPI allocate
         * a temporary as large as the model on some ranks: their peak memory) */
        double best = 1e30;
        size_t step = gx_bucket_max(m);
        for (int k = 0; k < 3; k++) {
            double t0 = now_seconds();
            grit_err rc = GRIT_OK;
            for (size_t off = 0; rc == GRIT_OK && off < np; off += step) {
                size_t n = np - off < step ? np - off : step;
                if (!p->zero1) {
                    rc = comm_allreduce_sum(d, m->grads + off, n);
                    continue;
                }
                bucket_parts(p, off, n, p->bucket_counts, NULL);
                rc = comm_reduce_scatter_v(d, m->grads + off, p->g_shard + shard_at(p, off),
                                           p->bucket_counts);
            }
            if (rc != GRIT_OK)
                return rc;
            best = fmin(best, now_seconds() - t0);
        }
        p->ar_blocking_s = best;
        gx_zero_grad(m);
    }
    if (p->zero2 && m->tp == 1 && !(m->cfg.tied && m->pp > 1)) {
        /* the vocabulary tensors in pieces no larger than a layer's bucket, so the windows
         * are a layer's size (the head's [V, C] would be the largest bucket by far) */
        int k = gx_vocab_pieces((size_t)m->nv, m->cfg.hidden, gx_layer_bucket_max(m));
        grit_err rc = k > 1 ? gx_set_vocab_pieces(m, k) : GRIT_OK;
        if (rc != GRIT_OK)
            return rc;
    }
    if (p->zero2) { /* the gradient block goes: backward writes one bucket at a time */
        size_t mb = gx_bucket_max(m);
        p->win = malloc(sizeof(float) * (mb ? mb : 1));
        p->rs = p->zero3 ? NULL : malloc(sizeof(float) * (mb ? mb : 1)); /* ZeRO-3: below */
        p->zc = calloc((size_t)W, sizeof(int));
        if (!p->win || (!p->zero3 && !p->rs) || !p->zc)
            return grit_errf(GRIT_ENOMEM, "out of memory for the gradient window");
        p->win_n = mb;
        gx_drop_grads(m); /* the gradient pointers are NULL until a step's z2_begin */
    }
    if (p->zero3) {
        size_t n = p->hi - p->lo;
        p->p_shard = malloc(sizeof(float) * (n ? n : 1));
        p->pwin = malloc(sizeof(float) * (p->win_n ? p->win_n : 1));
        p->pc = calloc((size_t)W, sizeof(int));
        p->pd = calloc((size_t)W, sizeof(int));
        if (!p->p_shard || !p->pwin || !p->pc || !p->pd)
            return grit_errf(GRIT_ENOMEM, "out of memory for the parameter shard and window");
        /* once a bucket's gradient is final its weights are not read again (the next use
         * gathers them anew): its reduced part lands in the parameter window */
        p->rs = p->pwin;
    }
    return GRIT_OK;
}

grit_err dp_shard_params(dp_sync *p)
{
    if (!p->zero3 || !p->m->params) /* a lean model (GX_NO_PARAMS) has only the shard */
        return GRIT_OK;
    memcpy(p->p_shard, p->m->params + p->lo, sizeof(float) * (p->hi - p->lo));
    return gx_drop_params(p->m); /* weight pointers NULL until a step's z3_param_begin */
}

void dp_init_weights(dp_sync *p, uint64_t seed)
{
    if (p->zero3 && !p->m->params)
        gx_init_weights_range(p->m, seed, p->lo, p->hi, p->p_shard);
    else
        gx_init_weights(p->m, seed);
}

typedef struct range_sink {
    const gx_model *m;
    size_t lo, hi;
    float *dst;
} range_sink;

static grit_err keep_range(void *ctx, int block, int i, const float *data)
{
    const range_sink *k = ctx;
    const gx_tensor *t = &k->m->tensors[i];
    size_t a = t->offset > k->lo ? t->offset : k->lo;
    size_t b = t->offset + t->numel < k->hi ? t->offset + t->numel : k->hi;
    if (block == 0 && a < b)
        memcpy(k->dst + (a - k->lo), data + (a - t->offset), (b - a) * sizeof(float));
    return GRIT_OK;
}

grit_err dp_load_params(dp_sync *p, store *ck, const char *dir)
{
    if (!p->zero3 || p->m->params)
        return ckpt_load(ck, dir, p->m, NULL, true);
    range_sink k = {.m = p->m, .lo = p->lo, .hi = p->hi, .dst = p->p_shard};
    return ckpt_load_each(ck, dir, p->m, 0, keep_range, &k);
}

grit_err dp_gather_params(dp_sync *p, float *out, int root)
{
    if (!p->zero3) {
        if (p->d->rank == root && out != p->m->params)
            memcpy(out, p->m->params, sizeof(float) * p->m->num_params);
        return GRIT_OK;
    }
    return comm_gather_v(p->d, p->p_shard, (int)(p->hi - p->lo), out, p->counts, p->displs,
                         root);
}

grit_err dp_gather_range(dp_sync *p, size_t off, size_t n, float *out, int root)
{
    if (!p->zero3) {
        if (p->d->rank == root)
            memcpy(out, p->m->params + off, sizeof(float) * n);
        return GRIT_OK;
    }
    bucket_parts(p, off, n, p->pc, p->pd); /* the parameter window's counts, free here */
    return comm_gather_v(p->d, p->p_shard + shard_at(p, off), p->pc[p->d->rank], out, p->pc,
                         p->pd, root);
}

size_t dp_state_bytes(const dp_sync *p)
{
    const gx_model *m = p->m;
    size_t n = p->hi - p->lo, f = 0;
    f += m->params ? m->num_params : p->zero3 ? n + p->win_n : 0;  /* weights: block or shard + window */
    f += m->grads ? m->num_params : p->zero2 ? n + p->win_n : 0;   /* gradients */
    f += m->adam_m ? 2 * m->num_params : p->zero1 ? 2 * n : 0;     /* AdamW moments */
    f += p->zero1 && !p->zero2 ? n : 0;                            /* ZeRO-1's reduced shard */
    f += p->zero2 && !p->zero3 ? p->win_n : 0;                     /* ZeRO-2: rs */
    return f * sizeof(float);
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
    free(p->rows);
    free(p->row_idx);
    free(p->pack);
    free(p->tied_buf);
    free(p->win);
    if (p->rs != p->pwin)
        free(p->rs);
    free(p->zc);
    free(p->p_shard);
    free(p->pwin);
    free(p->pc);
    free(p->pd);
    memset(p, 0, sizeof *p);
}

grit_err dp_set_tokens(dp_sync *p, const int32_t *tok, size_t n)
{
    p->nrows = 0;
    p->pre_wait_s = 0;
    if (!p->rows)
        return GRIT_OK;
    int V = p->m->cfg.vocab;
    memset(p->rows, 0, (size_t)V);
    unsigned char bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (tok[i] >= 0 && tok[i] < V)
            p->rows[tok[i]] = 1;
        else
            bad = 1;
    }
    double t0 = now_seconds();
    /* the union of every rank's rows; one out-of-range token anywhere: the dense path */
    if (bad)
        p->rows[0] |= 2;
    grit_err rc = comm_allreduce_or_u8(p->d, p->rows, (size_t)V);
    p->pre_wait_s = now_seconds() - t0;
    if (rc != GRIT_OK || (p->rows[0] & 2))
        return rc;
    for (int v = 0; v < V; v++)
        if (p->rows[v])
            p->row_idx[p->nrows++] = v;
    return GRIT_OK;
}

void dp_arm(dp_sync *p)
{
    p->started = 0;
    p->hook_s = 0;
    if (p->zero2) { /* every micro-batch of the step reduces into the shard */
        memset(p->g_shard, 0, sizeof(float) * (p->hi - p->lo));
        p->z2_rc = GRIT_OK;
        p->m->grad_begin = z2_begin;
        p->m->grad_ready = z2_ready;
        p->m->param_begin = p->zero3 ? z3_param_begin : NULL;
        p->m->grad_ctx = p;
        return;
    }
    if (p->d->size > 1) {
        p->m->grad_ready = on_grad_ready;
        p->m->grad_ctx = p;
    }
}

void dp_set_tp(dp_sync *p, comm *tp) { p->tp = tp && tp->size > 1 ? tp : NULL; }

void dp_set_pp(dp_sync *p, comm *pp) { p->pp = pp && pp->size > 1 ? pp : NULL; }

/* Sums of squares of grads[lo, hi) (g: those values), split into the tensors this TP
 * rank holds a slice of (out[0]) and the replicated ones (out[1]); fixed order. */
static void sq_parts(const gx_model *m, const float *g, size_t lo, size_t hi, double out[2])
{
    out[0] = out[1] = 0.0;
    for (int ti = 0; ti < m->num_tensors; ti++) {
        const gx_tensor *t = &m->tensors[ti];
        size_t a = t->offset > lo ? t->offset : lo;
        size_t b = t->offset + t->numel < hi ? t->offset + t->numel : hi;
        double s = 0.0;
        if (t->kv_copy) { /* replicated kv rows: the first replica counts them */
            for (size_t i = a; i < b; i++)
                if (!gx_tp_is_kv_copy(t, i - t->offset))
                    s += (double)g[i - lo] * g[i - lo];
        } else
            for (size_t i = a; i < b && !t->tied_copy; i++) /* a tied copy counts once */
                s += (double)g[i - lo] * g[i - lo];
        out[t->split < 0] += s;
    }
}

/* The global norm under TP: [split, replicated] sums gathered over the DP group (ZeRO-1
 * shards) and then over the TP group, each added in rank order. */
static grit_err tp_norm(dp_sync *p, const float *g, size_t lo, size_t hi, double *norm)
{
    double mine[2], all[2 * 1024], dsum[2] = {0, 0};
    sq_parts(p->m, g, lo, hi, mine);
    if (p->d->size > 1024 || p->tp->size > 1024)
        return grit_errf(GRIT_EINVAL, "group size above 1024");
    grit_err rc = GRIT_OK;
    if (p->zero1 && (rc = comm_allgather_f64(p->d, mine, all, 2)) == GRIT_OK) {
        for (int r = 0; r < p->d->size; r++)
            dsum[0] += all[2 * r], dsum[1] += all[2 * r + 1];
    } else if (!p->zero1)
        dsum[0] = mine[0], dsum[1] = mine[1];
    if (rc != GRIT_OK || (rc = comm_allgather_f64(p->tp, dsum, all, 2)) != GRIT_OK)
        return rc;
    double s = 0.0;
    for (int r = 0; r < p->tp->size; r++)
        s += all[2 * r];
    *norm = sqrt(s + all[1]); /* replicated tensors: TP rank 0's copy */
    return GRIT_OK;
}

/* Gradient reductions started by one step's backward: the head's (last stage), one per
 * layer of this stage, the input embedding's (first stage). Vocabulary pieces: each its own
 * bucket, the final norm another; ZeRO-2/3 with tied embeddings on one stage: the head's
 * part of the embedding's gradient one more (gptneox_step.c). */
static int buckets(const dp_sync *p)
{
    const gx_model *m = p->m;
    int v = m->vpieces > 1 ? m->vpieces : 1;
    bool apart = m->vpieces > 1 || (p->zero2 && m->cfg.tied && m->pp == 1);
    return m->nl + (m->pp_rank == m->pp - 1) * (apart ? 1 + v : 1) + (m->pp_rank == 0) * v;
}

static grit_err finish_grads(dp_sync *p, double *norm);
static grit_err shard_norm(dp_sync *p, double *norm);

/* The tied embedding's tensor on this stage: the embedding (first) or its copy (last). */
static const gx_tensor *tied_tensor(const gx_model *m)
{
    for (int i = 0; m->pp_rank != 0 && i < m->num_tensors; i++)
        if (m->tensors[i].tied_copy)
            return &m->tensors[i];
    return &m->tensors[0];
}

/* Tied embeddings across pipeline stages: the first stage's embedding gradient and the last
 * stage's copy's (its LM head's) are exchanged over the pipeline group, both already
 * reduced over the data-parallel group, and each side adds the other's: both hold the same
 * sum, so both apply the same AdamW update and the copies stay equal bit for bit. */
static grit_err tied_sync(dp_sync *p)
{
    gx_model *m = p->m;
    if (!p->pp || !m->cfg.tied || (m->pp_rank != 0 && m->pp_rank != m->pp - 1))
        return GRIT_OK;
    const gx_tensor *t = tied_tensor(m);
    size_t n = t->numel;
    if (!p->tied_buf && !(p->tied_buf = malloc(sizeof(float) * (n ? n : 1))))
        return grit_errf(GRIT_ENOMEM, "out of memory for the tied embedding's gradient");
    int peer = m->pp_rank == 0 ? m->pp - 1 : 0;
    float *mine = m->grads + t->offset;
    grit_err rc = comm_sendrecv(p->pp, mine, sizeof(float) * n, peer, p->tied_buf,
                                sizeof(float) * n, peer, DP_TIED_TAG);
    if (rc != GRIT_OK)
        return grit_errf(rc, "the tied embedding's gradient exchange with stage %d: %s", peer,
                         grit_errmsg());
    for (size_t i = 0; i < n; i++) /* a + b == b + a in IEEE arithmetic: both sides agree */
        mine[i] += p->tied_buf[i];
    return GRIT_OK;
}

/* ZeRO-1 with tied embeddings over stages: the reduced gradient is sharded, so the stages
 * cannot add each other's after the reduction (tied_sync). Instead the last stage sends its
 * copy's gradient (this data-parallel index's, not reduced) to the first, which adds it to
 * its embedding's and only then starts that bucket's reduce-scatter (deferred in the hook):
 * the first stage's shards hold the whole reduced gradient. The copy's own update is then
 * overwritten by the first stage's updated embedding after the step (tied_weights). */
static grit_err tied_grads_zero1(dp_sync *p)
{
    gx_model *m = p->m;
    if (m->pp_rank != 0 && m->pp_rank != m->pp - 1)
        return GRIT_OK;
    const gx_tensor *t = tied_tensor(m);
    size_t n = t->numel;
    grit_err rc;
    if (m->pp_rank != 0) {
        if ((rc = comm_send(p->pp, m->grads + t->offset, sizeof(float) * n, 0, DP_TIED_TAG)) !=
            GRIT_OK)
            return grit_errf(rc, "the tied embedding's gradient to stage 0: %s", grit_errmsg());
        return GRIT_OK;
    }
    if (!p->tied_buf && !(p->tied_buf = malloc(sizeof(float) * (n ? n : 1))))
        return grit_errf(GRIT_ENOMEM, "out of memory for the tied embedding's gradient");
    if ((rc = comm_recv(p->pp, p->tied_buf, sizeof(float) * n, m->pp - 1, DP_TIED_TAG)) !=
        GRIT_OK)
        return grit_errf(rc, "the tied embedding's gradient from stage %d: %s", m->pp - 1,
                         grit_errmsg());
    for (size_t i = 0; i < n; i++)
        m->grads[t->offset + i] += p->tied_buf[i];
    p->tied_now = true;
    on_grad_ready(p, 0, m->tensors[1].offset);
    p->tied_now = false;
    return GRIT_OK;
}

/* After a ZeRO-1 step: the first stage's updated embedding replaces the last stage's copy. */
static grit_err tied_weights(dp_sync *p)
{
    gx_model *m = p->m;
    if (!tied_zero1(p) || (m->pp_rank != 0 && m->pp_rank != m->pp - 1))
        return GRIT_OK;
    const gx_tensor *t = tied_tensor(m);
    size_t bytes = sizeof(float) * t->numel;
    grit_err rc = m->pp_rank == 0
                      ? comm_send(p->pp, m->params + t->offset, bytes, m->pp - 1, DP_TIED_TAG + 1)
                      : comm_recv(p->pp, m->params + t->offset, bytes, 0, DP_TIED_TAG + 1);
    if (rc != GRIT_OK)
        return grit_errf(rc, "the tied embedding's weights %s stage %s: %s",
                         m->pp_rank == 0 ? "to the last" : "from the first",
                         m->pp_rank == 0 ? "" : "0", grit_errmsg());
    return GRIT_OK;
}

grit_err dp_finish_grads(dp_sync *p, double *norm)
{
    grit_err rc = finish_grads(p, norm);
    if (rc != GRIT_OK || !p->pp)
        return rc;
    /* pipeline stages: each stage's sum of squares, added in stage order */
    double mine = *norm * *norm, all[1024], s = 0.0;
    if (p->pp->size > 1024)
        return grit_errf(GRIT_EINVAL, "pipeline group above 1024");
    if ((rc = comm_allgather_f64(p->pp, &mine, all, 1)) != GRIT_OK)
        return rc;
    for (int r = 0; r < p->pp->size; r++)
        s += all[r];
    *norm = sqrt(s);
    return GRIT_OK;
}

void dp_forward_begin(dp_sync *p)
{
    if (!p->zero3)
        return;
    p->z2_rc = GRIT_OK;
    p->m->param_begin = z3_param_begin;
    p->m->grad_ctx = p;
}

grit_err dp_forward_end(dp_sync *p)
{
    if (!p->zero3)
        return GRIT_OK;
    p->m->param_begin = NULL;
    if (p->z2_rc != GRIT_OK)
        return grit_errf(p->z2_rc, "ZeRO-3: gathering the weights for a forward: %s", p->z2_err);
    return GRIT_OK;
}

static grit_err finish_grads(dp_sync *p, double *norm)
{
    gx_model *m = p->m;
    p->m->grad_ready = NULL;
    p->m->grad_begin = NULL;
    p->m->param_begin = NULL;
    p->wait_s = 0;
    if (m->tp_failed) { /* the failed collective left its message */
        char why[256];
        snprintf(why, sizeof why, "%s", grit_errmsg());
        return grit_errf(GRIT_EIO, "a tensor-parallel reduction failed in this step: %s", why);
    }
    if (p->d->size == 1) {
        grit_err trc = tied_sync(p);
        if (trc != GRIT_OK)
            return trc;
        if (p->tp)
            return tp_norm(p, m->grads, 0, m->num_params, norm);
        *norm = optim_grad_norm(m);
        return GRIT_OK;
    }
    double t0 = now_seconds();
    grit_err trc = tied_zero1(p) ? tied_grads_zero1(p) : GRIT_OK; /* starts one more */
    if (trc != GRIT_OK)
        return trc;
    int expect = p->started;
    if (p->zero2) { /* every bucket of every micro-batch was reduced in its hook */
        p->wait_s = p->pre_wait_s + p->hook_s;
        if (p->z2_rc != GRIT_OK)
            return grit_errf(p->z2_rc, "a gradient reduce-scatter failed: %s", p->z2_err);
        if (expect == 0 || expect % buckets(p) != 0)
            return grit_errf(GRIT_EIO, "rank %d: %d gradient reductions, not a multiple of %d "
                                       "buckets", p->d->rank, expect, buckets(p));
        return shard_norm(p, norm);
    }
    grit_err rc = comm_wait_all(p->d);
    if (rc == GRIT_OK && p->nrows > 0)
        unpack_rows(p);
    /* the training thread's whole time in communication: the row union, starting and
     * progressing reductions during backward, and this wait */
    p->wait_s = now_seconds() - t0 + p->pre_wait_s + p->hook_s;
    if (rc != GRIT_OK)
        return rc;
    if (expect != buckets(p)) /* every bucket: head, each layer, embedding */
        return grit_errf(GRIT_EIO, "rank %d: %d of %d gradient reductions could not be started",
                         p->d->rank, expect, buckets(p));
    if (!p->zero1) {
        if ((rc = tied_sync(p)) != GRIT_OK)
            return rc;
        if (p->tp)
            return tp_norm(p, m->grads, 0, m->num_params, norm);
        *norm = optim_grad_norm(m);
        return GRIT_OK;
    }
    memcpy(m->grads + p->lo, p->g_shard, (p->hi - p->lo) * sizeof(float));
    return shard_norm(p, norm);
}

/* ZeRO-1/2: the global norm from every rank's reduced shard. */
static grit_err shard_norm(dp_sync *p, double *norm)
{
    size_t n = p->hi - p->lo;
    grit_err rc;
    if (p->tp)
        return tp_norm(p, p->g_shard, p->lo, p->hi, norm);
    double local = 0, parts[1024];
    /* a tied embedding's copy on the last stage counts once (on the first stage) */
    const gx_model *m = p->m;
    const gx_tensor *cp = p->pp && m->cfg.tied && m->pp_rank == m->pp - 1 ? tied_tensor(m) : NULL;
    size_t c0 = cp ? cp->offset : 0, c1 = cp ? cp->offset + cp->numel : 0;
    for (size_t i = 0; i < n; i++)
        if (p->lo + i < c0 || p->lo + i >= c1)
            local += (double)p->g_shard[i] * p->g_shard[i];
    if (p->d->size > 1024)
        return grit_errf(GRIT_EINVAL, "world size above 1024");
    if ((rc = comm_allgather_f64(p->d, &local, parts, 1)) != GRIT_OK)
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
    if (p->zero3) { /* the shard is the only copy: the next step gathers it per bucket */
        optim_adamw_range(p->m, o, t, lr, clip, p->lo, p->hi, p->p_shard, p->g_shard,
                          p->m_shard, p->v_shard);
        return GRIT_OK;
    }
    optim_adamw_range(p->m, o, t, lr, clip, p->lo, p->hi, p->m->params + p->lo, p->g_shard,
                      p->m_shard, p->v_shard);
    grit_err rc = comm_allgather_v(p->d, p->m->params, p->counts, p->displs);
    return rc == GRIT_OK ? tied_weights(p) : rc;
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
    grit_err rc = comm_gather_v(p->d, p->m_shard, n, mm, p->counts, p->displs, root);
    if (rc == GRIT_OK)
        rc = comm_gather_v(p->d, p->v_shard, n, vv, p->counts, p->displs, root);
    return rc;
}

double dp_optim_bytes(const dp_sync *p)
{
    size_t n = p->zero1 ? p->hi - p->lo : p->m->num_params;
    return 2.0 * 4.0 * (double)n;
}
