/*
 * train.c - the training loop (see train.h): set up, then for each step feed the
 * data, forward/backward over the micro-batches, reduce the gradients, apply the
 * step policies (policy.h), update, checkpoint (saver.h) and report (emit.h).
 */
#include "train/train.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ckpt/safetensors.h"
#include "comm/grid.h"
#include "core/events.h"
#include "core/fault.h"
#include "core/fsutil.h"
#include "core/ompenv.h"
#include "core/progress.h"
#include "core/runlock.h"
#include "core/stopsig.h"
#include "model/tp.h"
#include "tensor/gemm_bf16.h"
#include "train/data.h"
#include "train/dp.h"
#include "train/emit.h"
#include "train/faults.h"
#include "train/optim.h"
#include "train/parallel.h"
#include "train/pipeline.h"
#include "train/policy.h"
#include "train/saver.h"
#include "train/validate.h"

/* minor page faults of this process so far (the step loop should add none: core/bigalloc.h) */
static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

double train_peak_rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

/* Writes the tensors (a table and its block) as safetensors, durably. */
/* bf16: each tensor rounded to nearest even (a copy; the weights stay F32). */
static grit_err save_block(const gx_tensor *tensors, int nt, const float *params,
                           const char *path, bool bf16out)
{
    st_entry *e = saver_entries(tensors, nt);
    size_t total = 0;
    for (int i = 0; i < nt; i++)
        total += tensors[i].numel;
    bf16 *h = bf16out ? malloc(sizeof(bf16) * (total ? total : 1)) : NULL;
    if (!e || (bf16out && !h)) {
        free(e);
        free(h);
        return grit_errf(GRIT_ENOMEM, "out of memory");
    }
    for (size_t i = 0, o = 0; i < (size_t)nt; i++) {
        const gx_tensor *t = &tensors[i];
        e[i].data = params + t->offset;
        if (bf16out) {
            e[i].dtype = "BF16";
            bf16_convert(h + o, params + t->offset, t->numel);
            e[i].data = h + o;
            o += t->numel;
        }
    }
    grit_err rc = st_write(path, e, nt);
    free(e);
    free(h);
    return rc;
}

const char *train_fail_cause(grit_err rc, const char *msg)
{
    if (rc == GRIT_ECONFIG)
        return "config";
    if (msg && (strstr(msg, "No space left on device") || strstr(msg, "Disk quota exceeded")))
        return "disk_full";
    if (rc == GRIT_EFORMAT)
        return "bad_input"; /* a data file or every checkpoint: unusable as it is */
    return NULL;
}

grit_err train_save_weights(const gx_model *m, const char *path)
{
    return save_block(m->tensors, m->num_tensors, m->params, path, false);
}

grit_err train_save_weights_bf16(const gx_model *m, const char *path)
{
    return save_block(m->tensors, m->num_tensors, m->params, path, true);
}

/* The model's hook for reductions over the TP group (model/tp.h). */
static int tp_reduce(void *ctx, float *buf, size_t n, int max)
{
    comm *c = ctx;
    return (max ? comm_allreduce_max(c, buf, n) : comm_allreduce_sum(c, buf, n)) != GRIT_OK;
}

/* Sequence parallelism's (model/tp.h): all-gather in place, reduce-scatter. */
static int tp_gather(void *ctx, float *buf, size_t n)
{
    return comm_allgather(ctx, buf, n) != GRIT_OK;
}

static int tp_scatter(void *ctx, const float *buf, float *out, size_t n)
{
    return comm_reduce_scatter_sum(ctx, buf, out, n) != GRIT_OK;
}

/* The pipeline's hook before a stage's last backward of the step: the data-parallel
 * reductions start during it, as dp_arm before the last micro-batch does without stages. */
static void pp_arm(void *ctx)
{
    dp_sync *dp = ctx;
    if (!dp->zero2) /* ZeRO-2 armed the whole step before the schedule */
        dp_arm(dp);
}

static void path_join(char *buf, size_t cap, const char *dir, const char *name)
{
    snprintf(buf, cap, "%s/%s", dir, name);
}

