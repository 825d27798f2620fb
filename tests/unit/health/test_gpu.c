/* test_gpu.c - without NVML the GPU check skips (or fails when GPUs are expected);
 * the gpu_ecc fault drives the judging code with a fake driver. On a machine with
 * an NVIDIA driver the first case checks the real devices instead. Then the
 * stand-in libnvidia-ml (tests/fake/fake_nvml.c, loaded by path) stages Xid
 * events: a critical Xid fails gpu.xid naming the GPU and Xid, a benign one
 * only warns, and the event set is registered, waited on and freed. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"
#include "health/health.h"

static const health_result *find(const health_report *r, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->results[i].name, name))
            return &r->results[i];
    fprintf(stderr, "no result %s\n", name);
    return NULL;
}

/* Runs the GPU check against the fake library; returns gpu.xid (or NULL). */
static const health_result *run_fake(health_report *r, health_mode mode, double window)
{
    health_opts o;
    health_opts_defaults(&o, mode);
    o.nvml_path = GRIT_FAKE_NVML;
    o.xid_window_s = window;
    health_report_init(r, mode);
    CHECK_INT(health_check_gpu(r, &o), GRIT_OK);
    return find(r, "gpu.xid");
}

static void check_fake_lib(void)
{
    health_report r;
    char logpath[] = "/tmp/grit-fake-nvml-XXXXXX";
    int fd = mkstemp(logpath);
    CHECK(fd >= 0);
    close(fd);
    setenv("FAKE_NVML_LOG", logpath, 1);
    setenv("FAKE_NVML_GPUS", "2", 1);
    unsetenv("FAKE_NVML_XIDS");

    /* Quick mode: devices found, no Xid wait. */
    const health_result *x = run_fake(&r, HEALTH_QUICK, 2.0);
    CHECK_INT(find(&r, "gpu.devices")->verdict, HEALTH_PASS);
    CHECK_STR_HAS(find(&r, "gpu.devices")->reason, "2 GPU(s): Fake GPU 0");
    CHECK(x && x->verdict == HEALTH_SKIP);
    CHECK_STR_HAS(x ? x->reason : NULL, "quick mode");

    /* Deep, no events: pass after the window. */
    x = run_fake(&r, HEALTH_DEEP, 0.2);
    CHECK(x && x->verdict == HEALTH_PASS);
    CHECK_STR_HAS(x ? x->reason : NULL, "no Xid events in 0.2 s on 2 GPU(s)");
    CHECK_INT(health_exit_code(&r), 0);

    /* A critical Xid (79: fallen off the bus) fails, naming GPU and Xid. */
    setenv("FAKE_NVML_XIDS", "79", 1);
    x = run_fake(&r, HEALTH_DEEP, 0.2);
    CHECK(x && x->verdict == HEALTH_FAIL);
    CHECK_STR_HAS(x ? x->reason : NULL, "GPU 0: Xid 79 (GPU has fallen off the bus)");
    CHECK_INT(health_exit_code(&r), 1);

    /* A benign Xid (13, graphics engine exception: usually the program) warns only. */
    setenv("FAKE_NVML_XIDS", "13", 1);
    x = run_fake(&r, HEALTH_DEEP, 0.2);
    CHECK(x && x->verdict == HEALTH_WARN);
    CHECK_STR_HAS(x ? x->reason : NULL, "GPU 0: Xid 13: 1 non-critical Xid event(s)");
    CHECK_INT(health_exit_code(&r), 0);

    /* Benign then critical on GPU 1: the critical one decides and is named. */
    setenv("FAKE_NVML_XIDS", "13,31,48", 1);
    setenv("FAKE_NVML_XID_GPU", "1", 1);
    x = run_fake(&r, HEALTH_DEEP, 0.2);
    CHECK(x && x->verdict == HEALTH_FAIL);
    CHECK_STR_HAS(x ? x->reason : NULL, "GPU 1: Xid 48 (double-bit ECC error); 3 Xid event(s), 1 critical");
    CHECK_NEAR(x ? x->measured : -1, 1, 0);
    unsetenv("FAKE_NVML_XID_GPU");

    /* The event set was created, both devices registered for Xid events (0x8),
     * waited on, freed, and NVML shut down. */
    FILE *f = fopen(logpath, "r");
    char log[8192] = "";
    size_t n = f ? fread(log, 1, sizeof log - 1, f) : 0;
    log[n] = '\0';
    if (f)
        fclose(f);
    CHECK_STR_HAS(log, "create 0 0");
    CHECK_STR_HAS(log, "register 0 8");
    CHECK_STR_HAS(log, "register 1 8");
    CHECK_STR_HAS(log, "wait ");
    CHECK_STR_HAS(log, "free 0 0");
    CHECK_STR_HAS(log, "shutdown 0 0");
    int creates = 0, frees = 0;
    for (const char *p = log; (p = strstr(p, "create ")); p++)
        creates++;
    for (const char *p = log; (p = strstr(p, "free ")); p++)
        frees++;
    CHECK_INT(creates, frees);

    /* Devices without Xid event support, and a disabled window: skipped, said why. */
    setenv("FAKE_NVML_NO_EVENTS", "1", 1);
    x = run_fake(&r, HEALTH_DEEP, 0.2);
    CHECK(x && x->verdict == HEALTH_SKIP);
    CHECK_STR_HAS(x ? x->reason : NULL, "no device supports Xid events");
    unsetenv("FAKE_NVML_NO_EVENTS");
    x = run_fake(&r, HEALTH_DEEP, 0);
    CHECK(x && x->verdict == HEALTH_SKIP);
    CHECK_STR_HAS(x ? x->reason : NULL, "--xid-seconds 0");
    unsetenv("FAKE_NVML_XIDS");
    unsetenv("FAKE_NVML_GPUS");
    unsetenv("FAKE_NVML_LOG");
    unlink(logpath);
}

