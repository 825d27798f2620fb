/* emit.c - metrics.jsonl, TensorBoard and heartbeats of a training run (see emit.h). */
#include "train/emit.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/fsutil.h"

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

grit_err emit_open(emitter *e, const char *run_dir, bool leader, long start, FILE *log)
{
    memset(e, 0, sizeof *e);
    snprintf(e->run_dir, sizeof e->run_dir, "%s", run_dir);
    if (!leader)
        return GRIT_OK;
    char path[1200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
    grit_err rc;
    if (start > 0 && (rc = truncate_metrics(path, start)) != GRIT_OK)
        return rc;
    if (!(e->mf = fopen(path, start > 0 ? "a" : "w")))
        return grit_errf(GRIT_EIO, "%s: cannot create", path);
    snprintf(path, sizeof path, "%s/tb", run_dir);
    if (tb_open(path, &e->tb) != GRIT_OK && log) /* training goes on without it */
        fprintf(log, "grit train: no TensorBoard log: %s\n", grit_errmsg());
    return GRIT_OK;
}

/* The heartbeat thread's sampler: one meter sample, then its totals. */
static void sample_energy(void *ctx, hb_energy *out)
{
    obs_meter *m = ctx;
    obs_energy en;
    obs_meter_sample(m, 0, NULL);
    obs_meter_read(m, &en);
    *out = (hb_energy){.joules = en.joules, .watts = en.watts, .sources = en.sources,
                       .gpus = en.gpus};
}

_Static_assert(OBS_SRC_RAPL == HB_ESRC_RAPL && OBS_SRC_NVML == HB_ESRC_NVML,
               "the meter's source bits are the protocol's esrc bits");

void emit_heartbeat_start(emitter *e, int rank, const char *node, bool measure)
{
    char host[64];
    obs_host_id(host, sizeof host);
    /* one rank per machine measures its energy for the supervisor; the supervisor also
     * counts each machine once, by boot_id, should two of them do it */
    e->meter = measure ? obs_meter_open(NULL, NULL) : NULL; /* out of memory: no energy */
    hb_client_opts o = {.rank = rank, .node = node, .period = 1.0, .host = host,
                        .sample = e->meter ? sample_energy : NULL, .sample_ctx = e->meter,
                        .net = measure, .gpu = measure};
    e->hb = hb_client_start(&o); /* NULL unless supervised */
    if (!e->hb) {
        obs_meter_close(e->meter);
        e->meter = NULL;
    }
}

void emit_metrics(emitter *e, const emit_row *r)
{
    if (!e->mf)
        return;
    fprintf(e->mf,
            "{\"step\":%ld,\"loss\":%.9g,\"grad_norm\":%.9g,\"lr\":%.9g,"
            "\"tokens\":%.0f,\"tokens_per_s\":%.1f,\"step_time_s\":%.6f",
            r->step, r->loss, r->grad_norm, r->lr, r->tokens, r->tokens_per_s, r->step_time_s);
    if (r->comm_wait_s >= 0)
        fprintf(e->mf, ",\"comm_wait_s\":%.6f", r->comm_wait_s);
    if (r->ckpt_stall_s >= 0)
        fprintf(e->mf, ",\"ckpt_stall_s\":%.6f", r->ckpt_stall_s);
    if (r->dp_bytes >= 0)
        fprintf(e->mf, ",\"dp_bytes\":%.0f", r->dp_bytes);
    if (r->tp_bytes >= 0)
        fprintf(e->mf, ",\"tp_bytes\":%.0f", r->tp_bytes);
    if (r->pp_bytes >= 0)
        fprintf(e->mf, ",\"pp_bytes\":%.0f,\"pp_wait_s\":%.6f", r->pp_bytes, r->pp_wait_s);
    if (r->epochs >= 0)
        fprintf(e->mf, ",\"epochs\":%.6f", r->epochs);
    if (r->has_val)
        fprintf(e->mf, ",\"val_loss\":%.9g,\"val_ppl\":%.9g", r->val_loss, r->val_ppl);
    fputs("}\n", e->mf);
    fflush(e->mf);
    tb_train_step(e->tb, r->step, r->loss, r->grad_norm, r->lr, r->tokens_per_s);
    if (r->has_val && e->tb) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts); /* TensorBoard's wall_time: Unix seconds */
        double now = (double)ts.tv_sec + ts.tv_nsec / 1e9;
        char a[32], b[32]; /* the values metrics.jsonl holds, to the bit */
        snprintf(a, sizeof a, "%.9g", r->val_loss);
        snprintf(b, sizeof b, "%.9g", r->val_ppl);
        tb_scalar(e->tb, "val/loss", r->step, now, (float)strtod(a, NULL));
        tb_scalar(e->tb, "val/perplexity", r->step, now, (float)strtod(b, NULL));
        tb_flush(e->tb);
    }
}

void emit_beat(emitter *e, long step, double loss, double grad_norm, double step_time,
               double comm_time)
{
    hb_client_step(e->hb, step, loss, grad_norm, step_time, comm_time);
}

void emit_worker_event(emitter *e, const char *kind, long step, const char *detail)
{
    hb_client_event(e->hb, kind, step, detail);
}

void emit_done(emitter *e, long step)
{
    hb_client_final(e->hb); /* the last second's energy, before the supervisor hears "done" */
    hb_client_event(e->hb, "done", step, "-");
}

hb_client *emit_hb(emitter *e)
{
    return e->hb;
}

grit_err emit_close(emitter *e)
{
    grit_err rc = GRIT_OK;
    hb_client_stop(e->hb); /* joins the thread that samples the meter */
    obs_meter_close(e->meter);
    tb_close(e->tb);
    if (e->mf && fclose(e->mf) != 0)
        rc = grit_errf(GRIT_EIO, "%s/metrics.jsonl: write failed", e->run_dir);
    memset(e, 0, sizeof *e);
    return rc;
}
