/*
 * system.c - system checks: open-file and locked-memory limits, required
 * binaries and libraries, clock skew against the supervisor's clock.
 *
 * Limits are the soft limits (what this process and its children get), held
 * to min_nofile and min_memlock; RLIM_INFINITY passes. Binaries are looked
 * up like execvp does (a name with '/' is taken as a path; otherwise each
 * PATH entry); libraries with dlopen(RTLD_LAZY). Clock skew is
 * |CLOCK_REALTIME - ref_time|, measured first thing in the run; it includes
 * the launch latency, so max_skew_s should allow for it. Skipped when no
 * reference time is given.
 *
 * Faults: nofile_limit and memlock_limit lower this process's soft limit
 * (setrlimit) before measuring, so the check sees a real low limit;
 * missing_binary adds a binary that does not exist to the list;
 * clock_skew shifts the reference by an hour.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "health/health.h"

static void check_limit(health_report *r, const char *name, int res, uint64_t min,
                        const char *unit, int inject, uint64_t inject_to)
{
    health_result *hr = health_add(r, "%s", name);
    if (!hr)
        return;
    struct rlimit rl;
    if (inject && getrlimit(res, &rl) == 0) {
        rl.rlim_cur = inject_to;
        (void)setrlimit(res, &rl);
    }
    if (getrlimit(res, &rl) != 0) {
        health_set(hr, HEALTH_ERROR, "getrlimit failed");
        return;
    }
    double v = rl.rlim_cur == RLIM_INFINITY ? INFINITY : (double)rl.rlim_cur;
    health_judge(hr, v, HEALTH_CMP_GE, (double)min, unit);
    const char *ulim = res == RLIMIT_NOFILE ? "ulimit -n" : "ulimit -l";
    if (hr->verdict == HEALTH_FAIL)
        snprintf(hr->reason, sizeof hr->reason, "soft limit %llu below %llu %s (raise with %s or "
                 "limits.conf)", (unsigned long long)rl.rlim_cur, (unsigned long long)min, unit,
                 ulim);
    else if (rl.rlim_cur == RLIM_INFINITY)
        snprintf(hr->reason, sizeof hr->reason, "unlimited");
    else
        snprintf(hr->reason, sizeof hr->reason, "soft limit %llu %s", (unsigned long long)rl.rlim_cur,
                 unit);
}

static int find_binary(const char *name)
{
    if (strchr(name, '/'))
        return access(name, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    const char *p = path;
    while (*p) {
        const char *e = strchr(p, ':');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char full[4096];
        snprintf(full, sizeof full, "%.*s/%s", (int)len, len ? p : ".", name);
        if (access(full, X_OK) == 0)
            return 1;
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

grit_err health_check_system(health_report *r, const health_opts *o)
{
    /* Clock first (see the file comment). */
    health_result *ck = health_add(r, "system.clock_skew");
    if (ck) {
        double ref = o->ref_time;
        if (health_fault_on(o, HF_CLOCK_SKEW)) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ref = (isnan(ref) ? (double)ts.tv_sec + ts.tv_nsec * 1e-9 : ref) - 3600.0;
        }
        if (isnan(ref)) {
            health_set(ck, HEALTH_SKIP,
                       "skipped: no reference time given (--ref-time or GRIT_HEALTH_REF_TIME)");
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            double skew = (double)ts.tv_sec + ts.tv_nsec * 1e-9 - ref;
            health_judge(ck, fabs(skew), HEALTH_CMP_LE, o->max_skew_s, "s");
            snprintf(ck->reason, sizeof ck->reason, "clock is %+.3f s from the reference%s", skew,
                     ck->verdict == HEALTH_FAIL ? " (check NTP/chrony)" : "");
        }
    }
    check_limit(r, "system.nofile", RLIMIT_NOFILE, o->min_nofile, "files",
                health_fault_on(o, HF_NOFILE_LIMIT), 64);
    check_limit(r, "system.memlock", RLIMIT_MEMLOCK, o->min_memlock, "bytes",
                health_fault_on(o, HF_MEMLOCK_LIMIT), 0);

    health_result *bn = health_add(r, "system.binaries");
    if (bn) {
        const char *list[HEALTH_MAX_LIST + 1];
        int n = 0;
        for (int i = 0; i < o->n_require_bins; i++)
            list[n++] = o->require_bins[i];
        if (health_fault_on(o, HF_MISSING_BINARY))
            list[n++] = "grit-health-no-such-binary";
        char missing[256] = "";
        int nmiss = 0;
        for (int i = 0; i < n; i++)
            if (!find_binary(list[i])) {
                size_t l = strlen(missing);
                snprintf(missing + l, sizeof missing - l, "%s%s", nmiss ? ", " : "", list[i]);
                nmiss++;
            }
        health_judge(bn, (double)nmiss, HEALTH_CMP_LE, 0.0, "missing");
        if (nmiss)
            snprintf(bn->reason, sizeof bn->reason, "required binary not found in PATH: %s",
                     missing);
        else
            snprintf(bn->reason, sizeof bn->reason, "%d required binar%s found", n,
                     n == 1 ? "y" : "ies");
    }
    health_result *lb = health_add(r, "system.libraries");
    if (lb) {
        if (!o->n_require_libs) {
            health_set(lb, HEALTH_SKIP, "skipped: no libraries required (--require-lib)");
        } else {
            char missing[256] = "";
            int nmiss = 0;
            for (int i = 0; i < o->n_require_libs; i++) {
                void *h = dlopen(o->require_libs[i], RTLD_LAZY | RTLD_LOCAL);
                if (h) {
                    dlclose(h);
                    continue;
                }
                size_t l = strlen(missing);
                snprintf(missing + l, sizeof missing - l, "%s%s", nmiss ? ", " : "",
                         o->require_libs[i]);
                nmiss++;
            }
            health_judge(lb, (double)nmiss, HEALTH_CMP_LE, 0.0, "missing");
            if (nmiss)
                snprintf(lb->reason, sizeof lb->reason, "required library cannot be loaded: %s",
                         missing);
            else
                snprintf(lb->reason, sizeof lb->reason, "%d required librar%s loadable",
                         o->n_require_libs, o->n_require_libs == 1 ? "y" : "ies");
        }
    }
    return GRIT_OK;
}
