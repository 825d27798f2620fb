/*
 * sup_internal.h - the supervisor's state, shared by its files:
 *   sup.c         the loop, launching and stopping, the detectors
 *   sup_repair.c  diagnosis of suspect nodes and their replacement by spares
 *   sup_summary.c the incident table and goodput at the end
 *   sup_inject.c  --inject: faults into the environment of the processes they break
 */
#ifndef GRIT_SUP_INTERNAL_H
#define GRIT_SUP_INTERNAL_H

#include <jansson.h>
#include <sys/types.h>

#include "core/events.h"
#include "supervise/backend.h"
#include "supervise/cluster.h"
#include "heartbeat/hb.h"
#include "supervise/straggler.h"
#include "supervise/sup.h"

#define MAX_RANKS 256
#define MAX_INCIDENTS 64

typedef enum sup_state {
    S_PREFLIGHT, S_LAUNCHING, S_RUNNING, S_DETECTED, S_DIAGNOSING, S_REPAIRING, S_DONE, S_GAVE_UP
} sup_state;


/* --inject: faults for tests, put into the environment of the processes they break
 * (sup_inject.c); nothing else of the supervisor reads them. */
typedef struct sup_inject sup_inject;
grit_err sup_inject_open(const char *spec, const char *run_dir, sup_inject **out);
void sup_inject_close(sup_inject *in);
/* The trainer faults (GRIT_FAULTS) of attempt, for the launch event ("" none). */
void sup_inject_job_faults(const sup_inject *in, int attempt, char *trainer, size_t cap);
/* In the job's process before exec: the attempt's faults into its environment. */
void sup_inject_export_job(const sup_inject *in, int attempt);
/* GRIT_HEALTH_FAULT of node's processes, for a backend that starts its check there
 * (NULL: none of its own). */
const char *sup_inject_node_fault(const sup_inject *in, const char *node);
/* Whether node's processes have an injected environment of their own (so a check of
 * this machine does not speak for it). */
int sup_inject_node_env(const sup_inject *in, const char *node);
/* In a health check's process before exec: node's faults (node NULL: this machine;
 * periodic: a periodic check). */
void sup_inject_export_health(sup_inject *in, const char *node, int periodic);
/* A periodic check was started (periodic_health_fail is used up). */
void sup_inject_periodic_started(sup_inject *in);

typedef struct rank_info {
    long step, pid;
    int done; /* said it finished (EV1 kind=done): its exit is not a failure */
    double last_beat;
    char node[64];
    double compute; /* the last step's step_time - comm_time (valid when ncompute > 0) */
    int ncompute;   /* steps measured */
} rank_info;

typedef struct incident {
    char kind[16], node[64], detail[200];
    int rank;
    long step_seen, resumed_at;
    double fault_ts, detect_ts, recovered_ts;
} incident;

typedef struct sup {
    const sup_opts *o;
    const sup_backend *be;
    sup_state state;
    cluster cl;
    hb_server hb;
    events ev;
    char logdir[1100], statepath[1100];
    int attempt, restarts;
    pid_t job;
    double launch_ts, progress_ts, first_launch_ts;
    long max_step, log_size;
    rank_info rk[MAX_RANKS];
    int nranks;
    straggler strag; /* compute times by step, for the straggler detector */
    incident inc[MAX_INCIDENTS];
    int ninc;
    long nan_steps[16];
    int nnan;
    char skip_steps[256];
    /* the current failure */
    char f_kind[16], f_detail[200];
    char implicated[8][64];
    int nimplicated;
    int f_rank;
    long f_nan_step;
    double losses[32]; /* recent losses, for the spike detector */
    int nloss;
    pid_t health_pid;  /* periodic health check in flight */
    double health_ts;
    sup_inject *inj; /* --inject, NULL without (sup_inject.c) */
} sup;

/* A line on stderr prefixed "grit launch: " (unless quiet). */
void sup_say(sup *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An events.jsonl record from the supervisor; takes ownership of fields (may be NULL). */
void sup_event(sup *s, const char *kind, json_t *fields);
void sup_set_state(sup *s, sup_state st);
/* Starts grit health --quick as on node (NULL: this machine), in node's environment,
 * output into out (NULL: discarded); its pid, or -1. */
pid_t sup_spawn_health(sup *s, const char *node, int periodic, const char *out);

/* Checks the suspects of the current failure and replaces the bad ones by spares:
 * 0 to relaunch, -1 when the job cannot go on (no spare: requeued or given up). */
int sup_diagnose_and_repair(sup *s);
/* Prints the incident table and totals, and records the final event. */
void sup_summary(sup *s, int ok);

#endif
