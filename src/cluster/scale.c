/*
 * scale.c - `grit cluster update NAME SPEC`: group sizes (InstanceCount, WarmSpares)
 * changed to those of SPEC; nothing else of a group may change.
 *
 *   1. one transaction: new nodes' rows (Pending, in the lowest free slots), the
 *      removed nodes (highest slots of their group and kind) ShuttingDown, the new
 *      spec stored, cluster Updating;
 *   2. each ShuttingDown node: DRAIN in Slurm, wait until its jobs have ended, node
 *      removed (processes, namespace), row Terminated;
 *   3. the layout rewritten from the store, Slurm reconfigured (slurmctld restarted with
 *      the new node list; new nodes' namespaces made);
 *   4. each Pending node brought up (lifecycle, admission, rejoin), cluster InService.
 *
 * A rerun after a kill finds the rows of step 1 and continues at step 2 (the same
 * spec then asks for no further change).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/cluster_int.h"
#include "core/fsutil.h"

static grit_err compatible(const cluster_spec *a, const cluster_spec *b)
{
    if (strcmp(a->name, b->name) != 0)
        return grit_errf(GRIT_EINVAL, "%s: field 'ClusterName': expected \"%s\" (the cluster to "
                                      "update), got \"%s\"", b->file, a->name, b->name);
    if (strcmp(a->bridge, b->bridge) || strcmp(a->subnet, b->subnet) || a->port != b->port)
        return grit_errf(GRIT_EINVAL, "%s: field 'Network': cannot change on update (delete and "
                                      "create the cluster)", b->file);
    if (a->ngroups != b->ngroups)
        return grit_errf(GRIT_EINVAL, "%s: field 'InstanceGroups': expected the same %d groups "
                                      "(only InstanceCount and WarmSpares change on update)",
                         b->file, a->ngroups);
    for (int i = 0; i < a->ngroups; i++) {
        const cluster_group *x = &a->groups[i], *y = &b->groups[i];
        const char *f = strcmp(x->name, y->name)            ? "InstanceGroupName"
                        : x->role != y->role                ? "Role"
                        : strcmp(x->type, y->type)          ? "InstanceType"
                        : strcmp(x->source, y->source)      ? "LifeCycleConfig.SourceS3Uri"
                        : strcmp(x->on_create, y->on_create) ? "LifeCycleConfig.OnCreate"
                        : x->threads_per_core != y->threads_per_core ? "ThreadsPerCore"
                                                                     : NULL;
        if (f)
            return grit_errf(GRIT_EINVAL, "%s: field 'InstanceGroups[%d].%s': cannot change on "
                                          "update (only InstanceCount and WarmSpares do)",
                             b->file, i, f);
    }
    return GRIT_OK;
}

/* Step 1: rows for the new sizes. */
static grit_err plan(cl *k, const char *text, const char *base, char *detail, size_t cap)
{
    cluster_node *nodes = NULL;
    int nn = 0;
    grit_err rc = cluster_state_nodes(k->st, k->row.name, 0, &nodes, &nn);
    if (rc != GRIT_OK)
        return rc;
    if ((rc = cluster_state_begin(k->st)) != GRIT_OK) {
        free(nodes);
        return rc;
    }
    size_t len = 0;
    detail[0] = '\0';
    for (int g = 0; g < k->spec.ngroups && rc == GRIT_OK; g++)
        for (int spare = 0; spare < 2 && rc == GRIT_OK; spare++) {
            const cluster_group *x = &k->spec.groups[g];
            int want = spare ? x->spares : x->count, have = 0;
            for (int i = 0; i < nn; i++)
                have += !strcmp(nodes[i].group, x->name) && nodes[i].spare == spare &&
                        strcmp(nodes[i].status, "ShuttingDown") != 0;
            if (want != have)
                len += (size_t)snprintf(detail + len, len < cap ? cap - len : 0,
                                        "%s%s %s: %d -> %d", len ? ", " : "", x->name,
                                        spare ? "spares" : "nodes", have, want);
            for (int add = want - have; add > 0 && rc == GRIT_OK; add--) {
                int s = 2;
                while (s <= CLUSTER_MAX_NODES && k->slot_group[s] >= 0)
                    s++;
                if (s > CLUSTER_MAX_NODES) {
                    rc = grit_errf(GRIT_EINVAL, "more than %d nodes", CLUSTER_MAX_NODES);
                    break;
                }
                cluster_node n = {.slot = s, .spare = spare, .lifecycle_rc = -1,
                                  .launch_time = cluster__now()};
                cluster_state_new_id(n.id);
                snprintf(n.group, sizeof n.group, "%s", x->name);
                snprintf(n.status, sizeof n.status, "Pending");
                k->slot_group[s] = g;
                k->slot_spare[s] = spare;
                k->ctx.nslots = s > k->ctx.nslots ? s : k->ctx.nslots;
                rc = cluster_state_put_node(k->st, k->row.name, &n);
            }
            for (int del = have - want; del > 0 && rc == GRIT_OK; del--) {
                int pick = -1; /* the highest slot of this group and kind */
                for (int i = 0; i < nn; i++)
                    if (!strcmp(nodes[i].group, x->name) && nodes[i].spare == spare &&
                        strcmp(nodes[i].status, "ShuttingDown") != 0 &&
                        (pick < 0 || nodes[i].slot > nodes[pick].slot))
                        pick = i;
                if (pick < 0)
                    break;
                rc = cluster__put(k, &nodes[pick], "ShuttingDown", "scale down");
            }
        }
    if (rc == GRIT_OK)
        rc = cluster_state_set_spec(k->st, k->row.name, text, base);
    if (rc == GRIT_OK)
        rc = cluster_state_set_status(k->st, k->row.name, "Updating");
    if (rc == GRIT_OK)
        rc = cluster_state_commit(k->st);
    else
        cluster_state_rollback(k->st);
    free(nodes);
    return rc;
}

