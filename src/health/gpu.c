/*
 * gpu.c - the GPU check through NVML, loaded at run time with
 * dlopen("libnvidia-ml.so.1"): no build dependency, and a node without the
 * NVIDIA driver gets a clear "skipped" line (or a failure when GPUs were
 * expected with --expect-gpus).
 *
 * Per device: uncorrected volatile ECC errors (> 0 fails), pending page
 * retirement or row remapping (fails: the GPU needs a reset), temperature
 * (above max_gpu_temp_c fails) and hardware/thermal throttle reasons
 * (active hardware slowdown, HW/SW thermal or power-brake throttling
 * fails). Counters a device does not support are ignored.
 *
 * Xid events (gpu.xid, deep mode): the driver reports GPU errors as Xid
 * codes. NVML's event API delivers those that happen while we listen, so
 * deep mode registers every device for nvmlEventTypeXidCriticalError in one
 * event set and waits xid_window_s for events (nvmlEventSetWait_v2 returns
 * early on each event; we loop until the window ends, at most XID_MAX_EVENTS).
 * A critical Xid (xid_critical: double-bit ECC, page retirement/remap
 * failure, NVLink, fallen off the bus, contained/uncontained ECC) fails the
 * check; any other Xid (often an application fault, e.g. 13 or 31) is a
 * warning. Quick mode does not wait and says so. nvmlEventData_t as NVML
 * declares it: device handle, u64 eventType, u64 eventData (the Xid), u32
 * gpuInstanceId, u32 computeInstanceId.
 *
 * The NVML entry points sit behind the loader's table (core/nvml.h, shared
 * with power sampling in src/obs/live.c) so that the gpu_ecc fault can
 * substitute a fake driver: one device reporting two uncorrected ECC errors,
 * judged by the same code as a real one.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/nvml.h"
#include "core/progress.h"

#include "health/health.h"

#define NVML_EVENT_XID 0x8ull /* nvmlEventTypeXidCriticalError */
#define XID_MAX_EVENTS 64

/* Xids that mean the hardware (not the program) is bad: fail the node. */
static const struct {
    unsigned xid;
    const char *what;
} xid_critical[] = {
    {48, "double-bit ECC error"},
    {63, "ECC page retirement or row remap recorded"},
    {64, "ECC page retirement or row remap failed"},
    {74, "NVLink error"},
    {79, "GPU has fallen off the bus"},
    {92, "high single-bit ECC error rate"},
    {94, "contained ECC error"},
    {95, "uncontained ECC error"},
};

static const char *xid_critical_what(unsigned long long xid)
{
    for (size_t i = 0; i < sizeof xid_critical / sizeof xid_critical[0]; i++)
        if (xid_critical[i].xid == xid)
            return xid_critical[i].what;
    return NULL;
}

/* ---- the fake driver for the gpu_ecc fault --------------------------------- */
static nvml_ret fake_ok(void) { return 0; }
static nvml_ret fake_count(unsigned *n) { *n = 1; return 0; }
static nvml_ret fake_handle(unsigned i, nvml_dev *d) { *d = (nvml_dev)(size_t)(i + 1); return 0; }
static nvml_ret fake_name(nvml_dev d, char *s, unsigned n)
{
    (void)d;
    snprintf(s, n, "Fake GPU (gpu_ecc fault)");
    return 0;
}
static nvml_ret fake_temp(nvml_dev d, int sensor, unsigned *t) { (void)d, (void)sensor; *t = 40; return 0; }
static nvml_ret fake_ecc(nvml_dev d, int type, int counter, unsigned long long *c)
{
    (void)d, (void)counter;
    *c = type == 1 ? 2 : 0;
    return 0;
}
static nvml_ret fake_unsupported_i(nvml_dev d, int *p) { (void)d, (void)p; return 3; }
static nvml_ret fake_unsupported_r(nvml_dev d, unsigned *a, unsigned *b, unsigned *c, unsigned *e)
{
    (void)d, (void)a, (void)b, (void)c, (void)e;
    return 3;
}
static nvml_ret fake_throttle(nvml_dev d, unsigned long long *r) { (void)d; *r = 0; return 0; }
static const char *fake_errstr(nvml_ret r) { return r == 3 ? "Not Supported" : "Unknown Error"; }

