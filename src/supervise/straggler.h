/*
 * straggler.h - the straggler decision of grit launch: is one node persistently slower
 * at computing than the others?
 *
 * Pure and clock-free, so it can be tested with synthetic series: the supervisor feeds
 * each rank's compute time (step_time - comm_time from its heartbeat) keyed by the step
 * it belongs to, and asks for a verdict. No I/O; storage is allocated by straggler_init
 * for the job's ranks and nodes (none in record or check) and released by straggler_free.
 *
 * The rule (docs/heartbeat.md, README "a straggler"):
 *   1. Only aligned steps count: a step is compared once every rank has reported it.
 *      Ranks' heartbeats arrive at different times and some are lost (UDP); comparing
 *      "the last 5 samples" of each rank would compare different steps.
 *   2. A node's value at a step is the MAX over its ranks: a synchronous job runs at the
 *      pace of its slowest rank, so one slow GPU slows everyone, and the repair (cordon,
 *      spare in) acts on the whole node anyway.
 *   3. A node is slow at a step when its value exceeds factor x the median of the OTHER
 *      nodes' values at that same step, AND exceeds that median by more than min_gap
 *      seconds (below that, timer and scheduler noise of tiny steps is all there is).
 *   4. A node is a straggler when it is slow on EVERY one of the last `window` aligned
 *      steps. Not a fraction: one-off scheduler hiccups on a loaded host hit a node on a
 *      step or two, a sick node (thermal throttling, a bad DIMM, a noisy neighbour that
 *      stays) is slow on all of them; a false positive restarts the job, a late true
 *      positive costs only the steps it takes to see a clean run of `window`.
 * A slowdown of every node at once (host-wide load) flags nobody: each step is judged
 * relative to the other nodes at that step.
 *
 * Invariants: entries are tagged with their step, so a slot overwritten by a newer step
 * can never be mistaken for the old one; the decision reads only the newest
 * STRAGGLER_HISTORY steps of each rank.
 *
 * Size: any number of ranks up to STRAGGLER_MAX_RANKS (a sanity bound, refused loudly
 * at init); memory is ranks x STRAGGLER_HISTORY x 16 bytes (4 MiB for 4,096 ranks).
 * A check costs window x (ranks + nodes log nodes): about 0.1 ms at 4,096 ranks on 512
 * nodes, so the supervisor can afford it every poll.
 */
#ifndef GRIT_SUPERVISE_STRAGGLER_H
#define GRIT_SUPERVISE_STRAGGLER_H

#include <stddef.h>

#include "core/error.h"

#define STRAGGLER_MAX_RANKS (1 << 20)
#define STRAGGLER_MAX_WINDOW 32
/* steps kept per rank: twice the largest window, so that a few lost or late beats
 * still leave a full window of aligned steps */
#define STRAGGLER_HISTORY (2 * STRAGGLER_MAX_WINDOW)

typedef struct straggler_cfg {
    double factor;  /* slower than factor x the others' median; <= 0: detector off */
    int window;     /* aligned steps that must all be slow, 1..STRAGGLER_MAX_WINDOW */
    double min_gap; /* and slower by more than this many seconds (>= 0) */
} straggler_cfg;

/* Why a node was flagged: its numbers over the window. */
typedef struct straggler_verdict {
    int node;          /* node index, as given to straggler_init in node_of */
    int rank;          /* the node's slowest rank on the newest step of the window */
    double compute;    /* the node's mean compute time over the window, s */
    double others;     /* mean over the window of the others' median, s */
    double ratio;      /* compute / others */
    double min_ratio;  /* the smallest per-step ratio in the window (> factor) */
    long first_step, last_step; /* the window's oldest and newest aligned step */
} straggler_verdict;

typedef struct straggler_entry {
    long step; /* -1: empty */
    double compute;
} straggler_entry;

/* Caller-owned; zero it before the first straggler_init, release with straggler_free. */
typedef struct straggler {
    straggler_cfg cfg;
    int nranks, nnodes;
    int *node_of;          /* [nranks] */
    long *latest;          /* [nranks] newest step recorded per rank, -1 none */
    straggler_entry *hist; /* [nranks * HISTORY]: rank r's step s at r * HISTORY + s % HISTORY */
    double *scratch;       /* [6 * nnodes] for straggler_check */
    int *iscratch;         /* [2 * nnodes] for straggler_check */
    int cap_ranks, cap_nodes;
} straggler;

/* Empties st (zeroed, or initialised before: its storage is reused or grown) for a job
 * of nranks ranks, rank r on node node_of[r]; node indices must cover 0..nnodes-1, each
 * with at least one rank. GRIT_EINVAL (with context) for a bad configuration or node
 * map, GRIT_ENOMEM without memory; st is then unusable until a successful init. */
grit_err straggler_init(straggler *st, const straggler_cfg *cfg, int nranks, const int *node_of);

/* Records rank's compute time (seconds, >= 0) for step (> 0). A step recorded again
 * replaces the earlier value. GRIT_EINVAL for a bad rank, step or time (ignored). */
grit_err straggler_record(straggler *st, int rank, long step, double compute);

/* 1 and *v when a node is a straggler by the rule above (the one with the largest
 * ratio when several are), 0 when none is, the detector is off, there are fewer than
 * two nodes, or fewer than `window` aligned steps so far. */
int straggler_check(const straggler *st, straggler_verdict *v);

/* The verdict in one line for people, e.g. "node node1 computes 0.41 s vs 0.082 s, the
 * median of the others (5.0x); above 2.5x and by more than 0.010 s on each of the last 5
 * steps (6-10)". Returns what snprintf returns. */
int straggler_describe(const straggler *st, const straggler_verdict *v, const char *node_name,
                       char *buf, size_t cap);

/* Releases st's storage; a zeroed or freed st is a no-op. */
void straggler_free(straggler *st);

#endif
