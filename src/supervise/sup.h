/*
 * sup.h - grit launch: supervise a job, detect failures, replace nodes, resume.
 *
 * The states and the function behind each transition are drawn in sup_fsm.h, where
 * the table that enforces them lives:
 *
 *   PREFLIGHT -> LAUNCHING -> RUNNING -> (DETECTED -> DIAGNOSING -> REPAIRING ->
 *   LAUNCHING -> RUNNING)* -> DONE | GAVE_UP | STOPPED   (ERROR -> GAVE_UP on an internal
 *   error; STOPPED on SIGTERM/SIGINT)
 *
 * Every transition is an event in RUN/events.jsonl ("source":"supervisor"). Limits and
 * the state machine for users: docs/supervisor.md.
 */
#ifndef GRIT_SUPERVISE_SUP_H
#define GRIT_SUPERVISE_SUP_H

typedef struct sup_opts {
    int nodes, spares, ranks_per_node, max_restarts;
    const char *run_dir;
    struct runlock *lock; /* RUN/supervisor.lock taken by the caller (grit launch, before its
                           * dashboard writes into RUN); NULL: sup_run takes it */
    char *const *cmd; /* NULL-terminated */
    const char *inject;  /* fault spec (see grit launch --help) or NULL */
    double hang_timeout; /* 0: derived from step times, within [hang_floor, hang_cap] */
    double hang_floor, hang_cap, startup_timeout, grace, backoff;
    double stop_grace;   /* SIGTERM/SIGINT: seconds for the job to stop by itself (sup_stop.c) */
    double straggler_factor;  /* a node slower than F x the others' median (0 off) */
    int straggler_window;     /* on each of the last N aligned steps (1..32) */
    double straggler_min_gap; /* and slower by more than S seconds (straggler.h) */
    /* silent slowdowns (silent.h): utilisation / network below F x the others' median */
    double util_factor, net_factor; /* < 1; 0 off */
    double clock_factor;            /* GPU SM clock ratio vs peers' (silent.h); < 1; 0 off */
    int signal_window, signal_warmup; /* seconds (ticks) judged (silent.h rule 3); baseline */
    double net_min_rate;     /* bytes/s: the others' peak below this judges no link */
    double signal_step_slow; /* and the job's steps this much slower than the baseline */
    double spike_z;      /* loss spike: robust z-score over the last 32 steps (0 off) */
    double health_every; /* run grit health --quick every S seconds while running (0 off) */
    double spare_wait;   /* no_spare "wait": seconds to wait for a spare (cordon lifted) */
    const char *no_spare; /* "wait", "shrink" or "give_up" */
    int shrink_unit;      /* shrink: nodes per data-parallel replica; 0: from the job's
                           * "layout" event (tp x pp ranks), else 1 */
    /* --on-no-spare: a node to cordon and no spare left: run this (argv, NULL-terminated;
     * NULL: never), which prints the replacement's name (sup_provision.c) */
    char *const *on_no_spare;
    double on_no_spare_timeout; /* seconds the command may take (<= 0: 600) */
    /* strikes: a node named by `strikes` incidents within `strike_window` seconds (<= 0:
     * the whole run) is quarantined for the rest of the run (sup_strikes.c); 0 off */
    int strikes;
    double strike_window;
    /* heartbeat address; NULL: 127.0.0.1, or under a backend that knows its hosts'
     * addresses this machine's on the allocation's network (hb_bind.h) */
    const char *bind;
    /* ranks on other machines with no heartbeat S seconds after a launch (or at step
     * SUP_HBM_STEPS): a warning and a heartbeats_missing event (sup_hbwatch.c; 0 off) */
    double heartbeat_wait;
    const char *grit;     /* this grit binary, for grit health */
    const char *backend;  /* "local" (mpirun, default) or "slurm" (see backend.h) */
    double health_timeout; /* slurm: a node's grit health must answer within S seconds */
    char *const *srun_args; /* slurm: extra srun options for every step (NULL-terminated) */
    int quiet;
    /* tests: a backend that sup_backend_find does not know (NULL: by name) */
    const struct sup_backend *backend_impl;
} sup_opts;

/* Runs the job to the end. Returns 0 when it finished, 1 when the supervisor
 * gave up (reason printed and recorded), 2 when it could not start, 128 + the signal
 * when a SIGTERM/SIGINT stopped it (the caller installs core/stopsig.h). */
int sup_run(const sup_opts *o);

#endif
