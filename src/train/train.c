/* train.c - the training loop (see train.h). */
#include "train/train.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ckpt/async.h"
#include "ckpt/safetensors.h"
#include "core/events.h"
#include "core/fsutil.h"
#include "core/progress.h"
#include "obs/tb.h"
#include "train/data.h"
#include "train/dp.h"
#include "train/faults.h"
#include "train/optim.h"

double train_peak_rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

grit_err train_save_weights(const gx_model *m, const char *path)
{
    st_entry *e = calloc((size_t)m->num_tensors, sizeof *e);
    if (!e)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    for (int i = 0; i < m->num_tensors; i++) {
        const gx_tensor *t = &m->tensors[i];
        e[i] = (st_entry){.name = t->name, .dtype = "F32", .ndim = t->ndim,
                          .data = m->params + t->offset};
        e[i].shape[0] = t->shape[0];
        e[i].shape[1] = t->shape[1];
    }
    grit_err rc = st_write(path, e, m->num_tensors);
    free(e);
    return rc;
}

static void path_join(char *buf, size_t cap, const char *dir, const char *name)
{
    snprintf(buf, cap, "%s/%s", dir, name);
}

typedef struct run_ctx {
    const train_cfg *cfg;
    comm *d;
    FILE *log;
    events ev;
    store *ck;
    ckpt_async ca;
    int ck_on, ca_on, saves, save_failures;
    long pending; /* world > 1: step of a save whose parts are being written, else -1 */
    double stall_total, last_stall; /* last_stall: of the save in flight */
} run_ctx;

static void on_reject(void *ctx, const char *dir, const char *why, int remote_next)
{
    run_ctx *r = ctx;
    if (remote_next) {
        fprintf(stderr, "grit train: WARNING: the local copy of checkpoint %s is unusable: %s; "
                        "trying the remote copy\n", dir, why);
        events_emit(&r->ev, "ckpt_local_rejected", json_pack("{s:s,s:s}", "dir", dir, "reason", why));
        return;
    }
    fprintf(stderr, "grit train: WARNING: checkpoint %s/%s is unusable: %s; falling back to an "
                    "older one\n", r->ck->root, dir, why);
    events_emit(&r->ev, "ckpt_rejected", json_pack("{s:s,s:s}", "dir", dir, "reason", why));
}

/* Logs a finished save; an error only when it failed and on_error is "stop". */
static grit_err report_save(run_ctx *r, const ckpt_result *res)
{
    if (res->step < 0)
        return GRIT_OK;
    if (res->rc == GRIT_OK) {
        r->saves++;
        events_emit(&r->ev, "ckpt_saved",
                    json_pack("{s:I,s:f,s:f,s:f,s:f,s:i,s:f}", "step", (json_int_t)res->step,
                              "bytes", res->bytes, "seconds", res->seconds, "gb_per_s",
                              res->bytes / 1e9 / (res->seconds > 0 ? res->seconds : 1e-9),
                              "stall_s", r->last_stall, "pruned", res->pruned, "prune_seconds",
                              res->prune_seconds));
        if (res->err[0]) /* saved, but retention failed */
            fprintf(stderr, "grit train: WARNING: checkpoint step %ld: %s\n", res->step, res->err);
        return GRIT_OK;
    }
    r->save_failures++;
    fprintf(stderr, "grit train: checkpoint step %ld FAILED: %s%s\n", res->step, res->err,
            r->cfg->ckpt_stop_on_error ? "" : " (training continues; on_error is \"continue\")");
    events_emit(&r->ev, "ckpt_failed",
                json_pack("{s:I,s:s}", "step", (json_int_t)res->step, "error", res->err));
    if (r->cfg->ckpt_stop_on_error)
        return grit_errf(GRIT_EIO, "checkpoint step %ld failed: %s", res->step, res->err);
    return GRIT_OK;
}