int main(void)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    int have_nvml = h != NULL;
    if (h)
        dlclose(h);
    health_opts o;
    health_opts_defaults(&o, HEALTH_QUICK);
    health_report r;
    health_report_init(&r, HEALTH_QUICK);
    health_check_gpu(&r, &o);
    CHECK(r.n >= 1);
    CHECK_STR_HAS(r.results[0].name, "gpu.devices");
    if (!have_nvml) {
        printf("no NVML on this machine: testing the skip path\n");
        CHECK_INT(r.results[0].verdict, HEALTH_SKIP);
        CHECK_STR_HAS(r.results[0].reason, "libnvidia-ml.so.1 not found");
        o.expect_gpus = 2;
        health_report_init(&r, HEALTH_QUICK);
        health_check_gpu(&r, &o);
        CHECK_INT(r.results[0].verdict, HEALTH_FAIL);
        CHECK_STR_HAS(r.results[0].reason, "expected 2 GPU(s), found none");
    } else {
        printf("NVML present: %s: %s\n", health_verdict_name(r.results[0].verdict),
               r.results[0].reason);
    }
    o.expect_gpus = -1;
    o.faults = 1u << HF_GPU_ECC;
    health_report_init(&r, HEALTH_QUICK);
    health_check_gpu(&r, &o);
    CHECK_INT(r.n, 6);
    CHECK_INT(r.results[0].verdict, HEALTH_PASS);
    CHECK_STR_HAS(r.results[1].name, "gpu.ecc");
    CHECK_INT(r.results[1].verdict, HEALTH_FAIL);
    CHECK_STR_HAS(r.results[1].reason, "2 uncorrected ECC error(s)");
    CHECK_INT(r.results[2].verdict, HEALTH_PASS); /* remap/retire: not supported by the fake */
    CHECK_INT(r.results[3].verdict, HEALTH_PASS);
    o.expect_gpus = 4;
    health_report_init(&r, HEALTH_QUICK);
    health_check_gpu(&r, &o);
    CHECK_INT(r.results[0].verdict, HEALTH_FAIL);
    CHECK_STR_HAS(r.results[0].reason, "found 1 GPU(s), expected 4");
    check_fake_lib();
    CHECK_DONE();
}
