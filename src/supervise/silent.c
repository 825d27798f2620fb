/* silent.c - the silent-slowdown detector (see silent.h for the rule). Samples are
 * folded per tick; the baseline is the median of the warmup ticks; the judgement reads
 * the newest `window` ticks. Missing samples (NAN) never make a node low. */
#include "supervise/silent.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a rank that spent 95% of a tick waiting: its util is not stretched more than 20x */
#define SILENT_MIN_SHARE 0.05

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of the finite values among v[0..n-1] (reordered in place); NAN when none. */
static double median_finite(double *v, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i]))
            v[k++] = v[i];
    if (!k)
        return NAN;
    qsort(v, (size_t)k, sizeof *v, cmp_double);
    return k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
}

static double *hist_at(const silent *st, int sig, int node)
{
    return st->hist + ((size_t)sig * (size_t)st->nnodes + (size_t)node) * SILENT_HISTORY;
}

static double *acc_at(const silent *st, int sig, int node)
{
    return st->base_acc + ((size_t)sig * (size_t)st->nnodes + (size_t)node) * (size_t)st->cfg.warmup;
}

void silent_free(silent *st)
{
    if (!st)
        return;
    free(st->node_of), free(st->r_util), free(st->r_nutil), free(st->r_step), free(st->n_net);
    free(st->n_gpu), free(st->n_clk);
    free(st->r_comm), free(st->r_nstep);
    free(st->hist), free(st->base), free(st->base_acc), free(st->base_step_acc);
    free(st->scratch), free(st->last);
    memset(st, 0, sizeof *st);
}

grit_err silent_init(silent *st, const silent_cfg *cfg, int nranks, const int *node_of)
{
    silent_free(st);
    if (!(cfg->window >= 1 && cfg->window <= SILENT_MAX_WINDOW))
        return grit_errf(GRIT_EINVAL, "silent detector: window %d, expected 1..%d", cfg->window,
                         SILENT_MAX_WINDOW);
    if (!(cfg->warmup >= 1 && cfg->warmup <= SILENT_MAX_WARMUP))
        return grit_errf(GRIT_EINVAL, "silent detector: warmup %d ticks, expected 1..%d",
                         cfg->warmup, SILENT_MAX_WARMUP);
    if (!(isfinite(cfg->util_factor) && cfg->util_factor < 1) ||
        !(isfinite(cfg->net_factor) && cfg->net_factor < 1) ||
        !(isfinite(cfg->clock_factor) && cfg->clock_factor < 1))
        return grit_errf(GRIT_EINVAL, "silent detector: factors %g/%g/%g (util/net/clock), "
                         "expected < 1 (<= 0: off)", cfg->util_factor, cfg->net_factor,
                         cfg->clock_factor);
    if (!(cfg->min_rate >= 0) || !(cfg->step_slow >= 1))
        return grit_errf(GRIT_EINVAL, "silent detector: min_rate %g (>= 0) or step_slow %g "
                         "(>= 1) out of range", cfg->min_rate, cfg->step_slow);
    if (nranks < 1 || !node_of)
        return grit_errf(GRIT_EINVAL, "silent detector: %d ranks", nranks);
    int nnodes = 0;
    for (int r = 0; r < nranks; r++) {
        if (node_of[r] < 0 || node_of[r] >= nranks)
            return grit_errf(GRIT_EINVAL, "silent detector: rank %d on node %d, expected 0..%d",
                             r, node_of[r], nranks - 1);
        if (node_of[r] + 1 > nnodes)
            nnodes = node_of[r] + 1;
    }
    st->cfg = *cfg;
    st->nranks = nranks;
    st->nnodes = nnodes;
    size_t per = (size_t)SILENT_NSIGNALS * (size_t)nnodes;
    st->node_of = malloc((size_t)nranks * sizeof *st->node_of);
    st->r_util = calloc((size_t)nranks, sizeof *st->r_util);
    st->r_nutil = calloc((size_t)nranks, sizeof *st->r_nutil);
    st->r_step = calloc((size_t)nranks, sizeof *st->r_step);
    st->r_comm = calloc((size_t)nranks, sizeof *st->r_comm);
    st->r_nstep = calloc((size_t)nranks, sizeof *st->r_nstep);
    st->n_net = malloc((size_t)nnodes * sizeof *st->n_net);
    st->n_gpu = malloc((size_t)nnodes * sizeof *st->n_gpu);
    st->n_clk = malloc((size_t)nnodes * sizeof *st->n_clk);
    st->last = malloc(per * sizeof *st->last);
    st->hist = malloc(per * SILENT_HISTORY * sizeof *st->hist);
    st->base = malloc(per * sizeof *st->base);
    st->base_acc = malloc(per * (size_t)cfg->warmup * sizeof *st->base_acc);
    st->base_step_acc = malloc((size_t)cfg->warmup * sizeof *st->base_step_acc);
    st->scratch = malloc(((size_t)nnodes + (size_t)nranks + (size_t)cfg->warmup) * sizeof *st->scratch);
    if (!st->node_of || !st->r_util || !st->r_nutil || !st->r_step || !st->r_comm ||
        !st->r_nstep || !st->n_net || !st->n_gpu || !st->n_clk || !st->hist ||
        !st->base || !st->base_acc || !st->base_step_acc || !st->scratch || !st->last) {
        silent_free(st);
        return grit_errf(GRIT_ENOMEM, "silent detector: out of memory for %d ranks", nranks);
    }
    memcpy(st->node_of, node_of, (size_t)nranks * sizeof *node_of);
    int *seen = (int *)st->r_nutil; /* zeroed; reset below */
    for (int r = 0; r < nranks; r++)
        seen[node_of[r]] = 1;
    for (int n = 0; n < nnodes; n++)
        if (!seen[n]) {
            grit_err e = grit_errf(GRIT_EINVAL, "silent detector: node %d has no rank", n);
            silent_free(st);
            return e;
        }
    memset(st->r_nutil, 0, (size_t)nranks * sizeof *st->r_nutil);
    for (int n = 0; n < nnodes; n++)
        st->n_net[n] = st->n_gpu[n] = st->n_clk[n] = NAN;
    for (size_t i = 0; i < per * SILENT_HISTORY; i++)
        st->hist[i] = NAN;
    for (size_t i = 0; i < per; i++)
        st->base[i] = st->last[i] = NAN;
    for (int i = 0; i < SILENT_HISTORY; i++)
        st->step_hist[i] = NAN;
    st->step_base = NAN;
    st->ticks = 0;
    return GRIT_OK;
}