/* Keeps the metrics lines of steps <= step (a resumed run rewrites the rest). */
static grit_err truncate_metrics(const char *path, long step)
{
    char *text = NULL;
    size_t len = 0;
    if (fs_read_all(path, &text, &len) != GRIT_OK)
        return GRIT_OK; /* no metrics yet */
    size_t keep = 0;
    for (char *line = text; line < text + len;) {
        char *nl = memchr(line, '\n', (size_t)(text + len - line));
        if (!nl)
            break; /* a torn last line is dropped */
        long st;
        if (sscanf(line, "{\"step\":%ld", &st) != 1 || st > step)
            break;
        keep = (size_t)(nl + 1 - text);
        line = nl + 1;
    }
    grit_err rc = fs_write_durable(path, text, keep);
    free(text);
    return rc;
}

/* Loads checkpoint dir (already verified by rank 0) into this rank's model and shard. */
static grit_err load_checkpoint(run_ctx *r, gx_model *m, dp_sync *dp, const char *dir,
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
    if ((rc = ckpt_load(r->ck, dir, m, NULL, true)) != GRIT_OK)
        return rc;
    if (!dp->zero1)
        return ckpt_load_moments_range(r->ck, dir, m, 0, m->num_params, m->adam_m, m->adam_v);
    /* ZeRO-1: this rank's element range only, resliced from whatever shards were written */
    return ckpt_load_moments_range(r->ck, dir, m, dp->lo, dp->hi, dp->m_shard, dp->v_shard);
}

/* Restores state from the newest good checkpoint (rank 0 chooses and verifies it, every
 * rank loads it) or init_from; *start = first step to run; *loaded tells whether the
 * weights came from a file (else: initialise them). */
static grit_err restore(run_ctx *r, gx_model *m, dp_sync *dp, const char *fp, long *start,
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
        if (r->d->rank == 0) {
            rc = ckpt_find(r->ck, dir, sizeof dir, on_reject, r);
            if (rc == GRIT_OK)
                chosen = strtol(dir + 5, NULL, 10);
            else if (rc != GRIT_ENOTFOUND) {
                chosen = rc == GRIT_EFORMAT ? -2 : -3;
                snprintf(why, sizeof why, "%s", grit_errmsg());
            }
        }
        if ((rc = comm_bcast(r->d, &chosen, sizeof chosen, 0)) != GRIT_OK)
            return rc;
        if (chosen == -3) /* the store could not be read (S3 refused, unreachable, ...) */
            return grit_errf(GRIT_EIO, "%s", r->d->rank == 0 ? why : "rank 0 could not read "
                                                                    "the checkpoint store");
        if (chosen == -2)
            return grit_errf(GRIT_EFORMAT, "%s; refusing to start over on top of them (move "
                                           "them away, or set \"resume\": false)",
                             r->d->rank == 0 ? why : "rank 0 found no usable checkpoint");
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
            events_emit(&r->ev, "resume",
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
            rc = ckpt_load(src, ".", m, NULL, true);
        store_close(src);
        if (rc != GRIT_OK)
            return rc;
        events_emit(&r->ev, "init_from", json_pack("{s:s}", "path", cfg->init_from));
        *loaded = true;
    }
    return GRIT_OK;
}

static void summary(FILE *log, const run_ctx *r, const gx_model *m, long steps,
                    double first_loss, double last_loss, double min_loss, double secs,
                    double tokens)
{
    const train_cfg *cfg = r->cfg;
    char dur[32];
    format_duration(dur, sizeof dur, secs);
    double fpt = gx_flops_per_token(&cfg->model, cfg->optim.seq_len);
    fprintf(log, "\n  %-26s %s\n", "run", cfg->run_dir);
    fprintf(log, "  %-26s %s, %.2fM parameters\n", "model",
            cfg->preset[0] ? cfg->preset : "custom", (double)m->num_params / 1e6);
    fprintf(log, "  %-26s %ld\n", "steps", steps);
    fprintf(log, "  %-26s %.0f\n", "tokens", tokens);
    fprintf(log, "  %-26s %.4f -> %.4f (min %.4f)\n", "loss", first_loss, last_loss, min_loss);
    fprintf(log, "  %-26s %s\n", "wall time", dur);
    fprintf(log, "  %-26s %.0f tok/s, %.1f GFLOP/s\n", "throughput", tokens / secs,
            tokens / secs * fpt / 1e9);
    fprintf(log, "  %-26s %.0f MiB\n", "peak memory (RSS)", train_peak_rss_mib());
    fprintf(log, "  %-26s %d\n", "threads", cfg->threads);
    if (r->ck_on)
        fprintf(log, "  %-26s %d saved, %d failed, stall %.3fs in all (%.2f%% of wall time)\n",
                "checkpoints", r->saves, r->save_failures, r->stall_total,
                100.0 * r->stall_total / secs);
    fprintf(log, "  %-26s %s/metrics.jsonl, %s/model.safetensors\n\n", "outputs",
            cfg->run_dir, cfg->run_dir);
}

