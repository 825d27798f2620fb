/*
 * ssh.c - the `ssh` provider: a cluster's nodes are existing hosts listed in
 * the spec (group "Hosts"), reached with OpenSSH as Ssh.User with
 * Ssh.IdentityFile; host keys are always checked against Ssh.KnownHosts
 * (StrictHostKeyChecking=yes, BatchMode: never a prompt).
 *
 * On each host everything lives in Ssh.RemoteDir (RD): grit copies
 * scripts/cluster-node.sh, the cluster's slurm.conf and munge key there with
 * scp, and runs `RD/cluster-node.sh CMD` over ssh (munge, ctld, slurmd NODE,
 * stop-node, renew, wait, reconfigure, slurm CLIENT..., down). slurm.conf is
 * written here (DIR/slurm/etc/slurm.conf) from the slots: slurmctld on the
 * controller's host at Network.Port, every slurmd at Port+1 on its own host,
 * a partition per worker group, node features = instance type. Slurm clients
 * run on the controller's host (the operator's machine needs no munge key).
 *
 * A "fresh machine" (renew) is the same host with the node's processes ended
 * and its spool and tmp wiped; lifecycle scripts are copied to RD/lifecycle/
 * GROUP before they run (stage). grit itself must be at the same path on the
 * hosts for admission checks.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster/provider.h"
#include "cluster/run.h"
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

/* ssh's or scp's options: key, known hosts, port, user, no prompts. */
typedef struct ssh_opts {
    char v[10][PATH_MAX + 40];
    char *p[40];
    int n;
} ssh_opts;

static void ssh_opts_make(const cluster_ctx *c, ssh_opts *o, int scp)
{
    const cluster_spec *s = c->spec;
    int k = 0, m = 0;
    o->p[m++] = scp ? "scp" : "ssh";
    if (scp)
        o->p[m++] = "-q";
    sfmt(o->v[k], sizeof o->v[0], "UserKnownHostsFile=%s", s->ssh_known);
    o->p[m++] = "-o", o->p[m++] = o->v[k++];
    o->p[m++] = "-o", o->p[m++] = "GlobalKnownHostsFile=/dev/null";
    o->p[m++] = "-o", o->p[m++] = "StrictHostKeyChecking=yes";
    o->p[m++] = "-o", o->p[m++] = "BatchMode=yes";
    o->p[m++] = "-o", o->p[m++] = "ConnectTimeout=5";
    o->p[m++] = "-o", o->p[m++] = "IdentitiesOnly=yes";
    o->p[m++] = "-i", o->p[m++] = (char *)s->ssh_key;
    sfmt(o->v[k], sizeof o->v[0], "%d", s->ssh_port);
    o->p[m++] = scp ? "-P" : "-p", o->p[m++] = o->v[k++];
    sfmt(o->v[k], sizeof o->v[0], "User=%s", s->ssh_user);
    o->p[m++] = "-o", o->p[m++] = o->v[k++];
    /* one connection per host, reused (master started by ssh_master) */
    sfmt(o->v[k], sizeof o->v[0], "ControlPath=%s/ssh/%%C", c->dir);
    if (strlen(o->v[k]) < 80)
        o->p[m++] = "-o", o->p[m++] = o->v[k++];
    o->n = m;
}

/* A master connection to slot's host (ControlPersist 60 s) when there is none; its
 * output goes to the log, never to a caller's pipe. Failures are left to the command. */
static void ssh_master(const cluster_ctx *c, int slot, const char *log)
{
    char dir[PATH_MAX + 8];
    sfmt(dir, sizeof dir, "%s/ssh", c->dir);
    if (fs_mkdirs(dir) != GRIT_OK) {
        grit_errclear();
        return;
    }
    ssh_opts o;
    ssh_opts_make(c, &o, 0);
    char *check[48];
    memcpy(check, o.p, sizeof(char *) * (size_t)o.n);
    int n = o.n, st;
    check[n++] = "-O", check[n++] = "check", check[n++] = (char *)c->host[slot], check[n] = NULL;
    if (cluster_run(check, NULL, NULL, NULL, 10, &st) == GRIT_OK && st == 0)
        return;
    o.p[o.n++] = "-o", o.p[o.n++] = "ControlMaster=yes";
    o.p[o.n++] = "-o", o.p[o.n++] = "ControlPersist=60";
    o.p[o.n++] = "-f", o.p[o.n++] = "-N", o.p[o.n++] = (char *)c->host[slot], o.p[o.n] = NULL;
    cluster_run(o.p, NULL, log, NULL, 20, &st);
}

