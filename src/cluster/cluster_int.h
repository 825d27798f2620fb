/*
 * cluster_int.h - what the files of src/cluster/ that carry out operations share
 * (cluster.c: create, delete, views, node operations; scale.c: update). Not a
 * public interface: names are cluster__*.
 */
#ifndef GRIT_CLUSTER_CLUSTER_INT_H
#define GRIT_CLUSTER_CLUSTER_INT_H

#include "cluster/cluster.h"
#include "cluster/provider.h"
#include "cluster/spec.h"
#include "cluster/state.h"

/* An open cluster: the store, its row, the spec it was made from, the provider. */
typedef struct cl {
    const cluster_opts *o;
    cluster_state *st;
    cluster_row row;
    cluster_spec spec;
    cluster_ctx ctx;
    const cluster_provider *prov;
    int slot_group[CLUSTER_MAX_NODES + 1]; /* slot -> group index */
    int slot_spare[CLUSTER_MAX_NODES + 1];
} cl;

/* Opens cluster name (store, row, stored spec, slots from the store). */
grit_err cluster__open(cl *k, const cluster_opts *o, const char *name);
void cluster__close(cl *k);
double cluster__now(void);
void cluster__say(const cl *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Slurm's state and reason of every slot (sinfo); "" when unknown. */
void cluster__slurm_states(const cl *k, char states[][32], char reasons[][128]);
/* scontrol update NodeName=node State=state [Reason=reason]; its exit status. */
int cluster__scontrol(const cl *k, const char *node, const char *state, const char *reason);
/* Records the node with this status (and message, when not NULL). */
grit_err cluster__put(cl *k, cluster_node *n, const char *status, const char *msg);
/* Pending -> Running | Failure: lifecycle, admission, slurmd; tm (may be NULL) gets the
 * seconds of lifecycle, admission and rejoin. Errors only for store/provider failures. */
grit_err cluster__bring_up(cl *k, cluster_node *n, const char *why, double tm[3]);
/* The admission checks of a worker (admit.c): grit health in the node, then the MPI check
 * with a healthy peer; *ok 0 with why filled when the node must not be admitted. */
grit_err cluster__admission(cl *k, cluster_node *n, int *ok, char *why, size_t cap);
/* Writes the layout file from k's slots (absent slots included). */
grit_err cluster__write_layout(cl *k);
/* The provider's per-slot view (role, ssh host) from k's slots. */
void cluster__slot_hosts(cl *k);
/* Slots from the store's live nodes (when it has any). */
grit_err cluster__slots_from_store(cl *k);

#endif
