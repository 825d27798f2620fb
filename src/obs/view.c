/*
 * view.c - the run view (obs_view): one JSON object built from the run
 * directory's files, which the dashboard draws, /metrics exposes and the
 * launch summary prints. Readers tolerate a torn last line (a crash, or a
 * line being written right now): a line that does not parse is skipped.
 *
 * Derived figures (docs/formats.md, "dashboard API"):
 *   wall_s       first launch (as the supervisor's summary counts it; else
 *                train_start) to done/gave_up, else now
 *   productive_s sum of metrics.jsonl step_time_s (the kept steps); goodput = productive/wall
 *   lost_s       wall - productive (restarts, recomputed steps, detection, diagnosis)
 *   node_hours   (nodes + spares) x wall: every allocated node is paid for
 *   energy       measured (nodes.json: RAPL package + NVML GPU energy summed over the
 *                hosts the workers measured, or the supervisor's machine; live.c) when
 *                available, plus node_watts x wall for each allocated node not on a
 *                measured host (nodes_measured; spares, nodes without counters); else
 *                node_watts x allocated x wall. energy_source names it: "RAPL + NVML
 *                (4 GPUs)", "RAPL + configured", "configured", "unknown"; energy_hosts
 *                counts the machines measured, the view's "energy_hosts" lists them
 *   cost         node_hours x price; failure_cost = lost_s x allocated x price / 3600
 *   co2_kg       energy_kwh x grid_gco2_kwh / 1000
 *   mfu          tokens_per_s x FLOPs per token / (active nodes x peak_tflops x 1e12);
 *                FLOPs per token from the trainer's train_start event, or for a run
 *                from before grit recorded it there, from config.json's model shape
 *                (model/gptneox.h); summary.flops_per_token_from says which
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/fsutil.h"
#include "model/gptneox.h"
#include "obs/obs.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* Calls fn on each parsed line of a JSONL file; 0 when the file is missing. */
static int each_line(const char *path, void (*fn)(json_t *o, void *ctx), void *ctx)
{
    char *text = NULL;
    if (fs_read_all(path, &text, NULL) != GRIT_OK)
        return 0;
    for (char *p = text, *nl; *p; p = nl + 1) {
        nl = strchr(p, '\n');
        if (!nl)
            break; /* torn or unfinished last line */
        *nl = '\0';
        json_t *o = json_loads(p, 0, NULL);
        if (json_is_object(o))
            fn(o, ctx);
        json_decref(o);
    }
    free(text);
    return 1;
}

static double num(const json_t *o, const char *k, double dflt)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

static const char *str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* --- metrics.jsonl, read incrementally ------------------------------------------------
 *
 * A scrape every few seconds must not re-parse a long run's whole file: the last file
 * read is cached as numeric rows with the byte offset after its last complete line, and
 * a later call parses only what was appended. The cache is dropped when the file is
 * another one (path or inode: a resumed trainer rewrites it durably, which is a new
 * inode), shorter than the offset, or its bytes just before the offset changed. */

enum { C_STEP, C_LOSS, C_GNORM, C_LR, C_TOKENS, C_TPS, C_STEPT, C_STALL, C_VLOSS, NCOL };
static const char *const col_keys[NCOL] = {"step",         "loss",        "grad_norm",
                                           "lr",           "tokens",      "tokens_per_s",
                                           "step_time_s",  "ckpt_stall_s", "val_loss"};

typedef struct mcache {
    char path[1200];
    dev_t dev;
    ino_t ino;
    off_t off;          /* after the last complete line parsed */
    char tail[64];      /* the bytes before off, to notice a rewrite */
    size_t ntail;
    double (*rows)[NCOL];
    size_t n, cap;
    double productive, stall;
} mcache;

static mcache mc;
static pthread_mutex_t mc_mu = PTHREAD_MUTEX_INITIALIZER;

static void mc_reset(void)
{
    free(mc.rows);
    memset(&mc, 0, sizeof mc);
}

