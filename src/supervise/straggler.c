/*
 * straggler.c - the straggler decision (the rule and its reasons are in straggler.h).
 *
 * Storage: per rank a ring of STRAGGLER_HISTORY entries indexed by step % HISTORY and
 * tagged with the step, so "has rank r reported step s?" is one lookup. A check walks
 * down from the newest step that every rank has reached, collects the newest `window`
 * steps present in every rank's ring, and judges each node on each of them.
 *
 * Cost of a check: window x (ranks + nodes log nodes + nodes x nodes) at worst, a few
 * microseconds for the sizes grit runs; the supervisor calls it every poll.
 */
#include "supervise/straggler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

grit_err straggler_init(straggler *st, const straggler_cfg *cfg, int nranks, const int *node_of)
{
    if (!(cfg->factor >= 0) || !(cfg->min_gap >= 0) || cfg->window < 1 ||
        cfg->window > STRAGGLER_MAX_WINDOW)
        return grit_errf(GRIT_EINVAL, "straggler: factor >= 0, min gap >= 0 and window in 1..%d "
                         "expected (got %g, %g, %d)", STRAGGLER_MAX_WINDOW, cfg->factor,
                         cfg->min_gap, cfg->window);
    if (nranks < 0 || nranks > STRAGGLER_MAX_RANKS)
        return grit_errf(GRIT_EINVAL, "straggler: %d ranks, 0..%d expected", nranks,
                         STRAGGLER_MAX_RANKS);
    int nnodes = 0, seen[STRAGGLER_MAX_RANKS] = {0};
    for (int r = 0; r < nranks; r++) {
        if (node_of[r] < 0 || node_of[r] >= STRAGGLER_MAX_RANKS)
            return grit_errf(GRIT_EINVAL, "straggler: rank %d on node %d", r, node_of[r]);
        seen[node_of[r]] = 1;
        nnodes = node_of[r] + 1 > nnodes ? node_of[r] + 1 : nnodes;
    }
    for (int n = 0; n < nnodes; n++)
        if (!seen[n])
            return grit_errf(GRIT_EINVAL, "straggler: node %d has no rank", n);
    st->cfg = *cfg;
    st->nranks = nranks;
    st->nnodes = nnodes;
    for (int r = 0; r < nranks; r++) {
        st->node_of[r] = node_of[r];
        st->latest[r] = -1;
        for (int k = 0; k < STRAGGLER_HISTORY; k++)
            st->hist[r][k].step = -1;
    }
    return GRIT_OK;
}

grit_err straggler_record(straggler *st, int rank, long step, double compute)
{
    if (rank < 0 || rank >= st->nranks || step <= 0 || !(compute >= 0) || !isfinite(compute))
        return GRIT_EINVAL;
    if (st->latest[rank] >= 0 && step <= st->latest[rank] - STRAGGLER_HISTORY)
        return GRIT_OK; /* older than anything kept: would evict a newer step */
    straggler_entry *e = &st->hist[rank][step % STRAGGLER_HISTORY];
    e->step = step;
    e->compute = compute;
    if (step > st->latest[rank])
        st->latest[rank] = step;
    return GRIT_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of sorted[0..m-1] without one element equal to x (m >= 2). */
static double median_without(const double *sorted, int m, double x)
{
    int skip = 0;
    while (skip < m - 1 && sorted[skip] != x)
        skip++;
    int n = m - 1;
#define AT(j) sorted[(j) < skip ? (j) : (j) + 1]
    return n % 2 ? AT(n / 2) : 0.5 * (AT(n / 2 - 1) + AT(n / 2));
#undef AT
}

int straggler_check(const straggler *st, straggler_verdict *v)
{
    const straggler_cfg *c = &st->cfg;
    int W = c->window, N = st->nnodes;
    if (c->factor <= 0 || N < 2)
        return 0;
    /* the newest W steps that every rank has reported */
    long top = -1, steps[STRAGGLER_MAX_WINDOW];
    for (int r = 0; r < st->nranks; r++)
        if (r == 0 || st->latest[r] < top)
            top = st->latest[r];
    int nsteps = 0;
    for (long s = top; s > 0 && s > top - STRAGGLER_HISTORY && nsteps < W; s--) {
        int all = 1;
        for (int r = 0; r < st->nranks && all; r++)
            all = st->hist[r][s % STRAGGLER_HISTORY].step == s;
        if (all)
            steps[nsteps++] = s;
    }
    if (nsteps < W)
        return 0;
    /* per node: still slow on every step so far, sums for the verdict */
    int slow[STRAGGLER_MAX_RANKS], rank_newest[STRAGGLER_MAX_RANKS];
    double val[STRAGGLER_MAX_RANKS], sorted[STRAGGLER_MAX_RANKS];
    double sum_val[STRAGGLER_MAX_RANKS], sum_oth[STRAGGLER_MAX_RANKS], min_ratio[STRAGGLER_MAX_RANKS];
    for (int n = 0; n < N; n++) {
        slow[n] = 1;
        sum_val[n] = sum_oth[n] = 0;
        min_ratio[n] = INFINITY;
        val[n] = -1;
    }
    for (int k = 0; k < W; k++) { /* k = 0 is the newest step */
        long s = steps[k];
        for (int n = 0; n < N; n++)
            val[n] = -1;
        for (int r = 0; r < st->nranks; r++) {
            int n = st->node_of[r];
            double x = st->hist[r][s % STRAGGLER_HISTORY].compute;
            if (x > val[n]) {
                val[n] = x;
                if (k == 0)
                    rank_newest[n] = r;
            }
        }
        memcpy(sorted, val, (size_t)N * sizeof *val);
        qsort(sorted, (size_t)N, sizeof *sorted, cmp_double);
        for (int n = 0; n < N; n++) {
            double med = median_without(sorted, N, val[n]);
            if (!(med > 0 && val[n] > c->factor * med && val[n] - med > c->min_gap))
                slow[n] = 0;
            else if (val[n] / med < min_ratio[n])
                min_ratio[n] = val[n] / med;
            sum_val[n] += val[n];
            sum_oth[n] += med;
        }
    }
    int best = -1;
    for (int n = 0; n < N; n++)
        if (slow[n] && (best < 0 || sum_val[n] / sum_oth[n] > sum_val[best] / sum_oth[best]))
            best = n;
    if (best < 0)
        return 0;
    v->node = best;
    v->rank = rank_newest[best];
    v->compute = sum_val[best] / W;
    v->others = sum_oth[best] / W;
    v->ratio = sum_val[best] / sum_oth[best];
    v->min_ratio = min_ratio[best];
    v->first_step = steps[W - 1];
    v->last_step = steps[0];
    return 1;
}

int straggler_describe(const straggler *st, const straggler_verdict *v, const char *node_name,
                       char *buf, size_t cap)
{
    return snprintf(buf, cap,
                    "node %s computes %.3g s vs %.3g s, the median of the others (%.1fx); above "
                    "%.1fx and by more than %.3g s on each of the last %d steps (%ld-%ld)",
                    node_name, v->compute, v->others, v->ratio, st->cfg.factor, st->cfg.min_gap,
                    st->cfg.window, v->first_step, v->last_step);
}
