/* test_system.c - limits, binaries, libraries and clock skew, healthy and faulted. */
#include <math.h>
#include <string.h>
#include <time.h>

#include "../check.h"
#include "health/health.h"

/* The named result; a failing placeholder (and a failed check) when absent. */
static const health_result *find(const health_report *r, const char *name)
{
    static health_result missing = {.name = "missing", .reason = "missing",
                                    .verdict = HEALTH_ERROR};
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->results[i].name, name))
            return &r->results[i];
    fprintf(stderr, "result %s missing\n", name);
    check_failures++;
    return &missing;
}

int main(void)
{
    health_opts o;
    health_opts_defaults(&o, HEALTH_QUICK);
    o.min_nofile = 16;
    o.min_memlock = 0;
    health_report r;
    health_report_init(&r, HEALTH_QUICK);
    health_check_system(&r, &o);
    CHECK_INT(find(&r, "system.clock_skew")->verdict, HEALTH_SKIP);
    CHECK_STR_HAS(find(&r, "system.clock_skew")->reason, "no reference time");
    CHECK_INT(find(&r, "system.nofile")->verdict, HEALTH_PASS);
    CHECK_INT(find(&r, "system.memlock")->verdict, HEALTH_PASS);
    CHECK_INT(find(&r, "system.binaries")->verdict, HEALTH_PASS);
    CHECK_INT(find(&r, "system.libraries")->verdict, HEALTH_SKIP);

    o.ref_time = (double)time(NULL);
    o.require_bins[o.n_require_bins++] = "/bin/sh";
    o.require_bins[o.n_require_bins++] = "grit-no-such-tool";
    o.require_libs[o.n_require_libs++] = "libm.so.6";
    o.require_libs[o.n_require_libs++] = "libgrit-nope.so.0";
    o.min_nofile = (uint64_t)1 << 40;
    health_report_init(&r, HEALTH_QUICK);
    health_check_system(&r, &o);
    CHECK_INT(find(&r, "system.clock_skew")->verdict, HEALTH_PASS);
    CHECK(find(&r, "system.clock_skew")->measured < 2.0);
    CHECK_INT(find(&r, "system.nofile")->verdict, HEALTH_FAIL);
    CHECK_STR_HAS(find(&r, "system.nofile")->reason, "ulimit -n");
    CHECK_INT(find(&r, "system.binaries")->verdict, HEALTH_FAIL);
    CHECK_STR_HAS(find(&r, "system.binaries")->reason, "not found in PATH: grit-no-such-tool");
    CHECK_INT(find(&r, "system.libraries")->verdict, HEALTH_FAIL);
    CHECK_STR_HAS(find(&r, "system.libraries")->reason, "libgrit-nope.so.0");

    /* Faults (the limit faults lower this process's own soft limits, so last). */
    health_opts_defaults(&o, HEALTH_QUICK);
    o.faults = 1u << HF_CLOCK_SKEW | 1u << HF_MISSING_BINARY | 1u << HF_NOFILE_LIMIT |
               1u << HF_MEMLOCK_LIMIT;
    health_report_init(&r, HEALTH_QUICK);
    health_check_system(&r, &o);
    CHECK_INT(find(&r, "system.clock_skew")->verdict, HEALTH_FAIL);
    CHECK_NEAR(find(&r, "system.clock_skew")->measured, 3600, 5);
    CHECK_INT(find(&r, "system.binaries")->verdict, HEALTH_FAIL);
    CHECK_INT(find(&r, "system.nofile")->verdict, HEALTH_FAIL);
    CHECK_STR_HAS(find(&r, "system.nofile")->reason, "soft limit 64 below 4096");
    CHECK_INT(find(&r, "system.memlock")->verdict, HEALTH_FAIL);
    CHECK_DONE();
}
