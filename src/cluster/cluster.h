/*
 * cluster.h - the cluster's lifecycle: create, describe, list and describe
 * nodes, update-software, replace and reboot a node, delete. The operations
 * of `grit cluster`, on the SQLite store (state.h) and a provider (provider.h).
 *
 * Every operation converges: it reads what the store says was done, does the
 * rest, and records each step before moving on, so running it again after a
 * kill finishes the work without duplicating a node or leaking a namespace.
 *
 * A node's life (InstanceStatus):
 *
 *   Pending --lifecycle OnCreate ok--> (admission: grit health in the node, then the
 *           MPI all-reduce with a healthy peer, admit.c)
 *           --ok--> slurmd started, seen by slurmctld --> Running
 *   Pending --script fails | health fails | slurmd not up--> Failure (message, log)
 *   Running --update-software--> SystemUpdating --> Running | Failure
 *   Running|Failure --replace-node--> Terminated (kept for the record)
 *                                     + a new NodeId in the same slot: Pending ...
 *   Running --reboot-node--> SystemUpdating (slurmd restarted) --> Running
 *   any --delete--> gone (ShuttingDown while it happens)
 *
 * Results are JSON in HyperPod's field names (DescribeCluster,
 * ListClusterNodes, DescribeClusterNode), owned by the caller (json_decref).
 */
#ifndef GRIT_CLUSTER_CLUSTER_H
#define GRIT_CLUSTER_CLUSTER_H

#include <jansson.h>
#include <limits.h>
#include <stdio.h>

#include "core/error.h"

typedef struct cluster_opts {
    char state_dir[PATH_MAX];  /* state.db and one folder per cluster */
    char script[PATH_MAX];     /* scripts/slurm-local-cluster.sh */
    char grit[PATH_MAX];       /* the grit binary, run in nodes for admission checks */
    char spank[PATH_MAX];      /* spank_grit.so for the nodes' plugstack.conf ("" = none) */
    char health_args[256];     /* admission: `grit health ARGS` ("" = no admission check) */
    int mpi_check;             /* admission: MPI all-reduce with a healthy peer (after health) */
    int attempts;              /* replace-node: fresh nodes tried before giving up (>= 1) */
    double down_grace;         /* agent: seconds a node may be down before it is replaced */
    char if_node_id[64];       /* replace-node/reboot-node: only while the node is this NodeId */
    FILE *progress;            /* one line per step, or NULL */
} cluster_opts;

/* Creates the cluster of the spec, or finishes a create that was cut short.
 * name_out (64 bytes) receives the cluster's name. */
grit_err cluster_create(const cluster_opts *o, const char *spec_path, char *name_out);
/* Removes every node, process, namespace, link and file of the cluster. */
grit_err cluster_delete(const cluster_opts *o, const char *name);

grit_err cluster_list(const cluster_opts *o, json_t **out);
grit_err cluster_describe(const cluster_opts *o, const char *name, json_t **out);
grit_err cluster_list_nodes(const cluster_opts *o, const char *name, json_t **out);
grit_err cluster_describe_node(const cluster_opts *o, const char *name, const char *node,
                               json_t **out);

/* Group sizes (InstanceCount, WarmSpares) changed to those of spec_path: new nodes
 * created and admitted; removed ones drained, their jobs waited for, then removed. */
grit_err cluster_update(const cluster_opts *o, const char *name, const char *spec_path);
/* Runs every group's OnCreate again on its Running nodes. */
grit_err cluster_update_software(const cluster_opts *o, const char *name);
/* node: a NodeId or a Slurm name (n3). One replace or reboot of a node at a time across
 * processes (the agent, provide-spare, a person): the next waits for the one under way.
 * expect_id (NULL: any): act only while the node is still that NodeId, the one the caller
 * judged; when it has been replaced meanwhile and is Running, there is nothing to do
 * (GRIT_OK, said on progress). */
grit_err cluster_replace_node(const cluster_opts *o, const char *name, const char *node,
                              const char *expect_id);
grit_err cluster_reboot_node(const cluster_opts *o, const char *name, const char *node,
                             const char *expect_id);

#endif
