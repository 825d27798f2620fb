/* saver.c - checkpoint cadence, snapshot, rank-level commit and resume of a training
 * run (see saver.h). */
#include "train/saver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/progress.h"
#include "model/tp.h"

static void on_reject(void *ctx, const char *dir, const char *why, int remote_next)
{
    saver *r = ctx;
    if (remote_next) {
        fprintf(stderr, "grit train: WARNING: the local copy of checkpoint %s is unusable: %s; "
                        "trying the remote copy\n", dir, why);
        events_emit(r->ev, "ckpt_local_rejected", json_pack("{s:s,s:s}", "dir", dir, "reason", why));
        return;
    }
    fprintf(stderr, "grit train: WARNING: checkpoint %s/%s is unusable: %s; falling back to an "
                    "older one\n", r->ck->root, dir, why);
    events_emit(r->ev, "ckpt_rejected", json_pack("{s:s,s:s}", "dir", dir, "reason", why));
}

/* Logs a finished save; an error only when it failed and on_error is "stop". */
static grit_err report_save(saver *r, const ckpt_result *res)
{
    if (res->step < 0)
        return GRIT_OK;
    if (res->rc == GRIT_OK) {
        r->saves++;
        r->last_seconds = res->seconds;
        events_emit(r->ev, "ckpt_saved",
                    json_pack("{s:I,s:f,s:f,s:f,s:f,s:i,s:f}", "step", (json_int_t)res->step,
                              "bytes", res->bytes, "seconds", res->seconds, "gb_per_s",
                              res->bytes / 1e9 / (res->seconds > 0 ? res->seconds : 1e-9),
                              "stall_s", r->last_stall, "pruned", res->pruned, "prune_seconds",
                              res->prune_seconds));
        if (res->err[0]) /* saved, but retention failed */
            fprintf(stderr, "grit train: WARNING: checkpoint step %ld: %s\n", res->step, res->err);
        return GRIT_OK;
    }
    r->failures++;
    fprintf(stderr, "grit train: checkpoint step %ld FAILED: %s%s\n", res->step, res->err,
            r->cfg->ckpt_stop_on_error ? "" : " (training continues; on_error is \"continue\")");
    events_emit(r->ev, "ckpt_failed",
                json_pack("{s:I,s:s}", "step", (json_int_t)res->step, "error", res->err));
    if (r->cfg->ckpt_stop_on_error)
        return grit_errf(GRIT_EIO, "checkpoint step %ld failed: %s", res->step, res->err);
    return GRIT_OK;
}

/* Where load_tp's tensors go: this rank's slice of each whole tensor. */
typedef struct tp_sink {
    const gx_model *whole, *m;
    float *dst[3]; /* params, exp_avg, exp_avg_sq: this rank's layout */
    float *shard;  /* ZeRO-3: the weights go to elements [lo, hi) of the layout here */
    size_t lo, hi;
    float *tmp;    /* ZeRO-3: one slice (the largest tensor's numel) */
} tp_sink;

static grit_err tp_keep_slice(void *ctx, int block, int i, const float *data)
{
    const tp_sink *k = ctx;
    const gx_tensor *t = gx_find(k->m, k->whole->tensors[i].name);
    if (!t) { /* another pipeline stage's tensor */
        if (k->m->pp > 1)
            return GRIT_OK;
        return grit_errf(GRIT_EINVAL, "tensor %s of the whole model is not in this rank's slices",
                         k->whole->tensors[i].name);
    }
    if (block == 0 && k->shard) { /* ZeRO-3: the slice's part in [lo, hi) only */
        size_t a = t->offset > k->lo ? t->offset : k->lo;
        size_t b = t->offset + t->numel < k->hi ? t->offset + t->numel : k->hi;
        if (a < b) {
            gx_tp_slice_copy(t, data, k->tmp, 0);
            memcpy(k->shard + (a - k->lo), k->tmp + (a - t->offset), (b - a) * sizeof(float));
        }
        return GRIT_OK;
    }
    gx_tp_slice_copy(t, data, k->dst[block] + t->offset, 0);
    return GRIT_OK;
}

/* Under tensor parallelism: whole tensors from dir into this rank's slices (weights
 * only, or also the AdamW moments: this rank's ZeRO-1 range of its slices), one tensor
 * at a time (ckpt_load_each): a rank holds its slices and one whole tensor, never the
 * whole model. */
