/*
 * sup_internal.h - the supervisor's state, shared by its files:
 *   sup.c         the loop, launching and stopping, the detectors
 *   sup_fsm.c     the legal transitions and the failure kinds
 *   sup_repair.c  diagnosis of suspect nodes and their replacement by spares
 *   sup_summary.c the incident table and goodput at the end
 *   sup_inject.c  --inject: faults into the environment of the processes they break
 *   sup_stop.c    SIGTERM/SIGINT: a graceful stop, the summary, exit 128 + signal
 *   sup_incident.c every lost rank at a detection, a row per node hit, the durable
 *                 ledger (supervisor.json) a restarted supervisor carries on from
 *   sup_provision.c PROVISIONING: --on-no-spare CMD asked for a node when none is left
 *   sup_strikes.c  per-node strikes and quarantine (--strikes, --strike-window)
 *   sup_hbwatch.c  heartbeats across hosts: the socket's address from the allocation
 *                  (hb_bind.h), and a warning when ranks elsewhere send none
 *
 * Sizes: nothing here has a fixed capacity. Ranks are allocated at each launch for
 * the attempt's world; implicated nodes and diagnosis verdicts for the cluster's slot
 * count when it is opened; incidents, NaN steps and skipped steps grow as they come
 * (sup_grow). An allocation that fails is an error (ERROR -> GAVE_UP), never a row
 * overwritten or an entry dropped.
 */
#ifndef GRIT_SUP_INTERNAL_H
#define GRIT_SUP_INTERNAL_H

#include <jansson.h>
#include <stdio.h>
#include <sys/types.h>

#include "core/events.h"
#include "core/runlock.h"
#include "supervise/backend.h"
#include "supervise/cluster.h"
#include "heartbeat/hb.h"
#include "supervise/silent.h"
#include "supervise/straggler.h"
#include "supervise/sup.h"
#include "supervise/sup_fsm.h"

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
    char lost;      /* seen at a detection: 'D' gone or a zombie, 'T' stopped (else 0) */
    char remote;    /* runs on another machine than the supervisor (sup_hbwatch.c) */
} rank_info;

typedef struct incident {
    sup_fail kind;
    char node[64], detail[200];
    char health[120]; /* a measured incident's health check on the node ("": none run) */
    char pair[320];   /* a network incident's pairwise MPI checks (sup_repair.c; "": none) */
    int rank;
    long step_seen, resumed_at;
    double fault_ts, detect_ts, recovered_ts; /* Unix seconds (0: not known) */
} incident;

typedef struct sup {
    const sup_opts *o;
    const sup_backend *be;
    sup_state state;
    cluster cl;
    hb_server hb;
    events ev;
    runlock own_lock; /* RUN/supervisor.lock when the caller gave none (runlock.h) */
    const runlock *lock; /* o->lock or &own_lock: held for the supervisor's life */
    char logdir[1100], statepath[1100];
    int attempt, restarts;
    pid_t job;
    double launch_ts, progress_ts, first_launch_ts;
    long max_step, log_size;
    int beats; /* the program beats (a heartbeat seen, any attempt): its log is no progress */
    rank_info *rk; /* [nranks], this attempt's ranks (capacity rk_cap) */
    int nranks, rk_cap;
    int rcvbuf_warned; /* the heartbeat socket buffer warning was given */
    int live_next; /* the next rank whose process poll_running checks (round robin) */
    double hang_cache_ts; /* when hang_to was computed (the median is not per poll) */
    double hang_to;
    double strag_ts; /* the last straggler check (large jobs: not every poll) */
    straggler strag; /* compute times by step, for the straggler detector */
    silent sil;      /* utilisation and network signals, for the silent detector */
    double sil_ts;   /* the last tick of sil */
    int replica_ranks; /* tp x pp from the job's "layout" event (0: not told) */
    int sil_trace;   /* GRIT_SILENT_TRACE=1: a line per tick on stderr */
    incident *inc; /* [ninc] every incident of this supervisor, in order (capacity inc_cap) */
    int ninc, inc_cap;
    long *nan_steps; /* steps that failed numerically once (capacity nan_cap) */
    int nnan, nan_cap;
    char *skip_steps; /* comma list for GRIT_SKIP_STEPS (NULL: none; capacity skip_cap) */
    int skip_cap;
    /* the current failure */
    sup_fail f_kind;
    char f_detail[200];
    double rej_ts;       /* when the last rejected heartbeat was logged */
    long rej_suppressed; /* rejected since then, not logged one by one */
    char fatal[64]; /* the job said (event "fatal", exit 3) a retry would repeat this */
    char (*implicated)[64]; /* [nimplicated] distinct node names (capacity: cluster slots) */
    int nimplicated, impl_cap;
    struct sup_verdict { /* sup_diagnose's findings, one per suspect, for sup_repair */
        char node[64], why[200];
        int bad;
    } *vd;
    int nvd, vd_cap;
    int f_rank;
    long f_nan_step;
    double losses[32]; /* recent losses, for the spike detector */
    int nloss;
    double vals[16];      /* recent validation losses (event "validation"), for their spikes */
    int nval, val_spikes; /* values seen; spikes flagged (a warning, not a failure) */
    long val_spike_step;  /* the latest one's step */
    /* REPAIRING -> PROVISIONING: the node sup_repair must replace and has no spare for */
    char prov_node[64], prov_why[200];
    int nprov; /* --on-no-spare commands run by this supervisor */
    char end_reason[512]; /* why it gave up, for the summary ("" none) */
    struct sup_quar { /* quarantined nodes (the ledger keeps them; capacity quar_cap) */
        char node[64], why[200];
        double ts; /* Unix seconds */
    } *quar;
    int nquar, quar_cap;
    pid_t health_pid;  /* periodic health check in flight */
    sup_inject *inj; /* --inject, NULL without (sup_inject.c) */
    double health_ts;
    /* heartbeats across hosts (sup_hbwatch.c) */
    char hb_bind[16];          /* the address chosen from the allocation ("" none) */
    char hb_why[300];          /* why ("" when the backend knows no addresses) */
    int hb_fallback;           /* loopback although hosts are elsewhere (hb_bind.h rule 4) */
    char (*local_hosts)[32];   /* [nlocal] allocation hosts that are this machine */
    int nlocal;
    int hbm_checked;           /* this launch's ranks elsewhere were judged */
    double hbm_ts;             /* the last look at them */
    int hbm_warnings;          /* heartbeats_missing warnings given in this run */
    char hbm_nodes[256];       /* the silent nodes of the latest one */
} sup;