static int mc_parse_line(char *line)
{
    json_t *o = json_loads(line, 0, NULL);
    if (!json_is_object(o) || !json_is_number(json_object_get(o, "step"))) {
        json_decref(o);
        return 0;
    }
    if (mc.n == mc.cap) {
        size_t cap = mc.cap ? mc.cap * 2 : 1024;
        void *p = realloc(mc.rows, cap * sizeof *mc.rows);
        if (!p) {
            json_decref(o);
            return -1;
        }
        mc.rows = p;
        mc.cap = cap;
    }
    for (int k = 0; k < NCOL; k++)
        mc.rows[mc.n][k] = num(o, col_keys[k], NAN);
    mc.productive += num(o, "step_time_s", 0);
    mc.stall += num(o, "ckpt_stall_s", 0);
    mc.n++;
    json_decref(o);
    return 0;
}

/* Brings the cache up to date with path; 0 when the file is missing, -1 out of memory.
 * Call with mc_mu held. */
static int mc_update(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0)
            close(fd);
        mc_reset();
        return 0;
    }
    char tail[64];
    int same = !strcmp(mc.path, path) && mc.dev == st.st_dev && mc.ino == st.st_ino &&
               st.st_size >= mc.off &&
               (mc.ntail == 0 || (pread(fd, tail, mc.ntail, mc.off - (off_t)mc.ntail) == (ssize_t)mc.ntail &&
                                  !memcmp(tail, mc.tail, mc.ntail)));
    if (!same) {
        mc_reset();
        snprintf(mc.path, sizeof mc.path, "%s", path);
        mc.dev = st.st_dev;
        mc.ino = st.st_ino;
    }
    size_t len = (size_t)(st.st_size - mc.off);
    char *buf = len ? malloc(len + 1) : NULL;
    ssize_t got = buf ? pread(fd, buf, len, mc.off) : 0;
    int rc = len && !buf ? -1 : 1;
    if (got > 0) {
        buf[got] = '\0';
        char *p = buf, *nl;
        while ((nl = memchr(p, '\n', (size_t)(buf + got - p)))) { /* a torn last line waits */
            *nl = '\0';
            if (mc_parse_line(p) < 0) {
                rc = -1;
                break;
            }
            p = nl + 1;
        }
        mc.off += p - buf;
        mc.ntail = mc.off < (off_t)sizeof mc.tail ? (size_t)mc.off : sizeof mc.tail;
        if (pread(fd, mc.tail, mc.ntail, mc.off - (off_t)mc.ntail) != (ssize_t)mc.ntail)
            mc.ntail = 0;
    }
    free(buf);
    close(fd);
    return rc;
}

/* --- events.jsonl ------------------------------------------------------------------ */

typedef struct evstate {
    json_t *incidents, *restarts, *ckpts, *loads;
    json_t *ckfails; /* failed saves and checkpoints rejected at a resume (fallbacks) */
    double t0, t_end, t_train0, t_launch0;
    double done_goodput;
    double fpt; /* FLOPs per token of the latest train_start; 0: not recorded */
    int nodes, spares, launches, ended, gave_up;
    char state[32], gave_up_reason[300];
} evstate;

