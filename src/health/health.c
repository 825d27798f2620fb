/*
 * health.c - the result type, options, fault switch and the run order of the
 * check families (see health.h). The families themselves live in
 * compute.c, memory.c, disk.c, network.c, gpu.c and system.c.
 */
#include "health/health.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fault.h"
#include "core/progress.h"

const char *const health_fault_names[HF_COUNT] = {
    "gemm_bitflip", "layernorm_corrupt", "attention_corrupt", "adamw_corrupt",
    "slow_compute", "memory_corrupt",    "slow_memory",       "disk_readonly",
    "fsync_fail",   "disk_full",         "slow_disk",         "gpu_ecc",
    "nofile_limit", "memlock_limit",     "missing_binary",    "clock_skew",
    "slow_link",    "allreduce_corrupt",
};

const char *health_verdict_name(health_verdict v)
{
    switch (v) {
    case HEALTH_PASS: return "pass";
    case HEALTH_SKIP: return "skip";
    case HEALTH_FAIL: return "fail";
    case HEALTH_ERROR: return "error";
    case HEALTH_WARN: return "warn";
    }
    return "error";
}

void health_opts_defaults(health_opts *o, health_mode mode)
{
    memset(o, 0, sizeof *o);
    o->mode = mode;
    o->deep_seconds = 20.0;
    o->seed = 20240607;
    o->slow_factor = 1.25;
    o->gemm_threads = 1;
    o->mem_fraction = mode == HEALTH_DEEP ? 0.10 : 0.01;
    o->mem_max_bytes = mode == HEALTH_DEEP ? (size_t)8 << 30 : (size_t)128 << 20;
    o->min_mem_gbps = 0.5;
    o->dir = ".";
    o->disk_test_bytes = mode == HEALTH_DEEP ? (size_t)256 << 20 : (size_t)16 << 20;
    o->need_bytes = 0;
    o->ckpt_model = NULL;
    o->ckpt_count = 3;
    o->min_disk_mbps = 10.0;
    o->expect_gpus = -1;
    o->max_gpu_temp_c = 85.0;
    o->xid_window_s = 2.0;
    o->nvml_path = "libnvidia-ml.so.1";
    o->net_max_bytes = mode == HEALTH_DEEP ? (size_t)64 << 20 : (size_t)1 << 20;
    o->net_pair_bytes = mode == HEALTH_DEEP ? (size_t)64 << 20 : (size_t)8 << 20;
    o->min_busbw_gbps = 0.1;
    o->max_allreduce_us = 5000;
    o->min_pair_gbps = 0.1;
    o->max_pair_us = 1000;
    o->net_rel_factor = 4.0;
    o->min_nofile = 4096;
    o->min_memlock = 64 * 1024;
    o->require_bins[o->n_require_bins++] = "sh";
    o->ref_time = NAN;
    o->max_skew_s = 2.0;
    o->fault_bit = 30;
    o->slowdown = 1.0;
    o->fault_rank = -1;
    o->net_delay_us = 5000;
}

grit_err health_faults_from_env(health_opts *o)
{
    const char *s = fault_spec(FAULT_HEALTH);
    if (s && *s) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", s);
        char *save = NULL;
        for (char *tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
            int found = -1;
            for (int i = 0; i < HF_COUNT; i++)
                if (!strcmp(tok, health_fault_names[i]))
                    found = i;
            if (found < 0)
                return grit_errf(GRIT_EINVAL, "GRIT_HEALTH_FAULT: unknown fault '%s'", tok);
            o->faults |= 1u << found;
        }
    }
    const char *b = fault_spec(FAULT_HEALTH_BIT);
    if (b && *b) {
        char *end;
        errno = 0;
        long v = strtol(b, &end, 10);
        if (errno || *end || v < 0 || v > 31)
            return grit_errf(GRIT_EINVAL, "GRIT_HEALTH_FAULT_BIT: expected 0..31, got '%s'", b);
        o->fault_bit = (int)v;
    }
    const char *f = fault_spec(FAULT_HEALTH_SLOWDOWN);
    if (f && *f) {
        char *end;
        errno = 0;
        double v = strtod(f, &end);
        if (errno || *end || !(v >= 1.0 && v <= 1000.0))
            return grit_errf(GRIT_EINVAL, "GRIT_HEALTH_SLOWDOWN: expected a factor in [1, 1000], got '%s'", f);
        o->slowdown = v;
    }
    const char *fr = fault_spec(FAULT_HEALTH_RANK);
    if (fr && *fr) {
        char *end;
        errno = 0;
        long v = strtol(fr, &end, 10);
        if (errno || *end || v < 0 || v > 1000000)
            return grit_errf(GRIT_EINVAL, "GRIT_HEALTH_FAULT_RANK: expected a rank >= 0, got '%s'", fr);
        o->fault_rank = (int)v;
    }
    const char *dl = fault_spec(FAULT_HEALTH_NET_DELAY_US);
    if (dl && *dl) {
        char *end;
        errno = 0;
        double v = strtod(dl, &end);
        if (errno || *end || !(v >= 0 && v <= 1e7))
            return grit_errf(GRIT_EINVAL, "GRIT_HEALTH_NET_DELAY_US: expected microseconds in [0, 1e7], got '%s'", dl);
        o->net_delay_us = v;
    }
    if (health_fault_on(o, HF_SLOW_COMPUTE) && o->slowdown == 1.0)
        o->slowdown = 3.0;
    return GRIT_OK;
}