static grit_err load_tp(store *ck, const char *dir, saver *r, gx_model *m, dp_sync *dp,
                        int weights_only)
{
    size_t np = m->num_params;
    int z = !weights_only && dp->zero1; /* moments of the whole slice, then the ZeRO range */
    float *lm = z ? malloc(sizeof(float) * np) : m->adam_m;
    float *lv = z ? malloc(sizeof(float) * np) : m->adam_v;
    grit_err rc = !weights_only && (!lm || !lv)
                      ? grit_errf(GRIT_ENOMEM, "out of memory loading %s/%s", ck->root, dir)
                      : GRIT_OK;
    tp_sink k = {.whole = &r->full, .m = m, .dst = {m->params, lm, lv}};
    if (dp->zero3 && !m->params) { /* ZeRO-3 under TP/PP: this rank's part of its slices */
        k.shard = dp->p_shard;
        k.lo = dp->lo;
        k.hi = dp->hi;
        if (rc == GRIT_OK && !(k.tmp = malloc(sizeof(float) * gx_max_numel(m))))
            rc = grit_errf(GRIT_ENOMEM, "out of memory loading %s/%s", ck->root, dir);
    }
    if (rc == GRIT_OK)
        rc = ckpt_load_each(ck, dir, &r->full, !weights_only, tp_keep_slice, &k);
    free(k.tmp);
    if (rc == GRIT_OK && z) {
        memcpy(dp->m_shard, lm + dp->lo, sizeof(float) * (dp->hi - dp->lo));
        memcpy(dp->v_shard, lv + dp->lo, sizeof(float) * (dp->hi - dp->lo));
    }
    if (z) {
        free(lm);
        free(lv);
    }
    return rc;
}

/* Loads checkpoint dir (already verified by rank 0) into this rank's model and shard. */
static grit_err load_checkpoint(saver *r, gx_model *m, dp_sync *dp, const char *dir,
                                const char *fp, ckpt_state *st)
{
    const train_cfg *cfg = r->cfg;
    grit_err rc = ckpt_read_state(r->ck, dir, st);
    if (rc != GRIT_OK)
        return rc;
    if (strcmp(st->fingerprint, fp) != 0)
        return grit_errf(GRIT_ECONFIG,
                         "%s/%s was written by a different config (fingerprint %s, this config "
                         "%s): use a new run_dir, or \"init_from\" to start from its weights only",
                         r->ck->root, dir, st->fingerprint, fp);
    if (cfg->optim.global_batch == 0 && st->world_size != r->d->size)
        return grit_errf(GRIT_ECONFIG,
                         "%s/%s was written by %d ranks, this run has %d: set optim.global_batch "
                         "so the global batch stays the same across world sizes",
                         r->ck->root, dir, st->world_size, r->d->size);
    if (r->tpc)
        return load_tp(r->ck, dir, r, m, dp, 0);
    if ((rc = dp_load_params(dp, r->ck, dir)) != GRIT_OK) /* ZeRO-3: the shard's */
        return rc;
    if (!dp->zero1)
        return ckpt_load_moments_range(r->ck, dir, m, 0, m->num_params, m->adam_m, m->adam_v);
    /* ZeRO-1: this rank's element range only, resliced from whatever shards were written */
    return ckpt_load_moments_range(r->ck, dir, m, dp->lo, dp->hi, dp->m_shard, dp->v_shard);
}

/* Restores state from the newest good checkpoint (rank 0 chooses and verifies it, every
 * rank loads it) or init_from; *start = first step to run; *loaded tells whether the
 * weights came from a file (else: initialise them). */
