/*
 * fake_nvml.c - a stand-in libnvidia-ml for tests: the NVML entry points grit's
 * GPU check loads with dlopen, answering from the environment so a test can
 * stage devices and Xid events on a machine without a GPU.
 *
 *   FAKE_NVML_GPUS=N        devices (default 1)
 *   FAKE_NVML_XIDS=a,b,...  Xid events delivered, one per nvmlEventSetWait_v2
 *                           call, on registered devices (FAKE_NVML_XID_GPU, default 0)
 *   FAKE_NVML_NO_EVENTS=1   devices do not support Xid events
 *   FAKE_NVML_LOG=FILE      appends one line per event-API call, so a test can
 *                           check that the set was registered, waited on and freed
 *   FAKE_NVML_POWER_MW=a,b  power draw per GPU in milliwatts (nvmlDeviceGetPowerUsage;
 *                           the last value serves the GPUs after it); unset: not supported
 *   FAKE_NVML_ENERGY_MJ=a,b energy counter per GPU in millijoules, as read at the call
 *                           (nvmlDeviceGetTotalEnergyConsumption): a test moves it between
 *                           samples. Unset: the counter grows at FAKE_NVML_POWER_MW from the
 *                           first call (a live run sees matching energy and power); neither
 *                           set: not supported
 *   FAKE_NVML_NO_ENERGY=1   the energy counter is not supported (pre-Volta), so power
 *                           sampling must integrate the power draw
 *   FAKE_NVML_UTIL_FILE=F   GPU utilisation per GPU in percent, "a,b,c" in file F, read at
 *                           each nvmlDeviceGetUtilizationRates call (a test rewrites it
 *                           while a run goes on; the last value serves the GPUs after it);
 *                           unset: not supported; unreadable: an unknown error (999)
 *   FAKE_NVML_CLOCK_FILE=F  the SM clock per GPU in MHz, the same way
 *                           (nvmlDeviceGetClockInfo, NVML_CLOCK_SM only)
 *   FAKE_NVML_MAX_CLOCK_MHZ the SM clock's maximum (nvmlDeviceGetMaxClockInfo; default
 *                           1980, supported when FAKE_NVML_CLOCK_FILE is set)
 *
 * Return codes and the nvmlEventData_t layout follow nvml.h: 0 success,
 * 2 invalid argument, 3 not supported, 10 timeout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct fake_event {
    void *device;
    unsigned long long type, data;
    unsigned gpu_instance, compute_instance;
} fake_event;

typedef struct fake_set {
    unsigned long long mask[16]; /* per device */
    int next;                    /* index into FAKE_NVML_XIDS */
} fake_set;

static char devices[16]; /* handles are &devices[i] */

static int ngpus(void)
{
    const char *s = getenv("FAKE_NVML_GPUS");
    int n = s ? atoi(s) : 1;
    return n < 0 ? 0 : n > 16 ? 16 : n;
}

static void logf_(const char *what, int a, long long b)
{
    const char *p = getenv("FAKE_NVML_LOG");
    if (!p)
        return;
    FILE *f = fopen(p, "a");
    if (f) {
        fprintf(f, "%s %d %lld\n", what, a, b);
        fclose(f);
    }
}

static int dev_index(void *d)
{
    for (int i = 0; i < 16; i++)
        if (d == &devices[i])
            return i;
    return -1;
}

int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { logf_("shutdown", 0, 0); return 0; }
int nvmlDeviceGetCount_v2(unsigned *n) { *n = (unsigned)ngpus(); return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **d)
{
    if ((int)i >= ngpus())
        return 2;
    *d = &devices[i];
    return 0;
}
int nvmlDeviceGetName(void *d, char *s, unsigned n)
{
    snprintf(s, n, "Fake GPU %d", dev_index(d));
    return 0;
}
int nvmlDeviceGetTemperature(void *d, int sensor, unsigned *t)
{
    (void)d, (void)sensor;
    *t = 45;
    return 0;
}
int nvmlDeviceGetTotalEccErrors(void *d, int type, int counter, unsigned long long *c)
{
    (void)d, (void)type, (void)counter;
    *c = 0;
    return 0;
}
int nvmlDeviceGetCurrentClocksEventReasons(void *d, unsigned long long *r)
{
    (void)d;
    *r = 0;
    return 0;
}
/* The i-th number of a comma-separated list (the last one past its end); 0 when s is
 * NULL or empty. */
static unsigned long long list_at(const char *s, int i)
{
    unsigned long long v = 0;
    for (int k = 0; s && *s; k++) {
        v = strtoull(s, NULL, 10);
        if (k == i)
            break;
        s = strchr(s, ',');
        s = s ? s + 1 : NULL;
    }
    return v;
}