/* This rank's node: GRIT_NODES[rank / GRIT_RANKS_PER_NODE] under grit launch, else
 * the host name. */
static void train_node_name(int rank, char *out, size_t cap)
{
    const char *nodes = getenv("GRIT_NODES"), *rpn = getenv("GRIT_RANKS_PER_NODE");
    int per = rpn && atoi(rpn) > 0 ? atoi(rpn) : 1, want = rank / per, i = 0;
    if (nodes && *nodes) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", nodes);
        for (char *sv = NULL, *n = strtok_r(buf, ",", &sv); n; n = strtok_r(NULL, ",", &sv), i++)
            if (i == want) {
                snprintf(out, cap, "%s", n);
                return;
            }
    }
    if (gethostname(out, cap) != 0)
        snprintf(out, cap, "local");
}

/* A sharded save whose parts are all written (every rank calls this at the same
 * step): each rank's shard entry (or error) is gathered to rank 0 - the gather
 * completes only when every rank's part is durable - and rank 0 commits, or
 * abandons the save if any part failed. */
static grit_err ckpt_finish_parts(run_ctx *r)
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
    const ckpt_file *mine;
    const char *err;
    int n;
    part_msg msg = {0};
    msg.rc = ckpt_async_part(&r->ca, &mine, &n, &err);
    if (msg.rc == GRIT_OK)
        msg.f = mine[0];
    else
        snprintf(msg.err, sizeof msg.err, "%s", err);
    int W = r->d->size, leader = r->d->rank == 0;
    part_msg *all = leader ? calloc((size_t)W, sizeof *all) : NULL;
    ckpt_file *files = leader ? calloc((size_t)W + 3, sizeof *files) : NULL;
    if (leader && (!all || !files)) {
        free(all);
        free(files);
        return grit_errf(GRIT_ENOMEM, "out of memory");
    }
    grit_err rc = comm_gather(r->d, &msg, all, sizeof msg, 0);
    if (rc == GRIT_OK && leader) {
        char why[512] = "";
        for (int k = 0; k < W && !why[0]; k++)
            if (all[k].rc != GRIT_OK)
                snprintf(why, sizeof why, "rank %d: %s", k, all[k].err);
        if (why[0]) {
            ckpt_async_fail(&r->ca, step, why);
        } else {
            memcpy(files, mine + 1, 3 * sizeof *files); /* model, config, state */
            for (int k = 0; k < W; k++)
                files[3 + k] = all[k].f;
            rc = ckpt_async_commit(&r->ca, step, files, W + 3);
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
static grit_err ckpt_checkpoint_gate(run_ctx *r)
{
    int stop = 0;
    grit_err rc = ckpt_finish_parts(r);
    if (rc != GRIT_OK)
        return rc;
    if (r->d->rank == 0) {
        ckpt_result done;
        ckpt_async_wait(&r->ca);
        if (ckpt_async_poll(&r->ca, &done))
            rc = report_save(r, &done);
        stop = rc != GRIT_OK;
    }
    grit_err brc = comm_bcast(r->d, &stop, sizeof stop, 0);
    if (rc != GRIT_OK)
        return rc;
    if (brc != GRIT_OK)
        return brc;
    return stop ? grit_errf(GRIT_EIO, "rank 0 stopped the run: a checkpoint save failed") : GRIT_OK;
}

/* World > 1: rank 0 makes the temp directory; then every rank snapshots its moment
 * range (rank 0: and the parameters) and its writer starts on its part. */
static grit_err ckpt_save_sharded(run_ctx *r, gx_model *m, dp_sync *dp, const ckpt_state *st,
                                  double *stall)
{
    double t0 = now_seconds();
    float *snap = ckpt_async_begin(&r->ca), *mm, *vv;
    char why[512] = "";
    if (r->d->rank == 0 && ckpt_begin(r->ck, st->step) != GRIT_OK)
        snprintf(why, sizeof why, "%s", grit_errmsg());
    grit_err rc = comm_bcast(r->d, why, sizeof why, 0); /* also: the directory exists now */
    if (rc != GRIT_OK)
        return rc;
    if (why[0]) { /* nothing was started: report as a failed save */
        *stall = r->last_stall = now_seconds() - t0;
        if (r->d->rank != 0)
            return GRIT_OK;
        ckpt_result res = {.step = st->step, .rc = GRIT_EIO};
        snprintf(res.err, sizeof res.err, "%s", why);
        return report_save(r, &res);
    }
    size_t lo = dp->lo, n = dp->hi - dp->lo;
    if (r->d->rank == 0)
        ckpt_copy_parallel(snap, m->params, m->num_params);
    ckpt_async_moments(&r->ca, &mm, &vv);
    ckpt_copy_parallel(mm, dp->zero1 ? dp->m_shard : m->adam_m + lo, n);
    ckpt_copy_parallel(vv, dp->zero1 ? dp->v_shard : m->adam_v + lo, n);
    rc = ckpt_async_start(&r->ca, st);
    r->pending = st->step;
    *stall = r->last_stall = now_seconds() - t0;
    if (rc == GRIT_OK && !r->cfg->ckpt_async) /* written already: commit now */
        rc = ckpt_finish_parts(r);
    return rc;
}

/* Snapshot (params on rank 0, moments gathered from every rank) and start the save. */
static grit_err ckpt_checkpoint_save(run_ctx *r, gx_model *m, dp_sync *dp, const ckpt_state *st,
                                     double *stall)
{
    if (r->d->size > 1)
        return ckpt_save_sharded(r, m, dp, st, stall);
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

grit_err train_run(const train_cfg *cfg, comm *d, FILE *log, train_result *res)
{
    const optim_cfg *o = &cfg->optim;
    int B = o->micro_batch, T = o->seq_len, A = o->grad_accum, W = d->size;
    int leader = d->rank == 0;
    long G = (long)W * A * B; /* sequences per optimiser step, all ranks */
    char path[1200], fp[17];
    gx_model m;
    dp_sync dp = {0};
    FILE *mf = NULL;
    tb_writer *tb = NULL; /* TensorBoard scalars (src/obs/tb.h), leader only */
    int32_t *tokens = NULL;
    grit_err rc;
    run_ctx r = {.cfg = cfg, .d = d, .log = leader ? log : NULL,
                 .ck_on = train_cfg_ckpt_enabled(cfg), .pending = -1};
    train_data data = {0};
    faults fs;
    hb_client *hb = NULL;
    char node[64];
    log = r.log;
    train_node_name(d->rank, node, sizeof node);
    if ((rc = faults_init(&fs, d->rank, node)) != GRIT_OK)
        return rc;

    omp_set_num_threads(cfg->threads);
    openblas_set_num_threads(cfg->threads);
    memset(&m, 0, sizeof m);
    train_cfg_fingerprint(cfg, fp);

    if (leader) {
        if ((rc = fs_mkdirs(cfg->run_dir)) != GRIT_OK)
            return rc;
        char *cfgtext = train_cfg_dump(cfg);
        if (!cfgtext)
            return grit_errf(GRIT_ENOMEM, "out of memory");
        path_join(path, sizeof path, cfg->run_dir, "config.json");
        rc = fs_write_durable(path, cfgtext, strlen(cfgtext));
        free(cfgtext);
        if (rc != GRIT_OK)
            return rc;
        path_join(path, sizeof path, cfg->run_dir, "events.jsonl");
        if ((rc = events_open(&r.ev, path)) != GRIT_OK)
            return rc;
    }
    if ((rc = comm_barrier(d)) != GRIT_OK) /* the run directory exists for everyone */
        goto out;
    if ((rc = gx_init(&m, &cfg->model, B, T, cfg->threads)) != GRIT_OK ||
        (rc = train_data_open(&data, cfg)) != GRIT_OK ||
        (rc = dp_init(&dp, d, &m, o->zero1)) != GRIT_OK)
        goto out;
    if (r.ck_on || cfg->resume) {
        if (cfg->ckpt_dir[0])
            snprintf(path, sizeof path, "%s", cfg->ckpt_dir);
        else
            path_join(path, sizeof path, cfg->run_dir, "ckpt");
        const char *fault_rank = getenv("GRIT_CKPT_FAULT_RANK"); /* tests: faults on one rank */
        if (fault_rank && *fault_rank && atoi(fault_rank) != d->rank)
            unsetenv("GRIT_CKPT_FAULT");
        if ((rc = store_open_ex2(path, cfg->ckpt_cache, &cfg->ckpt_s3, &r.ck)) != GRIT_OK)
            goto out;
    }
    if (r.ck_on && leader) { /* before any save of this run: nothing of ours is in flight */
        int n = 0;
        if (store_cleanup(r.ck, &n) != GRIT_OK)
            fprintf(stderr, "grit train: WARNING: could not look for unfinished uploads of an "
                            "earlier run in %s: %s\n", r.ck->root, grit_errmsg());
        else if (n > 0) {
            fprintf(stderr, "grit train: aborted %d unfinished multipart upload%s left in %s by "
                            "an earlier run (their parts were stored and billed)\n",
                    n, n == 1 ? "" : "s", r.ck->root);
            events_emit(&r.ev, "ckpt_uploads_aborted", json_pack("{s:i}", "count", n));
        }
    }
    long start;
    double tokens_done;
    bool loaded;
    if ((rc = restore(&r, &m, &dp, fp, &start, &tokens_done, &loaded)) != GRIT_OK)
        goto out;
    if (!loaded)
        gx_init_weights(&m, cfg->seed);
    r.ca_on = r.ck_on && (leader || W > 1); /* world > 1: every rank writes its shard */
    if (r.ca_on &&
        (rc = ckpt_async_init_rank(&r.ca, r.ck, &m, cfg->ckpt_async, cfg->ckpt_keep_last,
                                   cfg->ckpt_keep_every, d->rank, W, dp.lo, dp.hi)) != GRIT_OK)
        goto out;
    tokens = malloc(sizeof(int32_t) * (size_t)A * B * (T + 1));
    if (!tokens) {
        rc = grit_errf(GRIT_ENOMEM, "out of memory");
        goto out;
    }
    if (leader) {
        path_join(path, sizeof path, cfg->run_dir, "metrics.jsonl");
        if (start > 0 && (rc = truncate_metrics(path, start)) != GRIT_OK)
            goto out;
        if (!(mf = fopen(path, start > 0 ? "a" : "w"))) {
            rc = grit_errf(GRIT_EIO, "%s: cannot create", path);
            goto out;
        }
        path_join(path, sizeof path, cfg->run_dir, "tb");
        if (tb_open(path, &tb) != GRIT_OK && log) /* training goes on without it */
            fprintf(log, "grit train: no TensorBoard log: %s\n", grit_errmsg());
    }
    events_emit(&r.ev, "train_start",
                json_pack("{s:I,s:i,s:s,s:i,s:b}", "step", (json_int_t)start, "total_steps",
                          o->total_steps, "fingerprint", fp, "world", W, "zero1", dp.zero1));
    if (log)
        fprintf(log, "grit train: %s, %.2fM params, %d layers, %d rank%s x micro batch %d x %d "
                     "tokens x accum %d, %d steps, %d threads/rank, activations %.1f KiB/token%s\n",
                cfg->preset[0] ? cfg->preset : "custom model", (double)m.num_params / 1e6,
                cfg->model.layers, W, W > 1 ? "s" : "", B, T, A, o->total_steps, cfg->threads,
                (double)gx_act_bytes_per_token(&cfg->model) / 1024.0, dp.zero1 ? ", ZeRO-1" : "");

    /* one rank per machine measures its energy for the supervisor (hb.h); the supervisor
     * also counts each machine once, by boot_id, should two of them do it */
    hb = hb_client_start(d->rank, node, 1.0, d->local_rank == 0); /* NULL unless supervised */
    progress pr;
    progress_init(&pr, log ? log : stderr, o->total_steps, cfg->log_every);
    double t_start = now_seconds(), last_save = t_start, first = NAN, last = NAN, minl = INFINITY;
    double run_tokens = 0, wait_total = 0;
    long step;
    for (step = start; step < o->total_steps; step++) {
        double t0 = now_seconds();
        long sample0 = step * G + (long)d->rank * A * B; /* this rank's slice */
        if ((rc = train_data_fill(&data, sample0, A * B, T + 1, tokens)) != GRIT_OK ||
            (rc = dp_set_tokens(&dp, tokens, (size_t)A * B * (T + 1))) != GRIT_OK)
            goto out;
        gx_zero_grad(&m);
        double loss = 0.0;
        for (int a = 0; a < A; a++) {
            if (a == A - 1)
                dp_arm(&dp);
            loss += gx_step(&m, tokens + (size_t)a * B * (T + 1), 1.0f / (float)(A * W), NULL);
        }
        loss /= A;
        faults_slow_compute(&fs, now_seconds() - t0);
        double norm, red[2] = {loss, 0.0};
        /* the loss sum also counts the ranks whose checkpoint part is written */
        if (r.pending >= 0 && !ckpt_async_busy(&r.ca))
            red[1] = 1.0;
        if ((rc = dp_finish_grads(&dp, &norm)) != GRIT_OK ||
            (rc = comm_allreduce_sum_f64(d, red, W > 1 ? 2 : 1)) != GRIT_OK)
            goto out;
        loss = red[0] / W;
        if (r.pending >= 0 && red[1] == (double)W && (rc = ckpt_finish_parts(&r)) != GRIT_OK)
            goto out;
        wait_total += dp.wait_s;
        if (faults_nan_at(&fs, step + 1))
            loss = NAN;
        if (!isfinite(loss) || !isfinite(norm)) {
            hb_client_event(hb, "nan", step + 1, isfinite(loss) ? "grad_norm" : "loss");
            rc = grit_errf(GRIT_ENUMERIC, "step %ld: non-finite %s (loss %g, grad norm %g)",
                           step + 1, isfinite(loss) ? "gradient norm" : "loss", loss, norm);
            events_emit(&r.ev, "numeric_error", json_pack("{s:I}", "step", (json_int_t)step + 1));
            goto out;
        }
        double lr = optim_lr(o, step);
        if (faults_skip(&fs, step + 1)) { /* the supervisor's answer to a NaN that repeats */
            events_emit(&r.ev, "batch_skipped", json_pack("{s:I}", "step", (json_int_t)step + 1));
            hb_client_event(hb, "batch_skipped", step + 1, "-");
        } else if ((rc = dp_step(&dp, o, step + 1, lr, optim_clip_coef(o, norm))) != GRIT_OK)
            goto out;
        double dt = now_seconds() - t0, ntok = (double)G * T;
        tokens_done += ntok;
        run_tokens += ntok;

        ckpt_result done;
        if (leader && r.ck_on && ckpt_async_poll(&r.ca, &done) &&
            (rc = report_save(&r, &done)) != GRIT_OK)
            goto out;
        double stall = -1;
        int due = r.ck_on &&
                  ((cfg->ckpt_interval_steps > 0 && (step + 1) % cfg->ckpt_interval_steps == 0) ||
                   (cfg->ckpt_interval_minutes > 0 &&
                    now_seconds() - last_save >= 60.0 * cfg->ckpt_interval_minutes) ||
                   step + 1 == o->total_steps);
        if (W > 1 && cfg->ckpt_interval_minutes > 0 && (rc = comm_bcast(d, &due, sizeof due, 0)) != GRIT_OK)
            goto out; /* time-based: rank 0's clock decides for all */
        if (due) {
            double t_wait = now_seconds();
            if ((rc = ckpt_checkpoint_gate(&r)) != GRIT_OK)
                goto out;
            double waited = now_seconds() - t_wait;
            ckpt_state st = {.step = step + 1, .tokens = tokens_done,
                             .next_sample = (step + 1) * G, .loss = loss,
                             .threads = cfg->threads, .world_size = W};
            memcpy(st.fingerprint, fp, sizeof st.fingerprint);
            if ((rc = ckpt_checkpoint_save(&r, &m, &dp, &st, &stall)) != GRIT_OK)
                goto out;
            stall += waited;
            r.last_stall = stall;
            r.stall_total += stall;
            last_save = now_seconds();
        }
        if (mf) {
            fprintf(mf,
                    "{\"step\":%ld,\"loss\":%.9g,\"grad_norm\":%.9g,\"lr\":%.9g,"
                    "\"tokens\":%.0f,\"tokens_per_s\":%.1f,\"step_time_s\":%.6f",
                    step + 1, loss, norm, lr, tokens_done, ntok / dt, dt);
            if (W > 1)
                fprintf(mf, ",\"comm_wait_s\":%.6f", dp.wait_s);
            if (stall >= 0)
                fprintf(mf, ",\"ckpt_stall_s\":%.6f", stall);
            if (data.mg)
                fprintf(mf, ",\"epochs\":%.6f", train_data_epochs(&data, (step + 1) * G));
            fputs("}\n", mf);
            fflush(mf);
            tb_train_step(tb, step + 1, loss, norm, lr, ntok / dt);
        }
        hb_client_step(hb, step + 1, loss * faults_spike(&fs, step + 1), norm, dt, dp.wait_s);
        faults_after_step(&fs, hb, step + 1, dt);
        if (step == start)
            first = loss;
        last = loss;
        minl = loss < minl ? loss : minl;
        if (log) {
            char text[160];
            snprintf(text, sizeof text, "loss %.4f | gnorm %.3f | lr %.2e | %.0f tok/s", loss,
                     norm, lr, ntok / dt);
            progress_update(&pr, step + 1, text);
        }
    }
    if (log)
        progress_finish(&pr);
    if (r.ca_on && (rc = ckpt_finish_parts(&r)) != GRIT_OK)
        goto out;
    if (leader && r.ck_on) {
        ckpt_result done;
        ckpt_async_wait(&r.ca);
        if (ckpt_async_poll(&r.ca, &done) && (rc = report_save(&r, &done)) != GRIT_OK)
            goto out;
    }
    double secs = now_seconds() - t_start;
    if (leader) {
        path_join(path, sizeof path, cfg->run_dir, "model.safetensors");
        if ((rc = train_save_weights(&m, path)) != GRIT_OK)
            goto out;
    }
    events_emit(&r.ev, "train_end", json_pack("{s:I,s:f}", "step", (json_int_t)step, "loss", last));
    long ran = step - start;
    if (log && ran > 0) {
        summary(log, &r, &m, ran, first, last, minl, secs, run_tokens);
        if (W > 1)
            fprintf(log, "  %-26s %d ranks%s; AdamW state %.1f MiB per rank; gradient "
                         "%s %.3f s blocking, %.3f s waited per step (%.0f%% hidden)\n\n",
                    "data parallel", W, dp.zero1 ? ", ZeRO-1" : "", dp_optim_bytes(&dp) / 1048576.0,
                    dp.zero1 ? "reduce-scatter" : "all-reduce", dp.ar_blocking_s,
                    wait_total / (double)ran,
                    fmax(0.0, 100.0 * (1.0 - wait_total / (double)ran / dp.ar_blocking_s)));
    }
    if (log && data.mg)
        fprintf(log, "data: %.4f epochs consumed\n", train_data_epochs(&data, step * G));
    if (res)
        *res = (train_result){step, last, secs, run_tokens / secs};
    hb_client_final(hb); /* the last second's energy, before the supervisor hears "done" */
    hb_client_event(hb, "done", step, "-");
out:
    hb_client_stop(hb);
    if (r.ca_on)
        ckpt_async_free(&r.ca);
    store_close(r.ck);
    tb_close(tb);
    if (mf && fclose(mf) != 0 && rc == GRIT_OK)
        rc = grit_errf(GRIT_EIO, "%s/metrics.jsonl: write failed", cfg->run_dir);
    events_close(&r.ev);
    train_data_close(&data);
    dp_free(&dp);
    free(tokens);
    gx_free(&m);
    return rc;
}