grit_err saver_restore(saver *r, gx_model *m, dp_sync *dp, const char *fp, long *start,
                        double *tokens, bool *loaded)
{
    const train_cfg *cfg = r->cfg;
    *start = 0;
    *tokens = 0;
    *loaded = false;
    if (cfg->resume) {
        double t_load = now_seconds(); /* find + verify + load: the resume event's seconds */
        char dir[64];
        long chosen = -1; /* -1: none, -2: some exist but none verifies, -3: store error */
        grit_err rc = GRIT_OK;
        char why[1024] = "";
        if (r->leader) {
            rc = ckpt_find(r->ck, dir, sizeof dir, on_reject, r);
            if (rc == GRIT_OK)
                chosen = strtol(dir + 5, NULL, 10);
            else if (rc != GRIT_ENOTFOUND) {
                chosen = rc == GRIT_EFORMAT ? -2 : -3;
                snprintf(why, sizeof why, "%s", grit_errmsg());
            }
        }
        if ((rc = comm_bcast(r->w, &chosen, sizeof chosen, 0)) != GRIT_OK)
            return rc;
        if (chosen == -3) /* the store could not be read (S3 refused, unreachable, ...) */
            return grit_errf(GRIT_EIO, "%s", r->leader ? why : "rank 0 could not read "
                                                              "the checkpoint store");
        if (chosen == -2)
            return grit_errf(GRIT_EFORMAT, "%s; refusing to start over on top of them (move "
                                           "them away, or set \"resume\": false)",
                             r->leader ? why : "rank 0 found no usable checkpoint");
        if (chosen >= 0) {
            ckpt_state st;
            ckpt_dirname(dir, sizeof dir, chosen);
            rc = load_checkpoint(r, m, dp, dir, fp, &st);
            store_release(r->ck); /* the objects a remote store kept for verify + load */
            if (rc != GRIT_OK)
                return rc;
            if (st.threads != cfg->threads && r->log)
                fprintf(stderr, "grit train: note: checkpoint was written with %d threads, this "
                                "run uses %d: the continuation is exact but not bitwise equal "
                                "to an uninterrupted %d-thread run\n",
                        st.threads, cfg->threads, st.threads);
            *start = st.step;
            *tokens = st.tokens;
            *loaded = true;
            if (r->log)
                fprintf(r->log, "grit train: resuming from %s/%s (step %ld, written by %d "
                                "rank%s, now %d)\n",
                        r->ck->root, dir, st.step, st.world_size, st.world_size > 1 ? "s" : "",
                        r->d->size);
            events_emit(r->ev, "resume",
                        json_pack("{s:s,s:I,s:i,s:i,s:f}", "dir", dir, "step", (json_int_t)st.step,
                                  "from_world", st.world_size, "world", r->d->size, "seconds",
                                  now_seconds() - t_load));
            return GRIT_OK;
        }
    }
    if (cfg->init_from[0]) {
        store *src;
        grit_err rc = store_open_posix(cfg->init_from, &src);
        if (rc == GRIT_OK)
            rc = r->tpc ? load_tp(src, ".", r, m, dp, 1) : dp_load_params(dp, src, ".");
        store_close(src);
        if (rc != GRIT_OK)
            return rc;
        events_emit(r->ev, "init_from", json_pack("{s:s}", "path", cfg->init_from));
        *loaded = true;
    }
    return GRIT_OK;
}

/* A sharded save whose parts are all written (every rank calls this at the same
 * step): each rank's shard entry (or error) is gathered to rank 0 - the gather
 * completes only when every rank's part is durable - and rank 0 commits, or
 * abandons the save if any part failed. */
static grit_err finish_parts(saver *r)
{
    typedef struct part_msg {
        int rc;
        char err[400];
        ckpt_file f;
    } part_msg;
    if (r->pending < 0)
        return GRIT_OK;
    long step = r->pending;
    r->pending = -1;
    const ckpt_file *mine = NULL;
    const char *err = "";
    int n = 0;
    part_msg msg = {0};
    /* a rank without a writer (model parallelism: DP ranks > 0) sends an empty entry */
    msg.rc = r->ca_on ? ckpt_async_part(&r->ca, &mine, &n, &err) : GRIT_OK;
    if (msg.rc == GRIT_OK && r->ca_on)
        msg.f = mine[0];
    else if (msg.rc != GRIT_OK)
        snprintf(msg.err, sizeof msg.err, "%s", err);
    int W = r->w->size, leader = r->leader;
    part_msg *all = leader ? calloc((size_t)W, sizeof *all) : NULL;
    ckpt_file *files = leader ? calloc((size_t)W + 3, sizeof *files) : NULL;
    if (leader && (!all || !files)) {
        free(all);
        free(files);
        return grit_errf(GRIT_ENOMEM, "out of memory");
    }
    grit_err rc = comm_gather(r->w, &msg, all, sizeof msg, 0);
    if (rc == GRIT_OK && leader) {
        char why[512] = "";
        for (int k = 0; k < W && !why[0]; k++)
            if (all[k].rc != GRIT_OK)
                snprintf(why, sizeof why, "rank %d: %s", k, all[k].err);
        if (why[0]) {
            ckpt_async_fail(&r->ca, step, why);
        } else {
            int nf = n - 1; /* [model,] config, state; then every written part */
            memcpy(files, mine + 1, (size_t)nf * sizeof *files);
            for (int k = 0; k < W; k++)
                if (all[k].f.name[0])
                    files[nf++] = all[k].f;
            rc = ckpt_async_commit(&r->ca, step, files, nf);
        }
    }
    free(all);
    free(files);
    ckpt_result done;
    if (rc == GRIT_OK && leader && !r->cfg->ckpt_async && ckpt_async_poll(&r->ca, &done))
        rc = report_save(r, &done);
    return rc;
}

