/*
 * state.h - the durable state of grit's clusters: one SQLite database.
 *
 *   clusters    (name, spec text, status, directory, creation time, agent PID)
 *   nodes       (NodeId, cluster, group, slot, spare?, InstanceStatus, message,
 *                launch time, lifecycle exit status and log)
 *   operations  (id, cluster, kind, target, status, start, end, detail): every
 *                action, also the event log with timings that describe shows
 *
 * Every write is its own transaction (synchronous=FULL, so a committed row
 * survives a crash); callers that change several rows together bracket them in
 * cluster_state_begin/commit. Operations are written before the work they
 * describe and ended after it, so a killed `grit cluster` leaves a row with
 * status InProgress that the next run finds and resumes.
 *
 * A node keeps its slot (its Slurm name n<slot>) for life; a replacement is a
 * new NodeId in the same slot, the old row kept as Terminated.
 * Concurrency: the CLI and the agent open the same file; SQLite's locks and a
 * busy timeout order them.
 */
#ifndef GRIT_CLUSTER_STATE_H
#define GRIT_CLUSTER_STATE_H

#include <limits.h>
#include <stdint.h>

#include "core/error.h"

typedef struct cluster_state cluster_state; /* opaque handle (sqlite3 inside) */

typedef struct cluster_row {
    char name[64];
    char status[24];      /* Creating|InService|Updating|Deleting|Failed */
    char dir[PATH_MAX];   /* the cluster's files (Slurm config, logs) */
    char base[PATH_MAX];  /* the spec's folder: relative lifecycle paths resolve here */
    double created;       /* unix seconds */
    int agent_pid;        /* 0: no agent */
} cluster_row;

typedef struct cluster_node {
    char id[24];                 /* NodeId, "i-" + 16 hex digits */
    char group[64];              /* InstanceGroupName */
    int slot;                    /* 1..CLUSTER_MAX_NODES: Slurm node n<slot> */
    int spare;                   /* 1: a warm spare of its group */
    char status[24];             /* Pending|Running|ShuttingDown|Failure|SystemUpdating|Terminated */
    char message[256];           /* why (a failure, an action) */
    double launch_time;          /* unix seconds */
    int lifecycle_rc;            /* exit status of OnCreate; -1: not run yet */
    char lifecycle_log[PATH_MAX];
} cluster_node;

/* Opens (creating if needed) the database at path. */
grit_err cluster_state_open(cluster_state **st, const char *path);
void cluster_state_close(cluster_state *st);

grit_err cluster_state_begin(cluster_state *st);
grit_err cluster_state_commit(cluster_state *st);
void cluster_state_rollback(cluster_state *st);

/* GRIT_ENOTFOUND when there is no such cluster. spec_text may be NULL; else *spec_text
 * is malloc'd for the caller. */
grit_err cluster_state_get(cluster_state *st, const char *name, cluster_row *row, char **spec_text);
/* Inserts a new cluster (GRIT_EINVAL if the name exists). */
grit_err cluster_state_add(cluster_state *st, const cluster_row *row, const char *spec_text);
grit_err cluster_state_set_status(cluster_state *st, const char *name, const char *status);
grit_err cluster_state_set_spec(cluster_state *st, const char *name, const char *spec_text,
                                const char *base);
grit_err cluster_state_set_agent(cluster_state *st, const char *name, int pid);
/* Removes the cluster, its nodes and its operations. */
grit_err cluster_state_remove(cluster_state *st, const char *name);
/* All clusters; *rows malloc'd (free()), *n their number. */
grit_err cluster_state_list(cluster_state *st, cluster_row **rows, int *n);

/* The cluster's nodes by slot; all = 0 leaves out Terminated ones. *rows malloc'd. */
grit_err cluster_state_nodes(cluster_state *st, const char *cluster, int all, cluster_node **rows,
                             int *n);
/* GRIT_ENOTFOUND when no live node has this NodeId or Slurm name (n<slot>). */
grit_err cluster_state_node(cluster_state *st, const char *cluster, const char *id_or_name,
                            cluster_node *node);
/* Inserts or updates the node with node->id. */
grit_err cluster_state_put_node(cluster_state *st, const char *cluster, const cluster_node *node);
/* A fresh NodeId (random). */
void cluster_state_new_id(char id[24]);

/* Operations: begin returns its id; end records status (Succeeded|Failed) and detail. */
grit_err cluster_state_op_begin(cluster_state *st, const char *cluster, const char *kind,
                                const char *target, int64_t *id);
grit_err cluster_state_op_end(cluster_state *st, int64_t id, const char *status,
                              const char *detail);
/* Operations of a cluster as a JSON array text (malloc'd), oldest first, at most the
 * last limit. Fields: Id, Kind, Target, Status, StartTime, EndTime, Seconds, Detail. */
grit_err cluster_state_ops_json(cluster_state *st, const char *cluster, int limit, char **json);

#endif
