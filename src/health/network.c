/*
 * network.c - the network check: run by every rank of an MPI job (mpirun -np N
 * grit health), it measures the links between the ranks and names the slow or
 * wrong one. In one process it says "skipped: single process".
 *
 * Two measurements, both collective (every rank runs them in the same order):
 *
 *   1. All-reduce sweep, like nccl-tests' all_reduce_perf: sizes from 8 bytes
 *      to net_max_bytes by factors of 4; per size a few warm-up and timed
 *      iterations, each started after a barrier. time = the slowest rank's
 *      median iteration; algbw = bytes / time; busbw = algbw * 2 (n - 1) / n,
 *      the rate each link must carry in a ring all-reduce, so it compares
 *      across rank counts. Every iteration's numbers are checked on every rank:
 *      rank r contributes (r + 1) * (i % 13 + 1) at element i, small integers
 *      whose float sum is exact, so a wrong element is a wrong all-reduce.
 *
 *   2. Pairwise ping-pong: every pair of ranks, scheduled in rounds by the
 *      circle method (round-robin tournament: n - 1 rounds for even n, n for
 *      odd), so the pairs of one round run at the same time and no rank is in
 *      two pairs at once; a barrier separates rounds. Latency is half the best
 *      round trip of an 8-byte message, bandwidth 2 x net_pair_bytes over the
 *      best round trip of a large one. Best-of-N, not the mean: a machine
 *      shared with other work adds noise to some round trips, while a slow
 *      link slows every one of them.
 *
 * Verdicts (the same on every rank: each judges the all-gathered numbers):
 *   network.allreduce_correct   every rank got the exact sums (else the rank, size, element)
 *   network.allreduce_busbw     busbw at the largest size >= min_busbw_gbps
 *   network.allreduce_latency   time of the smallest size <= max_allreduce_us
 *   network.pair_latency        the slowest pair's latency <= max_pair_us (names the pair)
 *   network.pair_bandwidth      the slowest pair's bandwidth >= min_pair_gbps (names it)
 *   network.pair_relative       no pair worse than the median pair by net_rel_factor
 *   network.slowest_node        no rank whose best pair is worse than the median rank's
 *                               best by net_rel_factor (names the rank and host)
 * "Worse" is the larger of the latency ratio and the bandwidth ratio; latency
 * is held to at least NET_LAT_FLOOR_US as the reference, so sub-microsecond
 * jitter on shared memory is not a ratio of 3.
 * The relative checks need three ranks or more: with two there is one pair and
 * its slow end cannot be told apart, so they skip and the absolute ones decide.
 *
 * Faults (GRIT_HEALTH_FAULT, on rank o->fault_rank, default the last):
 * slow_link sleeps net_delay_us before each message that rank sends and each
 * all-reduce it joins; allreduce_corrupt adds 1 to one element of that rank's
 * all-reduce result, as a bad receive path would.
 *
 * Errors: a peer that dies or hangs makes a comm call fail after the comm
 * deadline (GRIT_DIST_TIMEOUT); the check then records an ERROR result with
 * the message, and does not hang. An operation abandoned at its deadline may
 * still complete later and write into its buffers, so after such an error
 * every buffer the check gave MPI is leaked on purpose, never freed (the
 * process reports and exits soon after). The caller's merge of verdicts runs
 * on another communicator for the same reason.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/progress.h"
#include "comm/comm.h"
#include "health/health.h"

/* Latencies are compared with the median only above this many microseconds:
 * below it, a few hundred nanoseconds of timer and scheduling jitter would be
 * a large ratio (shared-memory latencies here are about 1 us). */
#define NET_LAT_FLOOR_US 10.0

int health_net_rounds(int n)
{
    if (n < 2)
        return 0;
    return n % 2 ? n : n - 1;
}

/* Circle method over m = n rounded up to even: position m - 1 is fixed, the
 * others rotate by one each round; a partner >= n is the bye. */