/* Sorts v[0..n) in place and returns its median (0 for n <= 0). */
double sup_median(double *v, int n);
/* Records a step's loss (rank 0's series); 1 when it is a spike against the 32 before it
 * (robust z > spike_z, at least 8 before it): then it is not recorded (sup_spike.c). */
int sup_check_spike(sup *s, double loss);
/* A validation loss (event "validation", detail "loss=X"): a spike is flagged (event,
 * warning, summary count), never failed; the value joins the window either way. */
void sup_check_validation(sup *s, long step, const char *detail);
/* x against the robust statistics of the n values of hist (median, 1.4826 x MAD): 1 when
 * x is more than z of them above the median (needs n >= min and MAD > 0); *med and *rz
 * (may be NULL) get the median and x's robust z. */
int sup_robust_spike(const double *hist, int n, int min, double x, double z, double *med,
                     double *rz);

/* A line on stderr prefixed "grit launch: " (unless quiet). */
void sup_say(sup *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An events.jsonl record from the supervisor; takes ownership of fields (may be NULL). */
void sup_event(sup *s, const char *kind, json_t *fields);
/* Moves to st when sup_fsm.h allows it (a "state" event naming the function behind
 * the transition). An illegal transition is GRIT_EINVAL, an "illegal_transition"
 * event and a line on stderr; the state is left as it was. */
grit_err sup_set_state(sup *s, sup_state st);
/* Makes room for n elements of size sz in *p (capacity *cap, doubled as needed).
 * GRIT_ENOMEM (with what) when it cannot; *p and *cap unchanged then. */
grit_err sup_grow(void **p, int *cap, int n, size_t sz, const char *what);
/* Adds node to the implicated list unless it is there already. */
void sup_implicate(sup *s, const char *node);
/* Whether node is on the current failure's implicated list (sup_repair.c). */
int sup_is_implicated(const sup *s, const char *node);
/* Starts grit health --quick as on node (NULL: this machine), in node's environment,
 * output into out (NULL: discarded); its pid, or -1. */
pid_t sup_spawn_health(sup *s, const char *node, int periodic, const char *out);

/* The verdict on every suspect of the current failure into s->vd (the implicated
 * nodes, or every active node when none is; none for a numeric failure): a diagnosis
 * event each. No state change, no repair. */
grit_err sup_diagnose(sup *s);
/* Cordons the nodes sup_diagnose found bad and brings in spares (with none left:
 * wait, shrink, requeue or give up as the policy says): 0 to relaunch, -1 when the
 * job cannot go on (the reason recorded), 1 (REPAIRING with --on-no-spare only) when
 * s->prov_node must be cordoned and no spare is left: PROVISIONING, then call again
 * (it carries on where it stopped). Quarantines by strikes first (sup_strikes.c).
 * No state change. */
int sup_repair(sup *s);
/* The job's "layout" event from rank 0 ("tp=T,pp=P,dp=D"): T x P ranks make one
 * data-parallel replica, which a shrink keeps whole (sup_repair.c). */
void sup_note_layout(sup *s, const char *detail);
/* The health verdict on node as sup_diagnose gives it: 0 healthy, else why filled.
 * machine_ok caches the one check of this machine (start it at -1). */
int sup_check_node(sup *s, const char *node, int *machine_ok, char *why, size_t cap);
/* PROVISIONING: runs --on-no-spare for s->prov_node (sup_provision.c): 0 a node was
 * added as a spare (or the failed one came back under its name, healthy: its verdict
 * cleared), -1 it failed (s->end_reason, a gave_up event), 2 a stop signal came (the
 * command killed). No state change. */
int sup_provision(sup *s);
/* Incidents in inc[0..n) that name node, detected within window seconds before now
 * (window <= 0: any time). Pure. */
int sup_strike_count(const incident *inc, int n, const char *node, double now, double window);
/* Whether node is quarantined for this run. */
int sup_quarantined(const sup *s, const char *node);
/* Every bad-or-not verdict whose node has --strikes incidents in the window: made bad
 * with a "quarantined: ..." reason, added to the quarantine (event, ledger). */
grit_err sup_strikes_apply(sup *s);
/* At start (after the ledger): quarantined nodes that cluster.json has as spare are
 * cordoned again, active ones replaced by a spare when there is one (events). */
void sup_quarantine_enforce(sup *s);
/* Adds node to the quarantine list (no event, no save); GRIT_ENOMEM. */
grit_err sup_quarantine_add(sup *s, const char *node, const char *why, double ts);
/* The state letter of /proc/PID/stat (R, S, D, T, Z, ...), 0 when the process is gone. */
char sup_proc_state(long pid);
void sup_done_dir(const sup *s, char *out, size_t cap);
int sup_done_marked(const sup *s, int rank);
/* At a detection: every rank gone, a zombie or stopped right now is marked (lost) and
 * its node implicated (sup_incident.c). */
void sup_collect_lost(sup *s);
/* A network incident's evidence from the backend's MPI pairwise check (be->pair_check;
 * none: out ""): node with its healthy peer peer[0], timed; when that fails and np is 2,
 * the two healthy peers as well: failing too, the fabric (a switch, the network) is at
 * fault rather than the node. out: one line, e.g. "n2<->n1 failed in 4.1 s (...);
 * n1<->n3 healthy in 2.0 s: the node, not the fabric" (sup_repair.c). */
void sup_pair_evidence(const sup_backend *be, const sup_opts *o, const char *node,
                       const char *const peer[2], int np, char *out, size_t cap);
/* After the detection's row (first): one row for each other implicated node. */
grit_err sup_record_more(sup *s, const incident *first);
/* RUN/supervisor.json, durably: restarts, attempt, first launch, every incident. A
 * write that fails is a warning (the run goes on). */
void sup_ledger_save(sup *s);
/* Reads it back (none: a first run); GRIT_ENOMEM only. */
grit_err sup_ledger_load(sup *s);
/* Checkpoint saves that failed and checkpoints rejected at resume, from events.jsonl. */
void sup_ckpt_counts(const sup *s, int *failed, int *rejected);
/* A rejected heartbeat: counted (s->hb.rejected); a line and an event at most once per
 * SUP_REJECT_LOG_S, the next one carrying how many were suppressed meanwhile. */
void sup_reject_note(sup *s, const char *why);
#define SUP_REJECT_LOG_S 1.0
#define SUP_EXIT_PERMANENT 3 /* a job's (and grit launch's) exit status: do not retry */
/* DETECTED -> GAVE_UP for a failure the job called permanent (s->fatal): the reason,
 * the summary; returns grit launch's exit status, SUP_EXIT_PERMANENT. */
int sup_give_up_permanent(sup *s);
/* SIGCONT + SIGTERM to the job's group and every known rank, SIGKILL after --grace;
 * the job's wait status (0 when none was running). */
int sup_stop_job(sup *s);
/* A SIGTERM/SIGINT asked the supervisor to stop (core/stopsig.h). */
int sup_stop_pending(void);
/* LAUNCHING/RUNNING -> STOPPED: the job stopped gracefully (sup_stop.c), the event
 * and summary; returns the exit status, 128 + the signal. */
int sup_stop(sup *s);
/* Before the heartbeat socket opens: when the backend knows its hosts' addresses,
 * chooses the address to listen on (s->hb_bind, unless --bind gave one) and which
 * hosts are this machine. Only GRIT_ENOMEM fails. */
grit_err sup_hb_plan(sup *s, const char (*hosts)[32], int nhosts);
/* After it opened: the address and why, on stderr and as a heartbeat_bind event. */
void sup_hb_announce(sup *s);
/* At a launch: which ranks run elsewhere; a new judgement for this launch. */
void sup_hb_launched(sup *s);
/* Every poll while running: once --heartbeat-wait seconds have passed since the launch,
 * or the job reached step SUP_HBM_STEPS, ranks on other machines that sent no heartbeat
 * at all get a warning (stderr, even with --quiet) and a heartbeats_missing event. */
void sup_hb_watch(sup *s);
#define SUP_HBM_STEPS 3
/* The summary's heartbeats line (nothing when every host was heard). */
void sup_hb_summary(const sup *s, FILE *f);

/* Prints the incident table and totals, and records the final event. */
void sup_summary(sup *s, int ok);

#endif
