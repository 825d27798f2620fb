/*
 * sup_repair.c - diagnosis and repair, two steps of the state machine (sup_fsm.h):
 *   sup_diagnose  (DIAGNOSING) which suspect nodes are unhealthy: grit health on them,
 *                 or the backend's own check; a verdict and an event for each
 *   sup_repair    (REPAIRING) cordon the unhealthy and bring in spares; with none
 *                 left, ask --on-no-spare for one (PROVISIONING, sup_provision.c),
 *                 or wait, shrink, requeue or give up as the policy says; a node with
 *                 --strikes incidents is quarantined first (sup_strikes.c)
 * Preflight runs both on every active node before the first launch (PREFLIGHT).
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
int sup_check_node(sup *s, const char *node, int *machine_ok, char *why, size_t cap)
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

int sup_is_implicated(const sup *s, const char *node)
{
    for (int i = 0; i < s->nimplicated; i++)
        if (!strcmp(s->implicated[i], node))
            return 1;
    return 0;
}

void sup_pair_evidence(const sup_backend *be, const sup_opts *o, const char *node,
                       const char *const peer[2], int np, char *out, size_t cap)
{
    out[0] = '\0';
    if (!be->pair_check || np < 1)
        return;
    char why[200], why2[200];
    double t0 = now_seconds();
    int bad = be->pair_check(o, node, peer[0], why, sizeof why);
    double t1 = now_seconds();
    const char *res = bad > 0 ? "failed" : bad < 0 ? "could not be run" : "healthy";
    size_t k = (size_t)snprintf(out, cap, "%s<->%s %s in %.1f s%s%.150s%s", node, peer[0], res,
                                t1 - t0, bad ? " (" : "", bad ? why : "", bad ? ")" : "");
    if (bad <= 0 || k >= cap)
        return;
    if (np < 2) {
        snprintf(out + k, cap - k, "; no second healthy peer to tell the node from the fabric");
        return;
    }
    int bad2 = be->pair_check(o, peer[0], peer[1], why2, sizeof why2);
    double t2 = now_seconds();
    if (bad2 > 0)
        snprintf(out + k, cap - k,
                 "; %s<->%s failed too in %.1f s (%.100s): the fabric, not the node", peer[0],
                 peer[1], t2 - t1, why2);
    else if (bad2 == 0)
        snprintf(out + k, cap - k, "; %s<->%s healthy in %.1f s: the node, not the fabric", peer[0],
                 peer[1], t2 - t1);
    else
        snprintf(out + k, cap - k, "; %s<->%s could not be run (%.100s)", peer[0], peer[1], why2);
}

/* The healthy peers of node (active nodes not implicated, at most 2), then their evidence. */
static void pair_evidence(sup *s, const char *node, char *out, size_t cap)
{
    const char *peer[2] = {NULL, NULL};
    int np = 0, act = cluster_active(&s->cl);
    for (int i = 0; i < act && np < 2; i++) {
        const node_slot *n = cluster_at(&s->cl, i);
        if (n && strcmp(n->name, node) && !sup_is_implicated(s, n->name))
            peer[np++] = n->name;
    }
    sup_pair_evidence(s->be, s->o, node, peer, np, out, cap);
}