/* Ends the master connection to slot's host (delete, remove). */
static void ssh_master_exit(const cluster_ctx *c, int slot)
{
    ssh_opts o;
    ssh_opts_make(c, &o, 0);
    int st;
    o.p[o.n++] = "-O", o.p[o.n++] = "exit", o.p[o.n++] = (char *)c->host[slot], o.p[o.n] = NULL;
    cluster_run(o.p, NULL, NULL, NULL, 10, &st);
}

/* Appends word to buf as one shell word ('...' with ' escaped). */
static void quote(char *buf, size_t cap, const char *word)
{
    size_t len = strlen(buf);
    if (len + 3 >= cap)
        return;
    buf[len++] = ' ';
    buf[len++] = '\'';
    for (const char *p = word; *p && len + 5 < cap; p++) {
        if (*p == '\'') {
            memcpy(buf + len, "'\\''", 4);
            len += 4;
        } else
            buf[len++] = *p;
    }
    buf[len++] = '\'';
    buf[len] = '\0';
}

static grit_err need_host(const cluster_ctx *c, int slot)
{
    if (slot < 1 || slot > c->nslots || !c->host[slot][0])
        return grit_errf(GRIT_EINVAL, "ssh provider: node n%d has no host (its group lists fewer "
                                      "\"Hosts\" than InstanceCount + WarmSpares)", slot);
    return GRIT_OK;
}

/* Runs `env ENV... ARGV...` on slot's host; output to log, or *out, or dropped. */
static grit_err ssh_run(const cluster_ctx *c, int slot, char *const argv[], char *const env[],
                        const char *log, char **out, double timeout_s, int *status)
{
    grit_err rc = need_host(c, slot);
    if (rc != GRIT_OK)
        return rc;
    char mlog[PATH_MAX + 32];
    sfmt(mlog, sizeof mlog, "%s/logs/provider.log", c->dir);
    ssh_master(c, slot, mlog);
    ssh_opts o;
    ssh_opts_make(c, &o, 0);
    static char cmd[65536];
    sfmt(cmd, sizeof cmd, "exec env");
    for (int i = 0; env && env[i]; i++)
        quote(cmd, sizeof cmd, env[i]);
    for (int i = 0; argv[i]; i++)
        quote(cmd, sizeof cmd, argv[i]);
    o.p[o.n++] = (char *)c->host[slot];
    o.p[o.n++] = "--";
    o.p[o.n++] = cmd;
    o.p[o.n] = NULL;
    return cluster_run(o.p, NULL, log, out, timeout_s, status);
}

static void ssh_log(const cluster_ctx *c, char *buf, size_t cap)
{
    sfmt(buf, cap, "%s/logs/provider.log", c->dir);
}

/* RD/cluster-node.sh what [a1 [a2]] on slot's host; a non-zero exit is an error. */
static grit_err node_cmd(const cluster_ctx *c, int slot, const char *what, const char *a1,
                         const char *a2, double timeout_s)
{
    char sh[300], log[PATH_MAX + 32];
    sfmt(sh, sizeof sh, "%s/cluster-node.sh", c->spec->remote_dir);
    ssh_log(c, log, sizeof log);
    char *argv[] = {sh, (char *)what, (char *)a1, (char *)a2, NULL};
    int st;
    grit_err rc = ssh_run(c, slot, argv, NULL, log, NULL, timeout_s, &st);
    if (rc == GRIT_OK && st != 0)
        rc = grit_errf(GRIT_EIO, "ssh provider: %s %s on %s (n%d) failed (exit %d%s; see %s)",
                       what, a1 ? a1 : "", c->host[slot], slot, st,
                       st == 255 ? ": ssh could not connect or the host key did not match" : "",
                       log);
    return rc;
}