/* Step 2: drain, wait for jobs, remove. */
static grit_err shrink(cl *k, cluster_node *n)
{
    char nn[16];
    snprintf(nn, sizeof nn, "n%d", n->slot);
    cluster__scontrol(k, nn, "DRAIN", "grit cluster: scale down");
    static char states[CLUSTER_MAX_NODES + 1][32];
    double t0 = cluster__now(), said = t0;
    for (;;) {
        cluster__slurm_states(k, states, NULL);
        const char *st = states[n->slot];
        if (!strstr(st, "draining") && !strstr(st, "mix") && !strstr(st, "alloc") &&
            !strstr(st, "completing"))
            break;
        if (cluster__now() - said > 10) {
            cluster__say(k, "n%d: waiting for its jobs to end (%s, %.0f s)", n->slot, st,
                         cluster__now() - t0);
            said = cluster__now();
        }
        sleep(1);
    }
    grit_err rc = k->prov->remove(&k->ctx, n->slot);
    if (rc != GRIT_OK)
        return rc;
    k->slot_group[n->slot] = -1;
    cluster__say(k, "n%d (%s) removed", n->slot, n->id);
    return cluster__put(k, n, "Terminated", "scale down");
}

grit_err cluster_update(const cluster_opts *o, const char *name, const char *spec_path)
{
    cluster_spec *ns = malloc(sizeof *ns);
    if (!ns)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    grit_err rc = cluster_spec_load(ns, spec_path);
    char *text = NULL;
    cl k;
    int opened = 0;
    int64_t op = 0;
    if (rc != GRIT_OK || (rc = fs_read_all(spec_path, &text, NULL)) != GRIT_OK)
        goto out;
    if ((rc = cluster__open(&k, o, name)) != GRIT_OK)
        goto out;
    opened = 1;
    if (!strcmp(k.row.status, "Deleting") || !strcmp(k.row.status, "Creating")) {
        rc = grit_errf(GRIT_EINVAL, "cluster %s is %s; finish that first", name, k.row.status);
        goto out;
    }
    if ((rc = compatible(&k.spec, ns)) != GRIT_OK)
        goto out;
    char base[PATH_MAX];
    snprintf(base, sizeof base, "%s", spec_path);
    char *slash = strrchr(base, '/');
    if (slash)
        *(slash == base ? slash + 1 : slash) = '\0';
    else
        snprintf(base, sizeof base, ".");
    char *abs = realpath(base, NULL);
    snprintf(base, sizeof base, "%s", abs ? abs : ".");
    free(abs);
    k.spec = *ns; /* same groups in the same order: the slots' group indexes hold */
    char detail[512];
    if ((rc = cluster_state_op_begin(k.st, name, "UpdateCluster", "", &op)) != GRIT_OK ||
        (rc = plan(&k, text, base, detail, sizeof detail)) != GRIT_OK)
        goto out;
    cluster__say(&k, "updating %s: %s", name, detail[0] ? detail : "no size change");
    double t0 = cluster__now();
    cluster_node *nodes = NULL;
    int nn = 0;
    if ((rc = cluster_state_nodes(k.st, name, 0, &nodes, &nn)) != GRIT_OK)
        goto out;
    for (int i = 0; i < nn && rc == GRIT_OK; i++)
        if (!strcmp(nodes[i].status, "ShuttingDown"))
            rc = shrink(&k, &nodes[i]);
    free(nodes);
    if (rc != GRIT_OK)
        goto out;
    k.ctx.nslots = 1;
    for (int s = 1; s <= CLUSTER_MAX_NODES; s++)
        if (k.slot_group[s] >= 0)
            k.ctx.nslots = s;
    double t1 = cluster__now();
    if ((rc = cluster__write_layout(&k)) != GRIT_OK || (rc = k.prov->reconfigure(&k.ctx)) != GRIT_OK)
        goto out;
    double t2 = cluster__now();
    if ((rc = cluster_state_nodes(k.st, name, 0, &nodes, &nn)) != GRIT_OK)
        goto out;
    int failed = 0;
    for (int i = 0; i < nn && rc == GRIT_OK; i++)
        if (!strcmp(nodes[i].status, "Pending")) {
            rc = cluster__bring_up(&k, &nodes[i], "OnCreate", NULL);
            failed += rc == GRIT_OK && !strcmp(nodes[i].status, "Failure");
        }
    free(nodes);
    if (rc == GRIT_OK)
        rc = cluster_state_set_status(k.st, name, "InService");
    if (rc != GRIT_OK)
        goto out;
    char full[768];
    snprintf(full, sizeof full, "%s (remove %.1f s, reconfigure %.1f s, add %.1f s; %d failed)",
             detail[0] ? detail : "no size change", t1 - t0, t2 - t1, cluster__now() - t2, failed);
    cluster__say(&k, "cluster %s InService: %s", name, full);
    rc = cluster_state_op_end(k.st, op, failed ? "Failed" : "Succeeded", full);
    op = 0;
out:
    if (opened && op)
        cluster_state_op_end(k.st, op, "Failed", grit_errmsg());
    if (opened)
        cluster__close(&k);
    free(text);
    free(ns);
    return rc;
}
