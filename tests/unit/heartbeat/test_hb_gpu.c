/* test_hb_gpu.c - the heartbeat's GPU signal (heartbeat/hb_gpu.h, hb.h) against the
 * stand-in NVML (tests/fake/fake_nvml.c): gpu_util= and sm_clock= parse, are NAN when
 * absent and dropped when out of 0..1; the sampler reads the mean utilisation and the
 * lowest SM clock ratio over the node's GPUs (all, or CUDA_VISIBLE_DEVICES's), follows
 * values the test changes between samples, and is NULL without a library or a visible
 * GPU; a real client with gpu on loopback sends both fields, one without gpu neither. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../check.h"
#include "heartbeat/hb.h"
#include "heartbeat/hb_gpu.h"

#define SECRET "00112233445566778899aabbccddeeff"

static char util_path[64], clock_path[64];

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void parse_gpu(void)
{
    hb_msg m;
    CHECK_INT(hb_parse("HB1 " SECRET " rank=1 node=n step=3 util=0.2 gpu_util=0.9500 "
                       "sm_clock=0.5200", SECRET, &m), GRIT_OK);
    CHECK_NEAR(m.gpu_util, 0.95, 1e-12);
    CHECK_NEAR(m.sm_clock, 0.52, 1e-12);
    CHECK_INT(hb_parse("HB1 " SECRET " rank=1 node=n step=3 util=0.2", SECRET, &m), GRIT_OK);
    CHECK(isnan(m.gpu_util) && isnan(m.sm_clock)); /* a worker without GPUs, or older */
    const char *bad[] = {"gpu_util=1.5 sm_clock=0", "gpu_util=-0.1 sm_clock=1.01",
                         "gpu_util=nan sm_clock=inf", "gpu_util=x sm_clock=-1"};
    for (int i = 0; i < 4; i++) {
        char line[200];
        snprintf(line, sizeof line, "HB1 " SECRET " rank=1 step=4 %s", bad[i]);
        CHECK_INT(hb_parse(line, SECRET, &m), GRIT_OK); /* the beat stands */
        CHECK(isnan(m.gpu_util) && isnan(m.sm_clock));
        CHECK_INT(m.step, 4);
    }
    /* the CPU and network signals too: a value that is not all number is no measurement */
    CHECK_INT(hb_parse("HB1 " SECRET " rank=1 step=4 util=x net_rx=5e5q net_tx=1", SECRET, &m),
              GRIT_OK);
    CHECK(isnan(m.util) && isnan(m.net_rx) && isnan(m.net_tx));
}

static void sampler(void)
{
    double u, k;
    setenv("GRIT_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    CHECK(hb_gpu_open() == NULL); /* no driver: no GPU signal */
    setenv("GRIT_NVML_LIB", GRIT_FAKE_NVML, 1);
    setenv("FAKE_NVML_GPUS", "3", 1);
    setenv("FAKE_NVML_UTIL_FILE", util_path, 1);
    setenv("FAKE_NVML_CLOCK_FILE", clock_path, 1);
    setenv("FAKE_NVML_MAX_CLOCK_MHZ", "1980", 1);
    put(util_path, "90,60,30\n");
    put(clock_path, "1980,990,1782\n");
    unsetenv("CUDA_VISIBLE_DEVICES");
    hb_gpu *g = hb_gpu_open();
    CHECK(g != NULL);
    if (!g)
        return;
    CHECK_INT(g->n, 3);
    hb_gpu_sample(g, &u, &k);
    CHECK_NEAR(u, 0.6, 1e-12); /* the mean of 90, 60, 30 % */
    CHECK_NEAR(k, 0.5, 1e-12); /* the lowest: 990 of 1980 MHz */
    put(util_path, "35,35,35\n"); /* changed while it runs */
    put(clock_path, "1980,1980,2100\n"); /* a boost above the maximum counts as 1 */
    hb_gpu_sample(g, &u, &k);
    CHECK_NEAR(u, 0.35, 1e-12);
    CHECK_NEAR(k, 1.0, 1e-12);
    unlink(util_path); /* the driver answers an error: no utilisation, the clock stands */
    hb_gpu_sample(g, &u, &k);
    CHECK(isnan(u));
    CHECK_NEAR(k, 1.0, 1e-12);
    hb_gpu_close(g);
    put(util_path, "90,60,30\n");
    put(clock_path, "1980,990,1782\n");
    setenv("CUDA_VISIBLE_DEVICES", "0,2", 1); /* the node's GPUs are those it may use */
    g = hb_gpu_open();
    CHECK(g && g->n == 2);
    hb_gpu_sample(g, &u, &k);
    CHECK_NEAR(u, 0.6, 1e-12); /* (90 + 30) / 2 */
    CHECK_NEAR(k, 0.9, 1e-12); /* 1782 of 1980 */
    hb_gpu_close(g);
    setenv("CUDA_VISIBLE_DEVICES", "1,7,0", 1); /* CUDA stops at the first invalid entry */
    g = hb_gpu_open();
    CHECK(g && g->n == 1);
    hb_gpu_sample(g, &u, &k);
    CHECK_NEAR(u, 0.6, 1e-12);
    CHECK_NEAR(k, 0.5, 1e-12);
    hb_gpu_close(g);
    setenv("CUDA_VISIBLE_DEVICES", "", 1); /* no GPU visible: none */
    CHECK(hb_gpu_open() == NULL);
    unsetenv("CUDA_VISIBLE_DEVICES");
    unsetenv("FAKE_NVML_UTIL_FILE"); /* neither query supported: NAN, NAN */
    unsetenv("FAKE_NVML_CLOCK_FILE");
    g = hb_gpu_open();
    hb_gpu_sample(g, &u, &k);
    CHECK(isnan(u) && isnan(k));
    hb_gpu_close(g);
    hb_gpu_close(NULL);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* rank's beats for secs: how many, and the newest gpu_util and sm_clock (NAN: none had
 * them); other ranks' (a stopped client's last) are skipped. */