/* Rank 0 reports the previous save and decides whether the run may go on; every
 * rank learns the decision. */
static grit_err gate(saver *r)
{
    int stop = 0;
    grit_err rc = finish_parts(r);
    if (rc != GRIT_OK)
        return rc;
    if (r->leader) {
        ckpt_result done;
        ckpt_async_wait(&r->ca);
        if (ckpt_async_poll(&r->ca, &done))
            rc = report_save(r, &done);
        stop = rc != GRIT_OK;
    }
    grit_err brc = comm_bcast(r->w, &stop, sizeof stop, 0);
    if (rc != GRIT_OK)
        return rc;
    if (brc != GRIT_OK)
        return brc;
    return stop ? grit_errf(GRIT_EIO, "rank 0 stopped the run: a checkpoint save failed") : GRIT_OK;
}

/* World > 1: rank 0 makes the temp directory; then every rank snapshots its moment
 * range (rank 0: and the parameters) and its writer starts on its part. */
/* The start of a save written in parts (save_sharded, save_mp): rank 0 makes
 * step_N.tmp/ and every rank learns whether it could (the broadcast over w: the directory
 * exists once it returns). 1: go on. 0: stop with *rc, either the broadcast's failure or,
 * when nothing was started, the failed save as rank 0 reported it (GRIT_OK elsewhere). */
static int begin_parts(saver *r, const ckpt_state *st, double t0, double *stall, grit_err *rc)
{
    char why[512] = "";
    if (r->leader && ckpt_begin(r->ck, st->step) != GRIT_OK)
        snprintf(why, sizeof why, "%s", grit_errmsg());
    if ((*rc = comm_bcast(r->w, why, sizeof why, 0)) != GRIT_OK)
        return 0;
    if (!why[0])
        return 1;
    *stall = r->last_stall = now_seconds() - t0;
    if (r->leader) {
        ckpt_result res = {.step = st->step, .rc = GRIT_EIO};
        snprintf(res.err, sizeof res.err, "%s", why);
        *rc = report_save(r, &res);
    }
    return 0;
}

static grit_err save_sharded(saver *r, gx_model *m, dp_sync *dp, const ckpt_state *st,
                                  double *stall)
{
    double t0 = now_seconds();
    float *snap = ckpt_async_begin(&r->ca), *mm, *vv;
    grit_err rc;
    if (!begin_parts(r, st, t0, stall, &rc))
        return rc;
    size_t lo = dp->lo, n = dp->hi - dp->lo;
    if (dp->zero3) { /* rank 0 writes the whole weights: the shards gathered */
        if ((rc = dp_gather_params(dp, snap, 0)) != GRIT_OK)
            return rc;
    } else if (r->d->rank == 0)
        ckpt_copy_parallel(snap, m->params, m->num_params);
    ckpt_async_moments(&r->ca, &mm, &vv);
    ckpt_copy_parallel(mm, dp->zero1 ? dp->m_shard : m->adam_m + lo, n);
    ckpt_copy_parallel(vv, dp->zero1 ? dp->v_shard : m->adam_v + lo, n);
    rc = ckpt_async_start(&r->ca, st);
    r->pending = st->step;
    *stall = r->last_stall = now_seconds() - t0;
    if (rc == GRIT_OK && !r->cfg->ckpt_async) /* written already: commit now */
        rc = finish_parts(r);
    return rc;
}

enum { GATHER_TAG = 4343 };