static void on_event(json_t *o, void *ctx)
{
    evstate *e = ctx;
    const char *name = str(o, "event");
    double ts = num(o, "ts", 0);
    if (!strcmp(name, "supervisor_start")) {
        if (e->t0 == 0)
            e->t0 = ts;
        e->nodes = (int)num(o, "nodes", e->nodes);
        e->spares = (int)num(o, "spares", e->spares);
    } else if (!strcmp(name, "train_start")) {
        if (e->t_train0 == 0)
            e->t_train0 = ts;
        double f = num(o, "flops_per_token", 0);
        if (isfinite(f) && f > 0)
            e->fpt = f;
    } else if (!strcmp(name, "launch")) {
        if (e->launches++ == 0)
            e->t_launch0 = ts;
    } else if (!strcmp(name, "state")) {
        snprintf(e->state, sizeof e->state, "%s", str(o, "to"));
    } else if (!strcmp(name, "detected")) {
        double lat = num(o, "latency_s", -1);
        json_array_append_new(
            e->incidents,
            json_pack("{s:s,s:s,s:s,s:f,s:f,s:f,s:o,s:[],s:[]}", "kind", str(o, "kind"), "node",
                      str(o, "node"), "detail", str(o, "detail"), "step", num(o, "step", 0),
                      "detect_ts", ts, "fault_ts", lat >= 0 ? ts - lat : 0.0, "recovered",
                      json_null(), "diagnosis", "cordoned"));
    } else if (!strcmp(name, "diagnosis") || !strcmp(name, "cordon")) {
        size_t n = json_array_size(e->incidents);
        if (n) {
            json_t *in = json_array_get(e->incidents, n - 1);
            json_t *d = json_pack("{s:s,s:s,s:f}", "node", str(o, "node"), "detail",
                                  !strcmp(name, "cordon") ? str(o, "reason") : str(o, "detail"),
                                  "ts", ts);
            if (!strcmp(name, "diagnosis")) {
                json_object_set_new(d, "verdict", json_string(str(o, "verdict")));
                json_array_append_new(json_object_get(in, "diagnosis"), d);
            } else {
                json_object_set_new(d, "replacement", json_string(str(o, "replacement")));
                json_array_append_new(json_object_get(in, "cordoned"), d);
            }
        }
    } else if (!strcmp(name, "recovered")) {
        size_t n = json_array_size(e->incidents);
        if (n)
            json_object_set_new(json_array_get(e->incidents, n - 1), "recovered",
                                json_pack("{s:f,s:f,s:f,s:f}", "ts", ts, "resumed_at_step",
                                          num(o, "resumed_at_step", 0), "recovery_s",
                                          num(o, "recovery_s", 0), "steps_lost",
                                          num(o, "steps_lost", 0)));
    } else if (!strcmp(name, "resume")) {
        json_array_append_new(e->restarts, json_pack("{s:f,s:f}", "step", num(o, "step", 0),
                                                     "ts", ts));
        if (json_is_number(json_object_get(o, "seconds")))
            json_array_append_new(e->loads, json_pack("{s:f,s:f}", "step", num(o, "step", 0),
                                                      "seconds", num(o, "seconds", 0)));
    } else if (!strcmp(name, "ckpt_saved")) {
        size_t i; /* a step saved again after a rollback: the later save counts */
        json_t *c;
        json_array_foreach(e->ckpts, i, c) if (num(c, "step", -1) == num(o, "step", -2))
        {
            json_array_remove(e->ckpts, i);
            break;
        }
        json_array_append_new(e->ckpts,
                              json_pack("{s:f,s:f,s:f,s:f,s:f,s:f}", "step", num(o, "step", 0),
                                        "bytes", num(o, "bytes", 0), "seconds",
                                        num(o, "seconds", 0), "stall_s", num(o, "stall_s", 0),
                                        "gb_per_s", num(o, "gb_per_s", 0), "ts", ts));
    } else if (!strcmp(name, "ckpt_failed")) {
        json_array_append_new(e->ckfails, json_pack("{s:s,s:f,s:s,s:f}", "kind", "save_failed",
                                                     "step", num(o, "step", 0), "detail",
                                                     str(o, "error"), "ts", ts));
    } else if (!strcmp(name, "ckpt_rejected") || !strcmp(name, "ckpt_local_rejected")) {
        char what[400];
        snprintf(what, sizeof what, "%s: %s", str(o, "dir"), str(o, "reason"));
        json_array_append_new(e->ckfails,
                              json_pack("{s:s,s:n,s:s,s:f}", "kind",
                                        !strcmp(name, "ckpt_rejected") ? "fallback" : "local_copy_rejected",
                                        "step", "detail", what, "ts", ts));
    } else if (!strcmp(name, "done") || !strcmp(name, "gave_up_summary")) {
        e->ended = 1;
        e->t_end = ts;
        e->gave_up = !strcmp(name, "gave_up_summary");
    } else if (!strcmp(name, "gave_up")) {
        snprintf(e->gave_up_reason, sizeof e->gave_up_reason, "%s", str(o, "reason"));
    } else if (!strcmp(name, "train_end") && e->nodes == 0) {
        e->ended = 1; /* a plain grit train run (no supervisor) */
        e->t_end = ts;
    }
}