static const nvml_api fake_api = {.init = fake_ok, .shutdown = fake_ok, .count = fake_count,
                                  .handle = fake_handle, .name = fake_name, .temp = fake_temp,
                                  .ecc = fake_ecc, .retired_pending = fake_unsupported_i,
                                  .remapped = fake_unsupported_r, .throttle = fake_throttle,
                                  .errstr = fake_errstr};

/* Throttle reason bits (nvml.h, clocksThrottleReasons). */
#define THR_HW_SLOWDOWN 0x8ull
#define THR_SW_THERMAL 0x20ull
#define THR_HW_THERMAL 0x40ull
#define THR_HW_POWER_BRAKE 0x80ull

/* Waits o->xid_window_s for Xid events on devs[n] and judges them into res. */
static void watch_xids(health_result *res, const health_opts *o, const nvml_api *api,
                       const nvml_dev *devs, unsigned n)
{
    if (o->mode != HEALTH_DEEP) {
        health_set(res, HEALTH_SKIP, "quick mode does not wait for Xid events (--deep does, "
                                     "for --xid-seconds)");
        return;
    }
    if (o->xid_window_s <= 0) {
        health_set(res, HEALTH_SKIP, "Xid watch disabled (--xid-seconds 0)");
        return;
    }
    if (!api->event_create || !api->register_events || !api->event_wait || !api->event_free) {
        health_set(res, HEALTH_SKIP, "this NVML lacks the event API (nvmlEventSetWait_v2)");
        return;
    }
    nvml_evset set = NULL;
    nvml_ret e = api->event_create(&set);
    if (e != 0) {
        health_set(res, HEALTH_ERROR, "nvmlEventSetCreate failed: %s", api->errstr(e));
        return;
    }
    unsigned watched = 0;
    for (unsigned i = 0; i < n; i++) {
        unsigned long long sup = NVML_EVENT_XID;
        if (api->supported_events && api->supported_events(devs[i], &sup) == 0 &&
            !(sup & NVML_EVENT_XID))
            continue;
        if (api->register_events(devs[i], NVML_EVENT_XID, set) == 0)
            watched++;
    }
    if (!watched) {
        api->event_free(set);
        health_set(res, HEALTH_SKIP, "no device supports Xid events");
        return;
    }
    unsigned nev = 0, ncrit = 0;
    char first_crit[200] = "", first_other[200] = "", err[120] = "";
    double t_end = now_seconds() + o->xid_window_s;
    for (double left; nev < XID_MAX_EVENTS && (left = t_end - now_seconds()) > 0;) {
        nvml_event ev;
        memset(&ev, 0, sizeof ev);
        unsigned ms = (unsigned)ceil(left * 1000.0);
        e = api->event_wait(set, &ev, ms);
        if (e == NVML_TIMEOUT)
            continue; /* the window's end, or an interrupt: the loop decides */
        if (e != 0) {
            snprintf(err, sizeof err, "nvmlEventSetWait failed: %s", api->errstr(e));
            if (e == NVML_GPU_IS_LOST)
                ncrit++;
            break;
        }
        if (!(ev.type & NVML_EVENT_XID))
            continue;
        nev++;
        unsigned gi = 0;
        while (gi < n && devs[gi] != ev.device)
            gi++;
        const char *what = xid_critical_what(ev.data);
        if (what) {
            if (!ncrit)
                snprintf(first_crit, sizeof first_crit, "GPU %u: Xid %llu (%s)", gi, ev.data,
                         what);
            ncrit++;
        } else if (!first_other[0]) {
            snprintf(first_other, sizeof first_other, "GPU %u: Xid %llu", gi, ev.data);
        }
    }
    api->event_free(set);
    health_judge(res, ncrit, HEALTH_CMP_LE, 0, "critical Xids");
    if (ncrit && first_crit[0])
        health_set(res, HEALTH_FAIL, "%s; %u Xid event(s), %u critical, in %.1f s on %u GPU(s)",
                   first_crit, nev, ncrit, o->xid_window_s, watched);
    else if (ncrit)
        health_set(res, HEALTH_FAIL, "%s (GPU is lost)", err);
    else if (err[0])
        health_set(res, HEALTH_ERROR, "%s", err);
    else if (nev)
        health_set(res, HEALTH_WARN, "%s: %u non-critical Xid event(s) in %.1f s (often an "
                   "application fault; critical Xids fail)", first_other, nev, o->xid_window_s);
    else
        health_set(res, HEALTH_PASS, "no Xid events in %.1f s on %u GPU(s)", o->xid_window_s,
                   watched);
}

