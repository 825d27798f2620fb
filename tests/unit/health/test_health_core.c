/* test_health_core.c - result judging, exit codes, fault parsing, JSON report, baseline file. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "../check.h"
#include "health/baseline.h"
#include "health/health.h"
#include "health/report.h"

int main(void)
{
    health_report r;
    health_report_init(&r, HEALTH_QUICK);
    CHECK_INT(health_exit_code(&r), 0);
    health_result *a = health_add(&r, "fam.%s", "le");
    health_judge(a, 1.0, HEALTH_CMP_LE, 1.0, "u");
    CHECK_INT(a->verdict, HEALTH_PASS);
    health_judge(a, NAN, HEALTH_CMP_LE, 1.0, "u"); /* NaN never passes */
    CHECK_INT(a->verdict, HEALTH_FAIL);
    health_judge(a, 5.0, HEALTH_CMP_GE, 4.0, "GB/s");
    CHECK_INT(a->verdict, HEALTH_PASS);
    health_result *b = health_add(&r, "fam.skip");
    health_set(b, HEALTH_SKIP, "skipped: %s", "why");
    CHECK_INT(health_exit_code(&r), 0);
    health_set(b, HEALTH_ERROR, "could not");
    CHECK_INT(health_exit_code(&r), 2);
    CHECK(health_first_bad(&r) == b);
    health_judge(a, 3.0, HEALTH_CMP_GE, 4.0, "GB/s");
    CHECK_INT(health_exit_code(&r), 1);
    CHECK(health_first_bad(&r) == a);

    json_t *j = health_report_json(&r);
    CHECK_INT(json_integer_value(json_object_get(j, "exit_code")), 1);
    CHECK(json_is_false(json_object_get(j, "healthy")));
    json_t *c0 = json_array_get(json_object_get(j, "checks"), 0);
    CHECK_STR_HAS(json_string_value(json_object_get(c0, "family")), "fam");
    CHECK_STR_HAS(json_string_value(json_object_get(c0, "op")), ">=");
    CHECK_NEAR(json_real_value(json_object_get(c0, "threshold")), 4.0, 0);
    CHECK(json_is_null(json_object_get(json_array_get(json_object_get(j, "checks"), 1), "measured")));
    CHECK_INT(json_array_size(json_object_get(j, "failures")), 2);
    json_decref(j);

    /* The table: reasons listed; ANSI colours only when asked for. */
    char *buf = NULL;
    size_t blen = 0;
    FILE *mf = open_memstream(&buf, &blen);
    health_report_print(&r, mf, 0);
    fclose(mf);
    CHECK_STR_HAS(buf, "UNHEALTHY");
    CHECK_STR_HAS(buf, "  - fam.le: ");
    CHECK(strchr(buf, '\033') == NULL);
    free(buf);
    mf = open_memstream(&buf, &blen);
    health_report_print(&r, mf, 1);
    fclose(mf);
    CHECK_STR_HAS(buf, "\033[31mfail");
    free(buf);

    /* Faults from the environment. */
    health_opts o;
    health_opts_defaults(&o, HEALTH_QUICK);
    setenv("GRIT_HEALTH_FAULT", "gemm_bitflip,clock_skew", 1);
    setenv("GRIT_HEALTH_FAULT_BIT", "3", 1);
    CHECK_INT(health_faults_from_env(&o), GRIT_OK);
    CHECK(health_fault_on(&o, HF_GEMM_BITFLIP));
    CHECK(health_fault_on(&o, HF_CLOCK_SKEW));
    CHECK(!health_fault_on(&o, HF_DISK_FULL));
    CHECK_INT(o.fault_bit, 3);
    setenv("GRIT_HEALTH_FAULT", "slow_compute", 1);
    health_opts_defaults(&o, HEALTH_QUICK);
    CHECK_INT(health_faults_from_env(&o), GRIT_OK);
    CHECK(o.slowdown > 1.0);
    setenv("GRIT_HEALTH_FAULT", "no_such_fault", 1);
    CHECK_INT(health_faults_from_env(&o), GRIT_EINVAL);
    CHECK_STR_HAS(grit_errmsg(), "unknown fault 'no_such_fault'");
    unsetenv("GRIT_HEALTH_FAULT");
    setenv("GRIT_HEALTH_SLOWDOWN", "0.5", 1);
    CHECK_INT(health_faults_from_env(&o), GRIT_EINVAL);
    unsetenv("GRIT_HEALTH_SLOWDOWN");
    unsetenv("GRIT_HEALTH_FAULT_BIT");

    /* Baseline round trip: values of passing measured results, the digest. */
    char dir[] = "/tmp/grit-test-baseline-XXXXXX", path[128];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/base.json", dir);
    health_report_init(&r, HEALTH_QUICK);
    health_result *g = health_add(&r, "compute.gemm_gflops");
    g->measured = 123.5;
    snprintf(g->unit, sizeof g->unit, "GFLOP/s");
    g->verdict = HEALTH_SKIP;
    health_result *k = health_add(&r, "compute.gemm_kat");
    health_judge(k, 0.01, HEALTH_CMP_LE, 1.0, "x bound");
    CHECK_INT(health_baseline_save(&r, 4, "00112233aabbccdd", path), GRIT_OK);
    health_baseline bl;
    CHECK_INT(health_baseline_load(&bl, path), GRIT_OK);
    double v = 0;
    CHECK(health_baseline_get(&bl, "compute.gemm_gflops", &v));
    CHECK_NEAR(v, 123.5, 0);
    CHECK(!health_baseline_get(&bl, "compute.gemm_kat", &v)); /* errors are not baselines */
    CHECK_INT(bl.threads, 4);
    CHECK_STR_HAS(bl.digest, "00112233aabbccdd");
    FILE *f = fopen(path, "w");
    fputs("{\"values\": {}}", f);
    fclose(f);
    CHECK_INT(health_baseline_load(&bl, path), GRIT_EFORMAT);
    CHECK_STR_HAS(grit_errmsg(), "not a grit health baseline");
    unlink(path);
    CHECK_INT(health_baseline_load(&bl, path), GRIT_EIO);
    rmdir(dir);
    health_report_free(&r);
    CHECK_DONE();
}
