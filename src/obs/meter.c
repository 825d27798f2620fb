/*
 * meter.c - one machine's energy meter (meter.h): node energy is what could be
 * measured, summed over the interval since the previous sample:
 *
 *   RAPL  the package counters <root>/intel-rapl:N/energy_uj (uJ), often root-only.
 *         They wrap at max_energy_range_uj: a decrease adds the range. A change in
 *         the number of zones (or an unreadable one) restarts the baseline.
 *   NVML  per GPU (core/nvml.h, libnvidia-ml loaded on the first sample and kept
 *         until obs_meter_close): nvmlDeviceGetTotalEnergyConsumption (mJ since
 *         the driver loaded, Volta and newer; 64 bits, never wraps) as the
 *         difference between samples. A decrease means the driver reloaded within
 *         the interval and the counter restarted at 0, so the interval counts the
 *         new value, never a negative difference. A GPU answering NOT_SUPPORTED
 *         (pre-Volta) integrates nvmlDeviceGetPowerUsage (mW) instead: the mean of
 *         the two readings times the interval.
 *
 * Node power = RAPL + GPUs. The meter records which sources were measured (a union
 * over its life) and the most GPUs in one interval. No library, no GPU or an NVML
 * that fails to initialise is tried once and then left alone: RAPL-only, silently.
 * A read that fails drops that source (or that GPU) from the interval and restarts
 * its baseline.
 */
#define _GNU_SOURCE
#include "obs/meter.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/nvml.h"

#define RAPL_MAX 16
#define GPU_MAX 64