static void judge_devices(health_report *r, const health_opts *o, const nvml_api *api)
{
    health_result *dv = health_add(r, "gpu.devices");
    health_result *ec = health_add(r, "gpu.ecc");
    health_result *rp = health_add(r, "gpu.retired_pages");
    health_result *tp = health_add(r, "gpu.temperature");
    health_result *th = health_add(r, "gpu.throttle");
    health_result *xi = health_add(r, "gpu.xid");
    if (!dv || !ec || !rp || !tp || !th || !xi)
        return;
    nvml_dev devs[64];
    unsigned n = 0;
    nvml_ret e = api->init();
    if (e != 0) {
        health_set(dv, o->expect_gpus > 0 ? HEALTH_FAIL : HEALTH_SKIP,
                   "NVML init failed: %s", api->errstr(e));
        health_set(ec, HEALTH_SKIP, "not run");
        health_set(rp, HEALTH_SKIP, "not run");
        health_set(tp, HEALTH_SKIP, "not run");
        health_set(th, HEALTH_SKIP, "not run");
        health_set(xi, HEALTH_SKIP, "not run");
        return;
    }
    if ((e = api->count(&n)) != 0)
        n = 0;
    if (o->expect_gpus >= 0) {
        health_judge(dv, n, HEALTH_CMP_GE, o->expect_gpus, "devices");
        if (n != (unsigned)o->expect_gpus)
            health_set(dv, HEALTH_FAIL, "found %u GPU(s), expected %d", n, o->expect_gpus);
    } else {
        dv->measured = n;
        snprintf(dv->unit, sizeof dv->unit, "devices");
    }
    unsigned long long ecc_total = 0;
    double max_temp = 0;
    char ecc_why[200] = "", rp_why[160] = "", th_why[160] = "", names[128] = "";
    int pending = 0, throttled = 0, ecc_supported = 0;
    unsigned ndevs = 0;
    for (unsigned i = 0; i < n; i++) {
        nvml_dev d;
        if (api->handle(i, &d) != 0)
            continue;
        if (ndevs < sizeof devs / sizeof devs[0])
            devs[ndevs++] = d;
        char nm[96] = "?";
        api->name(d, nm, sizeof nm);
        if (i == 0)
            snprintf(names, sizeof names, "%.96s", nm);
        unsigned long long c = 0;
        if (api->ecc && api->ecc(d, 1 /* uncorrected */, 0 /* volatile */, &c) == 0) {
            ecc_supported = 1;
            if (c && !ecc_total)
                snprintf(ecc_why, sizeof ecc_why, "GPU %u (%.64s): %llu uncorrected ECC error(s) "
                         "since the driver loaded", i, nm, c);
            ecc_total += c;
        }
        unsigned corr = 0, unc = 0, pend = 0, failed = 0;
        int rpend = 0;
        if (api->remapped && api->remapped(d, &corr, &unc, &pend, &failed) == 0) {
            if ((pend || failed) && !pending)
                snprintf(rp_why, sizeof rp_why, "GPU %u: row remapping %s", i,
                         failed ? "failed" : "pending (reset the GPU)");
            pending += pend || failed;
        } else if (api->retired_pending && api->retired_pending(d, &rpend) == 0 && rpend) {
            if (!pending)
                snprintf(rp_why, sizeof rp_why, "GPU %u: page retirement pending (reset the GPU)",
                         i);
            pending++;
        }
        unsigned t = 0;
        if (api->temp(d, 0, &t) == 0 && t > max_temp)
            max_temp = t;
        unsigned long long reasons = 0;
        unsigned long long bad = THR_HW_SLOWDOWN | THR_SW_THERMAL | THR_HW_THERMAL | THR_HW_POWER_BRAKE;
        if (api->throttle && api->throttle(d, &reasons) == 0 && (reasons & bad)) {
            if (!throttled)
                snprintf(th_why, sizeof th_why, "GPU %u: throttled (reasons 0x%llx:%s%s%s%s)", i,
                         reasons, reasons & THR_HW_SLOWDOWN ? " hw-slowdown" : "",
                         reasons & THR_SW_THERMAL ? " sw-thermal" : "",
                         reasons & THR_HW_THERMAL ? " hw-thermal" : "",
                         reasons & THR_HW_POWER_BRAKE ? " power-brake" : "");
            throttled++;
        }
    }
    if (n)
        watch_xids(xi, o, api, devs, ndevs);
    api->shutdown();
    if (dv->verdict == HEALTH_PASS)
        snprintf(dv->reason, sizeof dv->reason, "%u GPU(s)%s%s", n, n ? ": " : "", names);
    if (!n) {
        health_set(ec, HEALTH_SKIP, "no devices");
        health_set(rp, HEALTH_SKIP, "no devices");
        health_set(tp, HEALTH_SKIP, "no devices");
        health_set(th, HEALTH_SKIP, "no devices");
        health_set(xi, HEALTH_SKIP, "no devices");
        return;
    }
    if (ecc_supported) {
        health_judge(ec, (double)ecc_total, HEALTH_CMP_LE, 0, "errors");
        snprintf(ec->reason, sizeof ec->reason, "%s", ecc_total ? ecc_why : "no uncorrected ECC errors");
    } else
        health_set(ec, HEALTH_SKIP, "ECC counters not supported");
    health_judge(rp, pending, HEALTH_CMP_LE, 0, "devices");
    snprintf(rp->reason, sizeof rp->reason, "%s", pending ? rp_why : "no pending retirement/remap");
    health_judge(tp, max_temp, HEALTH_CMP_LE, o->max_gpu_temp_c, "C");
    snprintf(tp->reason, sizeof tp->reason, "hottest GPU %.0f C", max_temp);
    health_judge(th, throttled, HEALTH_CMP_LE, 0, "devices");
    snprintf(th->reason, sizeof th->reason, "%s", throttled ? th_why : "no hardware/thermal throttling");
}

