/*
 * cluster.c - cluster operations (see cluster.h for the node state diagram).
 *
 * Slots: the controller is slot 1; then each group in spec order, its
 * InstanceCount nodes, then its WarmSpares. The layout file given to the
 * provider is derived from the spec alone, so a rerun writes the same one.
 *
 * Invariants:
 *   1. A row exists in the store before anything is made for it (cluster row
 *      before the network, node row before its lifecycle).
 *   2. A node becomes Running only after its lifecycle script, its admission
 *      check and its slurmd registration all succeeded.
 *   3. delete removes the store's rows last: a killed delete is found and finished.
 */
#include "cluster/cluster.h"
#include "cluster/cluster_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cluster/agent.h"
#include "cluster/provider.h"
#include "cluster/run.h"
#include "cluster/spec.h"
#include "cluster/state.h"
#include "core/fsutil.h"

/* snprintf whose truncation is intended (bounded names and paths) */
static void sfmt(char *dst, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void sfmt(char *dst, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, cap, fmt, ap);
    va_end(ap);
}


double cluster__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void cluster__say(const cl *k, const char *fmt, ...)
{
    if (!k->o->progress)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(k->o->progress, "grit cluster: ");
    vfprintf(k->o->progress, fmt, ap);
    fputc('\n', k->o->progress);
    fflush(k->o->progress);
    va_end(ap);
}

static grit_err open_store(const cluster_opts *o, cluster_state **st)
{
    grit_err rc = fs_mkdirs(o->state_dir);
    if (rc != GRIT_OK)
        return rc;
    char db[PATH_MAX + 16];
    sfmt(db, sizeof db, "%s/state.db", o->state_dir);
    return cluster_state_open(st, db);
}

/* Slots from the spec; returns their number. */
static int assign_slots(const cluster_spec *s, int *grp, int *spare)
{
    int n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int g = 0; g < s->ngroups; g++) {
            const cluster_group *x = &s->groups[g];
            if ((pass == 0) != (x->role == CLUSTER_CONTROLLER))
                continue;
            for (int i = 0; i < x->count + x->spares; i++) {
                n++;
                grp[n] = g;
                spare[n] = i >= x->count;
            }
        }
    return n;
}

grit_err cluster__write_layout(cl *k)
{
    cluster__slot_hosts(k);
    char buf[CLUSTER_MAX_NODES * 160] = "";
    size_t len = 0;
    for (int i = 1; i <= k->ctx.nslots; i++) {
        if (k->slot_group[i] < 0) { /* a slot whose node was removed (scale down) */
            len += (size_t)snprintf(buf + len, sizeof buf - len, "n%d absent - -\n", i);
            continue;
        }
        const cluster_group *g = &k->spec.groups[k->slot_group[i]];
        len += (size_t)snprintf(buf + len, sizeof buf - len, "n%d %s %s %s\n", i,
                                cluster_role_name(g->role), g->name, g->type);
    }
    return fs_write_durable(k->ctx.layout, buf, len);
}

/* Fills k from the spec (text as stored, base for relative paths). */
static grit_err setup(cl *k, const char *spec_text, const char *spec_name)
{
    grit_err rc = cluster_spec_parse(&k->spec, spec_name, spec_text, k->row.base);
    if (rc != GRIT_OK)
        return rc;
    k->prov = k->spec.ssh ? &cluster_provider_ssh : &cluster_provider_local;
    k->ctx.spec = &k->spec;
    sfmt(k->ctx.dir, sizeof k->ctx.dir, "%s", k->row.dir);
    sfmt(k->ctx.script, sizeof k->ctx.script, "%s", k->o->script);
    sfmt(k->ctx.layout, sizeof k->ctx.layout, "%s/layout", k->row.dir);
    sfmt(k->ctx.spank, sizeof k->ctx.spank, "%s", k->o->spank);
    sfmt(k->ctx.grit, sizeof k->ctx.grit, "%s", k->o->grit);
    k->ctx.nslots = assign_slots(&k->spec, k->slot_group, k->slot_spare);
    rc = k->st && k->row.name[0] ? cluster__slots_from_store(k) : GRIT_OK;
    if (rc == GRIT_OK)
        cluster__slot_hosts(k);
    return rc;
}

void cluster__slot_hosts(cl *k)
{
    int used[CLUSTER_MAX_GROUPS] = {0};
    for (int i = 0; i <= CLUSTER_MAX_NODES; i++) {
        int g = i >= 1 && i <= k->ctx.nslots ? k->slot_group[i] : -1;
        k->ctx.slot_group[i] = g;
        k->ctx.host[i][0] = '\0';
        if (g >= 0 && used[g] < k->spec.groups[g].nhosts)
            sfmt(k->ctx.host[i], sizeof k->ctx.host[i], "%s", k->spec.groups[g].hosts[used[g]++]);
    }
}