/* Present checkpoints: complete step_N folders under ckpt/ (a .tmp is unfinished). */
static void mark_present(const char *run_dir, json_t *ckpts)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/ckpt", run_dir);
    DIR *d = opendir(path);
    size_t i;
    json_t *c;
    json_array_foreach(ckpts, i, c) json_object_set_new(c, "present", json_false());
    if (!d)
        return;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        long step;
        char extra;
        if (sscanf(ent->d_name, "step_%ld%c", &step, &extra) != 1)
            continue;
        int found = 0;
        json_array_foreach(ckpts, i, c) if ((long)num(c, "step", -1) == step)
        {
            json_object_set_new(c, "present", json_true());
            found = 1;
        }
        if (!found) /* saved by a run whose events we do not have */
            json_array_append_new(ckpts, json_pack("{s:I,s:b}", "step", (json_int_t)step,
                                                   "present", 1));
    }
    closedir(d);
}

static json_t *load_json(const char *run_dir, const char *name)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", run_dir, name);
    return json_load_file(path, 0, NULL);
}

/* FLOPs per token from config.json's model shape and sequence length, for runs whose
 * train_start event does not record it; 0 when the file lacks them. */
static double flops_from_config(const char *run_dir)
{
    json_t *j = load_json(run_dir, "config.json");
    json_t *mo = json_object_get(j, "model"), *op = json_object_get(j, "optim");
    gx_config shape = {.hidden = (int)num(mo, "hidden_size", 0),
                    .layers = (int)num(mo, "num_layers", 0),
                    .intermediate = (int)num(mo, "intermediate_size", 0),
                    .vocab = (int)num(mo, "vocab_size", 0),
                    .heads = (int)num(mo, "num_heads", 1)}; /* a run of before: multi-head */
    if (shape.heads <= 0)
        shape.heads = 1;
    int T = (int)num(op, "seq_len", 0);
    json_decref(j);
    if (shape.hidden <= 0 || shape.layers <= 0 || shape.intermediate <= 0 || shape.vocab <= 0 || T <= 0)
        return 0;
    return gx_flops_per_token(&shape, T);
}

