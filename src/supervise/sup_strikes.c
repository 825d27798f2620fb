/*
 * sup_strikes.c - per-node strikes and quarantine (docs/supervisor.md, "Strikes").
 *
 * A node whose ranks died while its health check passes is reused at once: one
 * unexplained death is not evidence against the hardware. A node named by --strikes K
 * incidents (default 2) within --strike-window seconds is: from then on it is
 * quarantined for the rest of the run, so it is cordoned now (whatever its health
 * check says) and never comes back, neither as a spare an operator or --on-no-spare
 * hands back nor after a repair.
 *
 * What counts: the incident rows (sup_internal.h `incident`) that name the node, the
 * rows a correlated failure adds for every other node it hit included, those of earlier
 * supervisors on the run directory included (they are in the ledger). A numeric failure
 * (NaN, spike) names no node; a hang where no rank was found stopped names none either.
 *
 * Invariants:
 *   - with K = 0 nothing is ever quarantined; with K >= 2 a node's first incident is
 *     handled exactly as without strikes;
 *   - the quarantine list only grows; it is in RUN/supervisor.json ("quarantined"),
 *     written before the node is cordoned, so a restarted supervisor keeps it
 *     (sup_quarantine_enforce re-applies it to cluster.json).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/progress.h"
#include "supervise/sup_internal.h"

int sup_strike_count(const incident *inc, int n, const char *node, double now, double window)
{
    int k = 0;
    if (!node || !node[0])
        return 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(inc[i].node, node) && (window <= 0 || now - inc[i].detect_ts <= window))
            k++;
    return k;
}

int sup_quarantined(const sup *s, const char *node)
{
    for (int i = 0; i < s->nquar; i++)
        if (!strcmp(s->quar[i].node, node))
            return 1;
    return 0;
}

grit_err sup_quarantine_add(sup *s, const char *node, const char *why, double ts)
{
    if (sup_quarantined(s, node))
        return GRIT_OK;
    grit_err rc = sup_grow((void **)&s->quar, &s->quar_cap, s->nquar + 1, sizeof *s->quar,
                           "quarantined nodes");
    if (rc != GRIT_OK)
        return rc;
    struct sup_quar *q = &s->quar[s->nquar++];
    snprintf(q->node, sizeof q->node, "%s", node);
    snprintf(q->why, sizeof q->why, "%s", why);
    q->ts = ts;
    return GRIT_OK;
}

grit_err sup_strikes_apply(sup *s)
{
    int K = s->o->strikes;
    if (K <= 0)
        return GRIT_OK;
    double now = wall_seconds(), W = s->o->strike_window;
    int added = 0;
    for (int i = 0; i < s->nvd; i++) {
        struct sup_verdict *v = &s->vd[i];
        int k = sup_strike_count(s->inc, s->ninc, v->node, now, W);
        if (k < K || sup_quarantined(s, v->node))
            continue;
        char why[200];
        if (W > 0)
            snprintf(why, sizeof why, "quarantined: %d incidents within %.0f s (--strikes %d)", k,
                     W, K);
        else
            snprintf(why, sizeof why, "quarantined: %d incidents in this run (--strikes %d)", k, K);
        grit_err rc = sup_quarantine_add(s, v->node, why, now);
        if (rc != GRIT_OK)
            return rc;
        sup_event(s, "quarantined", json_pack("{s:s,s:i,s:i,s:f,s:s,s:s}", "node", v->node,
                                              "incidents", k, "strikes", K, "window_s", W,
                                              "health", v->bad ? "unhealthy" : "healthy",
                                              "reason", why));
        sup_say(s, "node %s %s", v->node, why);
        /* cordoned like an unhealthy node, whatever its check said; the check's own
         * finding stays in the reason when it had one */
        if (v->bad) {
            char both[200];
            snprintf(both, sizeof both, "%.90s; %.100s", why, v->why);
            snprintf(v->why, sizeof v->why, "%s", both);
        } else
            snprintf(v->why, sizeof v->why, "%s", why);
        v->bad = 1;
        added++;
    }
    if (added)
        sup_ledger_save(s); /* durable before the cordon that follows */
    return GRIT_OK;
}

void sup_quarantine_enforce(sup *s)
{
    int changed = 0;
    for (int i = 0; i < s->nquar; i++) {
        node_slot *n = cluster_find(&s->cl, s->quar[i].node);
        if (!n || n->state == NODE_CORDONED)
            continue;
        const char *was = node_state_name(n->state), *spare = NULL;
        if (n->state == NODE_SPARE) {
            n->state = NODE_CORDONED;
            snprintf(n->reason, sizeof n->reason, "%.159s", s->quar[i].why);
        } else if (cluster_spares(&s->cl)) {
            spare = cluster_replace(&s->cl, n->name, s->quar[i].why);
        } else {
            sup_say(s, "WARNING: node %s is quarantined (%s) but active in %s and no spare is "
                       "left: it stays until its next failure", n->name, s->quar[i].why,
                    s->cl.path);
            continue;
        }
        changed = 1;
        sup_event(s, "quarantine_kept", json_pack("{s:s,s:s,s:s,s:s}", "node", s->quar[i].node,
                                                  "was", was, "reason", s->quar[i].why,
                                                  "replacement", spare ? spare : "-"));
        sup_say(s, "node %s was %s in %s but is quarantined (%s): cordoned%s%s", s->quar[i].node,
                was, s->cl.path, s->quar[i].why, spare ? ", replaced by " : "", spare ? spare : "");
    }
    if (changed)
        cluster_save(&s->cl);
}
