/* grid.c - the TP x PP x DP process grid (see grid.h). */
#include "comm/grid.h"

#include <string.h>

int comm_grid_rank(int tp, int dp, int t, int d, int p) { return t + tp * (d + dp * p); }

void comm_grid_coords(int rank, int tp, int dp, int *t, int *d, int *p)
{
    *t = rank % tp;
    *d = rank / tp % dp;
    *p = rank / (tp * dp);
}

grit_err comm_grid_check(int world, int tp, int pp, int dp)
{
    if (tp < 1 || pp < 1 || dp < 1)
        return grit_errf(GRIT_ECONFIG, "parallel: tensor %d, pipeline %d and data %d must each "
                                       "be at least 1", tp, pp, dp);
    if ((long)tp * pp * dp != world)
        return grit_errf(GRIT_ECONFIG, "parallel: tensor %d x pipeline %d x data %d = %ld ranks, "
                                       "but the world has %d", tp, pp, dp, (long)tp * pp * dp,
                         world);
    return GRIT_OK;
}

grit_err comm_grid_init(comm_grid *g, const comm *world, int tp, int pp, int dp)
{
    memset(g, 0, sizeof *g);
    grit_err rc = comm_grid_check(world->size, tp, pp, dp);
    if (rc != GRIT_OK)
        return rc;
    g->tp = tp;
    g->pp = pp;
    g->dp = dp;
    comm_grid_coords(world->rank, tp, dp, &g->tp_rank, &g->dp_rank, &g->pp_rank);
    /* colour = the coordinates the group shares; key = the coordinate that varies */
    int t = g->tp_rank, d = g->dp_rank, p = g->pp_rank;
    if ((rc = comm_split(world, d + dp * p, t, &g->tpc)) != GRIT_OK)
        goto fail;
    if ((rc = comm_split(world, t + tp * p, d, &g->dpc)) != GRIT_OK)
        goto fail;
    if ((rc = comm_split(world, t + tp * d, p, &g->ppc)) != GRIT_OK)
        goto fail;
    if (world->mpi && (g->tpc.size != tp || g->dpc.size != dp || g->ppc.size != pp ||
                       g->tpc.rank != t || g->dpc.rank != d || g->ppc.rank != p)) {
        rc = grit_errf(GRIT_EIO, "rank %d: group split gave sizes %d/%d/%d, expected %d/%d/%d",
                       world->rank, g->tpc.size, g->dpc.size, g->ppc.size, tp, dp, pp);
        goto fail;
    }
    if (!world->mpi) { /* a world of one: each group is that one rank */
        g->tpc.rank = g->dpc.rank = g->ppc.rank = 0;
        g->tpc.size = g->dpc.size = g->ppc.size = 1;
    }
    return GRIT_OK;
fail:
    comm_grid_free(g);
    return rc;
}

void comm_grid_free(comm_grid *g)
{
    if (!g)
        return;
    comm_dup_free(&g->tpc);
    comm_dup_free(&g->dpc);
    comm_dup_free(&g->ppc);
}