int health_net_partner(int n, int round, int rank)
{
    if (n < 2 || rank < 0 || rank >= n || round < 0 || round >= health_net_rounds(n))
        return -1;
    int m = n + (n % 2), k = m - 1, p = -1;
    if (rank == m - 1)
        p = round;
    else if (rank == round)
        p = m - 1;
    else
        p = ((2 * round - rank) % k + k) % k;
    return p < n ? p : -1;
}

typedef struct net_run {
    comm *d;
    const health_opts *o;
    int slow;     /* this rank is the slow_link rank */
    int corrupt;  /* this rank is the allreduce_corrupt rank */
} net_run;

static void maybe_delay(const net_run *nr)
{
    if (nr->slow && nr->o->net_delay_us > 0)
        usleep((useconds_t)nr->o->net_delay_us);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    if (n <= 0)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Per-rank record of the sweep: median time per size, first wrong element. */
typedef struct sweep_local {
    double time_us[HEALTH_NET_MAX_SIZES];
    double wrong_elem[HEALTH_NET_MAX_SIZES]; /* -1 when right */
    double got[HEALTH_NET_MAX_SIZES], want[HEALTH_NET_MAX_SIZES];
} sweep_local;

static grit_err allreduce_sweep(net_run *nr, health_net *net, sweep_local *loc)
{
    comm *d = nr->d;
    const health_opts *o = nr->o;
    size_t maxn = o->net_max_bytes / sizeof(float);
    if (maxn < 2)
        maxn = 2;
    float *buf = malloc(maxn * sizeof(float));
    if (!buf)
        return grit_errf(GRIT_ENOMEM, "network: no memory for a %zu-byte all-reduce buffer",
                         maxn * sizeof(float));
    double tri = (double)d->size * (d->size + 1) / 2.0;
    size_t budget = o->mode == HEALTH_DEEP ? (size_t)256 << 20 : (size_t)8 << 20;
    int maxit = o->mode == HEALTH_DEEP ? 100 : 20;
    double times[100];
    grit_err rc = GRIT_OK;
    net->nsizes = 0;
    for (size_t n = 2; net->nsizes < HEALTH_NET_MAX_SIZES; n *= 4) {
        if (n > maxn)
            n = maxn;
        int k = net->nsizes++;
        size_t bytes = n * sizeof(float);
        int iters = (int)(budget / bytes);
        iters = iters < 3 ? 3 : iters > maxit ? maxit : iters;
        loc->wrong_elem[k] = -1;
        for (int it = -2; it < iters; it++) { /* two warm-up iterations */
            for (size_t i = 0; i < n; i++)
                buf[i] = (float)((d->rank + 1) * (int)(i % 13 + 1));
            if ((rc = comm_barrier(d)) != GRIT_OK)
                goto out;
            double t0 = now_seconds();
            maybe_delay(nr);
            if ((rc = comm_allreduce_sum(d, buf, n)) != GRIT_OK)
                goto out;
            double dt = now_seconds() - t0;
            if (it >= 0)
                times[it] = dt * 1e6;
            if (nr->corrupt)
                buf[n / 2] += 1.0f;
            for (size_t i = 0; i < n && loc->wrong_elem[k] < 0; i++) {
                double want = (double)(i % 13 + 1) * tri;
                if ((double)buf[i] != want) {
                    loc->wrong_elem[k] = (double)i;
                    loc->got[k] = buf[i];
                    loc->want[k] = want;
                }
            }
        }
        loc->time_us[k] = median(times, iters);
        net->sizes[k].bytes = bytes;
        if (n == maxn)
            break;
    }
out:
    if (rc == GRIT_OK)
        free(buf); /* else leaked: see "Errors" at the top */
    return rc;
}

/* One ping-pong of bytes with peer (lower rank starts); round trip in s. */
static grit_err ping_pong(net_run *nr, int peer, char *buf, size_t bytes, int tag, double *rtt)
{
    comm *d = nr->d;
    grit_err rc;
    double t0 = now_seconds();
    if (d->rank < peer) {
        maybe_delay(nr);
        if ((rc = comm_send(d, buf, bytes, peer, tag)) != GRIT_OK)
            return rc;
        if ((rc = comm_recv(d, buf, bytes, peer, tag)) != GRIT_OK)
            return rc;
    } else {
        if ((rc = comm_recv(d, buf, bytes, peer, tag)) != GRIT_OK)
            return rc;
        maybe_delay(nr);
        if ((rc = comm_send(d, buf, bytes, peer, tag)) != GRIT_OK)
            return rc;
    }
    *rtt = now_seconds() - t0;
    return GRIT_OK;
}

/* Fills row[2 * peer] (latency us) and row[2 * peer + 1] (GB/s) for every peer
 * this rank measured as the lower rank of the pair; NAN elsewhere. */
static grit_err pairwise(net_run *nr, health_net *net, double *row)
{
    comm *d = nr->d;
    const health_opts *o = nr->o;
    int n = d->size;
    size_t big = o->net_pair_bytes < 8 ? 8 : o->net_pair_bytes;
    int lat_reps = o->mode == HEALTH_DEEP ? 1000 : 100;
    int bw_reps = o->mode == HEALTH_DEEP ? 50 : 20;
    char *buf = calloc(1, big);
    if (!buf)
        return grit_errf(GRIT_ENOMEM, "network: no memory for a %zu-byte ping-pong buffer", big);
    for (int i = 0; i < 2 * n; i++)
        row[i] = NAN;
    net->rounds = health_net_rounds(n);
    net->pair_bytes = big;
    grit_err rc = GRIT_OK;
    for (int r = 0; r < net->rounds; r++) {
        if ((rc = comm_barrier(d)) != GRIT_OK)
            goto out;
        int peer = health_net_partner(n, r, d->rank);
        if (peer < 0)
            continue;
        int tag = 1000 + r;
        double best_lat = INFINITY, best_bw = INFINITY, t;
        for (int i = -3; i < lat_reps; i++) {
            if ((rc = ping_pong(nr, peer, buf, 8, tag, &t)) != GRIT_OK)
                goto out;
            if (i >= 0 && t < best_lat)
                best_lat = t;
        }
        for (int i = -1; i < bw_reps; i++) {
            if ((rc = ping_pong(nr, peer, buf, big, tag, &t)) != GRIT_OK)
                goto out;
            if (i >= 0 && t < best_bw)
                best_bw = t;
        }
        if (d->rank < peer) {
            row[2 * peer] = best_lat / 2 * 1e6;
            row[2 * peer + 1] = 2.0 * (double)big / best_bw / 1e9;
        }
    }
out:
    if (rc == GRIT_OK)
        free(buf); /* else leaked: see "Errors" at the top */
    return rc;
}

static const char *host_of(const health_net *net, int rank)
{
    return net->hosts[rank];
}

static void fmt_bytes(char *b, size_t cap, size_t bytes)
{
    if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
        snprintf(b, cap, "%zu MiB", bytes >> 20);
    else if (bytes >= 1024 && bytes % 1024 == 0)
        snprintf(b, cap, "%zu KiB", bytes >> 10);
    else
        snprintf(b, cap, "%zu B", bytes);
}

/* The verdicts from the all-gathered numbers (identical on every rank). */
static void judge(health_report *r, const health_opts *o, health_net *net,
                  const sweep_local *all)
{
    int n = net->nranks;
    /* Sweep: time per size = the slowest rank's median. */
    int wrong_rank = -1, wrong_k = -1, nwrong = 0;
    for (int k = 0; k < net->nsizes; k++) {
        health_net_size *s = &net->sizes[k];
        s->time_us = 0;
        s->wrong_rank = -1;
        for (int q = 0; q < n; q++) {
            if (all[q].time_us[k] > s->time_us)
                s->time_us = all[q].time_us[k];
            if (all[q].wrong_elem[k] >= 0 && s->wrong_rank < 0)
                s->wrong_rank = q;
        }
        s->algbw_gbps = (double)s->bytes / (s->time_us * 1e-6) / 1e9;
        s->busbw_gbps = s->algbw_gbps * 2.0 * (n - 1) / n;
    }
    for (int q = 0; q < n; q++) {
        int bad = 0;
        for (int k = 0; k < net->nsizes; k++)
            if (all[q].wrong_elem[k] >= 0) {
                bad = 1;
                if (wrong_rank < 0) {
                    wrong_rank = q;
                    wrong_k = k;
                }
            }
        nwrong += bad;
    }
    char sz[32];
    health_result *res = health_add(r, "network.allreduce_correct");
    if (res) {
        health_judge(res, nwrong, HEALTH_CMP_LE, 0, "ranks");
        if (nwrong) {
            fmt_bytes(sz, sizeof sz, net->sizes[wrong_k].bytes);
            health_set(res, HEALTH_FAIL,
                       "all-reduce result wrong on %d rank(s), first rank %d (%s): at %s element "
                       "%.0f is %.9g, expected %.9g",
                       nwrong, wrong_rank, host_of(net, wrong_rank), sz,
                       all[wrong_rank].wrong_elem[wrong_k], all[wrong_rank].got[wrong_k],
                       all[wrong_rank].want[wrong_k]);
        } else {
            snprintf(res->reason, sizeof res->reason,
                     "exact sums on all %d ranks at %d sizes", n, net->nsizes);
        }
    }
    const health_net_size *last = &net->sizes[net->nsizes - 1], *first = &net->sizes[0];
    if ((res = health_add(r, "network.allreduce_busbw"))) {
        health_judge(res, last->busbw_gbps, HEALTH_CMP_GE, o->min_busbw_gbps, "GB/s");
        fmt_bytes(sz, sizeof sz, last->bytes);
        snprintf(res->reason, sizeof res->reason,
                 "%s all-reduce over %d ranks: %.1f us, algbw %.3f GB/s, busbw %.3f GB/s%s", sz, n,
                 last->time_us, last->algbw_gbps, last->busbw_gbps,
                 res->verdict == HEALTH_FAIL ? " (below the floor)" : "");
    }
    if ((res = health_add(r, "network.allreduce_latency"))) {
        health_judge(res, first->time_us, HEALTH_CMP_LE, o->max_allreduce_us, "us");
        snprintf(res->reason, sizeof res->reason, "%zu-byte all-reduce over %d ranks%s",
                 first->bytes, n, res->verdict == HEALTH_FAIL ? ": above the ceiling" : "");
    }
    /* Pairs. */
    const health_net_pair *slow_lat = NULL, *slow_bw = NULL;
    double *lat = malloc(sizeof(double) * (size_t)(net->npairs + n));
    double *bw = malloc(sizeof(double) * (size_t)(net->npairs + n));
    if (!lat || !bw) {
        free(lat);
        free(bw);
        if ((res = health_add(r, "network.pairs")))
            health_set(res, HEALTH_ERROR, "out of memory judging %d pairs", net->npairs);
        return;
    }
    for (int i = 0; i < net->npairs; i++) {
        const health_net_pair *p = &net->pairs[i];
        if (!slow_lat || p->latency_us > slow_lat->latency_us)
            slow_lat = p;
        if (!slow_bw || p->gbps < slow_bw->gbps)
            slow_bw = p;
        lat[i] = p->latency_us;
        bw[i] = p->gbps;
    }
    double med_lat = median(lat, net->npairs), med_bw = median(bw, net->npairs);
    if ((res = health_add(r, "network.pair_latency"))) {
        health_judge(res, slow_lat->latency_us, HEALTH_CMP_LE, o->max_pair_us, "us");
        snprintf(res->reason, sizeof res->reason,
                 "slowest pair %d<->%d (%s<->%s) %.1f us one way; median of %d pairs %.1f us",
                 slow_lat->a, slow_lat->b, host_of(net, slow_lat->a), host_of(net, slow_lat->b),
                 slow_lat->latency_us, net->npairs, med_lat);
    }
    if ((res = health_add(r, "network.pair_bandwidth"))) {
        health_judge(res, slow_bw->gbps, HEALTH_CMP_GE, o->min_pair_gbps, "GB/s");
        fmt_bytes(sz, sizeof sz, net->pair_bytes);
        snprintf(res->reason, sizeof res->reason,
                 "slowest pair %d<->%d (%s<->%s) %.3f GB/s with %s messages; median %.3f GB/s",
                 slow_bw->a, slow_bw->b, host_of(net, slow_bw->a), host_of(net, slow_bw->b),
                 slow_bw->gbps, sz, med_bw);
    }
    health_result *rel = health_add(r, "network.pair_relative");
    health_result *node = health_add(r, "network.slowest_node");
    if (n < 3) {
        if (rel)
            health_set(rel, HEALTH_SKIP, "needs 3 or more ranks (one pair has no median to "
                                         "compare with)");
        if (node)
            health_set(node, HEALTH_SKIP, "needs 3 or more ranks (the slow end of a single "
                                          "pair cannot be told apart)");
        goto out;
    }
    /* Worst pair relative to the median pair: the larger of the latency ratio
     * and the bandwidth ratio. */
    double worst = 0;
    const health_net_pair *wp = NULL;
    for (int i = 0; i < net->npairs; i++) {
        const health_net_pair *p = &net->pairs[i];
        double x = fmax(p->latency_us / fmax(med_lat, NET_LAT_FLOOR_US), med_bw / p->gbps);
        if (!wp || x > worst) {
            worst = x;
            wp = p;
        }
    }
    if (rel) {
        health_judge(rel, worst, HEALTH_CMP_LE, o->net_rel_factor, "x median");
        snprintf(rel->reason, sizeof rel->reason,
                 "worst pair %d<->%d (%s<->%s): %.1f us, %.3f GB/s vs median %.1f us, %.3f GB/s",
                 wp->a, wp->b, host_of(net, wp->a), host_of(net, wp->b), wp->latency_us, wp->gbps,
                 med_lat, med_bw);
    }
    /* A rank whose every pair is slow: its best pair against the median rank's best. */
    double *node_lat = lat + net->npairs, *node_bw = bw + net->npairs;
    for (int q = 0; q < n; q++) {
        node_lat[q] = INFINITY;
        node_bw[q] = 0;
        for (int i = 0; i < net->npairs; i++) {
            const health_net_pair *p = &net->pairs[i];
            if (p->a != q && p->b != q)
                continue;
            node_lat[q] = fmin(node_lat[q], p->latency_us);
            node_bw[q] = fmax(node_bw[q], p->gbps);
        }
    }
    double *tmp = malloc(sizeof(double) * 2 * (size_t)n);
    if (!tmp) {
        if (node)
            health_set(node, HEALTH_ERROR, "out of memory");
        goto out;
    }
    memcpy(tmp, node_lat, sizeof(double) * (size_t)n);
    memcpy(tmp + n, node_bw, sizeof(double) * (size_t)n);
    double mnl = median(tmp, n), mnb = median(tmp + n, n);
    free(tmp);
    int wq = 0;
    double wx = 0;
    for (int q = 0; q < n; q++) {
        double x = fmax(node_lat[q] / fmax(mnl, NET_LAT_FLOOR_US), mnb / node_bw[q]);
        if (x > wx) {
            wx = x;
            wq = q;
        }
    }
    if (node) {
        health_judge(node, wx, HEALTH_CMP_LE, o->net_rel_factor, "x median");
        snprintf(node->reason, sizeof node->reason,
                 "%s rank %d (%s): best pair %.1f us, %.3f GB/s vs the median rank's best "
                 "%.1f us, %.3f GB/s",
                 node->verdict == HEALTH_FAIL ? "slow with every peer:" : "slowest", wq,
                 host_of(net, wq), node_lat[wq], node_bw[wq], mnl, mnb);
    }
out:
    free(lat);
    free(bw);
}

grit_err health_check_network(health_report *r, const health_opts *o)
{
    comm *d = o->comm;
    if (!d || d->size < 2) {
        health_result *res = health_add(r, "network.allreduce");
        if (res)
            health_set(res, HEALTH_SKIP,
                       "skipped: single node (one process; run under mpirun -np N to measure "
                       "all-reduce and pairwise bandwidth between ranks)");
        return GRIT_OK;
    }
    int n = d->size;
    net_run nr = {d, o, 0, 0};
    int fr = o->fault_rank >= 0 ? o->fault_rank : n - 1;
    nr.slow = health_fault_on(o, HF_SLOW_LINK) && d->rank == fr;
    nr.corrupt = health_fault_on(o, HF_ALLREDUCE_CORRUPT) && d->rank == fr;
    health_net *net = calloc(1, sizeof *net);
    sweep_local *all = calloc((size_t)n, sizeof *all);
    sweep_local *loc = calloc(1, sizeof *loc);
    double *row = malloc(sizeof(double) * 2 * (size_t)n);
    double *rows = malloc(sizeof(double) * 2 * (size_t)n * (size_t)n);
    char *host = calloc(1, 64);
    grit_err rc = GRIT_OK;
    int inflight = 0; /* MPI may still own the buffers (see "Errors") */
    if (net) {
        net->hosts = calloc((size_t)n, sizeof *net->hosts);
        net->pairs = calloc((size_t)n * (size_t)(n - 1) / 2, sizeof *net->pairs);
    }
    if (!net || !all || !loc || !row || !rows || !host || !net->hosts || !net->pairs) {
        /* Cannot take part: peers will time out in their collectives. */
        rc = grit_errf(GRIT_ENOMEM, "network: out of memory for %d ranks", n);
        goto fail;
    }
    net->nranks = n;
    inflight = 1;
    snprintf(host, 64, "%s", r->host);
    if ((rc = comm_allgather_bytes(d, host, net->hosts, 64)) != GRIT_OK)
        goto fail;
    if ((rc = allreduce_sweep(&nr, net, loc)) != GRIT_OK)
        goto fail;
    /* sweep_local is all doubles: gather it as such. */
    if ((rc = comm_allgather_f64(d, (const double *)loc, (double *)all,
                                 sizeof *loc / sizeof(double))) != GRIT_OK)
        goto fail;
    if ((rc = pairwise(&nr, net, row)) != GRIT_OK)
        goto fail;
    if ((rc = comm_allgather_f64(d, row, rows, 2 * (size_t)n)) != GRIT_OK)
        goto fail;
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) {
            health_net_pair *p = &net->pairs[net->npairs++];
            p->a = a;
            p->b = b;
            p->latency_us = rows[(size_t)a * 2 * n + 2 * b];
            p->gbps = rows[(size_t)a * 2 * n + 2 * b + 1];
        }
    inflight = 0;
    judge(r, o, net, all);
    health_report_free(r); /* a previous run's net, if any */
    r->net = net;
    net = NULL;
    goto out;
fail: {
    health_result *res = health_add(r, "network.allreduce");
    if (res)
        health_set(res, HEALTH_ERROR, "network check could not run on rank %d: %s", d->rank,
                   grit_errmsg());
    rc = GRIT_OK; /* recorded as a result */
    if (inflight)
        return rc; /* leaked on purpose (see "Errors") */
}
out:
    if (net) {
        free(net->hosts);
        free(net->pairs);
        free(net);
    }
    free(all);
    free(loc);
    free(row);
    free(rows);
    free(host);
    return rc;
}
