/*
 * local.c - the `local` provider: nodes are network-namespace hosts on this
 * machine, made by scripts/slurm-local-cluster.sh in netns mode with a layout.
 *
 * The script owns the mechanism (bridge, namespaces, veths, munge, slurmctld in
 * the controller node, one slurmd per worker in its own PID/mount/UTS
 * namespaces, and their removal); this file only passes it the cluster's
 * settings. Node slot i is Slurm node "n<i>" at SUBNET.(10+i). Script output
 * goes to DIR/logs/provider.log.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/provider.h"
#include "cluster/run.h"
#include "core/fsutil.h"

#include <sys/stat.h>

/* snprintf whose truncation is intended (bounded names and paths) */
static void sfmt(char *dst, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void sfmt(char *dst, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, cap, fmt, ap);
    va_end(ap);
}

void cluster_ctx_slurm_conf(const cluster_ctx *c, char *buf, size_t cap)
{
    sfmt(buf, cap, "%s/slurm/etc/slurm.conf", c->dir);
}

/* The script's settings as environment strings, in env (space for 12). */
typedef struct local_env {
    char v[12][PATH_MAX + 40];
    char *p[14];
} local_env;

static void make_env(const cluster_ctx *c, local_env *e)
{
    int k = 0;
    sfmt(e->v[k++], sizeof e->v[0], "GRIT_SLURM_DIR=%s/slurm", c->dir);
    sfmt(e->v[k++], sizeof e->v[0], "GRIT_SLURM_NODES=%d", c->nslots);
    sfmt(e->v[k++], sizeof e->v[0], "GRIT_SLURM_NET=netns");
    sfmt(e->v[k++], sizeof e->v[0], "GRIT_SLURM_BRIDGE=%s", c->spec->bridge);
    sfmt(e->v[k++], sizeof e->v[0], "GRIT_SLURM_SUBNET=%s", c->spec->subnet);
    sfmt(e->v[k++], sizeof e->v[0], "GRIT_SLURM_PORT=%d", c->spec->port);
    sfmt(e->v[k++], sizeof e->v[0], "GRIT_SLURM_LAYOUT=%s", c->layout);
    sfmt(e->v[k++], sizeof e->v[0], "GRIT_SLURM_DEFER=1");
    sfmt(e->v[k++], sizeof e->v[0], "SLURM_CONF=%s/slurm/etc/slurm.conf", c->dir);
    if (c->spank[0]) {
        sfmt(e->v[k++], sizeof e->v[0], "GRIT_SLURM_PLUGIN=%s", c->spank);
        sfmt(e->v[k++], sizeof e->v[0], "GRIT_SLURM_PLUGIN_ARGS=grit=%s", c->grit);
    }
    for (int i = 0; i < k; i++)
        e->p[i] = e->v[i];
    e->p[k] = NULL;
}

/* Runs the script with args (and extra "K=V" variables); a non-zero exit is an error
 * naming the log. */
static grit_err script_env(const cluster_ctx *c, const char *what, double timeout_s,
                           char *const extra[], char *a1)
{
    local_env e;
    make_env(c, &e);
    char *env[20];
    int m = 0;
    for (int i = 0; e.p[i]; i++)
        env[m++] = e.p[i];
    for (int i = 0; extra && extra[i] && m < 19; i++)
        env[m++] = extra[i];
    env[m] = NULL;
    char log[PATH_MAX + 32];
    sfmt(log, sizeof log, "%s/logs/provider.log", c->dir);
    char *argv[] = {(char *)c->script, (char *)what, a1, NULL, NULL};
    int st;
    grit_err rc = cluster_run(argv, env, log, NULL, timeout_s, &st);
    if (rc != GRIT_OK)
        return rc;
    if (st != 0)
        return grit_errf(GRIT_EIO, "local provider: %s %s failed (exit %d; see %s)", what,
                         a1 ? a1 : "", st, log);
    return GRIT_OK;
}

static grit_err script(const cluster_ctx *c, const char *what, double timeout_s, char *a1,
                       char *a2, char *a3)
{
    if (!a2)
        return script_env(c, what, timeout_s, NULL, a1);
    local_env e;
    make_env(c, &e);
    char log[PATH_MAX + 32];
    sfmt(log, sizeof log, "%s/logs/provider.log", c->dir);
    char *argv[] = {(char *)c->script, (char *)what, a1, a2, a3, NULL};
    int st;
    grit_err rc = cluster_run(argv, e.p, log, NULL, timeout_s, &st);
    if (rc != GRIT_OK)
        return rc;
    if (st != 0)
        return grit_errf(GRIT_EIO, "local provider: %s %s %s failed (exit %d; see %s)", what,
                         a1 ? a1 : "", a2, st, log);
    return GRIT_OK;
}

static grit_err local_up(const cluster_ctx *c)
{
    local_env e;
    make_env(c, &e);
    char *ping[] = {(char *)c->script, "ping", NULL};
    int st;
    if (cluster_run(ping, e.p, NULL, NULL, 20, &st) == GRIT_OK && st == 0)
        return GRIT_OK; /* already up */
    /* half made (a killed create) or gone: clear what is left, then start */
    grit_err rc = script(c, "stop", 300, NULL, NULL, NULL);
    if (rc == GRIT_OK)
        rc = script(c, "start", 120, NULL, NULL, NULL);
    return rc;
}

