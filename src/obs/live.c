/*
 * live.c - obs.json (cost figures), the heartbeat-fed node registry and RAPL
 * power sampling (obs.h). The registry is a fixed table behind one mutex:
 * obs_beat() runs in the supervisor's loop, the HTTP thread reads it.
 */
#define _GNU_SOURCE
#include "obs/obs.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/fsutil.h"
#include "core/jcfg.h"

#define OBS_NODES 64
#define RAPL_MAX 16

typedef struct node_stat {
    char name[64];
    long step;
    double step_time, comm_time, ts;
    int ranks;
} node_stat;

static struct {
    pthread_mutex_t mu;
    node_stat n[OBS_NODES];
    int count;
    double energy_j;   /* measured (RAPL) since the first sample */
    double power_w;    /* latest measured power */
    int measured;      /* RAPL readable */
    double last_uj[RAPL_MAX], last_ts;
    int nrapl;
} reg = {.mu = PTHREAD_MUTEX_INITIALIZER};

static const char *const cfg_keys[] = {"price_node_hour", "grid_gco2_kwh", "node_watts",
                                       "peak_tflops", NULL};

grit_err obs_cfg_load(const char *run_dir, obs_cfg *c)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/obs.json", run_dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return GRIT_OK;
    fclose(f);
    jcfg j;
    grit_err rc = jcfg_open(&j, path);
    if (rc)
        return rc;
    if (!(rc = jcfg_only(&j, j.root, "", cfg_keys)) &&
        !(rc = jcfg_num(&j, j.root, "", "price_node_hour", 0, 1e9, &c->price_node_hour)) &&
        !(rc = jcfg_num(&j, j.root, "", "grid_gco2_kwh", 0, 1e5, &c->grid_gco2_kwh)) &&
        !(rc = jcfg_num(&j, j.root, "", "node_watts", 0, 1e7, &c->node_watts)))
        rc = jcfg_num(&j, j.root, "", "peak_tflops", 0, 1e9, &c->peak_tflops);
    jcfg_close(&j);
    return rc;
}

grit_err obs_cfg_save(const char *run_dir, const obs_cfg *c)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/obs.json", run_dir);
    json_t *j = json_pack("{s:f,s:f,s:f,s:f}", "price_node_hour", c->price_node_hour,
                          "grid_gco2_kwh", c->grid_gco2_kwh, "node_watts", c->node_watts,
                          "peak_tflops", c->peak_tflops);
    char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    if (!text)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    grit_err rc = fs_write_durable(path, text, strlen(text));
    free(text);
    return rc;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

void obs_beat(const char *node, int rank, long step, double step_time, double comm_time)
{
    (void)rank;
    if (!node || !node[0] || step <= 0 || !isfinite(step_time))
        return;
    pthread_mutex_lock(&reg.mu);
    int i;
    for (i = 0; i < reg.count && strcmp(reg.n[i].name, node); i++)
        ;
    if (i == reg.count && reg.count < OBS_NODES) {
        snprintf(reg.n[i].name, sizeof reg.n[i].name, "%s", node);
        reg.count++;
    }
    if (i < reg.count && step >= reg.n[i].step) {
        node_stat *n = &reg.n[i];
        if (step > n->step) { /* first rank to report this step sets it, others take the max */
            n->step = step;
            n->step_time = step_time;
            n->comm_time = comm_time;
        } else {
            n->step_time = fmax(n->step_time, step_time);
            n->comm_time = fmax(n->comm_time, comm_time);
        }
        n->ts = now_s();
    }
    pthread_mutex_unlock(&reg.mu);
}

/* Top-level RAPL zones (intel-rapl:N, not the subzones intel-rapl:N:M), in name order. */
static int rapl_read(const char *root, double *uj, double *range, int cap)
{
    DIR *d = opendir(root);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    char names[RAPL_MAX][64];
    while ((e = readdir(d)) && n < cap) {
        const char *s = e->d_name;
        if (strncmp(s, "intel-rapl:", 11) || strchr(s + 11, ':'))
            continue;
        snprintf(names[n++], 64, "%.60s", s);
    }
    closedir(d);
    qsort(names, (size_t)n, 64, (int (*)(const void *, const void *))strcmp);
    for (int i = 0; i < n; i++) {
        char path[1200], buf[64];
        const char *files[2] = {"energy_uj", "max_energy_range_uj"};
        double *outs[2] = {&uj[i], &range[i]};
        for (int k = 0; k < 2; k++) {
            snprintf(path, sizeof path, "%s/%s/%s", root, names[i], files[k]);
            FILE *f = fopen(path, "r");
            if (!f || !fgets(buf, sizeof buf, f)) {
                if (f)
                    fclose(f);
                return 0; /* unreadable (often root-only): fall back to the configured power */
            }
            fclose(f);
            *outs[k] = strtod(buf, NULL);
        }
    }
    return n;
}

void obs_power_sample(void)
{
    obs__power_sample_at("/sys/class/powercap");
}

void obs__power_sample_at(const char *root)
{
    double uj[RAPL_MAX], range[RAPL_MAX];
    int n = rapl_read(root, uj, range, RAPL_MAX);
    double t = now_s();
    pthread_mutex_lock(&reg.mu);
    if (n > 0 && n == reg.nrapl && reg.last_ts > 0) {
        double d = 0;
        for (int i = 0; i < n; i++) {
            double di = uj[i] - reg.last_uj[i];
            d += di >= 0 ? di : di + range[i]; /* the counter wrapped */
        }
        reg.energy_j += d / 1e6;
        reg.power_w = d / 1e6 / (t - reg.last_ts);
        reg.measured = 1;
    }
    reg.nrapl = n;
    memcpy(reg.last_uj, uj, sizeof(double) * (size_t)n);
    reg.last_ts = t;
    pthread_mutex_unlock(&reg.mu);
}

void obs__energy(double *joules, double *watts, int *measured)
{
    pthread_mutex_lock(&reg.mu);
    *joules = reg.energy_j;
    *watts = reg.power_w;
    *measured = reg.measured;
    pthread_mutex_unlock(&reg.mu);
}

grit_err obs_registry_save(const char *run_dir)
{
    json_t *nodes = json_array();
    pthread_mutex_lock(&reg.mu);
    for (int i = 0; i < reg.count; i++)
        json_array_append_new(nodes, json_pack("{s:s,s:I,s:f,s:f,s:f}", "name", reg.n[i].name,
                                               "step", (json_int_t)reg.n[i].step, "step_time_s",
                                               reg.n[i].step_time, "comm_time_s",
                                               reg.n[i].comm_time, "ts", reg.n[i].ts));
    json_t *j = json_pack("{s:i,s:o,s:b,s:f,s:f}", "version", 1, "nodes", nodes, "energy_measured",
                          reg.measured, "energy_j", reg.energy_j, "power_w", reg.power_w);
    pthread_mutex_unlock(&reg.mu);
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!text)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    char path[1200];
    snprintf(path, sizeof path, "%s/nodes.json", run_dir);
    grit_err rc = fs_write_durable(path, text, strlen(text));
    free(text);
    return rc;
}
