/*
 * meter.h - this machine's energy meter: RAPL package counters plus every GPU's
 * energy through NVML, accumulated sample by sample. One meter per sampling thread:
 * the supervisor's live server samples its own machine with one (live.c), and each
 * measuring worker's heartbeat thread samples its host with another (heartbeat/hb.c),
 * so the same code measures every node of a run. Counter rules: meter.c.
 *
 * Not thread-safe: a meter belongs to the thread that samples it.
 */
#ifndef GRIT_OBS_METER_H
#define GRIT_OBS_METER_H

#include <stddef.h>

#define OBS_SRC_RAPL 1 /* CPU package counters measured */
#define OBS_SRC_NVML 2 /* GPU energy measured */

typedef struct obs_meter obs_meter;

/* What a meter (or a machine) has measured so far. */
typedef struct obs_energy {
    double joules; /* since the first sample */
    double watts;  /* over the latest interval */
    int sources;   /* OBS_SRC_* measured at least once; 0: nothing measured */
    int gpus;      /* most GPUs measured in one interval */
} obs_energy;

/* A meter reading the powercap folder rapl_root (NULL: /sys/class/powercap) and the
 * NVML library nvml_lib (NULL: libnvidia-ml.so.1 or $GRIT_NVML_LIB, core/nvml.h).
 * Nothing is read until the first sample. NULL when out of memory. The caller owns it
 * and releases it with obs_meter_close (NULL: no-op), which also unloads NVML. */
obs_meter *obs_meter_open(const char *rapl_root, const char *nvml_lib);
void obs_meter_close(obs_meter *m);

/* One sample at time t (seconds, CLOCK_REALTIME; <= 0: now): adds the energy since the
 * previous sample to the meter's total. The first sample only takes a baseline. A source
 * that cannot be read (RAPL is often root-only; no driver, no GPU) is left out quietly,
 * never printed. Returns the OBS_SRC_* measured over this interval (0: none); *interval_j
 * (may be NULL) gets the interval's joules. */
int obs_meter_sample(obs_meter *m, double t, double *interval_j);

/* The meter's totals so far. */
void obs_meter_read(const obs_meter *m, obs_energy *e);

/* This machine's identity for counting each host once: $GRIT_HOST_ID when set (a
 * cluster simulated on one kernel, whose nodes share a boot_id: tests), else the
 * kernel's boot_id (/proc/sys/kernel/random/boot_id, different on every machine and
 * every boot; containers on one machine share it, as they share its power), else the
 * host name; characters that cannot go in a heartbeat word become '_'. Writes at
 * most n bytes to buf ("" when neither can be read) and returns buf. */
const char *obs_host_id(char *buf, size_t n);

#endif
