/*
 * obs.h - observing a run: the run view, Prometheus text, cost and CO2, the
 * live node registry, and the HTTP server behind /metrics and the dashboard.
 *
 * Everything a person sees is derived from the run directory (metrics.jsonl,
 * events.jsonl, cluster.json, ckpt/, config.json, obs.json, nodes.json), so
 * `grit launch` (live) and `grit dashboard RUN_DIR` (read-only, a finished or
 * running run) show the same thing from the same code. The one input that is
 * not in a file is per-node timing, which only heartbeats carry: the
 * supervisor feeds it to obs_beat(), and the live server persists it to
 * RUN_DIR/nodes.json every refresh so a later `grit dashboard` sees it too.
 *
 * Not in here: the trainer's TensorBoard writer (obs/tb.h).
 */
#ifndef GRIT_OBS_OBS_H
#define GRIT_OBS_OBS_H

#include <jansson.h>
#include <stdio.h>

#include "core/error.h"
#include "obs/meter.h"

/* Cost and power figures (RUN_DIR/obs.json, written by grit launch). 0 = unknown. */
typedef struct obs_cfg {
    double price_node_hour; /* currency units per node-hour (every allocated node: active + spare) */
    double grid_gco2_kwh;   /* grid carbon intensity, gCO2 per kWh */
    double node_watts;      /* power per node when neither RAPL nor NVML can be read */
    double peak_tflops;     /* peak FLOP/s per node, for MFU */
} obs_cfg;

/* Reads RUN_DIR/obs.json into *c (absent file: GRIT_OK, *c unchanged; a bad
 * field: GRIT_ECONFIG naming file and field). */
grit_err obs_cfg_load(const char *run_dir, obs_cfg *c);
grit_err obs_cfg_save(const char *run_dir, const obs_cfg *c);

/* --- live registry (thread-safe; fed by the supervisor's heartbeat loop) -------- */

void obs_beat(const char *node, int rank, long step, double step_time, double comm_time);
/* Samples this machine's (the supervisor's) power sources with an obs_meter (meter.h)
 * and adds the energy since the previous sample to its measured energy: RAPL package energy
 * (/sys/class/powercap/intel-rapl:N/energy_uj) plus every GPU's energy through NVML
 * (libnvidia-ml.so.1, or $GRIT_NVML_LIB; the energy counter, else the power draw
 * integrated over the interval). A source that cannot be read is left out quietly;
 * with none, nothing is measured and the view uses obs_cfg.node_watts. The first
 * call only takes a baseline. It counts in the run's energy only when no worker
 * reports energy from this machine (obs_energy_beat). Design: live.c. */
void obs_power_sample(void);

/* Unloads NVML (nvmlShutdown, dlclose); the energy measured so far is kept, and a later
 * sample loads it again. For the end of the live server. */
void obs_power_close(void);

/* For tests: one sample at time t (seconds; <= 0: now) from a powercap folder laid out
 * like /sys/class/powercap and the NVML library nvml_lib (NULL: as obs_power_sample;
 * a path other than the last one reloads); obs__power_reset forgets all samples and
 * host reports and unloads NVML; obs__energy reads this machine's own measurement. */
void obs__power_sample_at(const char *root, const char *nvml_lib, double t);
void obs__power_reset(void);
void obs__energy(obs_energy *e);

/* One heartbeat's view of a worker's host (heartbeat/hb.h fields host=, energy_j=,
 * power_w=, esrc=, gpus=). sources 0: the beat carries no measurement, only which host
 * the node's ranks run on. */
typedef struct obs_host_beat {
    const char *host; /* boot_id of the worker's machine; NULL or "": ignored */
    const char *node; /* the rank's node name */
    int rank;
    long pid;
    double joules;    /* the worker meter's cumulative energy since it started */
    double watts;     /* its latest interval */
    int sources, gpus;
    double t;         /* when (seconds, CLOCK_REALTIME); <= 0: now */
} obs_host_beat;

/* Adds a worker's energy report to its host's total: per host one reporting rank, a
 * decrease or a new pid taken as a restart (the new counter added, never a negative
 * difference); the supervisor's own sampling counts only for a machine no worker
 * reported from. Rules: live.c. */
void obs_energy_beat(const obs_host_beat *b);

/* For tests: the supervisor machine's identity (NULL: read obs_host_id again), and the
 * run's totals over hosts as nodes.json has them. */
void obs__set_host(const char *id);
void obs__totals(obs_energy *e, int *hosts, int *nodes);

/* "RAPL", "NVML (4 GPUs)", "RAPL + NVML (1 GPU)" for sources/gpus as in obs_energy;
 * "" for none. Writes at most n bytes to buf and returns buf. */
const char *obs_source_name(int sources, int gpus, char *buf, size_t n);
/* Writes RUN_DIR/nodes.json (per-node timing, measured energy per host) durably. */
grit_err obs_registry_save(const char *run_dir);

/* --- the run view -------------------------------------------------------------- */

/* The whole state of a run as one JSON object (schema in docs/formats.md, "dashboard
 * API"); NULL with a grit_errf context when run_dir has no events.jsonl or
 * metrics.jsonl. Caller owns the reference. Series longer than max_points are
 * thinned evenly (the last point is always kept). */
json_t *obs_view(const char *run_dir, const obs_cfg *c, int max_points);

/* Prometheus text exposition format 0.0.4 of a view; malloc'd, caller frees. */
char *obs_prometheus(const json_t *view);

/* The cost/energy/CO2 lines of the end-of-run summary. */
void obs_print_summary(FILE *f, const json_t *view);

/* --- HTTP (libmicrohttpd) ------------------------------------------------------- */

typedef struct obs_server obs_server;

typedef struct obs_serve_opts {
    const char *run_dir;
    obs_cfg cfg;
    const char *bind;    /* NULL: 127.0.0.1 */
    int port;            /* 0: any free port (see obs_server_port) */
    int live;            /* persist the registry and sample power (grit launch) */
    const char *web_dir; /* NULL: $GRIT_WEB_DIR, else the source tree's web/ */
} obs_serve_opts;

/* Starts serving /, /metrics, /api/run and the uPlot files in a background thread. */
grit_err obs_serve(const obs_serve_opts *o, obs_server **out);
int obs_server_port(const obs_server *s);
/* Stops the thread; persists the registry once more when live. NULL is a no-op. */
void obs_server_close(obs_server *s);

#endif
