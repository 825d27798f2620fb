/*
 * straggler.c - the straggler decision (the rule and its reasons are in straggler.h).
 *
 * Storage: per rank a ring of STRAGGLER_HISTORY entries indexed by step % HISTORY and
 * tagged with the step, so "has rank r reported step s?" is one lookup. A check walks
 * down from the newest step that every rank has reached, collects the newest `window`
 * steps present in every rank's ring, and judges each node on each of them.
 *
 * Cost of a check: window x (ranks + nodes log nodes): the nodes' values are sorted once
 * per step and each node's "median of the others" is read from the sorted array by
 * index (its own value found by binary search). About 0.1 ms at 4,096 ranks on 512
 * nodes; the supervisor calls it every poll.
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
        return grit_errf(GRIT_EINVAL, "straggler: %d ranks, 0..%d expected (STRAGGLER_MAX_RANKS)",
                         nranks, STRAGGLER_MAX_RANKS);
    int nnodes = 0;
    for (int r = 0; r < nranks; r++) {
        if (node_of[r] < 0 || node_of[r] >= nranks)
            return grit_errf(GRIT_EINVAL, "straggler: rank %d on node %d", r, node_of[r]);
        nnodes = node_of[r] + 1 > nnodes ? node_of[r] + 1 : nnodes;
    }
    st->nranks = st->nnodes = 0;
    if (nranks > st->cap_ranks) {
        free(st->node_of), free(st->latest), free(st->hist);
        st->node_of = malloc((size_t)nranks * sizeof *st->node_of);
        st->latest = malloc((size_t)nranks * sizeof *st->latest);
        st->hist = malloc((size_t)nranks * STRAGGLER_HISTORY * sizeof *st->hist);
        st->cap_ranks = st->node_of && st->latest && st->hist ? nranks : 0;
        if (!st->cap_ranks)
            return grit_errf(GRIT_ENOMEM, "straggler: out of memory for %d ranks", nranks);
    }
    if (nnodes > st->cap_nodes || !st->scratch) {
        int cap = nnodes ? nnodes : 1;
        free(st->scratch), free(st->iscratch);
        st->scratch = malloc((size_t)cap * 6 * sizeof *st->scratch);
        st->iscratch = malloc((size_t)cap * 2 * sizeof *st->iscratch);
        st->cap_nodes = st->scratch && st->iscratch ? cap : 0;
        if (!st->cap_nodes)
            return grit_errf(GRIT_ENOMEM, "straggler: out of memory for %d nodes", nnodes);
    }
    int *seen = st->iscratch; /* every node has a rank */
    memset(seen, 0, (size_t)nnodes * sizeof *seen);
    for (int r = 0; r < nranks; r++)
        seen[node_of[r]] = 1;
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
            st->hist[(size_t)r * STRAGGLER_HISTORY + k].step = -1;
    }
    return GRIT_OK;
}

void straggler_free(straggler *st)
{
    free(st->node_of), free(st->latest), free(st->hist), free(st->scratch), free(st->iscratch);
    memset(st, 0, sizeof *st);
}

/* rank r's entry for step s */
#define ENTRY(st, r, s) (&(st)->hist[(size_t)(r) * STRAGGLER_HISTORY + (size_t)((s) % STRAGGLER_HISTORY)])

grit_err straggler_record(straggler *st, int rank, long step, double compute)
{
    if (rank < 0 || rank >= st->nranks || step <= 0 || !(compute >= 0) || !isfinite(compute))
        return GRIT_EINVAL;
    if (st->latest[rank] >= 0 && step <= st->latest[rank] - STRAGGLER_HISTORY)
        return GRIT_OK; /* older than anything kept: would evict a newer step */
    straggler_entry *e = ENTRY(st, rank, step);
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

/* The median of sorted[0..m-1] without one element equal to x (m >= 2): x is found by
 * binary search (any of equal copies will do: removing either leaves the same array). */
static double median_without(const double *sorted, int m, double x)
{
    int lo = 0, hi = m - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (sorted[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    int skip = lo;
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
            all = ENTRY(st, r, s)->step == s;
        if (all)
            steps[nsteps++] = s;
    }
    if (nsteps < W)
        return 0;
    /* per node: still slow on every step so far, sums for the verdict */
    int *slow = st->iscratch, *rank_newest = st->iscratch + N;
    double *val = st->scratch, *sorted = st->scratch + N, *sum_val = st->scratch + 2 * N;
    double *sum_oth = st->scratch + 3 * N, *min_ratio = st->scratch + 4 * N;
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
            double x = ENTRY(st, r, s)->compute;
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