json_t *obs_view(const char *run_dir, const obs_cfg *c, int max_points)
{
    char path[1200];
    evstate e = {.incidents = json_array(), .restarts = json_array(), .ckpts = json_array(),
                 .loads = json_array(), .ckfails = json_array()};
    snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
    pthread_mutex_lock(&mc_mu); /* held until the rows are copied out */
    int have_m = mc_update(path);
    snprintf(path, sizeof path, "%s/events.jsonl", run_dir);
    int have_e = each_line(path, on_event, &e);
    if (have_m < 0 || (!have_m && !have_e)) {
        pthread_mutex_unlock(&mc_mu);
        json_decref(e.incidents), json_decref(e.restarts), json_decref(e.ckpts), json_decref(e.loads);
        json_decref(e.ckfails);
        if (have_m < 0)
            grit_errf(GRIT_ENOMEM, "%s/metrics.jsonl: out of memory", run_dir);
        else
            grit_errf(GRIT_ENOTFOUND, "%s: no metrics.jsonl or events.jsonl (is it a run "
                                      "directory?)", run_dir);
        return NULL;
    }
    mark_present(run_dir, e.ckpts);

    /* nodes: cluster.json states, nodes.json timing */
    json_t *cl = load_json(run_dir, "cluster.json"), *ns = load_json(run_dir, "nodes.json");
    json_t *nodes = json_array();
    int active = 0;
    size_t i, k;
    json_t *n, *m;
    json_array_foreach(json_object_get(cl, "nodes"), i, n)
    {
        json_t *o = json_pack("{s:s,s:s,s:s,s:f}", "name", str(n, "name"), "state",
                              str(n, "state"), "reason", str(n, "reason"), "position",
                              num(n, "position", -1));
        active += !strcmp(str(n, "state"), "active");
        json_array_foreach(json_object_get(ns, "nodes"), k, m) if (!strcmp(str(m, "name"), str(n, "name")))
        {
            json_object_set_new(o, "step", json_real(num(m, "step", 0)));
            json_object_set_new(o, "step_time_s", json_real(num(m, "step_time_s", 0)));
            json_object_set_new(o, "comm_time_s", json_real(num(m, "comm_time_s", 0)));
        }
        json_array_append_new(nodes, o);
    }
    if (!active)
        active = e.nodes > 0 ? e.nodes : 1;
    int allocated = e.nodes > 0 ? e.nodes + e.spares : active;

    /* series, thinned to max_points */
    size_t total = mc.n;
    const char *fpt_from = e.fpt > 0 ? "train_start" : "config.json";
    double fpt = c->peak_tflops <= 0 ? 0 : e.fpt > 0 ? e.fpt : flops_from_config(run_dir);
    static const int cols_out[] = {C_STEP, C_LOSS, C_GNORM, C_LR, C_TPS, C_STEPT, C_VLOSS};
    enum { NK = 7 };
    double last_val = NAN; /* validation rows are sparse: the latest one, and none thinned out */
    json_t *cols[NK + 1];
    for (int j = 0; j <= NK; j++)
        cols[j] = json_array();
    size_t stride = max_points > 0 && total > (size_t)max_points ? (total + max_points - 1) / max_points : 1;
    double prev_tokens = 0, tokens_per_step = 0;
    for (i = 0; i < total; i++) {
        const double *r = mc.rows[i];
        double tok = isfinite(r[C_TOKENS]) ? r[C_TOKENS] : 0;
        if (tok > prev_tokens)
            tokens_per_step = tok - prev_tokens;
        prev_tokens = tok;
        if (isfinite(r[C_VLOSS]))
            last_val = r[C_VLOSS];
        if (i % stride && i + 1 != total && !isfinite(r[C_VLOSS]))
            continue;
        for (int j = 0; j < NK; j++) {
            double v = r[cols_out[j]];
            json_array_append_new(cols[j], isfinite(v) ? json_real(v) : json_null());
        }
        double mfu = fpt > 0 ? r[C_TPS] * fpt / (active * c->peak_tflops * 1e12) : NAN;
        json_array_append_new(cols[NK], isfinite(mfu) ? json_real(mfu) : json_null());
    }
    double last[NCOL];
    for (int q = 0; q < NCOL; q++)
        last[q] = total ? mc.rows[total - 1][q] : NAN;
    double productive = mc.productive, stall_total = mc.stall;
    pthread_mutex_unlock(&mc_mu);
    static const char *const keys[NK] = {"step", "loss", "grad_norm", "lr", "tokens_per_s",
                                         "step_time_s", "val_loss"};
    json_t *series_o = json_object();
    for (int j = 0; j < NK; j++)
        json_object_set_new(series_o, keys[j], cols[j]);
    json_object_set_new(series_o, "mfu", cols[NK]);

    /* per-node throughput: the node's share of a step's tokens over its step time */
    json_array_foreach(nodes, i, n)
    {
        double st = num(n, "step_time_s", 0);
        if (st > 0 && tokens_per_step > 0 && !strcmp(str(n, "state"), "active"))
            json_object_set_new(n, "tokens_per_s", json_real(tokens_per_step / active / st));
    }

    double t0 = e.t_launch0 > 0 ? e.t_launch0 : e.t0 > 0 ? e.t0 : e.t_train0, now = now_s();
    double wall = t0 > 0 ? (e.ended ? e.t_end : now) - t0 : 0;
    double lost = fmax(0.0, wall - productive);
    double node_hours = allocated * wall / 3600.0;
    int measured = json_is_true(json_object_get(ns, "energy_measured"));
    double ngpu = num(ns, "gpus", 0);
    int sources = 0, gpus = isfinite(ngpu) && ngpu > 0 ? (int)fmin(ngpu, 1e6) : 0;
    json_t *src_a = json_object_get(ns, "energy_sources"), *src_v;
    json_array_foreach(src_a, i, src_v)
    {
        const char *sv = json_string_value(src_v);
        if (sv && !strcmp(sv, "RAPL"))
            sources |= OBS_SRC_RAPL;
        else if (sv && !strcmp(sv, "NVML"))
            sources |= OBS_SRC_NVML;
    }
    if (measured && !src_a)
        sources = OBS_SRC_RAPL; /* nodes.json from before NVML sampling */
    char source[64];
    obs_source_name(sources, gpus, source, sizeof source);
    if (measured && !source[0])
        snprintf(source, sizeof source, "measured");
    /* allocated nodes on no measured host: the configured power, when there is one */
    double nm = num(ns, "nodes_measured", 0);
    int unmeasured = measured && isfinite(nm) && nm > 0 && nm < allocated ? allocated - (int)nm : 0;
    if (c->node_watts <= 0)
        unmeasured = 0;
    if (unmeasured)
        snprintf(source + strlen(source), sizeof source - strlen(source), " + configured");
    double energy_j = measured ? num(ns, "energy_j", 0) + c->node_watts * unmeasured * wall
                               : c->node_watts * allocated * wall;
    double kwh = energy_j / 3.6e6;
    double cost = node_hours * c->price_node_hour;
    double tokens = total && isfinite(last[C_TOKENS]) ? last[C_TOKENS] : 0;

    /* a file holding absurd numbers (1e308 step times) must not make the view fail:
     * JSON has no infinity, so non-finite figures are reported as 0 */
#define FIN(x) (isfinite(x) ? (x) : 0.0)
    wall = FIN(wall), productive = FIN(productive), lost = FIN(lost), node_hours = FIN(node_hours);
    kwh = FIN(kwh), cost = FIN(cost), tokens = FIN(tokens), stall_total = FIN(stall_total);
    double power = FIN(measured ? num(ns, "power_w", 0) + c->node_watts * unmeasured
                                : c->node_watts * allocated);
    json_t *sum = json_pack(
        "{s:f,s:f,s:f,s:f,s:f,s:i,s:i,s:i,s:i,s:i,s:f,s:f,s:f,s:s,s:f,s:f}", "wall_s", wall,
        "productive_s", productive, "lost_s", lost, "goodput", wall > 0 ? productive / wall : 0.0,
        "tokens", tokens, "restarts", e.launches > 0 ? e.launches - 1 : (int)json_array_size(e.restarts),
        "incidents", (int)json_array_size(e.incidents), "nodes", e.nodes > 0 ? e.nodes : active,
        "spares", e.spares, "allocated_nodes", allocated, "node_hours", node_hours, "energy_kwh", kwh,
        "ckpt_stall_s", stall_total, "energy_source",
        measured ? source : c->node_watts > 0 ? "configured" : "unknown", "power_w", power,
        "flops_per_token", FIN(fpt));
    if (fpt > 0)
        json_object_set_new(sum, "flops_per_token_from", json_string(fpt_from));
    if (measured && (sources & OBS_SRC_NVML))
        json_object_set_new(sum, "energy_gpus", json_integer(gpus));
    double nh = num(ns, "hosts_measured", 0);
    if (measured && isfinite(nh) && nh > 0) /* absent in a nodes.json from before hosts */
        json_object_set_new(sum, "energy_hosts", json_integer((json_int_t)fmin(nh, 1e6)));
    if (unmeasured)
        json_object_set_new(sum, "energy_unmeasured_nodes", json_integer(unmeasured));
    if (c->price_node_hour > 0) {
        json_object_set_new(sum, "cost", json_real(cost));
        json_object_set_new(sum, "failure_cost",
                            json_real(FIN(lost * allocated * c->price_node_hour / 3600.0)));
        if (cost > 0)
            json_object_set_new(sum, "tokens_per_dollar", json_real(FIN(tokens / cost)));
    }
    if (c->grid_gco2_kwh > 0 && (measured || c->node_watts > 0))
        json_object_set_new(sum, "co2_kg", json_real(FIN(kwh * c->grid_gco2_kwh / 1000.0)));
    if (total) {
        static const int sk[] = {C_STEP, C_LOSS, C_GNORM, C_LR, C_TPS, C_STEPT};
        static const char *const sn[] = {"step", "loss", "grad_norm", "lr", "tokens_per_s",
                                         "step_time_s"};
        for (int q = 0; q < 6; q++)
            if (isfinite(last[sk[q]]))
                json_object_set_new(sum, sn[q], json_real(last[sk[q]]));
        if (isfinite(last_val))
            json_object_set_new(sum, "val_loss", json_real(last_val));
    }
    json_t *cfg = json_pack("{s:f,s:f,s:f,s:f}", "price_node_hour", c->price_node_hour,
                            "grid_gco2_kwh", c->grid_gco2_kwh, "node_watts", c->node_watts,
                            "peak_tflops", c->peak_tflops);
    json_t *v = json_pack("{s:s,s:f,s:b,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "run_dir",
                          run_dir, "now", now, "finished", e.ended,
                          "state", e.state[0] ? e.state : (e.ended ? "DONE" : "RUNNING"),
                          "gave_up_reason", e.gave_up_reason, "series", series_o, "restarts",
                          e.restarts, "nodes", nodes, "incidents", e.incidents, "checkpoints",
                          e.ckpts, "ckpt_loads", e.loads, "ckpt_failures", e.ckfails, "summary",
                          sum, "config", cfg);
    /* per host: what the workers (or the supervisor) measured on each machine */
    json_t *hosts = json_array(), *h;
    json_array_foreach(json_object_get(ns, "hosts"), i, h)
    {
        if (!json_is_object(h))
            continue;
        json_t *o = json_pack("{s:s,s:s,s:f,s:f,s:b}", "host", str(h, "host"), "node",
                              str(h, "node"), "energy_j", FIN(num(h, "energy_j", 0)), "power_w",
                              FIN(num(h, "power_w", 0)), "supervisor",
                              json_is_true(json_object_get(h, "supervisor")));
        double g = num(h, "gpus", 0);
        json_object_set_new(o, "gpus", json_integer(isfinite(g) && g > 0 ? (json_int_t)fmin(g, 1e6) : 0));
        json_t *hs = json_object_get(h, "sources");
        json_object_set_new(o, "sources", json_is_array(hs) ? json_deep_copy(hs) : json_array());
        json_array_append_new(hosts, o);
    }
    if (v)
        json_object_set_new(v, "energy_hosts", hosts);
    else
        json_decref(hosts);
    json_decref(cl);
    json_decref(ns);
    if (!v)
        grit_errf(GRIT_ENOMEM, "%s: out of memory building the run view", run_dir);
    return v;
#undef FIN
}