static int drain(hb_server *s, int rank, double secs, double *u, double *k)
{
    int n = 0;
    *u = *k = NAN;
    for (double end = now_s() + secs; now_s() < end; usleep(10000)) {
        hb_msg m;
        while (hb_server_poll(s, &m, NULL, NULL)) {
            if (m.rank != rank)
                continue;
            n++;
            if (isfinite(m.gpu_util))
                *u = m.gpu_util;
            if (isfinite(m.sm_clock))
                *k = m.sm_clock;
        }
    }
    return n;
}

static void client(void)
{
    setenv("FAKE_NVML_UTIL_FILE", util_path, 1);
    setenv("FAKE_NVML_CLOCK_FILE", clock_path, 1);
    put(util_path, "95,95,95\n");
    put(clock_path, "1960,1960,1960\n");
    hb_server s;
    CHECK_INT(hb_server_open(&s, NULL), GRIT_OK);
    setenv("GRIT_SUP_ADDR", s.addr, 1);
    setenv("GRIT_SUP_SECRET", s.secret, 1);
    hb_client_opts o = {.rank = 0, .node = "n0", .period = 0.2, .gpu = true};
    hb_client *c = hb_client_start(&o);
    CHECK(c != NULL);
    double u, k;
    CHECK(drain(&s, 0, 0.8, &u, &k) >= 2);
    CHECK_NEAR(u, 0.95, 1e-4);
    CHECK_NEAR(k, 1960.0 / 1980, 1e-4);
    put(util_path, "35,95,95\n"); /* node's GPU 0 slows: the next beats say so */
    put(clock_path, "990,1960,1960\n");
    drain(&s, 0, 0.8, &u, &k);
    CHECK_NEAR(u, 0.75, 1e-4);
    CHECK_NEAR(k, 0.5, 1e-4);
    hb_client_stop(c);
    o.gpu = false; /* the node's other ranks: no GPU fields */
    o.rank = 1;
    c = hb_client_start(&o);
    CHECK(drain(&s, 1, 0.6, &u, &k) >= 2);
    CHECK(isnan(u) && isnan(k));
    hb_client_stop(c);
    hb_server_close(&s);
}

int main(void)
{
    snprintf(util_path, sizeof util_path, "/tmp/grit-hbgpu-%ld.util", (long)getpid());
    snprintf(clock_path, sizeof clock_path, "/tmp/grit-hbgpu-%ld.clock", (long)getpid());
    parse_gpu();
    sampler();
    client();
    unlink(util_path);
    unlink(clock_path);
    CHECK_DONE();
}
