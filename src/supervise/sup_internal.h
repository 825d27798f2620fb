/*
 * sup_internal.h - the supervisor's state, shared by its files:
 *   sup.c         the loop, launching and stopping, the detectors
 *   sup_repair.c  diagnosis of suspect nodes and their replacement by spares
 *   sup_summary.c the incident table and goodput at the end
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
    char dead[8][64];
    int ndead;
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
    int periodic_failed; /* the injected periodic failure fired */
    double health_ts;
} sup;

/* A line on stderr prefixed "grit launch: " (unless quiet). */
void sup_say(sup *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An events.jsonl record from the supervisor; takes ownership of fields (may be NULL). */
void sup_event(sup *s, const char *kind, json_t *fields);
void sup_set_state(sup *s, sup_state st);
/* Whether an injected kill marked node as dead hardware. */
int sup_is_dead(sup *s, const char *node);
/* Starts grit health --quick (with GRIT_HEALTH_FAULT=fault when not NULL); its pid. */
pid_t sup_spawn_health(sup *s, const char *fault);
/* This attempt's injected faults: trainer (GRIT_FAULTS), ckpt (GRIT_CKPT_FAULT), and
 * the nodes whose health check must fail. */
void sup_faults_for_attempt(sup *s, char *trainer, size_t tcap, char *ckpt, size_t ccap,
                            char health[][32], int *nh);

/* Checks the suspects of the current failure and replaces the bad ones by spares:
 * 0 to relaunch, -1 when the job cannot go on (no spare: requeued or given up). */
int sup_diagnose_and_repair(sup *s);
/* Prints the incident table and totals, and records the final event. */
void sup_summary(sup *s, int ok);

#endif