struct obs_meter {
    char root[1024], lib[1024]; /* lib "": the default (nvml_lib_path) */
    obs_energy tot;
    /* RAPL */
    double last_uj[RAPL_MAX], last_ts;
    int nrapl;
    /* NVML */
    int state; /* 0 not tried, 1 open and initialised, -1 unavailable */
    nvml_api api;
    nvml_dev dev[GPU_MAX];
    unsigned n;
    int no_energy[GPU_MAX]; /* energy counter NOT_SUPPORTED: integrate the power draw */
    int have[GPU_MAX];      /* last_mj / last_mw hold the previous sample */
    unsigned long long last_mj[GPU_MAX];
    double last_mw[GPU_MAX];
    double last_t;
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

obs_meter *obs_meter_open(const char *rapl_root, const char *nvml_lib)
{
    obs_meter *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    snprintf(m->root, sizeof m->root, "%s", rapl_root ? rapl_root : "/sys/class/powercap");
    snprintf(m->lib, sizeof m->lib, "%s", nvml_lib ? nvml_lib : "");
    return m;
}

void obs_meter_close(obs_meter *m)
{
    if (!m)
        return;
    if (m->state == 1)
        m->api.shutdown();
    nvml_close(&m->api);
    free(m);
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

/* Loads and initialises NVML once; 1 when GPUs can be read. A missing library, a failed
 * init or no devices leaves it unavailable, quietly: a node without GPUs is the common
 * case, not an error. */
static int gpu_ready(obs_meter *m)
{
    if (m->state)
        return m->state == 1;
    m->state = -1;
    if (nvml_open(nvml_lib_path(m->lib[0] ? m->lib : NULL), &m->api) != GRIT_OK) {
        grit_errclear(); /* no driver: RAPL only */
        return 0;
    }
    unsigned n = 0;
    if (!m->api.init || !m->api.shutdown || !m->api.count || !m->api.handle ||
        (!m->api.energy && !m->api.power) || m->api.init() != NVML_SUCCESS) {
        nvml_close(&m->api);
        return 0;
    }
    if (m->api.count(&n) != NVML_SUCCESS)
        n = 0;
    for (unsigned i = 0; i < n && m->n < GPU_MAX; i++)
        if (m->api.handle(i, &m->dev[m->n]) == NVML_SUCCESS)
            m->n++;
    if (!m->n) {
        m->api.shutdown();
        nvml_close(&m->api);
        return 0;
    }
    m->state = 1;
    return 1;
}

/* One GPU's energy over the interval ending at t: 1 with *joules set when the interval
 * could be measured, 0 on the first sample or a failed read. */
static int gpu_read(obs_meter *m, unsigned i, double t, double *joules)
{
    nvml_dev d = m->dev[i];
    double dt = t - m->last_t;
    int prev = m->have[i] && m->last_t > 0 && dt > 0;
    m->have[i] = 0;
    if (!m->no_energy[i]) {
        unsigned long long mj = 0;
        nvml_ret e = m->api.energy ? m->api.energy(d, &mj) : NVML_NOT_SUPPORTED;
        if (e == NVML_SUCCESS) {
            unsigned long long last = m->last_mj[i];
            m->last_mj[i] = mj;
            m->have[i] = 1;
            if (!prev)
                return 0;
            *joules = (double)(mj >= last ? mj - last : mj) / 1e3; /* a decrease: reloaded */
            return 1;
        }
        if (e != NVML_NOT_SUPPORTED)
            return 0;
        m->no_energy[i] = 1; /* pre-Volta: from now on, integrate the power draw */
        prev = 0;
    }
    unsigned mw = 0;
    if (!m->api.power || m->api.power(d, &mw) != NVML_SUCCESS)
        return 0;
    double last = m->last_mw[i];
    m->last_mw[i] = mw;
    m->have[i] = 1;
    if (!prev)
        return 0;
    *joules = (last + mw) / 2.0 / 1e3 * dt;
    return 1;
}

int obs_meter_sample(obs_meter *m, double t, double *interval_j)
{
    double uj[RAPL_MAX], range[RAPL_MAX];
    int n = rapl_read(m->root, uj, range, RAPL_MAX);
    if (t <= 0)
        t = now_s();
    double gpu_j = 0;
    int ngpu = 0;
    if (gpu_ready(m)) {
        for (unsigned i = 0; i < m->n; i++) {
            double j = 0;
            if (gpu_read(m, i, t, &j)) {
                gpu_j += j;
                ngpu++;
            }
        }
        m->last_t = t;
    }
    double d = 0, dt = t - m->last_ts;
    int src = 0;
    if (n > 0 && n == m->nrapl && m->last_ts > 0 && dt > 0) {
        for (int i = 0; i < n; i++) {
            double di = uj[i] - m->last_uj[i];
            d += di >= 0 ? di : di + range[i]; /* the counter wrapped */
        }
        d /= 1e6;
        src |= OBS_SRC_RAPL;
    }
    if (ngpu) {
        d += gpu_j;
        src |= OBS_SRC_NVML;
        m->tot.gpus = ngpu > m->tot.gpus ? ngpu : m->tot.gpus;
    }
    if (!(dt > 0))
        src = 0;
    if (src) {
        m->tot.joules += d;
        m->tot.watts = d / dt;
        m->tot.sources |= src;
    }
    m->nrapl = n;
    memcpy(m->last_uj, uj, sizeof(double) * (size_t)n);
    m->last_ts = t;
    if (interval_j)
        *interval_j = src ? d : 0;
    return src;
}

void obs_meter_read(const obs_meter *m, obs_energy *e)
{
    *e = m->tot;
}

const char *obs_host_id(char *buf, size_t n)
{
    if (!n)
        return buf;
    buf[0] = '\0';
    const char *env = getenv("GRIT_HOST_ID"); /* a simulated cluster on one kernel (tests) */
    FILE *f = env && *env ? NULL : fopen("/proc/sys/kernel/random/boot_id", "r");
    char line[128] = "";
    if (env && *env)
        snprintf(line, sizeof line, "%s", env);
    if (f) {
        if (!fgets(line, sizeof line, f))
            line[0] = '\0';
        fclose(f);
    }
    line[strcspn(line, " \t\r\n")] = '\0';
    if (!line[0] && gethostname(line, sizeof line - 1) != 0)
        line[0] = '\0';
    line[sizeof line - 1] = '\0';
    for (char *p = line; *p; p++) /* a protocol word: no spaces, no '=' */
        if (*p <= ' ' || *p == '=' || *p == '"' || *p == '\\' || (unsigned char)*p >= 127)
            *p = '_';
    snprintf(buf, n, "%s", line);
    return buf;
}