void obs_print_summary(FILE *f, const json_t *view)
{
    const json_t *s = json_object_get(view, "summary");
    double kwh = num(s, "energy_kwh", 0);
    const char *src = str(s, "energy_source");
    int hosts = (int)num(s, "energy_hosts", 0), rest = (int)num(s, "energy_unmeasured_nodes", 0);
    char on[96] = "";
    if (hosts > 0)
        snprintf(on, sizeof on, " on %d host%s measured", hosts, hosts == 1 ? "" : "s");
    if (rest > 0)
        snprintf(on + strlen(on), sizeof on - strlen(on), ", %d node%s configured", rest,
                 rest == 1 ? "" : "s");
    if (strcmp(src, "unknown"))
        fprintf(f, "  %-20s %.4f kWh (%s%s, %.0f W)\n", "energy", kwh, src, on,
                num(s, "power_w", 0));
    else
        fprintf(f, "  %-20s unknown (neither RAPL nor NVML readable; give --node-watts)\n",
                "energy");
    if (json_object_get(s, "co2_kg"))
        fprintf(f, "  %-20s %.4f kg CO2 at %.0f g/kWh\n", "emissions", num(s, "co2_kg", 0),
                num(json_object_get(view, "config"), "grid_gco2_kwh", 0));
    if (json_object_get(s, "cost")) {
        fprintf(f, "  %-20s %.4f for %.4f node-hours (%d nodes allocated)\n", "cost",
                num(s, "cost", 0), num(s, "node_hours", 0), (int)num(s, "allocated_nodes", 0));
        fprintf(f, "  %-20s %.0f tokens per unit of currency\n", "tokens per dollar",
                num(s, "tokens_per_dollar", 0));
        fprintf(f, "  %-20s %.4f (%.1f s lost x %d nodes)\n", "cost of failures",
                num(s, "failure_cost", 0), num(s, "lost_s", 0), (int)num(s, "allocated_nodes", 0));
    } else {
        fprintf(f, "  %-20s unknown (give --price-node-hour)\n", "cost");
    }
}
