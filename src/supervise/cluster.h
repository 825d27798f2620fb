/*
 * cluster.h - the job's node slots and their states, persisted as cluster.json.
 *
 * Slots are named node0..node{N+K-1}; the first N start active, the rest as
 * spares. A slot that fails diagnosis is cordoned with a reason and a spare
 * takes its place. The file is rewritten durably on every change, so a
 * restarted supervisor carries on with the same cluster.
 *
 * Size: the slots are allocated when the cluster is opened, as many as it has (up to
 * CLUSTER_SLOTS_MAX, a sanity bound: more is refused at open, naming the limit).
 * Ownership: a cluster is filled by cluster_open/cluster_open_hosts (which overwrite
 * *c: free an opened one first) and released by cluster_free.
 */
#ifndef GRIT_SUPERVISE_CLUSTER_H
#define GRIT_SUPERVISE_CLUSTER_H

#include <stddef.h>

#include "core/error.h"

#define CLUSTER_SLOTS_MAX 100000

typedef enum node_state { NODE_ACTIVE, NODE_SPARE, NODE_CORDONED } node_state;

typedef struct node_slot {
    char name[32];
    node_state state;
    char reason[160];
    int position; /* index among the active nodes (its ranks), -1 when not active */
} node_slot;

typedef struct cluster {
    node_slot *n; /* [count] */
    int count;
    char path[1100];
} cluster;

/* Loads path if it exists (a restarted supervisor), else creates N active + K spares. */
grit_err cluster_open(cluster *c, const char *path, int nodes, int spares);
/* Slots named after hosts (a Slurm allocation): loads path when it holds exactly these
 * names (a restarted supervisor in the same allocation), else starts afresh with the
 * first n - spares hosts active and the rest spares. */
grit_err cluster_open_hosts(cluster *c, const char *path, char hosts[][32], int n, int spares);
/* Releases the slots; a zeroed or freed cluster is a no-op. */
void cluster_free(cluster *c);
grit_err cluster_save(const cluster *c);
int cluster_active(const cluster *c);
int cluster_spares(const cluster *c);
/* The active node at position p, or NULL. */
const node_slot *cluster_at(const cluster *c, int position);
node_slot *cluster_find(cluster *c, const char *name);
/* Cordons name and moves a spare into its position; returns the spare's name
 * (static storage in c) or NULL when none is left (the position is dropped). */
const char *cluster_replace(cluster *c, const char *name, const char *reason);
/* A slot for name as a spare: a new slot at the end (the table grows; CLUSTER_SLOTS_MAX
 * still bounds it), or a cordoned slot of that name made a spare again (its reason
 * cleared). GRIT_EINVAL when name is active or a spare already, or past the bound;
 * GRIT_ENOMEM. Not saved: the caller saves. Pointers into c->n are invalid after. */
grit_err cluster_add_spare(cluster *c, const char *name);

/* The active node at the highest position becomes a spare (a shrink to whole replicas
 * leaves it out of the job, healthy). Returns its name, NULL when none is active. */
const char *cluster_park_last(cluster *c);
/* Comma list of active node names by position. */
void cluster_names(const cluster *c, char *buf, size_t cap);
const char *node_state_name(node_state s);

#endif