grit_err health_check_gpu(health_report *r, const health_opts *o)
{
    if (health_fault_on(o, HF_GPU_ECC)) {
        judge_devices(r, o, &fake_api);
        return GRIT_OK;
    }
    const char *lib = nvml_lib_path(o->nvml_path);
    nvml_api api;
    if (nvml_open(lib, &api) != GRIT_OK) {
        health_result *res = health_add(r, "gpu.devices");
        if (!res)
            return GRIT_OK;
        if (o->expect_gpus > 0)
            health_set(res, HEALTH_FAIL, "expected %d GPU(s), found none: %s "
                       "cannot be loaded (no NVIDIA driver)", o->expect_gpus, lib);
        else
            health_set(res, HEALTH_SKIP, "skipped: no GPU (%s not found)", lib);
        return GRIT_OK;
    }
    if (!api.init || !api.shutdown || !api.count || !api.handle || !api.name || !api.temp ||
        !api.errstr) {
        health_result *res = health_add(r, "gpu.devices");
        if (res)
            health_set(res, o->expect_gpus > 0 ? HEALTH_FAIL : HEALTH_ERROR,
                       "%s lacks required NVML entry points", lib);
    } else {
        judge_devices(r, o, &api);
    }
    nvml_close(&api);
    return GRIT_OK;
}