static void summary(FILE *log, const saver *r, const gx_model *m, long steps,
                    double first_loss, double last_loss, double min_loss, double secs,
                    double tokens, long faults_later)
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
    char omp[160];
    fprintf(log, "  %-26s %d, OpenMP waits: %s\n", "threads", cfg->threads,
            ompenv_describe(omp, sizeof omp));
    if (steps > 1)
        fprintf(log, "  %-26s %ld in %ld steps after the first\n", "minor page faults", faults_later,
                steps - 1);
    if (r->on)
        fprintf(log, "  %-26s %d saved, %d failed, stall %.3fs in all (%.2f%% of wall time)\n",
                "checkpoints", r->saves, r->failures, r->stall_total,
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

/* 1.0 when the grit launch that started this rank is gone or another owns its run
 * (asked at most once a second; why says which), else 0.0. */
static double orphaned(char *why, size_t cap)
{
    runlock_state st = runlock_env_owner(1.0, why, cap);
    return st == RUNLOCK_GONE || st == RUNLOCK_SUPERSEDED ? 1.0 : 0.0;
}

/* After the step at which every rank agreed to stop (a SIGTERM/SIGINT on any of them,
 * core/stopsig.h): a final checkpoint of that step unless one was started at it
 * (saved_now), checkpointing is off, or the last save's duration says it would not be
 * finished within GRIT_STOP_GRACE seconds (default 25) of the signal; rank 0 decides
 * for all. *saved: whether the step's checkpoint exists or is being committed. */
static grit_err stop_save(saver *sv, gx_model *m, dp_sync *dp, const ckpt_state *st,
                          bool saved_now, bool *saved)
{
    int save = 0;
    *saved = saved_now;
    if (!sv->on || saved_now)
        return GRIT_OK;
    if (sv->leader) {
        const char *g = getenv("GRIT_STOP_GRACE");
        double grace = g && *g ? atof(g) : 25.0, since = stopsig_when();
        double elapsed = since > 0 ? now_seconds() - since : 0.0;
        save = elapsed + sv->last_seconds <= grace;
        if (!save)
            fprintf(stderr, "grit train: no final checkpoint: the last save took %.1f s and "
                            "%.1f s of the %.1f s grace (GRIT_STOP_GRACE) are gone\n",
                    sv->last_seconds, elapsed, grace);
    }
    grit_err rc = sv->w->size > 1 ? comm_bcast(sv->w, &save, sizeof save, 0) : GRIT_OK;
    if (rc != GRIT_OK || !save)
        return rc;
    double stall;
    if ((rc = saver_save(sv, m, dp, st, &stall)) == GRIT_OK)
        *saved = true;
    return rc;
}

/* Rank 0: the run directory, its resolved config.json and events.jsonl. */
static grit_err open_run_dir(const train_cfg *cfg, events *ev)
{
    char path[1200];
    grit_err rc = fs_mkdirs(cfg->run_dir);
    if (rc != GRIT_OK)
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
    return events_open(ev, path);
}

/* The train_start event: where the run starts, and what readers of the run directory
 * need without parsing the training config (obs/view.c: FLOPs per token for MFU). */
static void emit_train_start(events *ev, const train_cfg *cfg, long start, const char *fp,
                             int world, bool zero1)
{
    const optim_cfg *o = &cfg->optim;
    const gx_config *mc = &cfg->model;
    json_t *f = json_pack("{s:I,s:i,s:s,s:i,s:b}", "step", (json_int_t)start, "total_steps",
                          o->total_steps, "fingerprint", fp, "world", world, "zero1", zero1);
    json_object_set_new(f, "flops_per_token", json_real(gx_flops_per_token(mc, o->seq_len)));
    json_object_set_new(f, "model",
                        json_pack("{s:s,s:i,s:i,s:i,s:i,s:i}", "preset", cfg->preset,
                                  "hidden_size", mc->hidden, "num_layers", mc->layers,
                                  "num_heads", mc->heads, "intermediate_size", mc->intermediate,
                                  "vocab_size", mc->vocab));
    json_object_set_new(f, "layout",
                        json_pack("{s:i,s:i,s:i,s:i,s:i,s:b}", "dp", world, "micro_batch",
                                  o->micro_batch, "grad_accum", o->grad_accum, "seq_len",
                                  o->seq_len, "threads", cfg->threads, "zero1", zero1));
    events_emit(ev, "train_start", f);
}

grit_err train_run(const train_cfg *cfg, comm *world, FILE *log, train_result *res)
{
    const optim_cfg *o = &cfg->optim;
    comm_grid grid = {0};
    int tp = cfg->tp > 0 ? cfg->tp : 1, pp = cfg->pp > 0 ? cfg->pp : 1;
    grit_err rc = train_parallel_check(cfg, world->size);
    if (rc != GRIT_OK)
        return rc;
    train_plan plan; /* the first lines of every run; refused before allocating */
    if ((rc = train_plan_make(cfg, world->size, train_ranks_here(world->size), &plan)) !=
        GRIT_OK)
        return rc;
    if (log && world->rank == 0)
        train_plan_print(&plan, cfg, log);
    if ((rc = train_plan_fits(&plan)) != GRIT_OK)
        return rc;
    if ((rc = comm_grid_init(&grid, world, tp, pp, train_parallel_dp(cfg, world->size))) !=
        GRIT_OK)
        return rc;
    /* d: the data-parallel group (the world itself without model parallelism) */
    bool mp = tp > 1 || pp > 1;
    comm *d = mp ? &grid.dpc : world;
    int B = o->micro_batch, T = o->seq_len, A = o->grad_accum, W = d->size;
    int leader = world->rank == 0;
    long G = (long)W * A * B; /* sequences per optimiser step, all replicas */
    char path[1200], fp[17], node[64];
    gx_model m;
    dp_sync dp = {0};
    pp_sched pps = {0};
    const int32_t **mb_tok = NULL;
    gx_batch *mb_sft = NULL;
    train_data data = {0};
    events ev = {0};
    saver sv = {0};
    emitter em = {0};
    policy pol = {0};
    validator val = {0};
    faults fs;
    int32_t *tokens = NULL, *seg = NULL;
    uint8_t *mask = NULL;
    long step_now = 0; /* the step the run is at, for a fatal event */
    log = leader ? log : NULL;
    memset(&m, 0, sizeof m);
    fault_set_rank(world->rank); /* rank-scoped injected faults (core/fault.h) */
    train_node_name(world->rank, node, sizeof node);
    if ((rc = faults_init(&fs, world->rank, node)) != GRIT_OK ||
        (rc = policy_init(&pol, getenv("GRIT_SKIP_STEPS"))) != GRIT_OK)
        goto out;

    omp_set_num_threads(cfg->threads);
    openblas_set_num_threads(cfg->threads);
    train_cfg_fingerprint(cfg, fp);

    if (leader && (rc = open_run_dir(cfg, &ev)) != GRIT_OK)
        goto out;
    if ((rc = comm_barrier(world)) != GRIT_OK) /* the run directory exists for everyone */
        goto out;
    /* the blocks ZeRO shards are never allocated whole (dp.h keeps the shards) */
    unsigned lean = W == 1 ? 0 /* "zero": 3 implies 2 implies 1 (parallel.c) */
                           : (o->zero1 ? GX_NO_OPTIM : 0) | (o->zero2 ? GX_NO_GRADS : 0) |
                                 (o->zero3 ? GX_NO_PARAMS : 0);
    lean |= cfg->sp ? GX_SEQ_PAR : 0;
    if ((rc = gx_init_stage_f(&m, &cfg->model, B, T, cfg->threads, tp, grid.tp_rank,
                              cfg->recompute, pp, grid.pp_rank, lean)) != GRIT_OK ||
        (rc = train_data_open(&data, cfg)) != GRIT_OK ||
        (rc = dp_init(&dp, d, &m, o->zero1, o->zero2, o->zero3)) != GRIT_OK ||
        (rc = saver_open(&sv, cfg, d, &ev, log)) != GRIT_OK ||
        (rc = validate_open(&val, cfg, &m, d->rank, W)) != GRIT_OK)
        goto out;
    if (tp > 1) {
        m.tp_reduce = tp_reduce;
        m.tp_gather = tp_gather;
        m.tp_scatter = tp_scatter;
        m.tp_ctx = &grid.tpc;
        dp_set_tp(&dp, &grid.tpc);
    }
    if (pp > 1) { /* the 1F1B schedule over the grad-accumulation micro-batches */
        dp_set_pp(&dp, &grid.ppc);
        validate_set_pp(&val, &grid.ppc);
        if ((rc = pp_init(&pps, &grid.ppc, &m, A)) != GRIT_OK)
            goto out;
        pps.before_last_bwd = pp_arm;
        pps.ctx = &dp;
        mb_tok = calloc((size_t)A, sizeof *mb_tok);
        mb_sft = calloc((size_t)A, sizeof *mb_sft);
        if (!mb_tok || !mb_sft) {
            rc = grit_errf(GRIT_ENOMEM, "out of memory");
            goto out;
        }
    }
    if (mp && (rc = saver_set_mp(&sv, world, &grid.tpc, &grid.ppc, &m)) != GRIT_OK)
        goto out;
    if (cfg->precision != GX_FP32) {
        const char *note;
        if ((rc = gx_set_precision(&m, cfg->precision, &note)) != GRIT_OK)
            goto out;
        if (leader && !strncmp(note, "warning:", 8)) /* a CPU without AVX512-BF16: say so */
            fprintf(stderr, "grit train: %s\n", note);
        else if (log)
            fprintf(log, "grit train: %s\n", note);
    }
    long start;
    double tokens_done;
    bool loaded;
    if ((rc = saver_restore(&sv, &m, &dp, fp, &start, &tokens_done, &loaded)) != GRIT_OK)
        goto out;
    if (!loaded)
        dp_init_weights(&dp, cfg->seed);
    if ((rc = dp_shard_params(&dp)) != GRIT_OK) /* ZeRO-3: from here on a shard */
        goto out;
    if ((rc = saver_start(&sv, &m, &dp, now_seconds())) != GRIT_OK)
        goto out;
    tokens = malloc(sizeof(int32_t) * (size_t)A * B * (T + 1));
    if (data.sft) { /* SFT rows: loss mask and packed-example starts (data/sft.h) */
        mask = malloc((size_t)A * B * (T + 1));
        seg = malloc(sizeof(int32_t) * (size_t)A * B * T);
    }
    if (!tokens || (data.sft && (!mask || !seg))) {
        rc = grit_errf(GRIT_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = emit_open(&em, cfg->run_dir, leader, start, log)) != GRIT_OK)
        goto out;
    emit_train_start(&ev, cfg, start, fp, W, dp.zero1);
    if (log)
        fprintf(log, "grit train: %s, %.2fM params, %d layers, %d rank%s x micro batch %d x %d "
                     "tokens x accum %d, %d steps, %d threads/rank, activations %.1f KiB/token%s\n",
                cfg->preset[0] ? cfg->preset : "custom model", (double)m.num_params / 1e6,
                cfg->model.layers, W, W > 1 ? "s" : "", B, T, A, o->total_steps, cfg->threads,
                (double)gx_act_bytes_layout(&cfg->model, 1, cfg->recompute) / 1024.0,
                dp.zero3 ? ", ZeRO-3" : dp.zero2 ? ", ZeRO-2" : dp.zero1 ? ", ZeRO-1" : "");
    if (log && mp)
        fprintf(log, "grit train: tensor parallel %d x pipeline %d x data parallel %d: %.2fM "
                     "params on rank 0, activations %.1f KiB/token per rank\n",
                tp, pp, W, (double)m.num_params / 1e6,
                (double)gx_act_bytes_sp(&cfg->model, tp, cfg->recompute, cfg->sp) / 1024.0 / pp);
    if (log && m.vpieces > 1)
        fprintf(log, "grit train: ZeRO-%d: the vocabulary tensors in %d pieces of %d rows (a "
                     "window holds one: no larger than a layer's bucket)\n",
                dp.zero3 ? 3 : 2, m.vpieces, m.vrows);
    if (log && dp.zero1) { /* as allocated; one rank without ZeRO holds 16 bytes a parameter */
        double held = (double)dp_state_bytes(&dp), one = 16.0 * (double)m.num_params;
        fprintf(log, "grit train: weights, gradients and AdamW state on rank 0: %.1f MiB (%.1f%% "
                     "of the %.1f MiB one rank holds without ZeRO)\n",
                held / 1048576.0, 100.0 * held / one, one / 1048576.0);
    }
    if (log && pp > 1)
        fprintf(log, "grit train: pipeline bubble %.0f%% (%d stages, %d micro-batches per "
                     "step)\n", 100.0 * pp_bubble(pp, A), pp, A);

    emit_heartbeat_start(&em, world->rank, node, world->local_rank == 0); /* one meter per machine */
    if (world->rank == 0) { /* the grid, for a supervisor that shrinks by whole replicas */
        char lay[64];
        snprintf(lay, sizeof lay, "tp=%d,pp=%d,dp=%d", tp, pp, W);
        emit_worker_event(&em, "layout", start, lay);
    }
    progress pr;
    progress_init(&pr, log ? log : stderr, o->total_steps, cfg->log_every);
    double t_start = now_seconds(), first = NAN, last = NAN, minl = INFINITY;
    double run_tokens = 0, wait_total = 0;
    long step, faults0 = 0;
    bool stop = false, stop_saved = false;
    char orphan_why[400] = "";
    for (step = start; step < o->total_steps; step++) {
        unsigned long long dp_b0 = d->bytes, tp_b0 = tp > 1 ? grid.tpc.bytes : 0;
        if (step == start + 1)
            faults0 = minor_faults(); /* the first step may still fault (thread stacks, BLAS) */
        double t0 = now_seconds();
        step_now = step;
        long sample0 = step * G + (long)d->rank * A * B; /* this replica's slice */
        if ((rc = data.sft ? train_data_fill_sft(&data, sample0, A * B, T + 1, tokens, mask, seg)
                           : train_data_fill(&data, sample0, A * B, T + 1, tokens)) != GRIT_OK ||
            (rc = dp_set_tokens(&dp, tokens, (size_t)A * B * (T + 1))) != GRIT_OK)
            goto out;
        /* SFT: the loss is the mean over every counted target of the global batch
         * (all micro-batches, all ranks), so each rank needs the global count first */
        double counted = 0.0;
        if (data.sft) {
            for (long i = 0; i < (long)A * B; i++)
                for (int t = 1; t <= T; t++)
                    counted += mask[i * (T + 1) + t] != 0;
            if (W > 1 && (rc = comm_allreduce_sum_f64(d, &counted, 1)) != GRIT_OK)
                goto out;
        }
        gx_zero_grad(&m);
        double loss = 0.0;
        if (pp > 1) { /* every stage of a replica has the same micro-batches */
            for (int a = 0; a < A; a++) {
                mb_tok[a] = tokens + (size_t)a * B * (T + 1);
                if (data.sft)
                    mb_sft[a] = (gx_batch){.mask = mask + (size_t)a * B * (T + 1),
                                           .seg = seg + (size_t)a * B * T, .denom = counted};
            }
            if (dp.zero2)
                dp_arm(&dp);
            if ((rc = pp_step(&pps, mb_tok, data.sft ? mb_sft : NULL,
                              data.sft ? 1.0f : 1.0f / (float)(A * W), &loss)) != GRIT_OK)
                goto out;
        }
        for (int a = 0; pp == 1 && a < A; a++) {
            if (a == (dp.zero2 ? 0 : A - 1)) /* ZeRO-2 reduces every micro-batch */
                dp_arm(&dp);
            const int32_t *ta = tokens + (size_t)a * B * (T + 1);
            if (data.sft) {
                gx_batch sb = {.mask = mask + (size_t)a * B * (T + 1),
                               .seg = seg + (size_t)a * B * T, .denom = counted};
                loss += gx_step_ex(&m, ta, &sb, 1.0f, NULL);
            } else
                loss += gx_step(&m, ta, 1.0f / (float)(A * W), NULL);
        }
        if (!data.sft)
            loss /= A;
        if ((rc = m.gemm_err) != GRIT_OK) /* a bf16 GEMM failed: its message is set */
            goto out;
        faults_slow_compute(&fs, now_seconds() - t0);
        /* the loss sum also counts the ranks whose checkpoint part is written, and those
         * asked to stop (a signal reaches ranks at different steps: all stop at the same) */
        /* ... and the ranks whose supervisor is gone (core/runlock.h): all stop together */
        double norm, red[4] = {loss, saver_part_written(&sv), stopsig_pending() ? 1.0 : 0.0,
                               orphaned(orphan_why, sizeof orphan_why)};
        if ((rc = dp_finish_grads(&dp, &norm)) != GRIT_OK ||
            /* under TP and PP the flags (and the parts written) go round those groups
             * first: TP x PP x DP is the world */
            (tp > 1 && (rc = comm_allreduce_sum_f64(&grid.tpc, red + 1, 3)) != GRIT_OK) ||
            (pp > 1 && (rc = comm_allreduce_sum_f64(&grid.ppc, red + 1, 3)) != GRIT_OK) ||
            (rc = comm_allreduce_sum_f64(d, red, W > 1 ? 4 : 1)) != GRIT_OK)
            goto out;
        if (red[3] > 0) { /* no checkpoint: the run is not this job's any more */
            rc = grit_errf(GRIT_EIO, "stopping at step %ld without a checkpoint: %s", step + 1,
                           orphan_why[0] ? orphan_why
                                         : "another rank's supervisor is gone (GRIT_SUP_LOCK)");
            goto out;
        }
        loss = data.sft ? red[0] : red[0] / W; /* SFT: each rank sent its share of the mean */
        stop = red[2] > 0 && step + 1 < o->total_steps; /* the last step just finishes */
        if ((rc = saver_parts_agreed(&sv, red[1])) != GRIT_OK)
            goto out;
        wait_total += dp.wait_s;
        if (faults_nan_at(&fs, step + 1))
            loss = NAN;
        if ((rc = policy_guard(&em, &ev, step + 1, loss, norm)) != GRIT_OK)
            goto out;
        double lr = optim_lr(o, step);
        if (!policy_skip(&pol, &em, &ev, step + 1) &&
            (rc = dp_step(&dp, o, step + 1, lr, optim_clip_coef(o, norm))) != GRIT_OK)
            goto out;
        double dt = now_seconds() - t0, ntok = (double)G * T;
        tokens_done += ntok;
        run_tokens += ntok;

        double stall = -1;
        int due;
        if ((rc = saver_poll(&sv)) != GRIT_OK || (rc = saver_due(&sv, step + 1, &due)) != GRIT_OK)
            goto out;
        ckpt_state st = {.step = step + 1, .tokens = tokens_done, .next_sample = (step + 1) * G,
                         .loss = loss, .threads = cfg->threads, .world_size = W};
        memcpy(st.fingerprint, fp, sizeof st.fingerprint);
        if (due && (rc = saver_save(&sv, &m, &dp, &st, &stall)) != GRIT_OK)
            goto out;
        if (stop && (rc = stop_save(&sv, &m, &dp, &st, due, &stop_saved)) != GRIT_OK)
            goto out;
        /* after the update: the held-out loss of the weights this step produced */
        double vloss = NAN, vppl = NAN;
        if (validate_due(&val, step + 1, due)) {
            dp_forward_begin(&dp); /* ZeRO-3: the forward gathers each bucket's weights */
            rc = validate_run(&val, d, &vloss, &vppl);
            grit_err frc = dp_forward_end(&dp);
            if ((rc = rc != GRIT_OK ? rc : frc) != GRIT_OK)
                goto out;
        }
        emit_metrics(&em, &(emit_row){.has_val = !isnan(vloss), .val_loss = vloss,
                                      .val_ppl = vppl, .step = step + 1, .loss = loss, .grad_norm = norm,
                                      .lr = lr, .tokens = tokens_done, .tokens_per_s = ntok / dt,
                                      .step_time_s = dt, .comm_wait_s = W > 1 ? dp.wait_s : -1,
                                      .ckpt_stall_s = stall,
                                      .dp_bytes = W > 1 ? (double)(d->bytes - dp_b0) : -1,
                                      .tp_bytes = tp > 1 ? (double)(grid.tpc.bytes - tp_b0) : -1,
                                      .pp_bytes = pp > 1 ? (double)pps.bytes : -1,
                                      .pp_wait_s = pp > 1 ? pps.wait_s : -1,
                                      .epochs = data.mg || data.sft ? train_data_epochs(&data, (step + 1) * G)
                                                        : -1});
        emit_beat(&em, step + 1, loss * faults_spike(&fs, "spike", step + 1), norm, dt, dp.wait_s);
        if (!isnan(vloss) && leader) { /* the supervisor flags a validation spike */
            char vd[64];
            snprintf(vd, sizeof vd, "loss=%.9g", vloss * faults_spike(&fs, "val_spike", step + 1));
            emit_worker_event(&em, "validation", step + 1, vd);
        }
        faults_after_step(&fs, emit_hb(&em), step + 1, dt);
        if (step == start)
            first = loss;
        last = loss;
        minl = loss < minl ? loss : minl;
        if (log) {
            char text[160];
            int at = snprintf(text, sizeof text, "loss %.4f | gnorm %.3f | lr %.2e | %.0f tok/s",
                              loss, norm, lr, ntok / dt);
            if (!isnan(vloss))
                snprintf(text + at, sizeof text - (size_t)at, " | val %.4f", vloss);
            progress_update(&pr, step + 1, text);
        }
        if (stop) {
            step++; /* this step is done: the run stops after it */
            break;
        }
    }
    long faults_later = step > start + 1 ? minor_faults() - faults0 : 0;
    if (log)
        progress_finish(&pr);
    if ((rc = saver_finish(&sv)) != GRIT_OK)
        goto out;
    double secs = now_seconds() - t_start;
    if (stop) { /* a graceful stop: no final weights, the run resumes from the checkpoint */
        int sig = stopsig_pending() ? stopsig_pending() : 15; /* 15: SIGTERM on another rank */
        /* no rank exits before rank 0 has committed (a launcher ends a job whose rank
         * exits non-zero) */
        if ((rc = comm_barrier(world)) != GRIT_OK)
            goto out;
        events_emit(&ev, "train_stopped",
                    json_pack("{s:I,s:i,s:I,s:f}", "step", (json_int_t)step, "signal", sig,
                              "checkpoint_step", (json_int_t)(stop_saved ? step : -1),
                              "seconds", secs));
        emit_worker_event(&em, "stopped", step, stop_saved ? "saved" : "unsaved");
        if (log)
            fprintf(log, "grit train: stopped by a signal after step %ld; %s\n", step,
                    stop_saved ? "checkpoint saved at this step" : "no checkpoint at this step");
        if (res)
            *res = (train_result){step, last, secs, run_tokens / secs, sig};
        goto out;
    }
    gx_release_step(&m); /* the gathers below then never add to the training peak */
    path_join(path, sizeof path, cfg->run_dir, "model.safetensors");
    if (mp || dp.zero3) { /* whole tensors, one at a time, written by the leader */
        if ((rc = saver_write_weights(&sv, &m, &dp, path)) != GRIT_OK)
            goto out;
    } else if (leader && (rc = train_save_weights(&m, path)) != GRIT_OK)
        goto out;
    events_emit(&ev, "train_end", json_pack("{s:I,s:f}", "step", (json_int_t)step, "loss", last));
    long ran = step - start;
    if (log && ran > 0) {
        summary(log, &sv, &m, ran, first, last, minl, secs, run_tokens, faults_later);
        if (W > 1)
            fprintf(log, "  %-26s %d ranks%s; AdamW state %.1f MiB per rank; gradient "
                         "%s %.3f s blocking, %.3f s waited per step (%.0f%% hidden)\n\n",
                    "data parallel", W,
                    dp.zero3 ? ", ZeRO-3" : dp.zero2 ? ", ZeRO-2" : dp.zero1 ? ", ZeRO-1" : "",
                    dp_optim_bytes(&dp) / 1048576.0,
                    dp.zero1 ? "reduce-scatter" : "all-reduce", dp.ar_blocking_s,
                    wait_total / (double)ran,
                    fmax(0.0, 100.0 * (1.0 - wait_total / (double)ran / dp.ar_blocking_s)));
    }
    if (log && (data.mg || data.sft))
        fprintf(log, "data: %.4f epochs consumed\n", train_data_epochs(&data, step * G));
    if (res)
        *res = (train_result){step, last, secs, run_tokens / secs, 0};
    emit_done(&em, step);
out:;
    const char *cause = rc != GRIT_OK ? train_fail_cause(rc, grit_errmsg()) : NULL;
    if (cause) { /* a retry would fail the same way: say so before the process ends */
        char msg[400];
        snprintf(msg, sizeof msg, "%s", grit_errmsg());
        emit_worker_event(&em, "fatal", step_now, cause);
        events_emit(&ev, "train_failed", json_pack("{s:s,s:s,s:b}", "cause", cause, "error", msg,
                                                   "retry", 0));
        grit_errf(rc, "%s", msg); /* the caller reports this one */
    }
    grit_err erc = emit_close(&em);
    if (rc == GRIT_OK)
        rc = erc;
    saver_close(&sv);
    events_close(&ev);
    train_data_close(&data);
    dp_free(&dp);
    pp_free(&pps);
    free(mb_tok);
    free(mb_sft);
    policy_free(&pol);
    validate_close(&val);
    free(tokens);
    free(mask);
    free(seg);
    gx_free(&m);
    comm_grid_free(&grid);
    return rc;
}
