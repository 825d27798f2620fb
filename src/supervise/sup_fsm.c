/* sup_fsm.c - the supervisor's transition table and failure kinds (see sup_fsm.h). */
#include "supervise/sup_fsm.h"

#include <stddef.h>

static const char *const state_names[S_NSTATES] = {
    "PREFLIGHT", "LAUNCHING", "RUNNING", "DETECTED", "DIAGNOSING",
    "REPAIRING", "DONE",      "GAVE_UP", "ERROR", "STOPPED", "PROVISIONING"};

#define TO_ERROR(st) {st, S_ERROR, "give_up_error: an error the supervisor cannot handle"}

static const sup_transition table[] = {
    {S_PREFLIGHT, S_LAUNCHING, "sup_preflight: grit health on every active node, bad ones replaced"},
    {S_PREFLIGHT, S_GAVE_UP, "sup_preflight: a node failed and no spare is left"},
    {S_LAUNCHING, S_RUNNING, "launch: the backend's command in its own process group"},
    {S_RUNNING, S_DONE, "poll_running: the job exited 0"},
    {S_RUNNING, S_DETECTED, "poll_running: exit/signal, hang, NaN, spike, straggler, health"},
    {S_DETECTED, S_DIAGNOSING, "stop_job: SIGTERM, grace, SIGKILL; stacks first on a hang"},
    {S_DETECTED, S_GAVE_UP, "sup_give_up_permanent: the job said a retry would repeat it"},
    {S_DIAGNOSING, S_REPAIRING, "sup_diagnose: a verdict on each implicated node"},
    {S_REPAIRING, S_LAUNCHING, "sup_repair: cordon the bad, spares in; backoff"},
    {S_REPAIRING, S_GAVE_UP, "sup_repair: no spare (give_up, requeue) or --max-restarts"},
    {S_REPAIRING, S_PROVISIONING, "sup_repair: a node to cordon, no spare left: --on-no-spare asks"},
    {S_PROVISIONING, S_REPAIRING, "sup_provision: the command named a usable node, now a spare"},
    {S_PROVISIONING, S_GAVE_UP, "sup_provision: the command failed, timed out or named no node"},
    TO_ERROR(S_PREFLIGHT),
    TO_ERROR(S_LAUNCHING),
    TO_ERROR(S_RUNNING),
    TO_ERROR(S_DETECTED),
    TO_ERROR(S_DIAGNOSING),
    TO_ERROR(S_REPAIRING),
    TO_ERROR(S_PROVISIONING),
    {S_ERROR, S_GAVE_UP, "give_up_error: stop the job, record the reason, the summary"},
    {S_LAUNCHING, S_STOPPED, "sup_stop: SIGTERM/SIGINT: the job stopped gracefully, summary"},
    {S_RUNNING, S_STOPPED, "sup_stop: SIGTERM/SIGINT: the job stopped gracefully, summary"},
    {S_PROVISIONING, S_STOPPED, "sup_stop: SIGTERM/SIGINT: the command ended, summary"},
};

const sup_transition *sup_fsm_table(int *n)
{
    *n = (int)(sizeof table / sizeof table[0]);
    return table;
}

const sup_transition *sup_fsm_find(sup_state from, sup_state to)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].from == from && table[i].to == to)
            return &table[i];
    return NULL;
}

const char *sup_state_name(sup_state st)
{
    return (int)st >= 0 && st < S_NSTATES ? state_names[st] : "?";
}

static const char *const fail_names[F_NKINDS] = {"-",   "preflight", "exit",      "hang",
                                                 "nan", "spike",     "straggler", "health",
                                                 "utilisation", "network"};

const char *sup_fail_name(sup_fail k)
{
    return (int)k >= 0 && k < F_NKINDS ? fail_names[k] : "?";
}

int sup_fail_numeric(sup_fail k)
{
    return k == F_NAN || k == F_SPIKE;
}
