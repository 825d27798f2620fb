/*
 * silent.h - the silent-slowdown detector of grit launch: is one node's device
 * utilisation or network throughput persistently below its peers' while the job runs
 * slower than it did? (A GPU that runs on but slower, a CPU throttled by its cgroup or
 * by heat, a NIC that negotiated down.)
 *
 * Pure and clock-free like straggler.h: the supervisor records what heartbeats carry
 * (hb.h: util= per rank, net_rx=/net_tx= per node, step_time= and comm_time= per rank,
 * one beat per finished step) and calls
 * silent_tick once per tick (a second: the beat period); the detector folds what came
 * since the previous tick into one sample per node and judges the newest samples. No I/O;
 * storage allocated by silent_init, released by silent_free.
 *
 * The rule (docs/heartbeat.md "silent slowdowns"), for each signal (utilisation: the
 * mean over a node's ranks of util / (the share of the tick's step time not spent in
 * communication), the cores a rank used while it computed: a rank that waits in a
 * collective for a slow peer may sleep (its raw util sinks with the slow node's), but its
 * compute share sinks as much, so only the slow node stays low; network: the larger of
 * the node's peak rx and tx bytes/s,
 * which the supervisor passes as net: a slow link caps both directions of its node, while
 * each peer still has a fast direction with some other peer; with two nodes the one link
 * is both nodes' and nothing can tell them apart, so the network needs three or more):
 *   1. Baseline. The first `warmup` ticks after a launch are the baseline: each node's
 *      median of its samples, and the job's step time (per tick: the median over ranks
 *      of each rank's MEAN step time in the tick: a CPU quota throttles in bursts, a few
 *      steps of 70 ms among many of 5 ms, which a median of steps would not see). No
 *      verdict before.
 *   2. A node is low at a tick when its value is below factor x the median of the OTHER
 *      nodes' values at that tick AND below factor x its own baseline (one node that was
 *      always different, a smaller machine, is not a fault; a node that sank is). For
 *      the network, the others' median must also exceed min_rate (an idle network says
 *      nothing about links).
 *   3. A node is suspect when it is low on the first and the last of the last `window`
 *      ticks and on all but at most one (SILENT_SPARE_TICKS) of the ticks between (one
 *      noisy sample, a rank descheduled for a moment, does not fire: a dip must span the
 *      window; one noisy sample inside a real slowdown does not hide it either: a node
 *      throttled by a CPU quota reads 0.3-0.7x its baseline tick by tick, and requiring
 *      every tick below 0.6x once took 72 s on a 2-core CI machine). Beats and ticks
 *      are both about a second apart and not in phase: a tick that got no beat of a
 *      node reuses that node's sample of the tick before (once; two empty ticks in a
 *      row are a missing sample, which is never low).
 *   4. Cross-check, steady state: over those ticks steps completed, and the job's median
 *      step time is at least step_slow x its baseline: the low signal costs throughput.
 *      A checkpoint save (a tick or two without steps, everyone's signals dip) and a
 *      host-wide load (every node low at once: nobody below the others) do not fire.
 * GPUs (hb_gpu.h: gpu_util= and sm_clock= from the one client per node that samples
 * them): a node with a GPU baseline is judged on its GPU utilisation (the mean busy share
 * of its GPUs, against the other GPU nodes) INSTEAD of its CPU busy time, by the same
 * rule and util_factor; and on its SM clock ratio (the lowest clock / maximum clock of
 * its GPUs: a GPU that throttles for heat or power), by the same rule and clock_factor.
 * Nodes without a GPU keep the CPU signal and are compared with each other only (a
 * GPU job's CPU time says nothing about a CPU-only node's). Both GPU signals are
 * "utilisation" incidents.
 * When several nodes are suspect, the one with the smallest value/others ratio is named;
 * the verdict lists every signal that fired on it (e.g. gpu_util and sm_clock).
 *
 * Sizes: ranks and nodes as the job has (allocated at init, none in record/tick/check);
 * SILENT_HISTORY ticks kept per node. A tick costs O(ranks + nodes x window x nodes) for
 * the medians: fine for hundreds of nodes at one tick a second.
 */
#ifndef GRIT_SUPERVISE_SILENT_H
#define GRIT_SUPERVISE_SILENT_H

#include <stdio.h>
#include <stddef.h>

#include "core/error.h"

#define SILENT_MAX_WINDOW 60
#define SILENT_MAX_WARMUP 600
#define SILENT_HISTORY SILENT_MAX_WINDOW
/* ticks strictly inside the window that may be not low in a suspect's window (rule 3) */
#define SILENT_SPARE_TICKS 1

/* SILENT_UTIL: CPU busy time per compute share; SILENT_GPU and SILENT_CLOCK: the node's
 * GPU busy share and SM clock ratio; SILENT_NET: peak bytes/s. */
typedef enum silent_signal {
    SILENT_UTIL,
    SILENT_NET,
    SILENT_GPU,
    SILENT_CLOCK,
    SILENT_NSIGNALS
} silent_signal;

