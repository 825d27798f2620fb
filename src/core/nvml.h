/*
 * nvml.h - NVIDIA's management library (NVML), loaded at run time.
 *
 * grit has no build dependency on the NVIDIA driver: nvml_open() dlopen()s
 * libnvidia-ml.so.1 and resolves the entry points grit uses into a table of
 * function pointers. Three modules read it: the health check (src/health/gpu.c:
 * ECC, retirement, temperature, throttling, Xid events), power sampling
 * (src/obs/live.c: energy counter and power draw) and the heartbeat's GPU signal
 * (src/heartbeat/hb_gpu.c: utilisation and SM clocks). Keeping the dlopen here
 * means there is one list of symbol names and one library path rule.
 *
 * Not in here: nvmlInit/nvmlShutdown calls and any judging. The caller calls
 * api.init() after nvml_open() and api.shutdown() before nvml_close(); NVML
 * counts its own inits, so two modules may hold it at once.
 *
 * Library path: the argument, else $GRIT_NVML_LIB, else "libnvidia-ml.so.1".
 * Tests point both modules at tests/fake/fake_nvml.c this way.
 *
 * Entry points a library lacks are NULL: the caller decides which it needs
 * (versioned names such as nvmlInit_v2 are tried first, then the old name).
 * Types follow nvml.h: nvmlReturn_t is an int (0 success), handles are opaque
 * pointers, nvmlEventData_t is laid out as nvml_event below.
 */
#ifndef GRIT_CORE_NVML_H
#define GRIT_CORE_NVML_H

#include "core/error.h"

typedef int nvml_ret;     /* nvmlReturn_t */
typedef void *nvml_dev;   /* nvmlDevice_t */
typedef void *nvml_evset; /* nvmlEventSet_t */

#define NVML_SUCCESS 0
#define NVML_NOT_SUPPORTED 3
#define NVML_TIMEOUT 10
#define NVML_GPU_IS_LOST 15

typedef struct nvml_event { /* nvmlEventData_t */
    nvml_dev device;
    unsigned long long type;
    unsigned long long data; /* the Xid for an Xid event */
    unsigned gpu_instance, compute_instance;
} nvml_event;

typedef struct nvml_util { /* nvmlUtilization_t: percent of the sample period */
    unsigned gpu, memory;
} nvml_util;

#define NVML_CLOCK_SM 1 /* nvmlClockType_t */

typedef struct nvml_api {
    void *lib; /* dlopen handle; NULL for a table filled in by hand (a fake driver) */
    nvml_ret (*init)(void);
    nvml_ret (*shutdown)(void);
    nvml_ret (*count)(unsigned *);
    nvml_ret (*handle)(unsigned, nvml_dev *);
    nvml_ret (*handle_uuid)(const char *, nvml_dev *);
    nvml_ret (*name)(nvml_dev, char *, unsigned);
    nvml_ret (*temp)(nvml_dev, int, unsigned *);
    nvml_ret (*ecc)(nvml_dev, int, int, unsigned long long *);
    nvml_ret (*retired_pending)(nvml_dev, int *);
    nvml_ret (*remapped)(nvml_dev, unsigned *, unsigned *, unsigned *, unsigned *);
    nvml_ret (*throttle)(nvml_dev, unsigned long long *);
    const char *(*errstr)(nvml_ret);
    /* event API (gpu.xid) */
    nvml_ret (*event_create)(nvml_evset *);
    nvml_ret (*register_events)(nvml_dev, unsigned long long, nvml_evset);
    nvml_ret (*supported_events)(nvml_dev, unsigned long long *);
    nvml_ret (*event_wait)(nvml_evset, nvml_event *, unsigned);
    nvml_ret (*event_free)(nvml_evset);
    /* power (obs): mJ since the driver loaded (Volta and newer), and mW now */
    nvml_ret (*energy)(nvml_dev, unsigned long long *);
    nvml_ret (*power)(nvml_dev, unsigned *);
    /* silent slowdowns (heartbeat/hb_gpu.h): % busy over the driver's last sample
     * period, and the SM clock now and at most (MHz) */
    nvml_ret (*utilization)(nvml_dev, nvml_util *);
    nvml_ret (*clock)(nvml_dev, int, unsigned *);
    nvml_ret (*max_clock)(nvml_dev, int, unsigned *);
} nvml_api;

/* The library nvml_open(path) loads: path when non-empty, else $GRIT_NVML_LIB when
 * non-empty, else "libnvidia-ml.so.1". Never NULL. */
const char *nvml_lib_path(const char *path);

/* Loads the library (see nvml_lib_path) and fills *api; entry points it lacks are NULL.
 * GRIT_OK, or GRIT_ENOTFOUND with a context naming the library when it cannot be
 * loaded (no NVIDIA driver: callers treat that as "no GPU"). *api is zeroed on error.
 * The caller owns the handle and releases it with nvml_close(). */
grit_err nvml_open(const char *path, nvml_api *api);

/* Unloads the library and zeroes *api. NULL, or an api not from nvml_open, is a no-op
 * apart from the zeroing. */
void nvml_close(nvml_api *api);

#endif