/* scp local files to host:RD/sub/. */
static grit_err copy_to(const cluster_ctx *c, int slot, char *const files[], const char *sub,
                        int recursive)
{
    char dst[400], log[PATH_MAX + 32], mk[300];
    sfmt(mk, sizeof mk, "%s/%s", c->spec->remote_dir, sub);
    char *mkv[] = {"mkdir", "-p", "-m", "0755", mk, NULL};
    int st;
    ssh_log(c, log, sizeof log);
    grit_err rc = ssh_run(c, slot, mkv, NULL, log, NULL, 20, &st);
    if (rc == GRIT_OK && st != 0)
        rc = grit_errf(GRIT_EIO, "ssh provider: cannot make %s on %s (n%d; exit %d%s; see %s)", mk,
                       c->host[slot], slot, st,
                       st == 255 ? ": ssh could not connect or the host key did not match" : "",
                       log);
    if (rc != GRIT_OK)
        return rc;
    ssh_opts o;
    ssh_opts_make(c, &o, 1);
    if (recursive)
        o.p[o.n++] = "-r";
    for (int i = 0; files[i] && o.n < 36; i++)
        o.p[o.n++] = files[i];
    sfmt(dst, sizeof dst, "%s:%s/", c->host[slot], mk);
    o.p[o.n++] = dst;
    o.p[o.n] = NULL;
    if ((rc = cluster_run(o.p, NULL, log, NULL, 60, &st)) == GRIT_OK && st != 0)
        rc = grit_errf(GRIT_EIO, "ssh provider: scp to %s (n%d) failed (exit %d; see %s)",
                       c->host[slot], slot, st, log);
    return rc;
}

static int worker(const cluster_ctx *c, int slot)
{
    int g = c->slot_group[slot];
    return g >= 0 && c->spec->groups[g].role == CLUSTER_WORKER;
}

static int controller_slot(const cluster_ctx *c)
{
    for (int i = 1; i <= c->nslots; i++)
        if (c->slot_group[i] >= 0 && c->spec->groups[c->slot_group[i]].role == CLUSTER_CONTROLLER)
            return i;
    return 1;
}

/* DIR/slurm/etc/slurm.conf from the slots (durable). */
static grit_err write_conf(const cluster_ctx *c)
{
    const cluster_spec *s = c->spec;
    const char *rd = s->remote_dir;
    int ctl = controller_slot(c);
    static char buf[CLUSTER_MAX_NODES * 400 + 8192];
    size_t len = 0;
#define ADD(...) len += (size_t)snprintf(buf + len, len < sizeof buf ? sizeof buf - len : 0, __VA_ARGS__)
    ADD("# written by grit cluster (ssh provider) for cluster %s\n", s->name);
    ADD("ClusterName=%s\nSlurmctldHost=n%d(%s)\nSlurmctldPort=%d\nSlurmdPort=%d\n", s->name, ctl,
        c->host[ctl], s->port, s->port + 1);
    ADD("SlurmUser=root\nSlurmdUser=root\nAuthType=auth/munge\nCredType=cred/munge\n"
        "AuthInfo=socket=%s/munge/socket,cred_expire=10\n", rd);
    ADD("StateSaveLocation=%s/state\nSlurmdSpoolDir=%s/spool/%%n\nTmpFS=%s/tmp/%%n\n"
        "SlurmctldPidFile=%s/pids/slurmctld.slurm.pid\nSlurmdPidFile=%s/pids/slurmd.%%n.pid\n"
        "SlurmctldLogFile=%s/log/slurmctld.log\nSlurmdLogFile=%s/log/slurmd.%%n.log\n",
        rd, rd, rd, rd, rd, rd, rd);
    ADD("ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType="
        "jobacct_gather/none\nAccountingStorageType=accounting_storage/none\nJobCompType="
        "jobcomp/none\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
        "SchedulerType=sched/backfill\nSchedulerParameters=sched_interval=1,bf_interval=1,permit_job_expansion\n"
        "MpiDefault=none\nReturnToService=2\nJobRequeue=1\nSlurmdTimeout=5\nSlurmctldTimeout=10\n"
        "MessageTimeout=5\nInactiveLimit=0\nKillWait=2\nMinJobAge=300\n");
    for (int i = 1; i <= c->nslots; i++)
        if (worker(c, i))
            ADD("NodeName=n%d NodeAddr=%s CPUs=2 RealMemory=1000 Features=%s State=UNKNOWN\n", i,
                c->host[i], s->groups[c->slot_group[i]].type);
    int first = 1;
    for (int g = 0; g < s->ngroups; g++) {
        if (s->groups[g].role != CLUSTER_WORKER)
            continue;
        char nodes[CLUSTER_MAX_NODES * 8] = "";
        size_t nl = 0;
        for (int i = 1; i <= c->nslots; i++)
            if (c->slot_group[i] == g)
                nl += (size_t)snprintf(nodes + nl, sizeof nodes - nl, "%sn%d", nl ? "," : "", i);
        if (nl) {
            ADD("PartitionName=%s Nodes=%s%s MaxTime=INFINITE State=UP\n", s->groups[g].name,
                nodes, first ? " Default=YES" : "");
            first = 0;
        }
    }
#undef ADD
    if (len >= sizeof buf)
        return grit_errf(GRIT_EINVAL, "ssh provider: slurm.conf of cluster %s too long", s->name);
    char etc[PATH_MAX + 32], conf[PATH_MAX + 48];
    sfmt(etc, sizeof etc, "%s/slurm/etc", c->dir);
    grit_err rc = fs_mkdirs(etc);
    if (rc != GRIT_OK)
        return rc;
    cluster_ctx_slurm_conf(c, conf, sizeof conf);
    return fs_write_durable(conf, buf, len);
}

