/*
 * admit.c - the admission checks a new or replaced worker passes before its
 * slurmd starts (invariant 2 of cluster.c):
 *
 *   1. `grit health ARGS` in the node (--health; "" skips every check);
 *   2. the MPI network check: `mpirun -np 2` of `grit health` on a healthy
 *      peer (a Running worker that Slurm has up) and the new node, which
 *      all-reduces across both (exact sums, ping-pong, busbw) - a node whose
 *      network or all-reduce is broken fails here though its own health passes.
 *      mpirun runs on this machine and starts its daemons in the nodes through
 *      the provider's agent (local: slurm-local-cluster.sh node-exec); with no
 *      healthy peer yet (the first worker of a cluster) or a provider without
 *      an agent (ssh) the check is skipped and the log says so.
 *
 * The MPI check's floors are set for correctness and reachability, not speed
 * (a loaded machine must pass): small messages, latency ceilings of 1 s.
 * Output in logs/<NodeId>.health.log and logs/<NodeId>.mpi.log.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster_int.h"
#include "cluster/run.h"

/* snprintf whose truncation is intended (bounded names and paths) */
static void sfmt(char *dst, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void sfmt(char *dst, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, cap, fmt, ap);
    va_end(ap);
}

static void note(const char *log, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(const char *log, const char *fmt, ...)
{
    FILE *f = fopen(log, "a");
    if (!f)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

/* A Running worker other than n whose Slurm state is up and not drained; 0 if none. */
static int healthy_peer(cl *k, const cluster_node *n)
{
    static char states[CLUSTER_MAX_NODES + 1][32];
    cluster__slurm_states(k, states, NULL);
    cluster_node *nodes = NULL;
    int nn = 0, peer = 0;
    if (cluster_state_nodes(k->st, k->row.name, 0, &nodes, &nn) != GRIT_OK) {
        grit_errclear();
        return 0;
    }
    for (int i = 0; i < nn && !peer; i++) {
        const cluster_node *x = &nodes[i];
        int g = x->slot >= 1 && x->slot <= CLUSTER_MAX_NODES ? k->slot_group[x->slot] : -1;
        const char *s = states[x->slot];
        if (x->slot != n->slot && g >= 0 && k->spec.groups[g].role == CLUSTER_WORKER &&
            !strcmp(x->status, "Running") &&
            (!strncmp(s, "idle", 4) || !strncmp(s, "mixed", 5) || !strncmp(s, "allocated", 9)))
            peer = x->slot;
    }
    free(nodes);
    return peer;
}

/* The MPI all-reduce of grit health on peer and n; *ok 0 with why on failure. */
static grit_err mpi_check(cl *k, cluster_node *n, int *ok, char *why, size_t cap)
{
    char log[PATH_MAX + 48], agent[PATH_MAX + 32];
    sfmt(log, sizeof log, "%s/logs/%s.mpi.log", k->row.dir, n->id);
    if (!k->prov->mpi_agent) {
        note(log, "MPI check skipped: the %s provider has no MPI launch agent", k->prov->name);
        return GRIT_OK;
    }
    int peer = healthy_peer(k, n);
    if (!peer) {
        note(log, "MPI check skipped: no healthy worker to pair n%d with yet", n->slot);
        return GRIT_OK;
    }
    grit_err rc = k->prov->mpi_agent(&k->ctx, agent, sizeof agent);
    if (rc != GRIT_OK)
        return rc;
    char hosts[64], net[64], addr[32];
    /* the new node last: it is the rank the check names first when sums differ */
    sfmt(hosts, sizeof hosts, "n%d,n%d", peer, n->slot);
    k->prov->addr(&k->ctx, n->slot, addr, sizeof addr);
    char *dot = strrchr(addr, '.');
    sfmt(net, sizeof net, "%.*s.0/24", dot ? (int)(dot - addr) : 0, addr);
    note(log, "=== MPI check: all-reduce of n%d (peer) and n%d (%s) ===", peer, n->slot, n->id);
    char *argv[] = {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "--host", hosts,
                    "--mca", "plm_rsh_agent", agent, "--mca", "plm_rsh_no_tree_spawn", "1",
                    "--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
                    "--mca", "btl_tcp_if_include", net, "--mca", "oob_tcp_if_include", net,
                    (char *)k->o->grit, "health", "--quick", "--dir", "/tmp",
                    "--mem-max-bytes", "16777216", "--disk-bytes", "1048576", "--need-bytes",
                    "1048576", "--net-max-bytes", "65536", "--net-pair-bytes", "65536",
                    "--min-busbw", "0.0001", "--min-pair-gbps", "0.0001",
                    "--max-allreduce-us", "1000000", "--max-pair-us", "1000000", NULL};
    int st;
    if ((rc = cluster_run(argv, NULL, log, NULL, 180, &st)) != GRIT_OK)
        return rc;
    if (st != 0) {
        *ok = 0;
        sfmt(why, cap, "admission MPI check with n%d failed (mpirun of grit health exit %d; "
                       "see %s)", peer, st, log);
    }
    return GRIT_OK;
}

grit_err cluster__admission(cl *k, cluster_node *n, int *ok, char *why, size_t cap)
{
    *ok = 1;
    if (!k->o->health_args[0])
        return GRIT_OK;
    char log[PATH_MAX + 48], cmd[PATH_MAX + 300];
    sfmt(log, sizeof log, "%s/logs/%s.health.log", k->row.dir, n->id);
    sfmt(cmd, sizeof cmd, "exec \"%s\" health %s", k->o->grit, k->o->health_args);
    char *argv[] = {"sh", "-c", cmd, NULL};
    int st;
    grit_err rc = k->prov->exec(&k->ctx, n->slot, argv, NULL, log, 300, &st);
    if (rc != GRIT_OK)
        return rc;
    if (st != 0) {
        *ok = 0;
        sfmt(why, cap, "admission health check failed (grit health %s exit %d; see %s)",
             k->o->health_args, st, log);
        return GRIT_OK;
    }
    return k->o->mpi_check ? mpi_check(k, n, ok, why, cap) : GRIT_OK;
}