void silent_record(silent *st, int rank, double util, double step_time, double comm_time,
                   double net)
{
    if (!st->node_of || rank < 0 || rank >= st->nranks)
        return;
    if (isfinite(util) && util >= 0) {
        st->r_util[rank] += util;
        st->r_nutil[rank]++;
    }
    if (isfinite(step_time) && step_time > 0) {
        st->r_step[rank] += step_time;
        st->r_comm[rank] += isfinite(comm_time) && comm_time > 0 ? fmin(comm_time, step_time) : 0;
        st->r_nstep[rank]++;
    }
    int n = st->node_of[rank];
    if (isfinite(net) && net >= 0)
        st->n_net[n] = isfinite(st->n_net[n]) ? fmax(st->n_net[n], net) : net;
}

void silent_record_gpu(silent *st, int rank, double gpu_util, double sm_clock)
{
    if (!st->node_of || rank < 0 || rank >= st->nranks)
        return;
    /* the newest: every beat repeats the sampler's latest pair, and taking both from the
     * same beat lets a GPU that sinks and throttles at once flip both on the same tick */
    int n = st->node_of[rank];
    if (gpu_util >= 0 && gpu_util <= 1)
        st->n_gpu[n] = gpu_util;
    if (sm_clock > 0 && sm_clock <= 1)
        st->n_clk[n] = sm_clock;
}