st_entry *saver_entries(const gx_tensor *t, int nt)
{
    st_entry *e = calloc((size_t)(nt > 0 ? nt : 1), sizeof *e);
    for (int i = 0; e && i < nt; i++)
        e[i] = (st_entry){.name = t[i].name, .dtype = "F32", .ndim = t[i].ndim,
                          .shape = {t[i].shape[0], t[i].shape[1]}};
    return e;
}

/* Tensor i's weights as this rank holds them (ZeRO-3: gathered from the data-parallel
 * group's shards into buf on its rank 0, every rank of the group taking part). */
static grit_err my_tensor(const gx_model *m, dp_sync *dp, int i, float *buf, const float **out)
{
    const gx_tensor *t = &m->tensors[i];
    *out = dp->zero3 ? buf : m->params + t->offset;
    return dp->zero3 ? dp_gather_range(dp, t->offset, t->numel, buf, 0) : GRIT_OK;
}

/* The leader's model.safetensors: a write that fails (or a file that could not be opened)
 * is kept and later tensors are not written, while the gathers go on, so the other ranks
 * finish instead of waiting out the dist deadline. */
typedef struct wsink {
    st_stream s;
    bool open;
    grit_err err;
    char why[512];
} wsink;

static void sink_fail(wsink *k, grit_err rc)
{
    k->err = rc;
    snprintf(k->why, sizeof k->why, "%s", grit_errmsg());
    if (k->open)
        st_stream_abort(&k->s);
    k->open = false;
}

static void sink_put(wsink *k, int i, const void *data)
{
    grit_err rc = k->open ? st_stream_put(&k->s, i, data) : GRIT_OK;
    if (rc != GRIT_OK)
        sink_fail(k, rc);
}

/* Model parallelism (TP and/or PP): the whole tensors reach the leader's out one at a
 * time. Under ZeRO-3 each data-parallel group first gathers a tensor's weights to its rank
 * 0; replica 0's ranks go on: each stage's TP group gathers the tensor's slices to its TP
 * rank 0, which assembles the whole tensor; stage 0's is the leader, which writes it, the
 * other stages' send theirs over the pipeline group and the leader receives them stage by
 * stage, in table order. Nobody holds more than a whole tensor and its TP slices. */