int nvmlDeviceGetPowerUsage(void *d, unsigned *mw)
{
    int i = dev_index(d);
    const char *p = getenv("FAKE_NVML_POWER_MW");
    if (i < 0 || !mw)
        return 2;
    if (!p || !*p)
        return 3;
    *mw = (unsigned)list_at(p, i);
    return 0;
}
int nvmlDeviceGetTotalEnergyConsumption(void *d, unsigned long long *mj)
{
    static struct timespec t0;
    int i = dev_index(d);
    const char *e = getenv("FAKE_NVML_ENERGY_MJ"), *p = getenv("FAKE_NVML_POWER_MW");
    if (i < 0 || !mj)
        return 2;
    if (getenv("FAKE_NVML_NO_ENERGY"))
        return 3;
    if (e && *e) {
        *mj = list_at(e, i);
        return 0;
    }
    if (!p || !*p)
        return 3;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (!t0.tv_sec && !t0.tv_nsec)
        t0 = t;
    double s = (double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9;
    *mj = (unsigned long long)((double)list_at(p, i) * s); /* mW x s = mJ */
    return 0;
}
/* The i-th number in the file named by $env: 0, 3 (the variable unset: not supported)
 * or 999 (the file unreadable or empty). */
static int file_at(const char *env, int i, unsigned *out)
{
    const char *p = getenv(env);
    if (!p || !*p)
        return 3;
    char buf[256];
    FILE *f = fopen(p, "r");
    if (!f)
        return 999;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (!n || buf[0] < '0' || buf[0] > '9')
        return 999;
    *out = (unsigned)list_at(buf, i);
    return 0;
}

typedef struct fake_util { /* nvmlUtilization_t */
    unsigned gpu, memory;
} fake_util;

int nvmlDeviceGetUtilizationRates(void *d, fake_util *u)
{
    if (dev_index(d) < 0 || !u)
        return 2;
    int rc = file_at("FAKE_NVML_UTIL_FILE", dev_index(d), &u->gpu);
    u->memory = rc ? 0 : u->gpu / 2;
    return rc;
}
int nvmlDeviceGetClockInfo(void *d, int type, unsigned *mhz)
{
    if (dev_index(d) < 0 || !mhz || type < 0 || type > 3)
        return 2;
    return type == 1 ? file_at("FAKE_NVML_CLOCK_FILE", dev_index(d), mhz) : 3;
}
int nvmlDeviceGetMaxClockInfo(void *d, int type, unsigned *mhz)
{
    const char *m = getenv("FAKE_NVML_MAX_CLOCK_MHZ"), *c = getenv("FAKE_NVML_CLOCK_FILE");
    if (dev_index(d) < 0 || !mhz || type < 0 || type > 3)
        return 2;
    if (type != 1 || !c || !*c)
        return 3;
    *mhz = m && *m ? (unsigned)atoi(m) : 1980;
    return 0;
}
const char *nvmlErrorString(int r)
{
    return r == 0 ? "Success" : r == 3 ? "Not Supported" : r == 10 ? "Timeout" : "Unknown Error";
}

int nvmlEventSetCreate(void **set)
{
    fake_set *s = calloc(1, sizeof *s);
    if (!s)
        return 999;
    *set = s;
    logf_("create", 0, 0);
    return 0;
}
int nvmlDeviceGetSupportedEventTypes(void *d, unsigned long long *types)
{
    (void)d;
    *types = getenv("FAKE_NVML_NO_EVENTS") ? 0x4ull : 0x8ull | 0x4ull;
    return 0;
}
int nvmlDeviceRegisterEvents(void *d, unsigned long long types, void *set)
{
    int i = dev_index(d);
    if (i < 0 || !set)
        return 2;
    if (getenv("FAKE_NVML_NO_EVENTS"))
        return 3;
    ((fake_set *)set)->mask[i] |= types;
    logf_("register", i, (long long)types);
    return 0;
}
int nvmlEventSetWait_v2(void *set, fake_event *ev, unsigned ms)
{
    fake_set *s = set;
    if (!s || !ev)
        return 2;
    logf_("wait", (int)ms, 0);
    const char *xids = getenv("FAKE_NVML_XIDS");
    const char *g = getenv("FAKE_NVML_XID_GPU");
    int gpu = g ? atoi(g) : 0;
    if (xids && gpu >= 0 && gpu < 16 && (s->mask[gpu] & 0x8ull)) {
        const char *p = xids;
        for (int k = 0; k < s->next && p; k++) {
            p = strchr(p, ',');
            p = p ? p + 1 : NULL;
        }
        if (p && *p) {
            s->next++;
            memset(ev, 0, sizeof *ev);
            ev->device = &devices[gpu];
            ev->type = 0x8ull;
            ev->data = strtoull(p, NULL, 10);
            return 0;
        }
    }
    /* Nothing (more) to deliver: sleep out the timeout like the driver. */
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    return 10;
}
int nvmlEventSetFree(void *set)
{
    free(set);
    logf_("free", 0, 0);
    return 0;
}