grit_err sup_diagnose(sup *s)
{
    int machine_ok = -1;
    /* the suspects: none for a numeric failure (no hardware implicated; roll back), the
     * implicated nodes, or every active node when nothing names one */
    int act = cluster_active(&s->cl);
    int nt = sup_fail_numeric(s->f_kind) ? 0 : s->nimplicated ? s->nimplicated : act;
    char (*targets)[64] = calloc((size_t)(nt ? nt : 1), sizeof *targets);
    const char **faults = calloc((size_t)(nt ? nt : 1), sizeof *faults);
    grit_err rc = sup_grow((void **)&s->vd, &s->vd_cap, nt, sizeof *s->vd, "verdicts");
    if (!targets || !faults || rc != GRIT_OK) {
        free(targets), free(faults);
        return rc != GRIT_OK ? rc : grit_errf(GRIT_ENOMEM, "diagnosis: out of memory for %d nodes", nt);
    }
    for (int i = 0; i < nt; i++)
        snprintf(targets[i], sizeof *targets, "%s",
                 s->nimplicated ? s->implicated[i] : cluster_at(&s->cl, i)->name);
    /* judged by measurements (step times, utilisation, throughput) that a health check
     * run afterwards in a fresh process would not see: the node is cordoned whatever the
     * check says. A straggler's step times are all the evidence there is; a utilisation or
     * network incident's node still gets the health check (a GPU, network or compute
     * fault it can name), its verdict kept in the incident as evidence */
    int measured = s->f_kind == F_UTIL || s->f_kind == F_NETWORK;
    int slow = s->f_kind == F_STRAGGLER || measured;
    if (s->be->check_begin && (!slow || measured)) { /* all suspects at once */
        for (int i = 0; i < nt; i++)
            faults[i] = sup_inject_node_fault(s->inj, targets[i]);
        s->be->check_begin(s->o, targets, nt, faults);
    }
    s->nvd = 0;
    for (int i = 0; i < nt; i++) {
        struct sup_verdict *v = &s->vd[s->nvd++];
        snprintf(v->node, sizeof v->node, "%s", targets[i]);
        char hw[120] = "", pair[320] = "";
        if (!slow) {
            v->bad = sup_check_node(s, targets[i], &machine_ok, v->why, sizeof v->why);
        } else {
            if (measured)
                sup_check_node(s, targets[i], &machine_ok, hw, sizeof hw);
            if (s->f_kind == F_NETWORK)
                pair_evidence(s, targets[i], pair, sizeof pair);
            v->bad = 1;
            snprintf(v->why, sizeof v->why, "%s: %.170s", sup_fail_name(s->f_kind), s->f_detail);
        }
        if (measured) /* the row of this incident on this node */
            for (int k = s->ninc - 1; k >= 0 && !s->inc[k].recovered_ts; k--)
                if (s->inc[k].kind == s->f_kind && !strcmp(s->inc[k].node, targets[i])) {
                    snprintf(s->inc[k].health, sizeof s->inc[k].health, "%s", hw);
                    snprintf(s->inc[k].pair, sizeof s->inc[k].pair, "%s", pair);
                    break;
                }
        json_t *ev = json_pack("{s:s,s:s,s:s}", "node", v->node, "verdict",
                               v->bad ? "unhealthy" : "healthy", "detail", v->why);
        if (measured)
            json_object_set_new(ev, "health", json_string(hw));
        if (pair[0])
            json_object_set_new(ev, "pair_check", json_string(pair));
        sup_event(s, "diagnosis", ev);
        if (measured)
            sup_say(s, "node %s: %s; health check: %s%s%s (cordoned on the measurement either way)",
                    v->node, sup_fail_name(s->f_kind), hw,
                    pair[0] ? "; pairwise network check: " : "", pair);
    }
    if (measured)
        sup_ledger_save(s);
    free(targets), free(faults);
    return GRIT_OK;
}

/* Marks cordoned slots that an operator turned back into spares in cluster.json. */
static void reload_spares(sup *s)
{
    cluster fresh;
    if (cluster_open(&fresh, s->cl.path, 0, 0) != GRIT_OK)
        return;
    for (int k = 0; k < fresh.count; k++) {
        node_slot *mine = cluster_find(&s->cl, fresh.n[k].name);
        if (mine && mine->state == NODE_CORDONED && fresh.n[k].state == NODE_SPARE &&
            !sup_quarantined(s, mine->name)) { /* a quarantined node never comes back */
            mine->state = NODE_SPARE;
            mine->reason[0] = '\0';
            sup_event(s, "spare_returned", json_pack("{s:s}", "node", mine->name));
        }
    }
    cluster_free(&fresh);
}

void sup_note_layout(sup *s, const char *detail)
{
    int tp = 0, pp = 0, dp = 0;
    if (sscanf(detail, "tp=%d,pp=%d,dp=%d", &tp, &pp, &dp) == 3 && tp >= 1 && pp >= 1 && dp >= 1 &&
        tp <= 1 << 20 && pp <= 1 << 20 && (long)tp * pp <= 1 << 20)
        s->replica_ranks = tp * pp;
}

/* Nodes per data-parallel replica: --shrink-unit, else lcm(tp x pp, ranks per node) /
 * ranks per node from the job's layout, else 1. */
static int replica_nodes(const sup *s)
{
    if (s->o->shrink_unit > 0)
        return s->o->shrink_unit;
    long r = s->replica_ranks > 0 ? s->replica_ranks : 1, rpn = s->o->ranks_per_node;
    long a = r, b = rpn;
    while (b) {
        long t = a % b;
        a = b;
        b = t;
    }
    return (int)(r / a); /* lcm(r, rpn) / rpn */
}

/* After a shrink: the job keeps whole replicas (a TP x PP grid cannot lose one node of a
 * replica), so the active nodes left over become spares. -1 when none is left. */