/* DIR/munge.key: the cluster's munge key, made once. */
static grit_err munge_key(const cluster_ctx *c, char *path, size_t cap)
{
    sfmt(path, cap, "%s/munge.key", c->dir); /* its name on the hosts: RD/munge.key */
    struct stat sb;
    if (stat(path, &sb) == 0 && sb.st_size == 1024)
        return GRIT_OK;
    char key[1024];
    FILE *f = fopen("/dev/urandom", "rb");
    size_t got = f ? fread(key, 1, sizeof key, f) : 0;
    if (f)
        fclose(f);
    if (got != sizeof key)
        return grit_errf(GRIT_EIO, "/dev/urandom: cannot read a munge key");
    grit_err rc = fs_write_durable(path, key, sizeof key);
    if (rc == GRIT_OK && chmod(path, 0600) != 0)
        rc = grit_errf(GRIT_EIO, "%s: %s", path, strerror(errno));
    return rc;
}

/* Slot's host gets cluster-node.sh, slurm.conf and the munge key (one scp into RD;
 * cluster-node.sh moves them into place), then munged runs there. */
static grit_err push(const cluster_ctx *c, int slot)
{
    char node_sh[PATH_MAX + 32], conf[PATH_MAX + 48], key[PATH_MAX + 16];
    char *slash = strrchr(c->script, '/');
    sfmt(node_sh, sizeof node_sh, "%.*s/cluster-node.sh", slash ? (int)(slash - c->script) : 1,
         slash ? c->script : ".");
    cluster_ctx_slurm_conf(c, conf, sizeof conf);
    grit_err rc = munge_key(c, key, sizeof key);
    char *files[] = {node_sh, conf, key, NULL};
    if (rc == GRIT_OK)
        rc = copy_to(c, slot, files, ".", 0);
    if (rc == GRIT_OK)
        rc = node_cmd(c, slot, "munge", NULL, NULL, 30);
    return rc;
}

/* slurm.conf written and pushed with the munge key to every host, then `verb` run on the
 * controller's host (ctld: start it; reconfigure: make it read the new conf). */
static grit_err push_all_then(const cluster_ctx *c, const char *verb)
{
    grit_err rc = write_conf(c);
    int ctl = controller_slot(c);
    for (int i = 1; i <= c->nslots && rc == GRIT_OK; i++)
        if (c->slot_group[i] >= 0)
            rc = push(c, i);
    if (rc == GRIT_OK)
        rc = node_cmd(c, ctl, verb, NULL, NULL, 60);
    return rc;
}

static grit_err ssh_up(const cluster_ctx *c) { return push_all_then(c, "ctld"); }

