/*
 * grid.h - the process grid: world = TP x PP x DP ranks, one communicator per group.
 *
 * Rank order is Megatron's: tensor-parallel index fastest, then data-parallel,
 * then pipeline stage:
 *
 *     world rank = tp + TP * (dp + DP * pp)
 *
 * so the TP ranks of one group are consecutive world ranks, and with ranks
 * placed on nodes in blocks (mpirun's default, grit launch's GRIT_RANKS_PER_NODE)
 * a TP group stays inside one node whenever TP divides the ranks per node: its
 * all-reduces, one per layer and direction, are the most frequent and never
 * cross the network. DP groups (one gradient all-reduce per step) come next;
 * PP neighbours (point-to-point activations) are furthest apart.
 *
 * comm_grid_init splits the world into the three kinds of group; each member
 * is an ordinary comm (comm.h), so every collective and its deadline work on
 * it unchanged. A group of one is a size-1 handle whose collectives are local.
 * The mapping functions are pure (no MPI) and unit tested.
 */
#ifndef GRIT_COMM_GRID_H
#define GRIT_COMM_GRID_H

#include "comm/comm.h"

typedef struct comm_grid {
    int tp, pp, dp;                /* group sizes: world = tp * pp * dp */
    int tp_rank, pp_rank, dp_rank; /* this rank's coordinates */
    comm tpc, dpc, ppc;            /* this rank's groups (owned; comm_grid_free) */
} comm_grid;

/* World rank of coordinates (t, d, p) in a tp x dp x pp grid (order above). */
int comm_grid_rank(int tp, int dp, int t, int d, int p);
/* Coordinates of a world rank. */
void comm_grid_coords(int rank, int tp, int dp, int *t, int *d, int *p);
/* GRIT_ECONFIG unless every size is >= 1 and world == tp * pp * dp; the message
 * names the four numbers. */
grit_err comm_grid_check(int world, int tp, int pp, int dp);

/* Checks the sizes against world->size and splits it (collective over world,
 * blocking: call at start-up). On error nothing is left to free. */
grit_err comm_grid_init(comm_grid *g, const comm *world, int tp, int pp, int dp);
/* Releases the group handles (before comm_finalize); NULL-safe, idempotent. */
void comm_grid_free(comm_grid *g);

#endif
