/*
 * sup_repair.c - diagnosis and repair: which suspect nodes are unhealthy (grit health
 * on them, or the backend's own check), cordon them and bring in spares; with none
 * left, wait, shrink, requeue or give up as the policy says.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fsutil.h"
#include "core/progress.h"
#include "supervise/sup_internal.h"

/* 0 healthy, else failed (reason in why). */
static int check_node(sup *s, const char *node, char health[][32], int nh, int *machine_ok,
                      char *why, size_t cap)
{
    if (sup_is_dead(s, node)) {
        snprintf(why, cap, "node unreachable (its ranks died with it)");
        return 1;
    }
    int injected = 0;
    for (int i = 0; i < nh; i++)
        injected |= !strcmp(health[i], node);
    if (s->be->check_node) /* the node's own check, run on it */
        return s->be->check_node(s->o, node, injected ? "gemm_bitflip" : NULL, why, cap);
    if (!injected && *machine_ok >= 0) { /* one real check covers the slots of this machine */
        snprintf(why, cap, "%s", *machine_ok ? "healthy" : "grit health failed");
        return !*machine_ok;
    }
    pid_t pid = sup_spawn_health(s, injected ? "gemm_bitflip" : NULL);
    int status = 0;
    if (pid > 0)
        waitpid(pid, &status, 0);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!injected)
        *machine_ok = ok;
    snprintf(why, cap, "%s", ok ? "healthy" : injected ? "grit health: compute check failed (SDC)"
                                                       : "grit health failed");
    return !ok;
}

int sup_diagnose_and_repair(sup *s)
{
    sup_set_state(s, S_DIAGNOSING);
    char trainer[1024], ckpt[128], health[8][32];
    int nh, machine_ok = -1;
    sup_faults_for_attempt(s, trainer, sizeof trainer, ckpt, sizeof ckpt, health, &nh);
    char targets[CLUSTER_MAX][64];
    int nt = 0;
    if (!strcmp(s->f_kind, "nan") || !strcmp(s->f_kind, "spike")) {
        nt = 0; /* numeric: no hardware implicated; roll back */
    } else if (s->nimplicated) {
        for (int i = 0; i < s->nimplicated; i++)
            snprintf(targets[nt++], 64, "%s", s->implicated[i]);
    } else
        for (int p = 0; p < cluster_active(&s->cl); p++)
            snprintf(targets[nt++], 64, "%s", cluster_at(&s->cl, p)->name);
    sup_set_state(s, S_REPAIRING);
    if (s->be->check_begin && strcmp(s->f_kind, "straggler")) { /* all suspects at once */
        const char *faults[CLUSTER_MAX];
        for (int i = 0; i < nt; i++) {
            faults[i] = NULL;
            for (int k = 0; k < nh; k++)
                if (!strcmp(health[k], targets[i]))
                    faults[i] = "gemm_bitflip";
        }
        s->be->check_begin(s->o, targets, nt, faults);
    }
    int shrink_ok = s->o->no_spare && !strcmp(s->o->no_spare, "shrink");
    for (int i = 0; i < nt; i++) {
        char why[200];
        int bad = !strcmp(s->f_kind, "straggler") ? 1 : check_node(s, targets[i], health, nh,
                                                                    &machine_ok, why, sizeof why);
        if (!strcmp(s->f_kind, "straggler"))
            snprintf(why, sizeof why, "straggler: %.180s", s->f_detail);
        sup_event(s, "diagnosis", json_pack("{s:s,s:s,s:s}", "node", targets[i], "verdict",
                                        bad ? "unhealthy" : "healthy", "detail", why));
        node_slot *ns = cluster_find(&s->cl, targets[i]);
        if (!bad || !ns || ns->state != NODE_ACTIVE)
            continue;
        if (!cluster_spares(&s->cl) && !shrink_ok && s->o->no_spare &&
            !strcmp(s->o->no_spare, "wait")) {
            /* an operator (or a repair script) returns a node by editing cluster.json:
             * "state": "spare" */
            sup_say(s, "node %s is unhealthy and no spare is left: waiting up to %.0f s for one "
                   "(set a node's state to \"spare\" in %s)", targets[i], s->o->spare_wait,
                s->cl.path);
            sup_event(s, "waiting_for_spare", json_pack("{s:s,s:f}", "node", targets[i], "max_s",
                                                    s->o->spare_wait));
            double t0 = now_seconds();
            while (!cluster_spares(&s->cl) && now_seconds() - t0 < s->o->spare_wait) {
                usleep(500000);
                cluster fresh;
                if (cluster_open(&fresh, s->cl.path, 0, 0) == GRIT_OK)
                    for (int k = 0; k < fresh.count; k++) {
                        node_slot *mine = cluster_find(&s->cl, fresh.n[k].name);
                        if (mine && mine->state == NODE_CORDONED && fresh.n[k].state == NODE_SPARE) {
                            mine->state = NODE_SPARE;
                            mine->reason[0] = '\0';
                            sup_event(s, "spare_returned", json_pack("{s:s}", "node", mine->name));
                        }
                    }
            }
        }
        if (!cluster_spares(&s->cl) && !shrink_ok) {
            char reason[300];
            snprintf(reason, sizeof reason, "node %.60s failed (%.180s) and no spare is left", targets[i],
                     why);
            if (s->be->cordoned) /* the bad node stays out of the next allocation too */
                s->be->cordoned(s->o, targets[i], why);
            if (s->be->no_spare && s->be->no_spare(s->o, reason)) {
                sup_event(s, "requeued", json_pack("{s:s}", "reason", reason));
                sup_say(s, "%s: job requeued", reason);
                return -1;
            }
            sup_event(s, "gave_up", json_pack("{s:s}", "reason", reason));
            sup_say(s, "giving up: %s", reason);
            return -1;
        }
        const char *spare = cluster_replace(&s->cl, targets[i], why);
        cluster_save(&s->cl);
        if (s->be->cordoned)
            s->be->cordoned(s->o, targets[i], why);
        sup_event(s, "cordon", json_pack("{s:s,s:s,s:s}", "node", targets[i], "reason", why,
                                     "replacement", spare ? spare : "none (shrinking)"));
        sup_say(s, "cordoned %s (%s); %s takes its place", targets[i], why,
            spare ? spare : "nobody: the job shrinks");
    }
    return 0;
}