void silent_tick(silent *st)
{
    if (!st->node_of)
        return;
    int nn = st->nnodes, w = st->cfg.warmup;
    double *sum = st->scratch, *cnt = st->scratch + nn; /* nn + nranks >= 2 nn */
    for (int n = 0; n < nn; n++)
        sum[n] = cnt[n] = 0;
    for (int r = 0; r < st->nranks; r++)
        if (st->r_nutil[r] > 0) {
            /* the cores it used while computing: waiting in a collective is not work */
            double share = st->r_nstep[r] > 0 ? 1 - st->r_comm[r] / st->r_step[r] : 1;
            sum[st->node_of[r]] += st->r_util[r] / st->r_nutil[r] / fmax(share, SILENT_MIN_SHARE);
            cnt[st->node_of[r]] += 1;
        }
    double val[SILENT_NSIGNALS];
    long t = st->ticks;
    for (int n = 0; n < nn; n++) {
        val[SILENT_UTIL] = cnt[n] > 0 ? sum[n] / cnt[n] : NAN;
        val[SILENT_NET] = st->n_net[n];
        val[SILENT_GPU] = st->n_gpu[n];
        val[SILENT_CLOCK] = st->n_clk[n];
        for (int s = 0; s < SILENT_NSIGNALS; s++) {
            double *prev = &st->last[(size_t)s * (size_t)nn + (size_t)n];
            if (isfinite(val[s])) { /* fresh: remembered for one empty tick */
                *prev = val[s];
            } else { /* no beat this tick: the previous tick's, once */
                val[s] = *prev;
                *prev = NAN;
            }
            if (t < w)
                acc_at(st, s, n)[t] = val[s];
            else
                hist_at(st, s, n)[(t - w) % SILENT_HISTORY] = val[s];
        }
    }
    /* the job's step time this tick: the median of the ranks that finished a step */
    double *tmp = st->scratch;
    for (int r = 0; r < st->nranks; r++)
        tmp[r] = st->r_nstep[r] > 0 ? st->r_step[r] / st->r_nstep[r] : NAN;
    double step = median_finite(tmp, st->nranks);
    if (t < w)
        st->base_step_acc[t] = step;
    else
        st->step_hist[(t - w) % SILENT_HISTORY] = step;
    if (t == w - 1) { /* the warmup is over: learn the baselines */
        for (int s = 0; s < SILENT_NSIGNALS; s++)
            for (int n = 0; n < nn; n++) {
                memcpy(tmp, acc_at(st, s, n), (size_t)w * sizeof *tmp);
                st->base[(size_t)s * (size_t)nn + (size_t)n] = median_finite(tmp, w);
            }
        memcpy(tmp, st->base_step_acc, (size_t)w * sizeof *tmp);
        st->step_base = median_finite(tmp, w);
    }
    for (int r = 0; r < st->nranks; r++) {
        st->r_util[r] = 0;
        st->r_nutil[r] = 0;
        st->r_step[r] = st->r_comm[r] = 0;
        st->r_nstep[r] = 0;
    }
    for (int n = 0; n < nn; n++)
        st->n_net[n] = st->n_gpu[n] = st->n_clk[n] = NAN;
    st->ticks++;
}

int silent_check(const silent *st, silent_verdict *v)
{
    if (!st->node_of || st->nnodes < 2)
        return 0;
    int w = st->cfg.window, nn = st->nnodes;
    long judged = st->ticks - st->cfg.warmup; /* ticks past the warmup */
    if (judged < w || !isfinite(st->step_base))
        return 0;
    double tmp[SILENT_MAX_WINDOW];
    /* steady state and a cost: steps completed, and the job is slower than it was */
    int ns = 0;
    for (int k = 0; k < w; k++) {
        double x = st->step_hist[(judged - 1 - k) % SILENT_HISTORY];
        if (isfinite(x))
            tmp[ns++] = x;
    }
    if (!ns)
        return 0;
    double step = median_finite(tmp, ns);
    if (!(step >= st->cfg.step_slow * st->step_base))
        return 0;
    double *others = st->scratch;
    int found = 0;
    /* a node with a GPU baseline is judged on its GPUs, not on its CPU time (silent.h) */
    const double *gpu_base = st->base + (size_t)SILENT_GPU * (size_t)nn;
    silent_verdict low[SILENT_NSIGNALS]; /* this node's low signals */
    for (int n = 0; n < nn; n++) {
        unsigned fired = 0;
        int best = -1;
        for (int s = 0; s < SILENT_NSIGNALS; s++) {
            double f = s == SILENT_NET     ? st->cfg.net_factor
                     : s == SILENT_CLOCK   ? st->cfg.clock_factor
                                           : st->cfg.util_factor;
            double base = st->base[(size_t)s * (size_t)nn + (size_t)n];
            if (f <= 0 || !isfinite(base) || (s == SILENT_UTIL && isfinite(gpu_base[n])))
                continue;
            double vsum = 0, osum = 0;
            int is_low = 1, misses = 0, nsum = 0;
            for (int k = 0; k < w && is_low; k++) {
                size_t slot = (size_t)((judged - 1 - k) % SILENT_HISTORY);
                double x = hist_at(st, s, n)[slot];
                int no = 0;
                for (int m = 0; m < nn; m++) /* CPU time: compared with CPU-only nodes */
                    if (m != n)
                        others[no++] = s == SILENT_UTIL && isfinite(gpu_base[m])
                                           ? NAN : hist_at(st, s, m)[slot];
                double med = median_finite(others, no);
                int low_here = isfinite(x) && isfinite(med) && x < f * med && x < f * base &&
                               (s != SILENT_NET || med >= st->cfg.min_rate);
                /* rule 3: both ends low, at most SILENT_SPARE_TICKS between them not */
                if (!low_here && (k == 0 || k == w - 1 || ++misses > SILENT_SPARE_TICKS))
                    is_low = 0;
                if (isfinite(x) && isfinite(med)) {
                    vsum += x;
                    osum += med;
                    nsum++;
                }
            }
            if (!is_low || !(osum > 0))
                continue;
            low[s] = (silent_verdict){.node = n, .signal = (silent_signal)s, .value = vsum / nsum,
                                      .others = osum / nsum, .baseline = base,
                                      .ratio = vsum / osum, .step = step,
                                      .step_base = st->step_base, .window = w,
                                      .low_ticks = w - misses};
            fired |= 1u << s;
            if (best < 0 || low[s].ratio < low[best].ratio)
                best = s;
        }
        if (best < 0 || (found && low[best].ratio >= v->ratio))
            continue;
        *v = low[best];
        v->fired = fired;
        for (int s = 0; s < SILENT_NSIGNALS; s++) {
            int f = (fired >> s) & 1u;
            v->values[s] = f ? low[s].value : NAN;
            v->peers[s] = f ? low[s].others : NAN;
            v->bases[s] = f ? low[s].baseline : NAN;
        }
        found = 1;
    }
    return found;
}

