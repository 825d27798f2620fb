/*
 * agent.h - the cluster's healing agent: watches Slurm and replaces or reboots
 * nodes (see agent.c for the rules). One agent per cluster, its PID in the store.
 */
#ifndef GRIT_CLUSTER_AGENT_H
#define GRIT_CLUSTER_AGENT_H

#include "cluster/cluster.h"
#include "core/error.h"

/* Runs until SIGTERM/SIGINT or until the cluster is deleted. poll_s: seconds between
 * looks; down_grace_s: how long a node may be down (slurmd silent) before it is replaced. */
grit_err cluster_agent_run(const cluster_opts *o, const char *name, double poll_s,
                           double down_grace_s);

/* Starts `grit cluster agent NAME` (o->grit) detached, output appended to log, and
 * records its PID; nothing when this cluster's agent already runs. */
grit_err cluster_agent_start(const cluster_opts *o, const char *name, const char *log);

/* Stops the recorded agent (SIGTERM, then SIGKILL after 10 s) if that PID is still this
 * cluster's agent, and clears the record. */
grit_err cluster_agent_stop(const cluster_opts *o, const char *name);

#endif
