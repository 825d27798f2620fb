/*
 * live.c - obs.json (cost figures), the heartbeat-fed node registry and power
 * sampling (obs.h). The registry is a fixed table behind one mutex: obs_beat()
 * runs in the supervisor's loop, the HTTP thread reads it.
 *
 * Power sampling (once a second, the live server's tick): node energy is what
 * could be measured, summed over the interval since the previous sample:
 *
 *   RAPL  the package counters /sys/class/powercap/intel-rapl:N/energy_uj (uJ),
 *         often root-only. They wrap at max_energy_range_uj: a decrease adds
 *         the range.
 *   NVML  per GPU (core/nvml.h, libnvidia-ml loaded once and kept):
 *         nvmlDeviceGetTotalEnergyConsumption (mJ since the driver loaded,
 *         Volta and newer; 64 bits, never wraps) as the difference between
 *         samples. A decrease means the driver reloaded within the interval and
 *         the counter restarted at 0, so the interval counts the new value, never
 *         a negative difference. A GPU answering NOT_SUPPORTED (pre-Volta)
 *         integrates nvmlDeviceGetPowerUsage (mW) instead: the mean of the two
 *         readings times the interval.
 *
 * Node power = RAPL + GPUs. The registry records which sources were measured
 * (OBS_SRC_RAPL, OBS_SRC_NVML, a union over the run) and how many GPUs; with
 * neither, the view falls back to the configured node_watts. No library, no
 * GPU or an NVML that fails to initialise is tried once and then left alone:
 * RAPL-only, silently. A read that fails drops that source (or that GPU) from
 * the interval and restarts its baseline.
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
#include "core/nvml.h"

#define OBS_NODES 64
#define RAPL_MAX 16
#define GPU_MAX 64

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
    double energy_j;   /* measured (RAPL + GPUs) since the first sample */
    double power_w;    /* latest measured power */
    int sources;       /* OBS_SRC_* measured so far (0: nothing, use node_watts) */
    int gpus;          /* most GPUs measured in one interval */
    double last_uj[RAPL_MAX], last_ts;
    int nrapl;
} reg = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The GPU side of sampling: touched only by the sampler, under gpu.mu (one sampler
 * at a time; the registry lock is taken only to publish the interval). */
static struct {
    pthread_mutex_t mu;
    char path[1024];  /* library tried ("" none yet) */
    int state;        /* 0 not tried, 1 open and initialised, -1 unavailable */
    nvml_api api;
    nvml_dev dev[GPU_MAX];
    unsigned n;
    int no_energy[GPU_MAX]; /* energy counter NOT_SUPPORTED: integrate the power draw */
    int have[GPU_MAX];      /* last_mj / last_mw hold the previous sample */
    unsigned long long last_mj[GPU_MAX];
    double last_mw[GPU_MAX];
    double last_t;
} gpu = {.mu = PTHREAD_MUTEX_INITIALIZER};

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

/* Releases NVML (gpu.mu held). */
static void gpu_close(void)
{
    if (gpu.state == 1)
        gpu.api.shutdown();
    nvml_close(&gpu.api);
    memset(gpu.have, 0, sizeof gpu.have);
    memset(gpu.no_energy, 0, sizeof gpu.no_energy);
    gpu.state = 0;
    gpu.n = 0;
    gpu.path[0] = 0;
}

/* Loads and initialises NVML from lib once (gpu.mu held); 1 when GPUs can be read. A
 * missing library, a failed init or no devices leaves it unavailable, quietly: a node
 * without GPUs is the common case, not an error. */
static int gpu_ready(const char *lib)
{
    if (gpu.state && !strcmp(gpu.path, lib))
        return gpu.state == 1;
    gpu_close();
    snprintf(gpu.path, sizeof gpu.path, "%s", lib);
    gpu.state = -1;
    if (nvml_open(lib, &gpu.api) != GRIT_OK) {
        grit_errclear(); /* no driver: RAPL only */
        return 0;
    }
    unsigned n = 0;
    if (!gpu.api.init || !gpu.api.shutdown || !gpu.api.count || !gpu.api.handle ||
        (!gpu.api.energy && !gpu.api.power) || gpu.api.init() != NVML_SUCCESS) {
        nvml_close(&gpu.api);
        return 0;
    }
    if (gpu.api.count(&n) != NVML_SUCCESS)
        n = 0;
    for (unsigned i = 0; i < n && gpu.n < GPU_MAX; i++)
        if (gpu.api.handle(i, &gpu.dev[gpu.n]) == NVML_SUCCESS)
            gpu.n++;
    if (!gpu.n) {
        gpu.api.shutdown();
        nvml_close(&gpu.api);
        return 0;
    }
    gpu.state = 1;
    return 1;
}

/* One GPU's energy over the interval ending at t (gpu.mu held): 1 with *joules set
 * when the interval could be measured, 0 on the first sample or a failed read. */