grit_err cluster__slots_from_store(cl *k)
{
    cluster_node *nodes = NULL;
    int nn = 0;
    grit_err rc = cluster_state_nodes(k->st, k->row.name, 0, &nodes, &nn);
    if (rc != GRIT_OK || nn == 0) {
        free(nodes);
        return rc; /* a new cluster: the spec's assignment */
    }
    int max = 0;
    for (int i = 0; i <= CLUSTER_MAX_NODES; i++)
        k->slot_group[i] = -1, k->slot_spare[i] = 0;
    for (int i = 0; i < nn; i++) {
        int g = cluster_spec_group(&k->spec, nodes[i].group), s = nodes[i].slot;
        if (g < 0 || s < 1 || s > CLUSTER_MAX_NODES) {
            rc = grit_errf(GRIT_EFORMAT, "cluster %s: node %s has group \"%s\" / slot %d, not "
                                         "in its spec", k->row.name, nodes[i].id, nodes[i].group, s);
            break;
        }
        k->slot_group[s] = g;
        k->slot_spare[s] = nodes[i].spare;
        max = s > max ? s : max;
    }
    free(nodes);
    if (rc == GRIT_OK)
        k->ctx.nslots = max;
    return rc;
}

/* Opens an existing cluster. */
grit_err cluster__open(cl *k, const cluster_opts *o, const char *name)
{
    memset(k, 0, sizeof *k);
    k->o = o;
    grit_err rc = open_store(o, &k->st);
    char *text = NULL;
    if (rc == GRIT_OK)
        rc = cluster_state_get(k->st, name, &k->row, &text);
    if (rc == GRIT_OK) {
        char nm[128];
        sfmt(nm, sizeof nm, "%s (the spec stored with cluster %s)", "spec", name);
        rc = setup(k, text, nm);
    }
    free(text);
    if (rc != GRIT_OK) {
        cluster_state_close(k->st);
        k->st = NULL;
    }
    return rc;
}

void cluster__close(cl *k) { cluster_state_close(k->st); }

/* --- Slurm views ------------------------------------------------------------------ */

/* Slurm's state of every node: states[slot] ("" when unknown). */
void cluster__slurm_states(const cl *k, char states[][32], char reasons[][128])
{
    for (int i = 0; i <= CLUSTER_MAX_NODES; i++) {
        states[i][0] = '\0';
        if (reasons)
            reasons[i][0] = '\0';
    }
    char *out = NULL;
    char *argv[] = {"sinfo", "-h", "-N", "-o", "%N|%T|%E", NULL};
    int st;
    if (k->prov->slurm(&k->ctx, argv, &out, 10, &st) != GRIT_OK || st != 0) {
        free(out);
        return;
    }
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        int slot;
        char s[32] = "", r[128] = "";
        if (sscanf(line, "n%d|%31[^|]|%127[^\n]", &slot, s, r) >= 2 && slot >= 1 &&
            slot <= CLUSTER_MAX_NODES) {
            sfmt(states[slot], 32, "%s", s);
            if (reasons)
                sfmt(reasons[slot], 128, "%s", strcmp(r, "none") ? r : "");
        }
    }
    free(out);
}

int cluster__scontrol(const cl *k, const char *node, const char *state, const char *reason)
{
    char nn[64], ss[64], rr[192];
    sfmt(nn, sizeof nn, "NodeName=%s", node);
    sfmt(ss, sizeof ss, "State=%s", state);
    sfmt(rr, sizeof rr, "Reason=%s", reason ? reason : "");
    char *argv[] = {"scontrol", "update", nn, ss, reason ? rr : NULL, NULL};
    int st = -1;
    char *out = NULL;
    k->prov->slurm(&k->ctx, argv, &out, 10, &st);
    free(out);
    return st;
}

/* --- one node ---------------------------------------------------------------------- */

grit_err cluster__put(cl *k, cluster_node *n, const char *status, const char *msg)
{
    sfmt(n->status, sizeof n->status, "%s", status);
    if (msg)
        sfmt(n->message, sizeof n->message, "%s", msg);
    return cluster_state_put_node(k->st, k->row.name, n);
}

