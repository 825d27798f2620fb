/* test_compute.c - the compute KAT passes on healthy kernels; one flipped bit in one
 * GEMM output element is caught (by the tolerance when it is large, by the digest
 * always); a slowdown against a baseline is flagged. */
#include <string.h>

#include "../check.h"
#include "health/baseline.h"
#include "health/health.h"

static const health_result *find(const health_report *r, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->results[i].name, name))
            return &r->results[i];
    return NULL;
}

int main(void)
{
    health_opts o;
    health_opts_defaults(&o, HEALTH_QUICK);
    health_report r;
    health_report_init(&r, HEALTH_QUICK);
    CHECK_INT(health_check_compute(&r, &o), GRIT_OK);
    const char *names[] = {"compute.gemm_kat", "compute.layernorm_kat", "compute.attention_kat",
                           "compute.adamw_kat", "compute.digest"};
    for (int i = 0; i < 5; i++) {
        const health_result *x = find(&r, names[i]);
        CHECK(x != NULL);
        if (x && x->verdict != HEALTH_PASS)
            fprintf(stderr, "%s: %s\n", x->name, x->reason);
        CHECK(x && x->verdict == HEALTH_PASS);
    }
    const health_result *g = find(&r, "compute.gemm_gflops");
    CHECK(g && g->verdict == HEALTH_SKIP && g->measured > 0); /* no baseline */
    CHECK_INT(strlen(r.digest), 16);
    double gflops = g ? g->measured : 1.0;

    /* Exponent bit: both the tolerance and the digest catch it. */
    o.faults = 1u << HF_GEMM_BITFLIP;
    o.fault_bit = 30;
    health_report_init(&r, HEALTH_QUICK);
    health_check_compute(&r, &o);
    const health_result *k = find(&r, "compute.gemm_kat"), *d = find(&r, "compute.digest");
    CHECK(k && k->verdict == HEALTH_FAIL);
    CHECK_STR_HAS(k ? k->reason : NULL, "sgemm_nt C[");
    CHECK(d && d->verdict == HEALTH_FAIL);
    CHECK_STR_HAS(d ? d->reason : NULL, "(bit 30 flipped)");
    CHECK_NEAR(d ? d->measured : -1, 1, 0);

    /* Lowest mantissa bit: inside fp32 rounding, so only the digest sees it. */
    o.fault_bit = 0;
    health_report_init(&r, HEALTH_QUICK);
    health_check_compute(&r, &o);
    k = find(&r, "compute.gemm_kat");
    d = find(&r, "compute.digest");
    CHECK(k && k->verdict == HEALTH_PASS);
    CHECK(d && d->verdict == HEALTH_FAIL);
    CHECK_STR_HAS(d ? d->reason : NULL, "sgemm_nt C[");
    CHECK_STR_HAS(d ? d->reason : NULL, "(bit 0 flipped)");

    /* Each kernel's corruption names its kernel. */
    struct { health_fault f; const char *check, *what; } kf[] = {
        {HF_LAYERNORM_CORRUPT, "compute.layernorm_kat", "layernorm out["},
        {HF_ATTENTION_CORRUPT, "compute.attention_kat", "attention out["},
        {HF_ADAMW_CORRUPT, "compute.adamw_kat", "adamw param["},
    };
    o.fault_bit = 30;
    for (int i = 0; i < 3; i++) {
        o.faults = 1u << kf[i].f;
        health_report_init(&r, HEALTH_QUICK);
        health_check_compute(&r, &o);
        k = find(&r, kf[i].check);
        CHECK(k && k->verdict == HEALTH_FAIL);
        CHECK_STR_HAS(k ? k->reason : NULL, kf[i].what);
        CHECK(find(&r, "compute.gemm_kat")->verdict == HEALTH_PASS);
    }

    /* Throughput against a baseline: 50x slower fails. */
    health_baseline bl;
    memset(&bl, 0, sizeof bl);
    bl.n = 1;
    snprintf(bl.names[0], sizeof bl.names[0], "compute.gemm_gflops");
    bl.values[0] = gflops;
    o.faults = 0;
    o.baseline = &bl;
    o.slow_factor = 2.0; /* wide: the sanitizer build and a shared machine are noisy */
    o.slowdown = 50.0; /* far beyond the load swings of a shared machine */
    health_report_init(&r, HEALTH_QUICK);
    health_check_compute(&r, &o);
    g = find(&r, "compute.gemm_gflops");
    CHECK(g && g->verdict == HEALTH_FAIL);
    CHECK_STR_HAS(g ? g->reason : NULL, "slower than the baseline");
    health_report_free(&r);
    CHECK_DONE();
}
