/*
 * prom.c - the run view as Prometheus text exposition format 0.0.4:
 *
 *   # HELP grit_loss Training loss at the latest step.
 *   # TYPE grit_loss gauge
 *   grit_loss 3.2104
 *   grit_node_up{node="node1",state="cordoned"} 0
 *
 * Every sample is a gauge or counter of the latest state (Prometheus keeps the
 * history); label values are escaped (\\, \", \n) as the format requires. A
 * figure that is unknown (no price configured, no step yet) is left out rather
 * than exported as 0.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "obs/obs.h"

typedef struct buf {
    char *p;
    size_t len, cap;
    int oom;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = b->oom ? 0 : vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (b->oom || n < 0)
            return;
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap + (size_t)n + 1) * 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

static void head(buf *b, const char *name, const char *type, const char *help)
{
    put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void value(buf *b, double v)
{
    if (isnan(v))
        put(b, " NaN\n");
    else if (isinf(v))
        put(b, v > 0 ? " +Inf\n" : " -Inf\n");
    else { /* the shortest form that reads back as the same double */
        char t[40];
        snprintf(t, sizeof t, "%.15g", v);
        if (strtod(t, NULL) != v)
            snprintf(t, sizeof t, "%.17g", v);
        put(b, " %s\n", t);
    }
}

/* A metric of one sample from the summary; left out when the key is absent. */
static void gauge(buf *b, const json_t *s, const char *key, const char *name, const char *type,
                  const char *help)
{
    json_t *v = json_object_get(s, key);
    if (!json_is_number(v))
        return;
    head(b, name, type, help);
    put(b, "%s", name);
    value(b, json_number_value(v));
}

static void label(buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            put(b, "\\%c", *s);
        else if (*s == '\n')
            put(b, "\\n");
        else
            put(b, "%c", *s);
    }
}

