/* hb_gpu.c - the heartbeat's GPU signal (see hb_gpu.h). */
#include "heartbeat/hb_gpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Adds the device named by one CUDA_VISIBLE_DEVICES entry (an index or a UUID). */
static void add_entry(hb_gpu *g, const char *e)
{
    nvml_dev d = NULL;
    char *end;
    long i = strtol(e, &end, 10);
    if (end != e && !*end) {
        if (i < 0 || g->api.handle((unsigned)i, &d) != NVML_SUCCESS)
            return;
    } else if (!g->api.handle_uuid || g->api.handle_uuid(e, &d) != NVML_SUCCESS) {
        return;
    }
    if (g->n < HB_GPU_MAX)
        g->dev[g->n++] = d;
}

hb_gpu *hb_gpu_open(void)
{
    hb_gpu *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    if (nvml_open(NULL, &g->api) != GRIT_OK) {
        free(g);
        return NULL;
    }
    if (!g->api.init || !g->api.count || !g->api.handle || !g->api.shutdown ||
        (!g->api.utilization && !g->api.clock) || g->api.init() != NVML_SUCCESS) {
        nvml_close(&g->api);
        free(g);
        return NULL;
    }
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (cvd) { /* the listed devices, up to the first that is not one (CUDA's rule) */
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", cvd);
        for (char *sv = NULL, *e = strtok_r(buf, ",", &sv); e; e = strtok_r(NULL, ",", &sv)) {
            int before = g->n;
            add_entry(g, e);
            if (g->n == before)
                break;
        }
    } else {
        unsigned n = 0;
        if (g->api.count(&n) == NVML_SUCCESS)
            for (unsigned i = 0; i < n && g->n < HB_GPU_MAX; i++)
                if (g->api.handle(i, &g->dev[g->n]) == NVML_SUCCESS)
                    g->n++;
    }
    for (int i = 0; i < g->n; i++)
        if (!g->api.max_clock || g->api.max_clock(g->dev[i], NVML_CLOCK_SM, &g->max_mhz[i]) != NVML_SUCCESS)
            g->max_mhz[i] = 0;
    if (!g->n) {
        hb_gpu_close(g);
        return NULL;
    }
    return g;
}

void hb_gpu_sample(hb_gpu *g, double *util, double *clock)
{
    *util = *clock = NAN;
    if (!g)
        return;
    double sum = 0;
    int nu = 0;
    for (int i = 0; i < g->n; i++) {
        nvml_util u;
        if (g->api.utilization && g->api.utilization(g->dev[i], &u) == NVML_SUCCESS && u.gpu <= 100) {
            sum += u.gpu / 100.0;
            nu++;
        }
        unsigned mhz;
        if (g->max_mhz[i] && g->api.clock && g->api.clock(g->dev[i], NVML_CLOCK_SM, &mhz) == NVML_SUCCESS) {
            double r = fmin(1.0, (double)mhz / g->max_mhz[i]);
            *clock = isfinite(*clock) ? fmin(*clock, r) : r;
        }
    }
    if (nu)
        *util = sum / nu;
}

void hb_gpu_close(hb_gpu *g)
{
    if (!g)
        return;
    g->api.shutdown();
    nvml_close(&g->api);
    free(g);
}
