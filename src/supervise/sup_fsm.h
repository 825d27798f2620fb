/*
 * sup_fsm.h - the supervisor's states, the transitions between them, and the kinds of
 * failure it detects. The table in sup_fsm.c is the only place a transition is
 * allowed; sup_set_state (sup.c) refuses anything else (an error, logged as an
 * "illegal_transition" event, the state left as it was). Pure data: no I/O.
 *
 *   PREFLIGHT --[sup_preflight: grit health on every active node, bad ones replaced]--> LAUNCHING
 *   PREFLIGHT --[sup_preflight: a node failed and no spare is left]-----------------> GAVE_UP
 *   LAUNCHING --[launch: the backend's command in its own process group]------------> RUNNING
 *   RUNNING   --[poll_running: the job exited 0]-----------------------------------> DONE
 *   RUNNING   --[poll_running: exit/signal, hang, NaN, spike, straggler, health,
 *                 utilisation, network]-------------------------------------------> DETECTED
 *   DETECTED  --[stop_job: SIGTERM, grace, SIGKILL; stacks first on a hang]---------> DIAGNOSING
 *   DETECTED  --[sup_give_up_permanent: the job said a retry would repeat it]-----> GAVE_UP
 *   DIAGNOSING --[sup_diagnose: a verdict on each implicated node]------------------> REPAIRING
 *   REPAIRING --[sup_repair: cordon the bad, spares in; backoff]--------------------> LAUNCHING
 *   REPAIRING --[sup_repair: no spare (give_up, requeue) or --max-restarts]---------> GAVE_UP
 *   REPAIRING --[sup_repair: a node to cordon, no spare left: --on-no-spare asks]---> PROVISIONING
 *   PROVISIONING --[sup_provision: the command named a usable node, now a spare]----> REPAIRING
 *   PROVISIONING --[sup_provision: the command failed, timed out or named no node]--> GAVE_UP
 *   PROVISIONING --[sup_stop: SIGTERM/SIGINT: the command ended, summary]-----------> STOPPED
 *   any but DONE, GAVE_UP, ERROR --[give_up_error: an error it cannot handle]-------> ERROR
 *   ERROR     --[give_up_error: stop the job, record the reason, the summary]-------> GAVE_UP
 *   LAUNCHING --[sup_stop: SIGTERM/SIGINT: the job stopped gracefully, summary]----> STOPPED
 *   RUNNING   --[sup_stop: SIGTERM/SIGINT: the job stopped gracefully, summary]----> STOPPED
 *
 * So a run reads PREFLIGHT -> LAUNCHING -> RUNNING -> (DETECTED -> DIAGNOSING ->
 * REPAIRING [-> PROVISIONING -> REPAIRING]* -> LAUNCHING -> RUNNING)* -> DONE | GAVE_UP |
 * STOPPED. PROVISIONING (sup_provision.c) is entered only from REPAIRING, once per node
 * that needs a replacement the job's own pool no longer has. DONE, GAVE_UP and
 * STOPPED (a signal: sup_stop.c; a rerun resumes) are final;
 * GAVE_UP is left only by a person re-running grit launch on the run directory (it
 * carries on from cluster.json and the checkpoints). ERROR is left only on purpose,
 * to GAVE_UP, by the code that records why. Errors that lead there: a launch that cannot
 * start (fork, a command too long), memory for a growing table, an illegal transition.
 */
#ifndef GRIT_SUPERVISE_SUP_FSM_H
#define GRIT_SUPERVISE_SUP_FSM_H

typedef enum sup_state {
    S_PREFLIGHT, S_LAUNCHING, S_RUNNING, S_DETECTED, S_DIAGNOSING, S_REPAIRING, S_DONE,
    S_GAVE_UP, S_ERROR, S_STOPPED, S_PROVISIONING, S_NSTATES
} sup_state;

typedef struct sup_transition {
    sup_state from, to;
    const char *via; /* the function behind it and what it does, for events and docs */
} sup_transition;

/* The legal transitions, in the order drawn above; *n set to their count. */
const sup_transition *sup_fsm_table(int *n);
/* The transition from -> to, or NULL when it is not legal (from == to included). */
const sup_transition *sup_fsm_find(sup_state from, sup_state to);
/* "PREFLIGHT", ...; "?" for a value out of range. These strings are in events.jsonl
 * ("state" events, the "state" field) and the dashboard: never rename one. */
const char *sup_state_name(sup_state st);

/* What was detected. The names are the "kind" of "detected" and "recovered" events and
 * of the incident table: dashboards and tests match them, never rename one. */
typedef enum sup_fail {
    F_NONE,      /* "-": nothing (yet) */
    F_PREFLIGHT, /* "preflight": the health checks before the first launch */
    F_EXIT,      /* "exit": the job or a rank exited or was signalled */
    F_HANG,      /* "hang": no step progress within the hang timeout */
    F_NAN,       /* "nan": a non-finite loss or gradient norm */
    F_SPIKE,     /* "spike": a loss spike (robust z-score) */
    F_STRAGGLER, /* "straggler": a node persistently slower (straggler.h) */
    F_HEALTH,    /* "health": a periodic health check failed */
    F_UTIL,      /* "utilisation": a node's utilisation below its peers' (silent.h) */
    F_NETWORK,   /* "network": a node's network throughput below its peers' (silent.h) */
    F_NKINDS
} sup_fail;

const char *sup_fail_name(sup_fail k);
/* Numeric failures implicate no hardware: the job rolls back, no node is checked. */
int sup_fail_numeric(sup_fail k);

#endif