static grit_err local_down(const cluster_ctx *c)
{
    return script(c, "stop", 300, NULL, NULL, NULL);
}

static grit_err local_renew(const cluster_ctx *c, int slot)
{
    char n[16];
    sfmt(n, sizeof n, "n%d", slot);
    return script(c, "renew-node", 60, n, NULL, NULL);
}

static grit_err local_start(const cluster_ctx *c, int slot)
{
    char n[16];
    sfmt(n, sizeof n, "n%d", slot);
    return script(c, "start-node", 60, n, NULL, NULL);
}

static grit_err local_stop(const cluster_ctx *c, int slot)
{
    char n[16];
    sfmt(n, sizeof n, "n%d", slot);
    local_env e;
    make_env(c, &e);
    char *argv[] = {(char *)c->script, "node-pids", n, NULL};
    char *out = NULL;
    int st;
    grit_err rc = cluster_run(argv, e.p, NULL, &out, 20, &st);
    int running = rc == GRIT_OK && st == 0 && out && out[0];
    free(out);
    return running ? script(c, "kill-node", 60, n, NULL, NULL) : GRIT_OK;
}

static grit_err local_wait(const cluster_ctx *c, int slot, int seconds)
{
    char n[16], s[16];
    sfmt(n, sizeof n, "n%d", slot);
    sfmt(s, sizeof s, "%d", seconds);
    return script(c, "wait-node", seconds + 10, n, s, NULL);
}

static grit_err local_exec(const cluster_ctx *c, int slot, char *const argv[], char *const env[],
                           const char *log, double timeout_s, int *status)
{
    local_env e;
    make_env(c, &e);
    char n[16];
    sfmt(n, sizeof n, "n%d", slot);
    char *full[64];
    int k = 0;
    full[k++] = (char *)c->script;
    full[k++] = "node-exec";
    full[k++] = n;
    for (int i = 0; argv[i] && k < 62; i++)
        full[k++] = argv[i];
    full[k] = NULL;
    /* the script's settings first, the caller's variables after them */
    char *all[64];
    int m = 0;
    for (int i = 0; e.p[i]; i++)
        all[m++] = e.p[i];
    for (int i = 0; env && env[i] && m < 63; i++)
        all[m++] = env[i];
    all[m] = NULL;
    return cluster_run(full, all, log, NULL, timeout_s, status);
}

static grit_err local_remove(const cluster_ctx *c, int slot)
{
    char n[16];
    sfmt(n, sizeof n, "n%d", slot);
    return script(c, "remove-node", 60, n, NULL, NULL);
}

static grit_err local_reconfigure(const cluster_ctx *c)
{
    char lay[PATH_MAX + 32], nodes[48];
    sfmt(lay, sizeof lay, "GRIT_SLURM_LAYOUT_NEW=%s", c->layout);
    sfmt(nodes, sizeof nodes, "GRIT_SLURM_NODES_NEW=%d", c->nslots);
    char *extra[] = {lay, nodes, NULL};
    return script_env(c, "reconfigure", 120, extra, NULL);
}

static void local_addr(const cluster_ctx *c, int slot, char *buf, size_t cap)
{
    sfmt(buf, cap, "%s.%d", c->spec->subnet, 10 + slot);
}

static grit_err local_slurm(const cluster_ctx *c, char *const argv[], char **out,
                            double timeout_s, int *status)
{
    char conf[PATH_MAX + 64];
    sfmt(conf, sizeof conf, "SLURM_CONF=%s/slurm/etc/slurm.conf", c->dir);
    char *env[] = {conf, NULL};
    return cluster_run(argv, env, NULL, out, timeout_s, status);
}

static grit_err local_stage(const cluster_ctx *c, int slot, const char *dir, const char *name,
                            char *remote, size_t cap)
{
    (void)c, (void)slot, (void)name;
    sfmt(remote, cap, "%s", dir); /* the nodes share this machine's files */
    return GRIT_OK;
}

static grit_err local_mpi_agent(const cluster_ctx *c, char *path, size_t cap)
{
    sfmt(path, cap, "%s/mpi-agent.sh", c->dir);
    char text[3 * PATH_MAX];
    int len = snprintf(text, sizeof text,
                       "#!/bin/sh\n# mpirun's rsh agent: AGENT nI CMD... runs CMD in node nI\n"
                       "h=$1; shift\nGRIT_SLURM_DIR='%s/slurm' exec '%s' node-exec \"$h\" sh -c \"$*\"\n",
                       c->dir, c->script);
    if (len < 0 || (size_t)len >= sizeof text)
        return grit_errf(GRIT_EINVAL, "%s: path too long", path);
    grit_err rc = fs_write_durable(path, text, (size_t)len);
    if (rc == GRIT_OK && chmod(path, 0755) != 0)
        rc = grit_errf(GRIT_EIO, "%s: cannot make it executable", path);
    return rc;
}

const cluster_provider cluster_provider_local = {
    .name = "local",
    .up = local_up,
    .down = local_down,
    .renew = local_renew,
    .exec = local_exec,
    .start = local_start,
    .stop = local_stop,
    .wait = local_wait,
    .remove = local_remove,
    .reconfigure = local_reconfigure,
    .addr = local_addr,
    .slurm = local_slurm,
    .stage = local_stage,
    .mpi_agent = local_mpi_agent,
};
