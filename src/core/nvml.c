/*
 * nvml.c - the NVML loader (nvml.h): dlopen, then one dlsym per entry point,
 * the versioned name first. Nothing here calls into NVML itself.
 */
#include "core/nvml.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

const char *nvml_lib_path(const char *path)
{
    if (path && *path)
        return path;
    const char *env = getenv("GRIT_NVML_LIB");
    return env && *env ? env : "libnvidia-ml.so.1";
}

/* dlsym of a, else of b (NULL: none). A function pointer read through void * as
 * POSIX allows (dlsym's own contract). */
static void *sym(void *h, const char *a, const char *b)
{
    void *p = dlsym(h, a);
    return p || !b ? p : dlsym(h, b);
}

grit_err nvml_open(const char *path, nvml_api *api)
{
    memset(api, 0, sizeof *api);
    const char *lib = nvml_lib_path(path);
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return grit_errf(GRIT_ENOTFOUND, "%s cannot be loaded (no NVIDIA driver)", lib);
    api->lib = h;
    *(void **)&api->init = sym(h, "nvmlInit_v2", "nvmlInit");
    *(void **)&api->shutdown = sym(h, "nvmlShutdown", NULL);
    *(void **)&api->count = sym(h, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
    *(void **)&api->handle = sym(h, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
    *(void **)&api->handle_uuid = sym(h, "nvmlDeviceGetHandleByUUID", NULL);
    *(void **)&api->name = sym(h, "nvmlDeviceGetName", NULL);
    *(void **)&api->temp = sym(h, "nvmlDeviceGetTemperature", NULL);
    *(void **)&api->ecc = sym(h, "nvmlDeviceGetTotalEccErrors", NULL);
    *(void **)&api->retired_pending = sym(h, "nvmlDeviceGetRetiredPagesPendingStatus", NULL);
    *(void **)&api->remapped = sym(h, "nvmlDeviceGetRemappedRows", NULL);
    *(void **)&api->throttle = sym(h, "nvmlDeviceGetCurrentClocksEventReasons",
                                   "nvmlDeviceGetCurrentClocksThrottleReasons");
    *(void **)&api->errstr = sym(h, "nvmlErrorString", NULL);
    *(void **)&api->event_create = sym(h, "nvmlEventSetCreate", NULL);
    *(void **)&api->register_events = sym(h, "nvmlDeviceRegisterEvents", NULL);
    *(void **)&api->supported_events = sym(h, "nvmlDeviceGetSupportedEventTypes", NULL);
    *(void **)&api->event_wait = sym(h, "nvmlEventSetWait_v2", "nvmlEventSetWait");
    *(void **)&api->event_free = sym(h, "nvmlEventSetFree", NULL);
    *(void **)&api->energy = sym(h, "nvmlDeviceGetTotalEnergyConsumption", NULL);
    *(void **)&api->power = sym(h, "nvmlDeviceGetPowerUsage", NULL);
    *(void **)&api->utilization = sym(h, "nvmlDeviceGetUtilizationRates", NULL);
    *(void **)&api->clock = sym(h, "nvmlDeviceGetClockInfo", NULL);
    *(void **)&api->max_clock = sym(h, "nvmlDeviceGetMaxClockInfo", NULL);
    return GRIT_OK;
}

void nvml_close(nvml_api *api)
{
    if (!api)
        return;
    if (api->lib)
        dlclose(api->lib);
    memset(api, 0, sizeof *api);
}
