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

/* The reason grit health gave in its output file: its verdict line's first failing
 * check, or a line of its own ("grit health: node unreachable ..."). */
static void health_reason(const char *path, char *why, size_t cap)
{
    char *text = NULL;
    snprintf(why, cap, "grit health failed");
    if (fs_read_all(path, &text, NULL) != GRIT_OK)
        return;
    const char *first = strstr(text, "failed, first "), *own = strstr(text, "grit health: ");
    if (first)
        snprintf(why, cap, "grit health: %.*s failed", (int)strcspn(first + 14, " \n"),
                 first + 14);
    else if (own)
        snprintf(why, cap, "%.*s", (int)strcspn(own, "\n"), own);
    free(text);
}

/* 0 healthy, else failed (reason in why): from the node's check, never from what was
 * injected (a node's injected faults are in its checks' environment: sup_inject.c). */
static int check_node(sup *s, const char *node, int *machine_ok, char *why, size_t cap)
{
    if (s->be->check_node) /* the node's own check, run on it */
        return s->be->check_node(s->o, node, sup_inject_node_fault(s->inj, node), why, cap);
    int own_env = sup_inject_node_env(s->inj, node);
    if (!own_env && *machine_ok >= 0) { /* one real check covers the slots of this machine */
        snprintf(why, cap, "%s", *machine_ok ? "healthy" : "grit health failed");
        return !*machine_ok;
    }
    char out[1200];
    snprintf(out, sizeof out, "%.1100s/health-%.64s.log", s->logdir, node);
    pid_t pid = sup_spawn_health(s, node, 0, out);
    int status = 0;
    if (pid > 0)
        waitpid(pid, &status, 0);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!own_env)
        *machine_ok = ok;
    if (ok)
        snprintf(why, cap, "healthy");
    else
        health_reason(out, why, cap);
    return !ok;
}

int sup_diagnose_and_repair(sup *s)
{
    sup_set_state(s, S_DIAGNOSING);
    int machine_ok = -1;
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
        for (int i = 0; i < nt; i++)
            faults[i] = sup_inject_node_fault(s->inj, targets[i]);
        s->be->check_begin(s->o, targets, nt, faults);
    }
    int shrink_ok = s->o->no_spare && !strcmp(s->o->no_spare, "shrink");
    for (int i = 0; i < nt; i++) {
        char why[200];
        int bad = !strcmp(s->f_kind, "straggler") ? 1 : check_node(s, targets[i], &machine_ok,
                                                                    why, sizeof why);
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