/* Every host's processes and RemoteDir gone; the controller's host last. */
static grit_err ssh_down(const cluster_ctx *c)
{
    grit_err rc = GRIT_OK;
    int ctl = controller_slot(c);
    for (int i = 1; i <= c->nslots; i++)
        if (i != ctl && c->slot_group[i] >= 0) {
            grit_err r = node_cmd(c, i, "down", NULL, NULL, 60);
            rc = rc == GRIT_OK ? r : rc;
            ssh_master_exit(c, i);
        }
    grit_err r = node_cmd(c, ctl, "down", NULL, NULL, 60);
    ssh_master_exit(c, ctl);
    return rc == GRIT_OK ? r : rc;
}

static grit_err ssh_renew(const cluster_ctx *c, int slot)
{
    char n[16];
    sfmt(n, sizeof n, "n%d", slot);
    grit_err rc = write_conf(c);
    if (rc == GRIT_OK)
        rc = push(c, slot); /* a host that lost its folder gets it again */
    if (rc == GRIT_OK)
        rc = node_cmd(c, slot, "renew", n, NULL, 30);
    return rc;
}

static grit_err ssh_start(const cluster_ctx *c, int slot)
{
    char n[16];
    sfmt(n, sizeof n, "n%d", slot);
    return node_cmd(c, slot, "slurmd", n, NULL, 30);
}

static grit_err ssh_stop(const cluster_ctx *c, int slot)
{
    char n[16];
    sfmt(n, sizeof n, "n%d", slot);
    return node_cmd(c, slot, "stop-node", n, NULL, 30);
}

static grit_err ssh_wait(const cluster_ctx *c, int slot, int seconds)
{
    char n[16], s[16];
    sfmt(n, sizeof n, "n%d", slot);
    sfmt(s, sizeof s, "%d", seconds);
    return node_cmd(c, controller_slot(c), "wait", n, s, seconds + 15);
}

static grit_err ssh_exec(const cluster_ctx *c, int slot, char *const argv[], char *const env[],
                         const char *log, double timeout_s, int *status)
{
    return ssh_run(c, slot, argv, env, log, NULL, timeout_s, status);
}

/* The node's host is handed back: its processes end and its RemoteDir goes (hosts are
 * distinct: the spec refuses a host listed twice). */
static grit_err ssh_remove(const cluster_ctx *c, int slot)
{
    if (need_host(c, slot) != GRIT_OK) {
        grit_errclear();
        return GRIT_OK; /* no host: nothing was made */
    }
    grit_err rc = node_cmd(c, slot, "down", NULL, NULL, 60);
    ssh_master_exit(c, slot);
    return rc;
}

static grit_err ssh_reconfigure(const cluster_ctx *c) { return push_all_then(c, "reconfigure"); }

static void ssh_addr(const cluster_ctx *c, int slot, char *buf, size_t cap)
{
    sfmt(buf, cap, "%s", slot >= 1 && slot <= CLUSTER_MAX_NODES ? c->host[slot] : "");
}

static grit_err ssh_slurm(const cluster_ctx *c, char *const argv[], char **out, double timeout_s,
                          int *status)
{
    char sh[300], *full[64];
    sfmt(sh, sizeof sh, "%s/cluster-node.sh", c->spec->remote_dir);
    int k = 0;
    full[k++] = sh;
    full[k++] = "slurm";
    for (int i = 0; argv[i] && k < 63; i++)
        full[k++] = argv[i];
    full[k] = NULL;
    return ssh_run(c, controller_slot(c), full, NULL, NULL, out, timeout_s, status);
}

static grit_err ssh_stage(const cluster_ctx *c, int slot, const char *dir, const char *name,
                          char *remote, size_t cap)
{
    char sub[128];
    sfmt(sub, sizeof sub, "lifecycle/%s", name);
    char *files[] = {(char *)dir, NULL};
    grit_err rc = copy_to(c, slot, files, sub, 1);
    const char *base = strrchr(dir, '/');
    sfmt(remote, cap, "%s/%s/%s", c->spec->remote_dir, sub, base ? base + 1 : dir);
    return rc;
}

const cluster_provider cluster_provider_ssh = {
    .name = "ssh",
    .up = ssh_up,
    .down = ssh_down,
    .renew = ssh_renew,
    .exec = ssh_exec,
    .start = ssh_start,
    .stop = ssh_stop,
    .wait = ssh_wait,
    .remove = ssh_remove,
    .reconfigure = ssh_reconfigure,
    .addr = ssh_addr,
    .slurm = ssh_slurm,
    .stage = ssh_stage,
};