/* Runs the group's OnCreate in the node; *rc its exit status. */
static grit_err lifecycle(cl *k, cluster_node *n, const char *why, int *status)
{
    const cluster_group *g = &k->spec.groups[k->slot_group[n->slot]];
    char logs[PATH_MAX + 8];
    sfmt(logs, sizeof logs, "%s/logs", k->row.dir);
    grit_err rc = fs_mkdirs(logs);
    if (rc != GRIT_OK)
        return rc;
    sfmt(n->lifecycle_log, sizeof n->lifecycle_log, "%s/%s.lifecycle.log", logs, n->id);
    FILE *f = fopen(n->lifecycle_log, "a");
    if (!f)
        return grit_errf(GRIT_EIO, "%s: %s", n->lifecycle_log, strerror(errno));
    fprintf(f, "=== %s: %s/%s on n%d (%s) ===\n", why, g->source, g->on_create, n->slot, n->id);
    fclose(f);
    char addr[32], ctl[32], e[16][PATH_MAX + 64];
    k->prov->addr(&k->ctx, n->slot, addr, sizeof addr);
    k->prov->addr(&k->ctx, 1, ctl, sizeof ctl);
    int m = 0;
    sfmt(e[m++], sizeof e[0], "GRIT_CLUSTER_NAME=%s", k->row.name);
    sfmt(e[m++], sizeof e[0], "GRIT_INSTANCE_GROUP_NAME=%s", g->name);
    sfmt(e[m++], sizeof e[0], "SAGEMAKER_INSTANCE_GROUP_NAME=%s", g->name);
    sfmt(e[m++], sizeof e[0], "GRIT_INSTANCE_TYPE=%s", g->type);
    sfmt(e[m++], sizeof e[0], "SAGEMAKER_INSTANCE_TYPE=%s", g->type);
    sfmt(e[m++], sizeof e[0], "GRIT_NODE_ROLE=%s", cluster_role_name(g->role));
    sfmt(e[m++], sizeof e[0], "GRIT_NODE_ID=%s", n->id);
    sfmt(e[m++], sizeof e[0], "GRIT_NODE_NAME=n%d", n->slot);
    sfmt(e[m++], sizeof e[0], "GRIT_NODE_ADDR=%s", addr);
    sfmt(e[m++], sizeof e[0], "GRIT_NODE_SPARE=%d", n->spare);
    sfmt(e[m++], sizeof e[0], "GRIT_CONTROLLER_ADDR=%s", ctl);
    char src[PATH_MAX];
    if ((rc = k->prov->stage(&k->ctx, n->slot, g->source, g->name, src, sizeof src)) != GRIT_OK)
        return rc;
    sfmt(e[m++], sizeof e[0], "GRIT_LIFECYCLE_DIR=%s", src);
    sfmt(e[m++], sizeof e[0], "GRIT_LIFECYCLE_REASON=%s", why);
    char *env[16];
    for (int i = 0; i < m; i++)
        env[i] = e[i];
    env[m] = NULL;
    char script[PATH_MAX + 300];
    sfmt(script, sizeof script, "%s/%s", src, g->on_create);
    char *argv[] = {"sh", "-c", "cd \"$GRIT_LIFECYCLE_DIR\" && exec bash \"$0\"", script, NULL};
    return k->prov->exec(&k->ctx, n->slot, argv, env, n->lifecycle_log, 600, status);
}

/* Takes a Pending node to Running or Failure (invariant 2). A node failure is not an
 * error of the operation; only the store or the provider failing is. */
grit_err cluster__bring_up(cl *k, cluster_node *n, const char *why, double tm[3])
{
    const cluster_group *g = &k->spec.groups[k->slot_group[n->slot]];
    double t0 = cluster__now();
    int st;
    char msg[512], nn[16];
    sfmt(nn, sizeof nn, "n%d", n->slot);
    if (g->role == CLUSTER_WORKER) {
        /* out of service until admitted: RESUME clears a FAIL or DRAIN of the node this one
         * replaces (FAIL -> DOWN is refused), DOWN keeps jobs off it; with ReturnToService=2
         * it turns idle when its new slurmd registers */
        cluster__scontrol(k, nn, "RESUME", NULL);
        cluster__scontrol(k, nn, "DOWN", "grit cluster: provisioning");
    }
    grit_err rc = cluster__put(k, n, "Pending", "");
    if (rc == GRIT_OK)
        rc = lifecycle(k, n, why, &st);
    if (rc != GRIT_OK)
        return rc;
    n->lifecycle_rc = st;
    if (st != 0) {
        sfmt(msg, sizeof msg, "lifecycle script %s exited with status %d (log %s)",
                 g->on_create, st, n->lifecycle_log);
        cluster__say(k, "n%d (%s): %s", n->slot, n->id, msg);
        if (g->role == CLUSTER_WORKER)
            cluster__scontrol(k, nn, "DOWN", "grit cluster: lifecycle script failed");
        return cluster__put(k, n, "Failure", msg);
    }
    double t1 = cluster__now();
    if (g->role == CLUSTER_WORKER) {
        int ok;
        if ((rc = cluster__admission(k, n, &ok, msg, sizeof msg)) != GRIT_OK)
            return rc;
        if (!ok) {
            cluster__say(k, "n%d (%s): %s", n->slot, n->id, msg);
            cluster__scontrol(k, nn, "DOWN", "grit cluster: admission health check failed");
            return cluster__put(k, n, "Failure", msg);
        }
    }
    double t2 = cluster__now();
    if (g->role == CLUSTER_WORKER) {
        if ((rc = k->prov->start(&k->ctx, n->slot)) == GRIT_OK)
            rc = k->prov->wait(&k->ctx, n->slot, 30);
        if (rc != GRIT_OK) {
            sfmt(msg, sizeof msg, "slurmd did not join: %s", grit_errmsg());
            cluster__say(k, "n%d (%s): %s", n->slot, n->id, msg);
            k->prov->stop(&k->ctx, n->slot);
            cluster__scontrol(k, nn, "DOWN", "grit cluster: slurmd did not join");
            return cluster__put(k, n, "Failure", msg);
        }
        cluster__scontrol(k, nn, "RESUME", NULL); /* a node drained or failed before: back in service */
    }
    double t3 = cluster__now();
    if (tm) {
        tm[0] = t1 - t0;
        tm[1] = t2 - t1;
        tm[2] = t3 - t2;
    }
    n->launch_time = n->launch_time > 0 ? n->launch_time : t0;
    sfmt(msg, sizeof msg, "lifecycle %.1f s, admission %.1f s, rejoin %.1f s", t1 - t0,
             t2 - t1, t3 - t2);
    cluster__say(k, "n%d (%s, %s%s): Running (%s)", n->slot, n->id, g->name, n->spare ? ", spare" : "",
        msg);
    return cluster__put(k, n, "Running", "");
}