typedef struct silent_cfg {
    double util_factor; /* low: below factor x others' median and x own baseline; <= 0 off */
    double net_factor;  /* the same for the network; <= 0 off */
    int window;         /* ticks judged (rule 3), 1..SILENT_MAX_WINDOW */
    int warmup;         /* ticks of baseline after a launch, 1..SILENT_MAX_WARMUP */
    double min_rate;    /* bytes/s: the others' median below this judges no link */
    double step_slow;   /* the job's step time over the window >= this x baseline (>= 1) */
    double clock_factor; /* SM clock ratio below this x others' and own baseline; <= 0 off */
} silent_cfg;

/* Why a node was flagged: its numbers over the window. */
typedef struct silent_verdict {
    int node;              /* node index, as in node_of */
    silent_signal signal;
    double value;          /* the node's mean over the window's samples (cores, or bytes/s) */
    double others;         /* mean over the same ticks of the others' median */
    double baseline;       /* the node's own baseline */
    double ratio;          /* value / others */
    double step, step_base; /* the job's median step time over the window, and baseline */
    int window;
    int low_ticks;         /* of those, the ticks it was low on (window - SILENT_SPARE_TICKS..) */
    unsigned fired;        /* 1u << signal for every signal low on this node (signal's too) */
    double values[SILENT_NSIGNALS], peers[SILENT_NSIGNALS], bases[SILENT_NSIGNALS];
} silent_verdict;

/* Caller-owned; zero it before the first silent_init, release with silent_free. */
typedef struct silent {
    silent_cfg cfg;
    int nranks, nnodes, cap_ranks, cap_nodes;
    int *node_of;        /* [nranks] */
    /* since the previous tick, per rank: util sum and count, step and comm time sums */
    double *r_util;      /* [nranks] */
    int *r_nutil;        /* [nranks] */
    double *r_step;      /* [nranks] sum of step times since the tick */
    double *r_comm;      /* [nranks] sum of their communication times */
    int *r_nstep;        /* [nranks] steps since the tick (0: none) */
    double *n_net;       /* [nnodes] peak bytes/s since the tick, NAN none */
    double *n_gpu;       /* [nnodes] the newest GPU busy share since the tick, NAN none */
    double *n_clk;       /* [nnodes] the newest SM clock ratio since the tick, NAN none */
    double *last;        /* [SILENT_NSIGNALS][nnodes] the previous tick's sample (NAN none) */
    /* per node, per signal: SILENT_HISTORY ticks (NAN: no sample), baseline samples */
    double *hist;        /* [SILENT_NSIGNALS][nnodes][HISTORY] */
    double *base;        /* [SILENT_NSIGNALS][nnodes] (NAN until learned) */
    double *base_acc;    /* [SILENT_NSIGNALS][nnodes][warmup] samples of the warmup */
    double step_hist[SILENT_HISTORY]; /* the job's median step time per tick, NAN none */
    double step_base;
    double *base_step_acc; /* [warmup] */
    long ticks;          /* ticks since init */
    double *scratch;     /* [nnodes + nranks + warmup] for medians */
} silent;

/* Empties st for a job of nranks ranks, rank r on node node_of[r] (0..nnodes-1, each
 * with a rank). GRIT_EINVAL (with context) for a bad configuration or map, GRIT_ENOMEM. */
grit_err silent_init(silent *st, const silent_cfg *cfg, int nranks, const int *node_of);

/* What one heartbeat carried: util (cores, NAN none), step_time (s, <= 0 or NAN: none,
 * a liveness beat) and the part of it spent communicating (comm_time, s; NAN or < 0:
 * not known, taken as 0), net (node's peak bytes/s, NAN none). A bad rank is ignored. */
void silent_record(silent *st, int rank, double util, double step_time, double comm_time,
                   double net);

/* What a node's GPU sampler sent in one heartbeat of rank: gpu_util (0..1) and sm_clock
 * (0..1), each NAN when absent; the tick keeps the newest of each (every beat repeats the
 * sampler's latest pair). A bad rank is ignored. */
void silent_record_gpu(silent *st, int rank, double gpu_util, double sm_clock);

/* Closes the current tick: one sample per node and signal from what was recorded. */
void silent_tick(silent *st);

/* 1 and *v when a node is suspect by the rule above, 0 when none is (or the detector
 * is off, fewer than two nodes, still in warmup). */
int silent_check(const silent *st, silent_verdict *v);
/* One line for the newest tick: the job's step time and each node's samples and
 * baselines (grit launch prints it under GRIT_SILENT_TRACE=1, docs/env.md). */
void silent_trace(const silent *st, FILE *f);

/* The incident kind: "utilisation" (UTIL, GPU, CLOCK) or "network". */
const char *silent_signal_name(silent_signal s);
/* The signal itself: "cpu_util", "net", "gpu_util" or "sm_clock". */
const char *silent_signal_field(silent_signal s);

/* The verdict in one line, naming each signal that fired and its values. */
int silent_describe(const silent_verdict *v, const char *node_name, char *buf, size_t cap);

/* Releases st's storage; a zeroed or freed st is a no-op. */
void silent_free(silent *st);

#endif