static int shrink_to_replicas(sup *s)
{
    int unit = replica_nodes(s), act = cluster_active(&s->cl);
    if (act < unit) {
        snprintf(s->end_reason, sizeof s->end_reason,
                 "%d node%s left, fewer than one data-parallel replica (%d node%s): cannot shrink",
                 act, act == 1 ? "" : "s", unit, unit == 1 ? "" : "s");
        sup_event(s, "gave_up", json_pack("{s:s}", "reason", s->end_reason));
        sup_say(s, "giving up: %s", s->end_reason);
        return -1;
    }
    while (cluster_active(&s->cl) % unit) {
        const char *n = cluster_park_last(&s->cl);
        if (!n)
            break;
        sup_event(s, "parked", json_pack("{s:s,s:i}", "node", n, "replica_nodes", unit));
        sup_say(s, "%s leaves the job, healthy, as a spare: the job keeps whole data-parallel "
                   "replicas of %d nodes", n, unit);
    }
    cluster_save(&s->cl);
    return 0;
}

int sup_repair(sup *s)
{
    int shrink_ok = s->o->no_spare && !strcmp(s->o->no_spare, "shrink");
    if (s->state == S_REPAIRING && !s->prov_node[0] && sup_strikes_apply(s) != GRIT_OK) {
        snprintf(s->end_reason, sizeof s->end_reason, "%.390s", grit_errmsg());
        sup_event(s, "gave_up", json_pack("{s:s}", "reason", s->end_reason));
        return -1;
    }
    s->prov_node[0] = '\0'; /* asked for, and come back: carry on */
    for (int i = 0; i < s->nvd; i++) {
        const char *node = s->vd[i].node, *why = s->vd[i].why;
        node_slot *ns = cluster_find(&s->cl, node);
        if (!s->vd[i].bad || !ns || ns->state != NODE_ACTIVE)
            continue;
        if (!cluster_spares(&s->cl) && s->o->on_no_spare && s->state == S_REPAIRING) {
            /* the pool is empty: ask for a node (PROVISIONING), then come back here */
            snprintf(s->prov_node, sizeof s->prov_node, "%s", node);
            snprintf(s->prov_why, sizeof s->prov_why, "%s", why);
            return 1;
        }
        if (!cluster_spares(&s->cl) && !shrink_ok && s->o->no_spare &&
            !strcmp(s->o->no_spare, "wait")) {
            /* an operator (or a repair script) returns a node by editing cluster.json:
             * "state": "spare" */
            sup_say(s, "node %s is unhealthy and no spare is left: waiting up to %.0f s for one "
                   "(set a node's state to \"spare\" in %s)", node, s->o->spare_wait,
                s->cl.path);
            sup_event(s, "waiting_for_spare", json_pack("{s:s,s:f}", "node", node, "max_s",
                                                    s->o->spare_wait));
            double t0 = now_seconds();
            while (!cluster_spares(&s->cl) && now_seconds() - t0 < s->o->spare_wait) {
                usleep(500000);
                reload_spares(s);
            }
        }
        if (!cluster_spares(&s->cl) && !shrink_ok) {
            char reason[300];
            snprintf(reason, sizeof reason, "node %.60s failed (%.180s) and no spare is left", node,
                     why);
            if (s->be->cordoned) /* the bad node stays out of the next allocation too */
                s->be->cordoned(s->o, node, why);
            if (s->be->no_spare && s->be->no_spare(s->o, reason)) {
                sup_event(s, "requeued", json_pack("{s:s}", "reason", reason));
                sup_say(s, "%s: job requeued", reason);
                return -1;
            }
            sup_event(s, "gave_up", json_pack("{s:s}", "reason", reason));
            sup_say(s, "giving up: %s", reason);
            snprintf(s->end_reason, sizeof s->end_reason, "%s", reason);
            return -1;
        }
        const char *spare = cluster_replace(&s->cl, node, why);
        cluster_save(&s->cl);
        if (s->be->cordoned)
            s->be->cordoned(s->o, node, why);
        sup_event(s, "cordon", json_pack("{s:s,s:s,s:s}", "node", node, "reason", why,
                                     "replacement", spare ? spare : "none (shrinking)"));
        if (spare)
            sup_say(s, "cordoned %s (%s); %s takes its place", node, why, spare);
        else
            sup_say(s, "cordoned %s (%s); no spare: the job shrinks", node, why);
        if (!spare && shrink_to_replicas(s) != 0)
            return -1;
    }
    return 0;
}