/* --- create -------------------------------------------------------------------------- */

grit_err cluster_create(const cluster_opts *o, const char *spec_path, char *name_out)
{
    cl k;
    memset(&k, 0, sizeof k);
    k.o = o;
    cluster_spec spec;
    grit_err rc = cluster_spec_load(&spec, spec_path);
    if (rc != GRIT_OK)
        return rc;
    sfmt(name_out, 64, "%s", spec.name);
    char *text = NULL;
    if ((rc = fs_read_all(spec_path, &text, NULL)) != GRIT_OK)
        return rc;
    if ((rc = open_store(o, &k.st)) != GRIT_OK) {
        free(text);
        return rc;
    }
    int64_t op = 0;
    char *stored = NULL;
    rc = cluster_state_get(k.st, spec.name, &k.row, &stored);
    if (rc == GRIT_ENOTFOUND) {
        /* a new cluster: its row and its nodes' rows in one transaction (invariant 1) */
        grit_errclear();
        sfmt(k.row.name, sizeof k.row.name, "%s", spec.name);
        sfmt(k.row.status, sizeof k.row.status, "Creating");
        sfmt(k.row.dir, sizeof k.row.dir, "%s/%s", o->state_dir, spec.name);
        char *slash = strrchr(spec.file, '/');
        char base[PATH_MAX];
        sfmt(base, sizeof base, "%s", spec.file);
        if (slash)
            base[slash - spec.file ? slash - spec.file : 1] = '\0';
        else
            sfmt(base, sizeof base, ".");
        char *abs = realpath(base, NULL);
        sfmt(k.row.base, sizeof k.row.base, "%s", abs ? abs : base);
        free(abs);
        k.row.created = cluster__now();
        if ((rc = setup(&k, text, spec_path)) != GRIT_OK)
            goto out;
        if ((rc = cluster_state_begin(k.st)) != GRIT_OK)
            goto out;
        rc = cluster_state_add(k.st, &k.row, text);
        for (int i = 1; i <= k.ctx.nslots && rc == GRIT_OK; i++) {
            cluster_node n = {.slot = i, .spare = k.slot_spare[i], .lifecycle_rc = -1,
                              .launch_time = k.row.created};
            cluster_state_new_id(n.id);
            sfmt(n.group, sizeof n.group, "%s", k.spec.groups[k.slot_group[i]].name);
            sfmt(n.status, sizeof n.status, "Pending");
            rc = cluster_state_put_node(k.st, k.row.name, &n);
        }
        if (rc == GRIT_OK)
            rc = cluster_state_commit(k.st);
        else
            cluster_state_rollback(k.st);
        if (rc != GRIT_OK)
            goto out;
        cluster__say(&k, "creating cluster %s: %d nodes (%s provider), state in %s", k.row.name,
            k.ctx.nslots, k.prov->name, o->state_dir);
    } else if (rc == GRIT_OK) {
        if (!strcmp(k.row.status, "Deleting")) {
            rc = grit_errf(GRIT_EINVAL, "cluster %s is being deleted; run `grit cluster delete "
                                        "%s` to finish that first", spec.name, spec.name);
            goto out;
        }
        if ((rc = setup(&k, stored, "spec")) != GRIT_OK)
            goto out;
        if (strcmp(stored, text) != 0)
            cluster__say(&k, "cluster %s exists; converging to the spec it was created with (use "
                    "`grit cluster update` to change it)", spec.name);
        else
            cluster__say(&k, "cluster %s exists (%s); finishing what is left", spec.name, k.row.status);
    } else
        goto out;

    if ((rc = cluster_state_op_begin(k.st, k.row.name, "CreateCluster", "", &op)) != GRIT_OK)
        goto out;
    char sub[PATH_MAX + 16];
    sfmt(sub, sizeof sub, "%s/logs", k.row.dir);
    if ((rc = fs_mkdirs(sub)) != GRIT_OK || (rc = cluster__write_layout(&k)) != GRIT_OK)
        goto out;
    if (chmod(o->state_dir, 0755) != 0 || chmod(k.row.dir, 0755) != 0) {
        rc = grit_errf(GRIT_EIO, "%s: %s", k.row.dir, strerror(errno));
        goto out;
    }
    cluster__say(&k, "network %s (%s.0/24), munge, slurmctld on n1", k.spec.bridge, k.spec.subnet);
    if ((rc = k.prov->up(&k.ctx)) != GRIT_OK)
        goto out;
    cluster_node *nodes = NULL;
    int nn = 0;
    if ((rc = cluster_state_nodes(k.st, k.row.name, 0, &nodes, &nn)) != GRIT_OK)
        goto out;
    int failed = 0;
    for (int i = 0; i < nn && rc == GRIT_OK; i++) {
        cluster_node *n = &nodes[i];
        if (!strcmp(n->status, "Running")) {
            /* made before: make sure its daemon runs (a restarted machine, a rerun) */
            if (k.spec.groups[k.slot_group[n->slot]].role == CLUSTER_WORKER)
                rc = k.prov->start(&k.ctx, n->slot);
            continue;
        }
        if (!strcmp(n->status, "Failure")) {
            failed++;
            continue;
        }
        if (!strcmp(n->status, "ShuttingDown"))
            continue; /* an update's scale-down finishes it */
        rc = cluster__bring_up(&k, n, "OnCreate", NULL);
        failed += rc == GRIT_OK && !strcmp(n->status, "Failure");
    }
    free(nodes);
    if (rc != GRIT_OK)
        goto out;
    rc = cluster_state_set_status(k.st, k.row.name, "InService");
    if (rc == GRIT_OK) {
        char alog[PATH_MAX + 32];
        sfmt(alog, sizeof alog, "%s/logs/agent.log", k.row.dir);
        if ((rc = cluster_agent_start(o, k.row.name, alog)) == GRIT_OK)
            cluster__say(&k, "healing agent started (log %s)", alog);
    }
    if (rc != GRIT_OK)
        goto out;
    char detail[128];
    sfmt(detail, sizeof detail, "%d nodes, %d failed", nn, failed);
    cluster__say(&k, "cluster %s InService: %s", k.row.name, detail);
    if (rc == GRIT_OK)
        rc = cluster_state_op_end(k.st, op, "Succeeded", detail);
    op = 0;
out:
    if (op) {
        char *m = strdup(grit_errmsg());
        cluster_state_op_end(k.st, op, "Failed", m ? m : "");
        grit_errf(rc, "%s", m ? m : "");
        free(m);
    }
    free(text);
    free(stored);
    cluster__close(&k);
    return rc;
}

