/* test_gpu.c - without NVML the GPU check skips (or fails when GPUs are expected);
 * the gpu_ecc fault drives the judging code with a fake driver. On a machine with
 * an NVIDIA driver the first case checks the real devices instead. */
#include <dlfcn.h>
#include <string.h>

#include "../check.h"
#include "health/health.h"

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
    CHECK_INT(r.n, 5);
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
    CHECK_DONE();
}