static int gpu_read(unsigned i, double t, double *joules)
{
    nvml_dev d = gpu.dev[i];
    double dt = t - gpu.last_t;
    int prev = gpu.have[i] && gpu.last_t > 0 && dt > 0;
    gpu.have[i] = 0;
    if (!gpu.no_energy[i]) {
        unsigned long long mj = 0;
        nvml_ret e = gpu.api.energy ? gpu.api.energy(d, &mj) : NVML_NOT_SUPPORTED;
        if (e == NVML_SUCCESS) {
            unsigned long long last = gpu.last_mj[i];
            gpu.last_mj[i] = mj;
            gpu.have[i] = 1;
            if (!prev)
                return 0;
            *joules = (double)(mj >= last ? mj - last : mj) / 1e3; /* a decrease: reloaded */
            return 1;
        }
        if (e != NVML_NOT_SUPPORTED)
            return 0;
        gpu.no_energy[i] = 1; /* pre-Volta: from now on, integrate the power draw */
        prev = 0;
    }
    unsigned mw = 0;
    if (!gpu.api.power || gpu.api.power(d, &mw) != NVML_SUCCESS)
        return 0;
    double last = gpu.last_mw[i];
    gpu.last_mw[i] = mw;
    gpu.have[i] = 1;
    if (!prev)
        return 0;
    *joules = (last + mw) / 2.0 / 1e3 * dt;
    return 1;
}

void obs_power_sample(void)
{
    obs__power_sample_at("/sys/class/powercap", NULL, 0);
}

void obs__power_sample_at(const char *root, const char *nvml_lib, double t)
{
    double uj[RAPL_MAX], range[RAPL_MAX];
    int n = rapl_read(root, uj, range, RAPL_MAX);
    if (t <= 0)
        t = now_s();

    pthread_mutex_lock(&gpu.mu);
    double gpu_j = 0;
    int ngpu = 0;
    if (gpu_ready(nvml_lib_path(nvml_lib))) {
        for (unsigned i = 0; i < gpu.n; i++) {
            double j = 0;
            if (gpu_read(i, t, &j)) {
                gpu_j += j;
                ngpu++;
            }
        }
        gpu.last_t = t;
    }
    pthread_mutex_unlock(&gpu.mu);

    pthread_mutex_lock(&reg.mu);
    double d = 0, dt = t - reg.last_ts;
    int src = 0;
    if (n > 0 && n == reg.nrapl && reg.last_ts > 0 && dt > 0) {
        for (int i = 0; i < n; i++) {
            double di = uj[i] - reg.last_uj[i];
            d += di >= 0 ? di : di + range[i]; /* the counter wrapped */
        }
        d /= 1e6;
        src |= OBS_SRC_RAPL;
    }
    if (ngpu) {
        d += gpu_j;
        src |= OBS_SRC_NVML;
        reg.gpus = ngpu > reg.gpus ? ngpu : reg.gpus;
    }
    if (src && dt > 0) {
        reg.energy_j += d;
        reg.power_w = d / dt;
        reg.sources |= src;
    }
    reg.nrapl = n;
    memcpy(reg.last_uj, uj, sizeof(double) * (size_t)n);
    reg.last_ts = t;
    pthread_mutex_unlock(&reg.mu);
}

void obs_power_close(void)
{
    pthread_mutex_lock(&gpu.mu);
    gpu_close();
    gpu.last_t = 0;
    pthread_mutex_unlock(&gpu.mu);
}

void obs__power_reset(void)
{
    obs_power_close();
    pthread_mutex_lock(&reg.mu);
    reg.energy_j = reg.power_w = reg.last_ts = 0;
    reg.sources = reg.gpus = reg.nrapl = 0;
    pthread_mutex_unlock(&reg.mu);
}

void obs__energy(obs_energy *e)
{
    pthread_mutex_lock(&reg.mu);
    e->joules = reg.energy_j;
    e->watts = reg.power_w;
    e->sources = reg.sources;
    e->gpus = reg.gpus;
    pthread_mutex_unlock(&reg.mu);
}

const char *obs_source_name(int sources, int gpus, char *buf, size_t n)
{
    const char *rapl = sources & OBS_SRC_RAPL ? "RAPL" : "";
    if (!(sources & OBS_SRC_NVML))
        snprintf(buf, n, "%s", rapl);
    else
        snprintf(buf, n, "%s%sNVML (%d GPU%s)", rapl, *rapl ? " + " : "", gpus,
                 gpus == 1 ? "" : "s");
    return buf;
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
    json_t *src = json_array();
    if (reg.sources & OBS_SRC_RAPL)
        json_array_append_new(src, json_string("RAPL"));
    if (reg.sources & OBS_SRC_NVML)
        json_array_append_new(src, json_string("NVML"));
    json_t *j = json_pack("{s:i,s:o,s:b,s:o,s:i,s:f,s:f}", "version", 1, "nodes", nodes,
                          "energy_measured", reg.sources != 0, "energy_sources", src, "gpus",
                          reg.gpus, "energy_j", reg.energy_j, "power_w", reg.power_w);
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