/* --- delete -------------------------------------------------------------------------- */

grit_err cluster_delete(const cluster_opts *o, const char *name)
{
    cl k;
    grit_err rc = cluster__open(&k, o, name);
    if (rc != GRIT_OK)
        return rc;
    cluster__say(&k, "deleting cluster %s", name);
    if ((rc = cluster_agent_stop(o, name)) != GRIT_OK)
        goto out;
    if ((rc = cluster_state_set_status(k.st, name, "Deleting")) != GRIT_OK)
        goto out;
    cluster_node *nodes = NULL;
    int nn = 0;
    if ((rc = cluster_state_nodes(k.st, name, 0, &nodes, &nn)) != GRIT_OK)
        goto out;
    for (int i = 0; i < nn && rc == GRIT_OK; i++)
        rc = cluster__put(&k, &nodes[i], "ShuttingDown", "");
    free(nodes);
    if (rc != GRIT_OK)
        goto out;
    struct stat sb;
    if (stat(k.row.dir, &sb) == 0 && (rc = k.prov->down(&k.ctx)) != GRIT_OK)
        goto out;
    char *argv[] = {"rm", "-rf", "--one-file-system", k.row.dir, NULL};
    int st;
    if ((rc = cluster_run(argv, NULL, NULL, NULL, 120, &st)) != GRIT_OK)
        goto out;
    if (st != 0 || stat(k.row.dir, &sb) == 0) {
        rc = grit_errf(GRIT_EIO, "%s: could not remove the cluster's folder", k.row.dir);
        goto out;
    }
    rc = cluster_state_remove(k.st, name); /* invariant 3: last */
    if (rc == GRIT_OK)
        cluster__say(&k, "cluster %s deleted", name);
out:
    cluster__close(&k);
    return rc;
}

/* --- views ----------------------------------------------------------------------------- */

static json_t *time_json(double t)
{
    char buf[40];
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_string(buf);
}

static json_t *lifecycle_json(const cluster_group *g)
{
    return json_pack("{s:s, s:s}", "SourceS3Uri", g->source, "OnCreate", g->on_create);
}

grit_err cluster_list(const cluster_opts *o, json_t **out)
{
    cluster_state *st;
    grit_err rc = open_store(o, &st);
    if (rc != GRIT_OK)
        return rc;
    cluster_row *rows = NULL;
    int n = 0;
    rc = cluster_state_list(st, &rows, &n);
    json_t *arr = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(arr, json_pack("{s:s, s:s, s:o}", "ClusterName", rows[i].name,
                                             "ClusterStatus", rows[i].status, "CreationTime",
                                             time_json(rows[i].created)));
    free(rows);
    cluster_state_close(st);
    *out = json_pack("{s:o}", "ClusterSummaries", arr);
    return rc;
}

