/*
 * hb.h - the heartbeat line protocol between workers and the supervisor.
 *
 * Transport: UDP datagrams to GRIT_SUP_ADDR (host:port, loopback by default),
 * one line per datagram, fields separated by spaces (docs/heartbeat.md):
 *
 *   HB1 <secret> rank=<int> node=<name> step=<int> loss=<float> gnorm=<float>
 *       step_time=<seconds> comm_time=<seconds> pid=<int> host=<boot_id>
 *       [energy_j=<joules> power_w=<watts> esrc=<HB_ESRC_* mask> gpus=<int>]
 *       [util=<cores busy>] [net_rx=<bytes/s> net_tx=<bytes/s>]
 *       [gpu_util=<0..1>] [sm_clock=<0..1>]
 *   EV1 <secret> rank=<int> node=<name> kind=<word> step=<int> [detail=<word>]
 *
 * HB1 reports progress (a worker with nothing new sends its last step again
 * as a liveness beat); EV1 reports an event the worker knows about (an
 * injected fault about to fire, a skipped batch). <secret> is the job's
 * GRIT_SUP_SECRET; anything else is rejected and logged without the secret.
 * Unknown key=value pairs are ignored, so the protocol can grow.
 *
 * Energy: host= names the worker's machine (the caller passes its id: grit's trainer
 * sends the kernel's boot_id, obs_host_id), so the supervisor counts each machine once.
 * A client started with a sampler (one rank per host: local rank 0) calls it on its
 * beat thread, never on the training thread, and adds energy_j (cumulative since the
 * worker started), power_w (latest interval), esrc (1 RAPL, 2 NVML, 3 both) and gpus
 * once something was measured; nothing readable: no energy fields, no message. The
 * sampler is the caller's (grit's trainer passes the RAPL/NVML meter of obs/meter.h),
 * so this module depends on core only.
 *
 * Silent-failure signals (docs/heartbeat.md "utilisation and network"): every client's
 * beat thread measures util=, the CPU time its process used per second of wall time over
 * the last beat period (1.0: one core busy; from CLOCK_PROCESS_CPUTIME_ID, the kernel's
 * utime+stime of all its threads, no /proc parsing); a client started with net (one per
 * node: local rank 0) also samples its node's interface byte counters
 * (/sys/class/net/<if>/statistics, every interface but lo, or GRIT_NET_IFACE) every
 * HB_NET_SLICE_S and sends net_rx=/net_tx=, the PEAK rate over those slices since the
 * previous beat. Peak, not mean: in a synchronous job every node moves the same bytes
 * per step and waits for the slowest, so mean rates are equal on every node; the rate a
 * node reaches while it does send is what its link can do. A client started with gpu
 * (one per node: local rank 0) samples the node's GPUs through NVML before each periodic
 * beat (hb_gpu.h) and sends gpu_util= (mean busy share over its GPUs) and sm_clock=
 * (the lowest SM clock / maximum SM clock among them); no GPU: neither field. An older
 * supervisor ignores them. Absent fields: NAN.
 *
 * Files: hb.c the parser (both ends), hb_client.c the worker's thread, hb_server.c
 * the supervisor's socket.
 */
#ifndef GRIT_HEARTBEAT_HB_H
#define GRIT_HEARTBEAT_HB_H

#include <stdbool.h>

#include "core/error.h"

#define HB_ESRC_RAPL 1 /* esrc bit: CPU package counters measured */
#define HB_ESRC_NVML 2 /* esrc bit: GPU energy measured */
#define HB_NET_SLICE_S 0.1 /* seconds between two samples of the interface counters */

typedef struct hb_msg {
    bool event;       /* EV1 (else HB1) */
    int rank;
    char node[64];
    long step;
    double loss, gnorm, step_time, comm_time;
    bool has_loss;    /* loss= was sent (a program without a loss sends none: not a NaN) */
    long pid;
    char host[64];             /* "" when absent (an older worker) */
    double energy_j, power_w;  /* valid when esrc != 0 (energy_j NaN when absent) */
    int esrc, gpus;            /* HB_ESRC_* measured on host; 0: no energy fields */
    char kind[32], detail[64]; /* EV1 */
    double util;               /* cores busy over the last beat period; NAN when absent */
    double net_rx, net_tx;     /* node's peak interface bytes/s; NAN when absent */
    double gpu_util, sm_clock; /* node's GPU busy share and SM clock ratio, 0..1; NAN absent */
} hb_msg;

/* Parses one line; GRIT_EINVAL for a malformed line, GRIT_EFORMAT (no message
 * detail that could leak the secret) when the secret does not match. */
grit_err hb_parse(const char *line, const char *secret, hb_msg *out);

/* --- client (workers) --------------------------------------------------------- */

typedef struct hb_client hb_client;

/* What a sampler measured so far on this machine. */
typedef struct hb_energy {
    double joules; /* cumulative since the sampler's first sample (a baseline) */
    double watts;  /* over the latest interval */
    int sources;   /* HB_ESRC_* measured at least once; 0: nothing (no fields sent) */
    int gpus;      /* most GPUs measured in one interval */
} hb_energy;

/* Takes one sample and fills *out; called on the client's beat thread only (never
 * concurrently with itself), once at start (the baseline) and before each beat. */
typedef void (*hb_sample_fn)(void *ctx, hb_energy *out);

typedef struct hb_client_opts {
    int rank;
    const char *node;      /* node name (NULL or "": "local") */
    double period;         /* seconds between liveness beats */
    const char *host;      /* this machine's id for host= (NULL or "": "-") */
    hb_sample_fn sample;   /* NULL: no energy fields */
    void *sample_ctx;      /* the caller's; must outlive the client */
    bool net;              /* sample the node's interfaces (one client per node) */
    bool gpu;              /* sample the node's GPUs through NVML (one client per node) */
} hb_client_opts;

/* From GRIT_SUP_ADDR / GRIT_SUP_SECRET; NULL (no error) when not supervised.
 * Starts a background thread that sends a beat at least every period seconds; with
 * a sampler, that thread also samples this machine's energy before each beat. */
hb_client *hb_client_start(const hb_client_opts *o);
/* Records a finished step and sends it now. */
void hb_client_step(hb_client *c, long step, double loss, double gnorm, double step_time,
                    double comm_time);
void hb_client_event(hb_client *c, const char *kind, long step, const char *detail);
/* Samples the energy once more (when this client has a sampler) and sends a beat now:
 * for the end of a run, before the "done" event, so that the energy since the last
 * periodic beat (and that of a worker shorter than one period) is counted. NULL: no-op. */
void hb_client_final(hb_client *c);
void hb_client_stop(hb_client *c);

/* --- server (supervisor) --------------------------------------------------------- */

typedef struct hb_server {
    int fd;
    char addr[64];     /* "127.0.0.1:port" */
    char secret[65];   /* hex */
    long rejected;
} hb_server;

/* Binds bind_host (NULL: 127.0.0.1) on an ephemeral port, makes a fresh secret. */
grit_err hb_server_open(hb_server *s, const char *bind_host);
#define HB_POLL_REJECT_MAX 4096 /* rejected datagrams one hb_server_poll reads at most */
/* Non-blocking: 1 and *out when a valid message was read, 0 when none is pending or
 * HB_POLL_REJECT_MAX invalid ones were read in this call (a flood cannot hold the
 * caller); invalid ones are counted, logged to log (without the secret) and skipped. */
int hb_server_poll(hb_server *s, hb_msg *out, void (*log)(void *ctx, const char *why), void *ctx);
void hb_server_close(hb_server *s);

#endif