static grit_err gather_whole(saver *r, const gx_model *m, dp_sync *dp, wsink *out)
{
    int tp = m->tp, tpr = r->tpc->rank, P = r->ppc->size, s = r->ppc->rank;
    bool col = r->d->rank == 0; /* replica 0 (every replica holds the same weights) */
    size_t big = gx_max_numel(m), bigw = gx_max_numel(&r->full);
    if (bigw > 0x7fffffffUL / sizeof(float) / (size_t)tp)
        return grit_errf(GRIT_EINVAL, "a %zu-element tensor exceeds one MPI message", bigw);
    bool asm_ = col && tpr == 0; /* assembles whole tensors */
    float *tbuf = asm_ ? malloc(sizeof(float) * big * (size_t)tp) : NULL;
    float *whole = asm_ ? malloc(sizeof(float) * bigw) : NULL;
    float *mine = dp->zero3 && col ? malloc(sizeof(float) * (big ? big : 1)) : NULL;
    gx_tensor **lay = asm_ ? calloc((size_t)tp, sizeof *lay) : NULL;
    grit_err rc = (asm_ && (!tbuf || !whole || !lay)) || (dp->zero3 && col && !mine)
                      ? grit_errf(GRIT_ENOMEM, "out of memory gathering whole tensors")
                      : GRIT_OK;
    for (int q = 0; rc == GRIT_OK && asm_ && q < tp; q++) { /* each TP rank's slices */
        int nt;
        size_t npq;
        if ((rc = gx_stage_layout(&m->cfg, tp, q, P, s, &lay[q], &nt, &npq)) == GRIT_OK &&
            (nt != m->num_tensors || npq != m->num_params))
            rc = grit_errf(GRIT_EINVAL, "TP rank %d of stage %d holds %zu floats in %d tensors, "
                                        "expected %zu in %d", q, s, npq, nt, m->num_params,
                           m->num_tensors);
        for (int i = 0; rc == GRIT_OK && i < m->num_tensors; i++) /* gathered as equal parts */
            if (lay[q][i].numel != m->tensors[i].numel)
                rc = grit_errf(GRIT_EINVAL, "tensor %s: TP rank %d holds %zu elements, rank 0 %zu",
                               m->tensors[i].name, q, lay[q][i].numel, m->tensors[i].numel);
    }
    for (int i = 0; rc == GRIT_OK && i < m->num_tensors; i++) {
        const gx_tensor *t = &m->tensors[i], *w = gx_find(&r->full, t->name);
        if (t->tied_copy) /* the first stage writes the tied embedding */
            continue;
        if (!w)
            rc = grit_errf(GRIT_EINVAL, "tensor %s is not in the whole model", t->name);
        const float *src = NULL;
        if (rc != GRIT_OK || (rc = my_tensor(m, dp, i, mine, &src)) != GRIT_OK || !col)
            continue;
        if ((rc = comm_gather(r->tpc, src, tbuf, sizeof(float) * t->numel, 0)) != GRIT_OK ||
            tpr != 0)
            continue;
        for (int q = 0; q < tp; q++)
            gx_tp_slice_copy(&lay[q][i], whole, tbuf + (size_t)q * t->numel, 1);
        if (r->leader)
            sink_put(out, (int)(w - r->full.tensors), whole);
        else
            rc = comm_send(r->ppc, whole, sizeof(float) * w->numel, 0, GATHER_TAG);
    }
    for (int p = 1; rc == GRIT_OK && r->leader && p < P; p++) { /* the other stages' */
        gx_tensor *st = NULL;
        int nt = 0;
        size_t nps;
        rc = gx_stage_layout(&m->cfg, 1, 0, P, p, &st, &nt, &nps);
        for (int i = 0; rc == GRIT_OK && i < nt; i++) {
            const gx_tensor *w = gx_find(&r->full, st[i].name);
            if (st[i].tied_copy)
                continue;
            if (!w) {
                rc = grit_errf(GRIT_EINVAL, "tensor %s is not in the whole model", st[i].name);
                break;
            }
            if ((rc = comm_recv(r->ppc, whole, sizeof(float) * w->numel, p, GATHER_TAG)) ==
                GRIT_OK)
                sink_put(out, (int)(w - r->full.tensors), whole);
        }
        free(st);
    }
    for (int q = 0; lay && q < tp; q++)
        free(lay[q]);
    free(lay);
    free(tbuf);
    free(whole);
    free(mine);
    return rc;
}

grit_err saver_write_weights(saver *r, const gx_model *m, dp_sync *dp, const char *path)
{
    bool mp = r->tpc != NULL;
    const gx_tensor *tab = mp ? r->full.tensors : m->tensors;
    int nt = mp ? r->full.num_tensors : m->num_tensors;
    wsink out = {.err = GRIT_OK};
    if (r->leader) {
        st_entry *e = saver_entries(tab, nt);
        grit_err orc = !e ? grit_errf(GRIT_ENOMEM, "out of memory")
                          : st_stream_open(&out.s, path, e, nt);
        free(e);
        if (orc == GRIT_OK)
            out.open = true;
        else
            sink_fail(&out, orc);
    }
    grit_err rc = GRIT_OK;
    if (mp)
        rc = gather_whole(r, m, dp, &out);
    else { /* data parallelism under ZeRO-3: a tensor at a time */
        float *buf = r->leader ? malloc(sizeof(float) * (gx_max_numel(m) + 1)) : NULL;
        if (r->leader && !buf)
            rc = grit_errf(GRIT_ENOMEM, "out of memory gathering the weights");
        for (int i = 0; rc == GRIT_OK && i < nt; i++) {
            const gx_tensor *t = &m->tensors[i];
            if ((rc = dp_gather_range(dp, t->offset, t->numel, buf, 0)) == GRIT_OK && r->leader)
                sink_put(&out, i, buf);
        }
        free(buf);
    }
    if (!r->leader)
        return rc;
    if (rc != GRIT_OK) {
        if (out.open)
            st_stream_abort(&out.s);
        return rc;
    }
    if (out.err != GRIT_OK)
        return grit_errf(out.err, "%s", out.why);
    return st_stream_commit(&out.s);
}

/* Model parallelism: rank 0 makes step_N.tmp/; every DP group gathers its moments
 * (ZeRO shards) to its rank 0, and each rank of replica 0 snapshots its slices and its
 * writer puts its model-parallel shard (rank 0: also config and state), all in parallel;
 * the parts are committed as in save_sharded. Nobody holds more than its own slices. */