static json_t *node_json(const cl *k, const cluster_node *n, const char *slurm, const char *reason)
{
    const cluster_group *g = &k->spec.groups[k->slot_group[n->slot]];
    char name[16], addr[32];
    sfmt(name, sizeof name, "n%d", n->slot);
    k->prov->addr(&k->ctx, n->slot, addr, sizeof addr);
    json_t *o = json_pack("{s:s, s:s, s:s, s:o, s:{s:s, s:s}, s:s, s:s, s:b, s:s}",
                          "InstanceGroupName", n->group, "NodeId", n->id, "InstanceType", g->type,
                          "LaunchTime", time_json(n->launch_time), "InstanceStatus", "Status",
                          n->status, "Message", n->message, "PrivateDnsHostname", name,
                          "PrivatePrimaryIp", addr, "WarmSpare", n->spare, "Role",
                          cluster_role_name(g->role));
    if (slurm && slurm[0])
        json_object_set_new(o, "SlurmState", json_string(slurm));
    if (reason && reason[0])
        json_object_set_new(o, "SlurmReason", json_string(reason));
    return o;
}

grit_err cluster_list_nodes(const cluster_opts *o, const char *name, json_t **out)
{
    cl k;
    grit_err rc = cluster__open(&k, o, name);
    if (rc != GRIT_OK)
        return rc;
    static char states[CLUSTER_MAX_NODES + 1][32], reasons[CLUSTER_MAX_NODES + 1][128];
    cluster__slurm_states(&k, states, reasons);
    cluster_node *nodes = NULL;
    int nn = 0;
    rc = cluster_state_nodes(k.st, name, 0, &nodes, &nn);
    json_t *arr = json_array();
    for (int i = 0; i < nn; i++)
        json_array_append_new(arr, node_json(&k, &nodes[i], states[nodes[i].slot],
                                             reasons[nodes[i].slot]));
    free(nodes);
    cluster__close(&k);
    *out = json_pack("{s:o}", "ClusterNodeSummaries", arr);
    return rc;
}

/* The last cap bytes of a file ("" when absent). */
static json_t *file_tail(const char *path, size_t cap)
{
    char *text = NULL;
    size_t len = 0;
    if (!path[0] || fs_read_all(path, &text, &len) != GRIT_OK) {
        grit_errclear();
        return json_string("");
    }
    json_t *s = json_stringn_nocheck(len > cap ? text + len - cap : text, len > cap ? cap : len);
    free(text);
    return s ? s : json_string("");
}

grit_err cluster_describe_node(const cluster_opts *o, const char *name, const char *node,
                               json_t **out)
{
    cl k;
    grit_err rc = cluster__open(&k, o, name);
    if (rc != GRIT_OK)
        return rc;
    cluster_node n;
    if ((rc = cluster_state_node(k.st, name, node, &n)) == GRIT_OK) {
        static char states[CLUSTER_MAX_NODES + 1][32], reasons[CLUSTER_MAX_NODES + 1][128];
        cluster__slurm_states(&k, states, reasons);
        const cluster_group *g = &k.spec.groups[k.slot_group[n.slot]];
        json_t *d = node_json(&k, &n, states[n.slot], reasons[n.slot]);
        json_object_set_new(d, "LifeCycleConfig", lifecycle_json(g));
        json_object_set_new(d, "ThreadsPerCore", json_integer(g->threads_per_core));
        if (n.lifecycle_rc >= 0)
            json_object_set_new(d, "LifeCycleExitStatus", json_integer(n.lifecycle_rc));
        json_object_set_new(d, "LifeCycleLog", json_string(n.lifecycle_log));
        json_object_set_new(d, "LifeCycleOutput", file_tail(n.lifecycle_log, 4096));
        *out = json_pack("{s:o}", "NodeDetails", d);
    }
    cluster__close(&k);
    return rc;
}

grit_err cluster_describe(const cluster_opts *o, const char *name, json_t **out)
{
    cl k;
    grit_err rc = cluster__open(&k, o, name);
    if (rc != GRIT_OK)
        return rc;
    cluster_node *nodes = NULL;
    int nn = 0;
    char *ops = NULL;
    if ((rc = cluster_state_nodes(k.st, name, 0, &nodes, &nn)) != GRIT_OK ||
        (rc = cluster_state_ops_json(k.st, name, 50, &ops)) != GRIT_OK)
        goto out;
    json_t *groups = json_array();
    for (int g = 0; g < k.spec.ngroups; g++) {
        const cluster_group *x = &k.spec.groups[g];
        int cur = 0, spares = 0;
        for (int i = 0; i < nn; i++)
            if (!strcmp(nodes[i].group, x->name) && !strcmp(nodes[i].status, "Running"))
                nodes[i].spare ? spares++ : cur++;
        json_array_append_new(groups, json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:o, s:i}",
                                                "InstanceGroupName", x->name, "Role",
                                                cluster_role_name(x->role), "InstanceType", x->type,
                                                "CurrentCount", cur, "TargetCount", x->count,
                                                "WarmSpares", x->spares, "CurrentWarmSpares", spares,
                                                "LifeCycleConfig", lifecycle_json(x),
                                                "ThreadsPerCore", x->threads_per_core));
    }
    char conf[PATH_MAX + 32], ctl[32];
    cluster_ctx_slurm_conf(&k.ctx, conf, sizeof conf);
    k.prov->addr(&k.ctx, 1, ctl, sizeof ctl);
    json_error_t je;
    json_t *events = json_loads(ops, 0, &je);
    *out = json_pack("{s:s, s:s, s:o, s:o, s:s, s:{s:s, s:s, s:s, s:i}, s:s, s:i, s:o}",
                     "ClusterName", name, "ClusterStatus", k.row.status, "CreationTime",
                     time_json(k.row.created), "InstanceGroups", groups, "Provider", k.prov->name,
                     "Network", "Bridge", k.spec.bridge, "Subnet", k.spec.subnet, "ControllerAddr",
                     ctl, "Port", k.spec.port, "SlurmConf", conf, "AgentPid", k.row.agent_pid,
                     "Events", events ? events : json_array());