int health_node_down(char *why, size_t cap)
{
    const char *marker = fault_spec(FAULT_NODE_DOWN);
    if (!*marker || access(marker, F_OK) != 0)
        return 0;
    snprintf(why, cap, "node unreachable (injected: %s exists)", marker);
    return 1;
}

void health_report_init(health_report *r, health_mode mode)
{
    memset(r, 0, sizeof *r);
    r->mode = mode;
    r->nranks = 1;
    if (gethostname(r->host, sizeof r->host - 1) != 0)
        snprintf(r->host, sizeof r->host, "unknown");
}

void health_report_free(health_report *r)
{
    if (!r || !r->net)
        return;
    free(r->net->hosts);
    free(r->net->pairs);
    free(r->net);
    r->net = NULL;
}

health_result *health_add(health_report *r, const char *fmt, ...)
{
    if (r->n >= HEALTH_MAX_RESULTS)
        return NULL;
    health_result *res = &r->results[r->n++];
    memset(res, 0, sizeof *res);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->name, sizeof res->name, fmt, ap);
    va_end(ap);
    res->measured = NAN;
    res->threshold = NAN;
    res->verdict = HEALTH_PASS;
    return res;
}

void health_judge(health_result *res, double measured, health_cmp cmp, double threshold,
                  const char *unit)
{
    res->measured = measured;
    res->threshold = threshold;
    res->cmp = cmp;
    snprintf(res->unit, sizeof res->unit, "%s", unit ? unit : "");
    int ok = 1;
    if (cmp == HEALTH_CMP_LE)
        ok = measured <= threshold; /* NaN fails */
    else if (cmp == HEALTH_CMP_GE)
        ok = measured >= threshold;
    res->verdict = ok ? HEALTH_PASS : HEALTH_FAIL;
}

void health_set(health_result *res, health_verdict v, const char *fmt, ...)
{
    res->verdict = v;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->reason, sizeof res->reason, fmt, ap);
    va_end(ap);
}

int health_exit_code(const health_report *r)
{
    int fail = 0, err = 0;
    for (int i = 0; i < r->n; i++) {
        fail |= r->results[i].verdict == HEALTH_FAIL;
        err |= r->results[i].verdict == HEALTH_ERROR;
    }
    return fail ? 1 : err ? 2 : 0;
}

const health_result *health_first_bad(const health_report *r)
{
    for (int i = 0; i < r->n; i++)
        if (r->results[i].verdict == HEALTH_FAIL)
            return &r->results[i];
    for (int i = 0; i < r->n; i++)
        if (r->results[i].verdict == HEALTH_ERROR)
            return &r->results[i];
    return NULL;
}

grit_err health_run(health_report *r, const health_opts *o)
{
    double t0 = now_seconds();
    /* System first: the clock-skew measurement should be as close to the
     * supervisor's reference time as possible. */
    grit_err (*const families[])(health_report *, const health_opts *) = {
        health_check_system, health_check_compute, health_check_memory,
        health_check_disk,   health_check_network, health_check_gpu,
    };
    grit_err rc = GRIT_OK;
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        int first = r->n;
        double tf = now_seconds();
        grit_err e = families[i](r, o);
        tf = now_seconds() - tf;
        for (int k = first; k < r->n; k++)
            r->results[k].seconds = tf;
        if (e != GRIT_OK && rc == GRIT_OK)
            rc = e;
    }
    r->seconds = now_seconds() - t0;
    return rc;
}