static grit_err save_mp(saver *r, gx_model *m, dp_sync *dp, const ckpt_state *st,
                        double *stall)
{
    double t0 = now_seconds();
    grit_err rc;
    if (!begin_parts(r, st, t0, stall, &rc))
        return rc;
    float *snap = r->ca_on ? ckpt_async_begin(&r->ca) : NULL, *mm = NULL, *vv = NULL;
    if (snap)
        ckpt_async_moments(&r->ca, &mm, &vv);
    if ((rc = dp_gather_moments(dp, mm, vv, 0)) != GRIT_OK)
        return rc;
    if (dp->zero3 && (rc = dp_gather_params(dp, snap, 0)) != GRIT_OK) /* the weight shards */
        return rc;
    if (snap) {
        if (!dp->zero3)
            ckpt_copy_parallel(snap, m->params, m->num_params);
        rc = ckpt_async_start(&r->ca, st);
    }
    r->pending = st->step;
    *stall = r->last_stall = now_seconds() - t0;
    if (rc == GRIT_OK && !r->cfg->ckpt_async) /* written already: commit now */
        rc = finish_parts(r);
    return rc;
}

/* Snapshot (params on rank 0, moments gathered from every rank) and start the save. */
static grit_err save_now(saver *r, gx_model *m, dp_sync *dp, const ckpt_state *st,
                                     double *stall)
{
    if (r->tpc)
        return save_mp(r, m, dp, st, stall);
    if (r->d->size > 1)
        return save_sharded(r, m, dp, st, stall);
    double t0 = now_seconds();
    size_t np = m->num_params;
    float *snap = r->d->rank == 0 ? ckpt_async_begin(&r->ca) : NULL;
    if (snap)
        ckpt_copy_parallel(snap, m->params, np);
    grit_err rc = dp_gather_moments(dp, snap ? snap + np : NULL, snap ? snap + 2 * np : NULL, 0);
    if (rc == GRIT_OK && snap)
        rc = ckpt_async_start(&r->ca, st);
    *stall = now_seconds() - t0;
    r->last_stall = *stall;
    ckpt_result done;
    if (rc == GRIT_OK && snap && !r->cfg->ckpt_async && ckpt_async_poll(&r->ca, &done))
        rc = report_save(r, &done);
    return rc;
}


grit_err saver_open(saver *r, const train_cfg *cfg, comm *d, events *ev, FILE *log)
{
    memset(r, 0, sizeof *r);
    r->cfg = cfg;
    r->d = d;
    r->ev = ev;
    r->log = d->rank == 0 ? log : NULL;
    r->on = train_cfg_ckpt_enabled(cfg);
    r->pending = -1;
    r->w = d;
    r->leader = d->rank == 0;
    if (!r->on && !cfg->resume)
        return GRIT_OK;
    char path[1200];
    if (cfg->ckpt_dir[0])
        snprintf(path, sizeof path, "%s", cfg->ckpt_dir);
    else
        snprintf(path, sizeof path, "%s/ckpt", cfg->run_dir);
    grit_err rc = store_open_ex2(path, cfg->ckpt_cache, &cfg->ckpt_s3, &r->ck);
    if (rc != GRIT_OK)
        return rc;
    if (r->on && r->leader) { /* before any save of this run: nothing of ours is in flight */
        int n = 0;
        if (store_cleanup(r->ck, &n) != GRIT_OK)
            fprintf(stderr, "grit train: WARNING: could not look for unfinished uploads of an "
                            "earlier run in %s: %s\n", r->ck->root, grit_errmsg());
        else if (n > 0) {
            fprintf(stderr, "grit train: aborted %d unfinished multipart upload%s left in %s by "
                            "an earlier run (their parts were stored and billed)\n",
                    n, n == 1 ? "" : "s", r->ck->root);
            events_emit(r->ev, "ckpt_uploads_aborted", json_pack("{s:i}", "count", n));
        }
    }
    return GRIT_OK;
}