void silent_trace(const silent *st, FILE *f)
{
    if (!st->node_of || st->ticks < 1)
        return;
    long t = st->ticks - 1, w = st->cfg.warmup;
    fprintf(f, "silent: tick %ld%s step %.4f s (baseline %.4f)", t, t < w ? " (warmup)" : "",
            t < w ? st->base_step_acc[t] : st->step_hist[(t - w) % SILENT_HISTORY], st->step_base);
    for (int n = 0; n < st->nnodes; n++)
        for (int s = 0; s < SILENT_NSIGNALS; s++) {
            double x = t < w ? acc_at(st, s, n)[t] : hist_at(st, s, n)[(t - w) % SILENT_HISTORY];
            if (s >= SILENT_GPU && !isfinite(x) && !isfinite(st->base[(size_t)s * (size_t)st->nnodes + (size_t)n]))
                continue; /* no GPU on this node */
            fprintf(f, " | n%d %s %.3g (base %.3g)", n, silent_signal_field((silent_signal)s), x,
                    st->base[(size_t)s * (size_t)st->nnodes + (size_t)n]);
        }
    fputc('\n', f);
}

const char *silent_signal_name(silent_signal s)
{
    return s == SILENT_NET ? "network" : s >= 0 && s < SILENT_NSIGNALS ? "utilisation" : "?";
}

const char *silent_signal_field(silent_signal s)
{
    static const char *const names[SILENT_NSIGNALS] = {"cpu_util", "net", "gpu_util", "sm_clock"};
    return s >= 0 && s < SILENT_NSIGNALS ? names[s] : "?";
}

int silent_describe(const silent_verdict *v, const char *node_name, char *buf, size_t cap)
{
    /* how many ticks, and what it cost: the tail every kind of verdict ends with */
    char on[48], tail[128];
    if (v->low_ticks > 0 && v->low_ticks < v->window)
        snprintf(on, sizeof on, "on %d of the last %d ticks", v->low_ticks, v->window);
    else
        snprintf(on, sizeof on, "on each of the last %d ticks", v->window);
    snprintf(tail, sizeof tail, "%s; steps %.3f s vs %.3f s baseline", on, v->step, v->step_base);
    if (v->signal == SILENT_UTIL)
        return snprintf(buf, cap,
                        "node %s utilisation %.2f cores vs %.2f, the others' median (%.2fx; its "
                        "baseline %.2f) %s",
                        node_name, v->value, v->others, v->ratio, v->baseline, tail);
    if (v->signal == SILENT_NET)
        return snprintf(buf, cap,
                        "node %s network %.3g B/s peak vs %.3g, the others' median (%.2fx; its "
                        "baseline %.3g) %s",
                        node_name, v->value, v->others, v->ratio, v->baseline, tail);
    /* the GPU signals: each that fired (values[] holds the primary's too), weakest first */
    size_t n = (size_t)snprintf(buf, cap, "node %s", node_name);
    silent_signal order[2] = {v->signal, v->signal == SILENT_GPU ? SILENT_CLOCK : SILENT_GPU};
    for (int i = 0; i < 2; i++) {
        silent_signal s = order[i];
        if ((v->fired >> s) & 1u && n < cap)
            n += (size_t)snprintf(buf + n, cap - n, "%s %s %.2f%s vs peers %.2f (baseline %.2f)",
                                  i ? "," : "", silent_signal_field(s), v->values[s],
                                  s == SILENT_CLOCK ? " of max" : "", v->peers[s], v->bases[s]);
    }
    if (n < cap)
        n += (size_t)snprintf(buf + n, cap - n, " %s", tail);
    return (int)n;
}
