/*
 * provider.h - where a cluster's nodes come from, behind one interface.
 *
 * A provider makes the network and the controller (up/down), and per node
 * slot: a fresh machine (renew), a command run as root in it (exec: lifecycle
 * scripts, health checks), its Slurm daemon (start/stop) and the wait until
 * slurmctld sees it. Every call is idempotent: up on a running cluster and
 * start on a running node do nothing, down on a removed cluster does nothing,
 * so an operation killed half way is finished by running it again.
 *
 * Implemented: `local` (local.c): each node a network namespace host on a
 * private bridge, through scripts/slurm-local-cluster.sh (the same mechanism
 * as grit's Slurm tests; the layout file maps slots to roles, groups and
 * instance types). `ssh` (ssh.c): each node an existing host listed in the
 * spec, reached with OpenSSH (key, host keys checked); scripts/cluster-node.sh
 * is copied to every host and runs its daemons there.
 */
#ifndef GRIT_CLUSTER_PROVIDER_H
#define GRIT_CLUSTER_PROVIDER_H

#include "cluster/spec.h"
#include "core/error.h"

typedef struct cluster_ctx {
    const cluster_spec *spec;
    char dir[PATH_MAX];     /* the cluster's files: slurm/ (the Slurm directory), logs/ */
    char script[PATH_MAX];  /* scripts/slurm-local-cluster.sh */
    int nslots;             /* node slots 1..nslots */
    char layout[PATH_MAX];  /* the layout file (slot -> role, group, features) */
    char spank[PATH_MAX];   /* spank_grit.so to load in srun/slurmd ("" = none) */
    char grit[PATH_MAX];    /* the grit binary the plugin starts */
    int slot_group[CLUSTER_MAX_NODES + 1]; /* ssh: slot -> group index (-1 absent) */
    char host[CLUSTER_MAX_NODES + 1][64];  /* ssh: slot -> host address ("" none) */
} cluster_ctx;

typedef struct cluster_provider {
    const char *name;
    grit_err (*up)(const cluster_ctx *c);
    grit_err (*down)(const cluster_ctx *c);
    /* a fresh machine in slot (old processes ended, network made again) */
    grit_err (*renew)(const cluster_ctx *c, int slot);
    /* runs argv as root in the node; output appended to log; *status its exit status */
    grit_err (*exec)(const cluster_ctx *c, int slot, char *const argv[], char *const env[],
                     const char *log, double timeout_s, int *status);
    grit_err (*start)(const cluster_ctx *c, int slot);
    grit_err (*stop)(const cluster_ctx *c, int slot);
    grit_err (*wait)(const cluster_ctx *c, int slot, int seconds);
    /* the node in slot gone for good (processes, namespace) */
    grit_err (*remove)(const cluster_ctx *c, int slot);
    /* the layout file and nslots changed: nodes added to or removed from Slurm */
    grit_err (*reconfigure)(const cluster_ctx *c);
    /* the address other nodes reach slot at (buf of cap bytes) */
    void (*addr)(const cluster_ctx *c, int slot, char *buf, size_t cap);
    /* runs a Slurm client (sinfo, scontrol, squeue, srun) where it reaches slurmctld, with
     * the cluster's config; output captured in *out (may be NULL), *status its exit status */
    grit_err (*slurm)(const cluster_ctx *c, char *const argv[], char **out, double timeout_s,
                      int *status);
    /* the local folder dir made available in slot's node (lifecycle scripts, group name):
     * remote gets its path there (local: dir itself; ssh: a copy in RemoteDir) */
    grit_err (*stage)(const cluster_ctx *c, int slot, const char *dir, const char *name,
                      char *remote, size_t cap);
    /* an rsh agent for mpirun (`AGENT nI CMD...` runs CMD in node nI) written in the
     * cluster's folder, its path in path; NULL when the provider has none */
    grit_err (*mpi_agent)(const cluster_ctx *c, char *path, size_t cap);
} cluster_provider;

extern const cluster_provider cluster_provider_local;
extern const cluster_provider cluster_provider_ssh;

/* The Slurm config file of the cluster (for SLURM_CONF). */
void cluster_ctx_slurm_conf(const cluster_ctx *c, char *buf, size_t cap);

#endif