grit_err saver_start(saver *r, const gx_model *m, const dp_sync *dp, double now)
{
    r->last_save = now;
    /* world > 1: every rank writes its shard; model parallelism: replica 0's ranks write
     * theirs, and every rank takes part in the commit */
    r->parts = r->on && (r->tpc || r->d->size > 1);
    r->ca_on = r->on && (r->tpc ? r->d->rank == 0 : r->leader || r->d->size > 1);
    if (!r->ca_on)
        return GRIT_OK;
    const train_cfg *cfg = r->cfg;
    grit_err rc;
    if (r->tpc) {
        rc = ckpt_async_init_mp(&r->ca, r->ck, m, cfg->ckpt_async, cfg->ckpt_keep_last,
                                cfg->ckpt_keep_every, r->w->rank);
        if (rc != GRIT_OK)
            r->ca_on = false;
        return rc;
    }
    rc = ckpt_async_init_rank(&r->ca, r->ck, m, cfg->ckpt_async, cfg->ckpt_keep_last,
                                       cfg->ckpt_keep_every, r->d->rank, r->d->size, dp->lo,
                                       dp->hi);
    if (rc != GRIT_OK)
        r->ca_on = false;
    return rc;
}

double saver_part_written(saver *r)
{
    return r->pending >= 0 && (!r->ca_on || !ckpt_async_busy(&r->ca)) ? 1.0 : 0.0;
}

grit_err saver_parts_agreed(saver *r, double parts_written)
{
    if (r->pending >= 0 && parts_written == (double)r->w->size)
        return finish_parts(r);
    return GRIT_OK;
}

grit_err saver_poll(saver *r)
{
    ckpt_result done;
    if (r->leader && r->on && ckpt_async_poll(&r->ca, &done))
        return report_save(r, &done);
    return GRIT_OK;
}

grit_err saver_due(saver *r, long step, int *due)
{
    const train_cfg *cfg = r->cfg;
    *due = r->on &&
           ((cfg->ckpt_interval_steps > 0 && step % cfg->ckpt_interval_steps == 0) ||
            (cfg->ckpt_interval_minutes > 0 &&
             now_seconds() - r->last_save >= 60.0 * cfg->ckpt_interval_minutes) ||
            step == cfg->optim.total_steps);
    if (r->w->size > 1 && cfg->ckpt_interval_minutes > 0) /* rank 0's clock decides for all */
        return comm_bcast(r->w, due, sizeof *due, 0);
    return GRIT_OK;
}

grit_err saver_save(saver *r, gx_model *m, dp_sync *dp, const ckpt_state *st, double *stall)
{
    double t_wait = now_seconds();
    grit_err rc = gate(r);
    if (rc != GRIT_OK)
        return rc;
    double waited = now_seconds() - t_wait;
    if ((rc = save_now(r, m, dp, st, stall)) != GRIT_OK)
        return rc;
    *stall += waited;
    r->last_stall = *stall;
    r->stall_total += *stall;
    r->last_save = now_seconds();
    return GRIT_OK;
}

grit_err saver_finish(saver *r)
{
    grit_err rc;
    if (r->parts && (rc = finish_parts(r)) != GRIT_OK)
        return rc;
    if (r->leader && r->on) {
        ckpt_result done;
        ckpt_async_wait(&r->ca);
        if (ckpt_async_poll(&r->ca, &done))
            return report_save(r, &done);
    }
    return GRIT_OK;
}

grit_err saver_set_mp(saver *r, comm *world, comm *tpc, comm *ppc, const gx_model *m)
{
    int n = 0;
    size_t np = 0;
    grit_err rc = gx_tp_layout(&m->cfg, 1, 0, &r->full_t, &n, &np);
    if (rc != GRIT_OK)
        return rc;
    r->w = world;
    r->tpc = tpc;
    r->ppc = ppc;
    r->leader = world->rank == 0;
    r->log = r->leader ? r->log : NULL;
    r->full = *m; /* the configuration; the whole model's table, no buffers */
    r->full.tp = 1;
    r->full.tp_rank = 0;
    r->full.pp = 1;
    r->full.pp_rank = 0;
    r->full.l0 = 0;
    r->full.nl = m->cfg.layers;
    r->full.lt0 = 1;
    r->full.tensors = r->full_t;
    r->full.num_tensors = n;
    r->full.num_params = np;
    r->full.params = r->full.grads = r->full.adam_m = r->full.adam_v = NULL;
    return GRIT_OK;
}

void saver_close(saver *r)
{
    free(r->full_t);
    r->full_t = NULL;
    if (r->ca_on)
        ckpt_async_free(&r->ca);
    r->ca_on = false;
    store_close(r->ck);
    r->ck = NULL;
}