char *obs_prometheus(const json_t *view)
{
    buf b = {0};
    const json_t *s = json_object_get(view, "summary");
    gauge(&b, s, "step", "grit_step", "gauge", "Latest optimiser step in metrics.jsonl.");
    gauge(&b, s, "loss", "grit_loss", "gauge", "Training loss at the latest step.");
    gauge(&b, s, "grad_norm", "grit_grad_norm", "gauge", "Global gradient L2 norm before clipping.");
    gauge(&b, s, "lr", "grit_learning_rate", "gauge", "Learning rate of the latest step.");
    gauge(&b, s, "val_loss", "grit_validation_loss", "gauge",
          "Held-out loss at the latest validation (eval.interval_steps).");
    gauge(&b, s, "tokens_per_s", "grit_tokens_per_second", "gauge", "Training throughput, all ranks.");
    gauge(&b, s, "step_time_s", "grit_step_seconds", "gauge", "Wall time of the latest step.");
    gauge(&b, s, "tokens", "grit_tokens_total", "counter", "Tokens trained (kept steps).");
    json_t *mfu = json_object_get(json_object_get(view, "series"), "mfu");
    json_t *lm = json_array_get(mfu, json_array_size(mfu) - 1);
    if (json_is_number(lm)) {
        head(&b, "grit_mfu", "gauge", "Model FLOPs utilisation (0..1) against --peak-tflops per node.");
        put(&b, "grit_mfu");
        value(&b, json_number_value(lm));
    }
    gauge(&b, s, "restarts", "grit_restarts_total", "counter", "Job relaunches after a failure.");
    gauge(&b, s, "incidents", "grit_incidents_total", "counter", "Failures detected.");
    gauge(&b, s, "goodput", "grit_goodput_ratio", "gauge", "Productive training time over wall time.");
    gauge(&b, s, "wall_s", "grit_wall_seconds", "gauge", "Wall time since the supervisor started.");
    gauge(&b, s, "productive_s", "grit_productive_seconds", "gauge", "Time of the kept steps.");
    gauge(&b, s, "lost_s", "grit_lost_seconds", "gauge", "Wall time not spent on kept steps.");
    gauge(&b, s, "ckpt_stall_s", "grit_checkpoint_stall_seconds_total", "counter",
          "Training time blocked by checkpoint saves (kept steps).");
    gauge(&b, s, "energy_kwh", "grit_energy_kwh", "gauge", "Energy used by the run.");
    gauge(&b, s, "power_w", "grit_power_watts", "gauge", "Power draw (measured or configured).");
    const char *src = json_string_value(json_object_get(s, "energy_source"));
    if (src) {
        head(&b, "grit_energy_source_info", "gauge",
             "1, labelled with what the energy figure comes from: the sources measured "
             "(RAPL, NVML with the GPU count), configured (--node-watts) or unknown.");
        put(&b, "grit_energy_source_info{source=\"");
        label(&b, src);
        put(&b, "\",rapl=\"%d\",nvml=\"%d\"}", strstr(src, "RAPL") != NULL,
            strstr(src, "NVML") != NULL);
        value(&b, 1);
    }
    gauge(&b, s, "energy_gpus", "grit_energy_gpus", "gauge", "GPUs whose energy NVML measured.");
    gauge(&b, s, "energy_hosts", "grit_energy_hosts", "gauge",
          "Machines whose energy was measured (RAPL or NVML), each counted once.");
    json_t *eh = json_object_get(view, "energy_hosts"), *h;
    size_t hi;
    if (json_array_size(eh))
        head(&b, "grit_node_energy_joules", "gauge",
             "Energy measured on one machine during the run (host: its boot_id; node: the "
             "node whose rank measured it, or supervisor).");
    json_array_foreach(eh, hi, h)
    {
        json_t *j = json_object_get(h, "energy_j");
        const char *id = json_string_value(json_object_get(h, "host"));
        const char *nd = json_string_value(json_object_get(h, "node"));
        if (!json_is_number(j))
            continue;
        put(&b, "grit_node_energy_joules{host=\"");
        label(&b, id ? id : "");
        put(&b, "\",node=\"");
        label(&b, nd ? nd : "");
        put(&b, "\"}");
        value(&b, json_number_value(j));
    }
    gauge(&b, s, "co2_kg", "grit_co2_kg", "gauge", "Emissions: energy x grid carbon intensity.");
    gauge(&b, s, "cost", "grit_cost", "gauge", "Cost: allocated node-hours x price.");
    gauge(&b, s, "failure_cost", "grit_failure_cost", "gauge", "Cost of the time lost to failures.");
    gauge(&b, s, "tokens_per_dollar", "grit_tokens_per_dollar", "gauge", "Tokens trained per unit of cost.");

    size_t i;
    json_t *n;
    json_t *nodes = json_object_get(view, "nodes");
    static const char *const states[] = {"active", "spare", "cordoned"};
    head(&b, "grit_node_state", "gauge", "1 for the node's current state (active, spare, cordoned).");
    json_array_foreach(nodes, i, n) for (int k = 0; k < 3; k++)
    {
        put(&b, "grit_node_state{node=\"");
        label(&b, json_string_value(json_object_get(n, "name")));
        put(&b, "\",state=\"%s\"}", states[k]);
        value(&b, !strcmp(json_string_value(json_object_get(n, "state")), states[k]));
    }
    const char *per[][3] = {{"step_time_s", "grit_node_step_seconds", "Latest step time reported by the node's ranks."},
                            {"comm_time_s", "grit_node_comm_seconds", "Latest communication (all-reduce wait) time of the node's ranks."},
                            {"tokens_per_s", "grit_node_tokens_per_second", "The node's share of the step's tokens over its step time."},
                            {"step", "grit_node_step", "Latest step the node reported."}};
    for (int k = 0; k < 4; k++) {
        int any = 0;
        json_array_foreach(nodes, i, n)
        {
            json_t *v = json_object_get(n, per[k][0]);
            if (!json_is_number(v))
                continue;
            if (!any++)
                head(&b, per[k][1], "gauge", per[k][2]);
            put(&b, "%s{node=\"", per[k][1]);
            label(&b, json_string_value(json_object_get(n, "name")));
            put(&b, "\"}");
            value(&b, json_number_value(v));
        }
    }
    json_t *ck = json_object_get(view, "checkpoints"), *c, *last = NULL;
    json_array_foreach(ck, i, c) if (json_object_get(c, "seconds")) last = c;
    if (last) {
        gauge(&b, last, "seconds", "grit_checkpoint_save_seconds", "gauge", "Duration of the latest checkpoint save.");
        gauge(&b, last, "stall_s", "grit_checkpoint_stall_seconds", "gauge", "Training blocked by the latest save.");
        gauge(&b, last, "step", "grit_checkpoint_step", "gauge", "Step of the latest checkpoint saved.");
    }
    json_t *loads = json_object_get(view, "ckpt_loads");
    if (json_array_size(loads))
        gauge(&b, json_array_get(loads, json_array_size(loads) - 1), "seconds",
              "grit_checkpoint_load_seconds", "gauge", "Duration of the latest checkpoint load (resume).");
    json_t *fails = json_object_get(view, "ckpt_failures"), *f;
    double nsave = 0, nfall = 0;
    json_array_foreach(fails, i, f) {
        const char *k = json_string_value(json_object_get(f, "kind"));
        nsave += k && !strcmp(k, "save_failed");
        nfall += k && strcmp(k, "save_failed") != 0;
    }
    head(&b, "grit_checkpoint_failures_total", "counter", "Checkpoint saves that failed (nothing partial is visible).");
    put(&b, "grit_checkpoint_failures_total");
    value(&b, nsave);
    head(&b, "grit_checkpoint_fallbacks_total", "counter",
         "Checkpoints rejected at a resume (unusable: an older one, or the remote copy, was used).");
    put(&b, "grit_checkpoint_fallbacks_total");
    value(&b, nfall);
    head(&b, "grit_run_finished", "gauge", "1 once the supervisor has finished or given up.");
    put(&b, "grit_run_finished");
    value(&b, json_is_true(json_object_get(view, "finished")));
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