out:
    free(nodes);
    free(ops);
    cluster__close(&k);
    return rc;
}

/* --- node operations ------------------------------------------------------------------- */

/* The live node named by key; GRIT_EINVAL for the controller (not replaceable here). */
static grit_err pick(cl *k, const char *key, cluster_node *n)
{
    grit_err rc = cluster_state_node(k->st, k->row.name, key, n);
    if (rc == GRIT_OK && k->spec.groups[k->slot_group[n->slot]].role == CLUSTER_CONTROLLER)
        rc = grit_errf(GRIT_EINVAL, "n%d is the controller node; replacing or rebooting it is "
                                    "not supported (delete and create the cluster)", n->slot);
    return rc;
}

/* Waits for the node's slot lock (DIR/locks/nN.lock, flock: released when its holder
 * ends, however it ends), then picks the node again: *n is its row now. 1 when the caller's
 * judgement is stale (expect_id given, and the node is another one by now, Running);
 * -1 with rc set on errors; 0 to go on. *fd: the lock, closed by the caller. */
static int slot_lock(cl *k, const char *key, const char *expect_id, cluster_node *n, int *fd,
                     grit_err *rc)
{
    char dir[PATH_MAX + 8], path[PATH_MAX + 32];
    *fd = -1;
    if ((*rc = pick(k, key, n)) != GRIT_OK)
        return -1;
    sfmt(dir, sizeof dir, "%s/locks", k->ctx.dir);
    sfmt(path, sizeof path, "%s/n%d.lock", dir, n->slot);
    if ((*rc = fs_mkdirs(dir)) != GRIT_OK)
        return -1;
    *fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (*fd < 0) {
        *rc = grit_errf(GRIT_EIO, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(*fd, LOCK_EX | LOCK_NB) != 0) {
        cluster__say(k, "n%d: another replace or reboot is under way; waiting for it", n->slot);
        while (flock(*fd, LOCK_EX) != 0)
            if (errno != EINTR) {
                *rc = grit_errf(GRIT_EIO, "%s: cannot lock: %s", path, strerror(errno));
                return -1;
            }
        if ((*rc = pick(k, key, n)) != GRIT_OK)
            return -1;
    }
    if (expect_id && *expect_id && strcmp(n->id, expect_id) && !strcmp(n->status, "Running")) {
        cluster__say(k, "n%d is %s by now, Running (it was %s): replaced meanwhile, nothing to do",
                     n->slot, n->id, expect_id);
        return 1;
    }
    return 0;
}

grit_err cluster_replace_node(const cluster_opts *o, const char *name, const char *key,
                              const char *expect_id)
{
    cl k;
    grit_err rc = cluster__open(&k, o, name);
    if (rc != GRIT_OK)
        return rc;
    cluster_node old, n;
    int64_t op = 0;
    int fd = -1, st = slot_lock(&k, key, expect_id, &old, &fd, &rc);
    if (st != 0 ||
        (rc = cluster_state_op_begin(k.st, name, "ReplaceNode", old.id, &op)) != GRIT_OK)
        goto out;
    const char *first = old.id[0] ? old.id : "?";
    char first_id[24];
    sfmt(first_id, sizeof first_id, "%s", first);
    int limit = o->attempts > 0 ? o->attempts : 1;
    double t0 = cluster__now(), tm[3] = {0, 0, 0}, prov = 0;
    for (int attempt = 1;; attempt++) {
        cluster__say(&k, "replacing n%d (%s), attempt %d of %d", old.slot, old.id, attempt, limit);
        double ta = cluster__now();
        /* the new node's row and the old one's end in one transaction: a kill leaves one
         * live node in the slot, Pending, and the rerun (replace-node nN) brings it up */
        n = old;
        if (strcmp(old.status, "Pending") != 0) {
            cluster_state_new_id(n.id);
            n.lifecycle_rc = -1;
            n.lifecycle_log[0] = n.message[0] = '\0';
            n.launch_time = ta;
            sfmt(n.status, sizeof n.status, "Pending");
            if ((rc = cluster_state_begin(k.st)) != GRIT_OK)
                goto out;
            if ((rc = cluster__put(&k, &old, "Terminated", "replaced")) == GRIT_OK)
                rc = cluster_state_put_node(k.st, name, &n);
            if (rc == GRIT_OK)
                rc = cluster_state_commit(k.st);
            else
                cluster_state_rollback(k.st);
            if (rc != GRIT_OK)
                goto out;
        }
        if ((rc = k.prov->renew(&k.ctx, n.slot)) != GRIT_OK)
            goto out;
        prov = cluster__now() - ta;
        if ((rc = cluster__bring_up(&k, &n, "OnCreate", tm)) != GRIT_OK)
            goto out;
        if (!strcmp(n.status, "Running") || attempt >= limit)
            break;
        cluster__say(&k, "n%d (%s) was not admitted: %s; replacing it again", n.slot, n.id, n.message);
        old = n;
    }
    char detail[512];
    sfmt(detail, sizeof detail, "%s -> %s: %s (provisioning %.2f s, lifecycle %.2f s, health "
         "%.2f s, rejoin %.2f s; total %.2f s)%s%s", first_id, n.id, n.status, prov, tm[0], tm[1],
         tm[2], cluster__now() - t0, n.message[0] ? ": " : "", n.message);
    rc = cluster_state_op_end(k.st, op, !strcmp(n.status, "Running") ? "Succeeded" : "Failed",
                              detail);
    op = 0;
    cluster__say(&k, "n%d: %s", n.slot, detail);
out:
    if (op)
        cluster_state_op_end(k.st, op, "Failed", grit_errmsg());
    if (fd >= 0)
        close(fd);
    cluster__close(&k);
    return rc;
}

grit_err cluster_reboot_node(const cluster_opts *o, const char *name, const char *key,
                             const char *expect_id)
{
    cl k;
    grit_err rc = cluster__open(&k, o, name);
    if (rc != GRIT_OK)
        return rc;
    cluster_node n;
    int64_t op = 0;
    int fd = -1;
    if (slot_lock(&k, key, expect_id, &n, &fd, &rc) != 0 ||
        (rc = cluster_state_op_begin(k.st, name, "RebootNode", n.id, &op)) != GRIT_OK)
        goto out;
    double t0 = cluster__now();
    cluster__say(&k, "rebooting n%d (%s): its processes end and slurmd starts again", n.slot, n.id);
    if ((rc = cluster__put(&k, &n, "SystemUpdating", "rebooting")) != GRIT_OK ||
        (rc = k.prov->stop(&k.ctx, n.slot)) != GRIT_OK)
        goto out;
    char nn[16], detail[160];
    sfmt(nn, sizeof nn, "n%d", n.slot);
    if ((rc = k.prov->start(&k.ctx, n.slot)) == GRIT_OK &&
        (rc = k.prov->wait(&k.ctx, n.slot, 30)) == GRIT_OK) {
        cluster__scontrol(&k, nn, "RESUME", NULL);
        rc = cluster__put(&k, &n, "Running", "");
    } else {
        sfmt(detail, sizeof detail, "slurmd did not come back: %s", grit_errmsg());
        rc = cluster__put(&k, &n, "Failure", detail);
    }
    sfmt(detail, sizeof detail, "n%d %s in %.1f s", n.slot, n.status, cluster__now() - t0);
    if (rc == GRIT_OK)
        rc = cluster_state_op_end(k.st, op, !strcmp(n.status, "Running") ? "Succeeded" : "Failed",
                                  detail);
    op = 0;
    cluster__say(&k, "%s", detail);
out:
    if (op)
        cluster_state_op_end(k.st, op, "Failed", grit_errmsg());
    if (fd >= 0)
        close(fd);
    cluster__close(&k);
    return rc;
}

grit_err cluster_update_software(const cluster_opts *o, const char *name)
{
    cl k;
    grit_err rc = cluster__open(&k, o, name);
    if (rc != GRIT_OK)
        return rc;
    cluster_node *nodes = NULL;
    int nn = 0, failed = 0;
    int64_t op = 0;
    if ((rc = cluster_state_op_begin(k.st, name, "UpdateClusterSoftware", "", &op)) != GRIT_OK ||
        (rc = cluster_state_nodes(k.st, name, 0, &nodes, &nn)) != GRIT_OK)
        goto out;
    for (int i = 0; i < nn && rc == GRIT_OK; i++) {
        cluster_node *n = &nodes[i];
        /* Running nodes, and those a killed update left SystemUpdating */
        if (strcmp(n->status, "Running") != 0 && strcmp(n->status, "SystemUpdating") != 0)
            continue;
        if ((rc = cluster__put(&k, n, "SystemUpdating", "")) != GRIT_OK)
            break;
        int st;
        if ((rc = lifecycle(&k, n, "UpdateSoftware", &st)) != GRIT_OK)
            break;
        n->lifecycle_rc = st;
        char msg[512] = "";
        if (st != 0) {
            sfmt(msg, sizeof msg, "lifecycle script exited with status %d on update "
                                      "(log %s)", st, n->lifecycle_log);
            failed++;
        }
        cluster__say(&k, "n%d (%s): %s", n->slot, n->id, st ? msg : "software updated");
        rc = cluster__put(&k, n, st ? "Failure" : "Running", msg);
    }
    char detail[64];
    sfmt(detail, sizeof detail, "%d failed", failed);
    if (rc == GRIT_OK) {
        rc = cluster_state_op_end(k.st, op, failed ? "Failed" : "Succeeded", detail);
        op = 0;
    }
out:
    if (op)
        cluster_state_op_end(k.st, op, "Failed", grit_errmsg());
    free(nodes);
    cluster__close(&k);
    return rc;
}
