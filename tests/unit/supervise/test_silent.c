/* test_silent.c - the silent-slowdown detector (src/supervise/silent.h) on synthetic
 * series with jitter: a throttled node (utilisation) and a slow link (network) are
 * flagged on exactly the window-th tick after the fault and named with their signal,
 * one noisy tick inside the window forgiven, none at its ends;
 * healthy noisy runs, a dip shorter than the window, a host-wide load, a checkpoint
 * pause, a node that was always different, a low signal that costs no step time and an
 * idle network flag nobody; bad configurations are refused with the field named.
 * GPUs (gpu_util= and sm_clock= per node): a node whose GPUs sink or throttle is flagged
 * on the GPU signal(s) and named with their values, its CPU time ignored; noisy healthy
 * GPU samples and a checkpoint pause flag nobody; a mixed job judges its GPU nodes on
 * their GPUs and its CPU-only nodes on CPU time against each other. */
#include <stdio.h>
#include <string.h>

#include "../check.h"
#include "supervise/silent.h"

#define NODES 3
#define RPN 2
#define WARM 10
#define WIN 5

static silent st;
static unsigned lcg = 12345;

static double jitter(double x, double rel) /* x times 1 +- rel, deterministic */
{
    lcg = lcg * 1103515245u + 12345u;
    double u = (double)((lcg >> 8) & 0xffff) / 65535.0;
    return x * (1.0 + rel * (2.0 * u - 1.0));
}

static void init(double uf, double nf)
{
    silent_cfg c = {.util_factor = uf, .net_factor = nf, .window = WIN, .warmup = WARM,
                    .min_rate = 1e5, .step_slow = 1.2};
    int node_of[NODES * RPN];
    for (int r = 0; r < NODES * RPN; r++)
        node_of[r] = r / RPN;
    CHECK_INT(silent_init(&st, &c, NODES * RPN, node_of), GRIT_OK);
}

/* One tick: every rank beats util[node] (NAN: none) and step (NAN: no step finished),
 * the node's first rank net[node]; then the tick. */
static void tick(const double *util, double step, const double *net)
{
    for (int r = 0; r < NODES * RPN; r++) {
        int n = r / RPN;
        silent_record(&st, r, isfinite(util[n]) ? jitter(util[n], 0.1) : NAN,
                      isfinite(step) ? jitter(step, 0.1) : NAN, 0.0,
                      r % RPN == 0 && net ? jitter(net[n], 0.1) : NAN);
    }
    silent_tick(&st);
}

static const double healthy_u[NODES] = {1.0, 1.0, 1.0}, healthy_n[NODES] = {5e7, 5e7, 5e7};

static void warmup(void)
{
    for (int t = 0; t < WARM; t++)
        tick(healthy_u, 0.1, healthy_n);
}

/* The first tick (1-based after the fault) on which a verdict comes, 0 if none. */
static int run_fault(const double *u, double step, const double *net, int ticks, silent_verdict *v)
{
    for (int t = 1; t <= ticks; t++) {
        tick(u, step, net);
        if (silent_check(&st, v))
            return t;
    }
    return 0;
}

static void test_throttled_cpu(void)
{
    init(0.6, 0.5);
    warmup();
    silent_verdict v;
    CHECK_INT(silent_check(&st, &v), 0);
    double u[NODES] = {1.0, 0.4, 1.0}; /* cpu.max at 40% of a core */
    CHECK_INT(run_fault(u, 0.25, healthy_n, 30, &v), WIN);
    CHECK_INT(v.node, 1);
    CHECK_INT(v.signal, SILENT_UTIL);
    CHECK_NEAR(v.value, 0.4, 0.05);
    CHECK_NEAR(v.others, 1.0, 0.1);
    CHECK(v.step > 2 * v.step_base);
    char d[300];
    silent_describe(&v, "node1", d, sizeof d);
    CHECK_STR_HAS(d, "node node1 utilisation 0.");
    CHECK_STR_HAS(d, "on each of the last 5 ticks");
}

/* A throttled node whose samples are noisy (silent.h rule 3): one tick inside the window
 * that is not low does not hide it; a window that starts or ends on such a tick, or holds
 * two of them, is not judged low. series: node1's value per tick after the fault (others
 * at 1.0), 0.9 being not low (> 0.6 x 1.0); want: the tick of the first verdict. */
static int noisy_run(const double *series, int nt, silent_verdict *v)
{
    init(0.6, 0.5);
    warmup();
    for (int t = 1; t <= nt; t++) {
        double u[NODES] = {1.0, series[t - 1], 1.0};
        tick(u, 0.25, healthy_n);
        if (silent_check(&st, v))
            return t;
    }
    return 0;
}

static void test_noisy_throttle(void)
{
    silent_verdict v;
    char d[300];
    const double inside[] = {0.4, 0.4, 0.9, 0.4, 0.4, 0.4};
    CHECK_INT(noisy_run(inside, 6, &v), WIN);
    CHECK_INT(v.node, 1);
    CHECK_INT(v.low_ticks, WIN - 1);
    CHECK_NEAR(v.value, (4 * 0.4 + 0.9) / 5, 0.05); /* the mean of all five samples */
    silent_describe(&v, "node1", d, sizeof d);
    CHECK_STR_HAS(d, "on 4 of the last 5 ticks; steps");
    const double two[] = {0.4, 0.9, 0.9, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4};
    CHECK_INT(noisy_run(two, 9, &v), 8); /* the first window past both */
    CHECK_INT(v.low_ticks, WIN);
    silent_describe(&v, "node1", d, sizeof d);
    CHECK_STR_HAS(d, "on each of the last 5 ticks");
    const double newest[] = {0.4, 0.4, 0.4, 0.4, 0.9, 0.4};
    CHECK_INT(noisy_run(newest, 6, &v), 6); /* not on the noisy tick itself */
    CHECK_INT(v.low_ticks, WIN - 1);
    const double oldest[] = {0.9, 0.4, 0.4, 0.4, 0.4};
    CHECK_INT(noisy_run(oldest, 5, &v), 0); /* the window's first tick is not low */
    /* a missing sample inside (two ticks without beats: the first reuses the sample
     * before it, the second is missing) */
    const double gap[] = {0.4, 0.4, NAN, NAN, 0.4, 0.4};
    CHECK_INT(noisy_run(gap, 6, &v), WIN);
    CHECK_INT(v.low_ticks, WIN - 1);
    CHECK_NEAR(v.value, 0.4, 0.05); /* the missing sample is left out of the mean */
    /* a dip of window-1 ticks around one healthy tick flags nobody: both ends must be low */
    const double dip[] = {0.4, 0.4, 0.9, 0.4, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0};
    CHECK_INT(noisy_run(dip, 10, &v), 0);
}

/* Beats out of phase with the ticks: the throttled node's arrive on every other tick
 * only; each empty tick reuses the sample before it, so the window still fills. */
static void test_beats_out_of_phase(void)
{
    init(0.6, 0.5);
    warmup();
    silent_verdict v;
    double u[NODES] = {1.0, 0.4, 1.0}, u_gap[NODES] = {1.0, NAN, 1.0};
    int t = 1, found = 0;
    for (; t <= 30 && !found; t++) {
        tick(t % 2 ? u : u_gap, 0.25, healthy_n);
        found = silent_check(&st, &v);
    }
    CHECK(found);
    CHECK_INT(t - 1, WIN);
    CHECK_INT(v.node, 1);
}

static void test_slow_link(void)
{
    init(0.6, 0.5);
    warmup();
    silent_verdict v;
    double n[NODES] = {5e7, 5e7, 5e6}; /* node2's link at 1/10 */
    CHECK_INT(run_fault(healthy_u, 0.3, n, 30, &v), WIN);
    CHECK_INT(v.node, 2);
    CHECK_INT(v.signal, SILENT_NET);
    CHECK(v.ratio < 0.15);
    char d[300];
    silent_describe(&v, "node2", d, sizeof d);
    CHECK_STR_HAS(d, "node node2 network");
    /* the network detector off: the same series flags nobody */
    init(0.6, 0);
    warmup();
    CHECK_INT(run_fault(healthy_u, 0.3, n, 30, &v), 0);
}

/* Healthy runs: jitter, a dip shorter than the window, a host-wide load, a checkpoint
 * pause, a low signal that costs nothing, an idle network: nobody. */
static void test_no_false_alarm(void)
{
    silent_verdict v;
    for (int run = 0; run < 20; run++) {
        init(0.6, 0.5);
        warmup();
        CHECK_INT(run_fault(healthy_u, 0.1, healthy_n, 60, &v), 0);
    }
    init(0.6, 0.5); /* a dip of window-1 ticks, with slow steps, then healthy again */
    warmup();
    double dip[NODES] = {1.0, 0.2, 1.0};
    CHECK_INT(run_fault(dip, 0.3, healthy_n, WIN - 1, &v), 0);
    CHECK_INT(run_fault(healthy_u, 0.3, healthy_n, 30, &v), 0);
    init(0.6, 0.5); /* every node loaded at once */
    warmup();
    double all[NODES] = {0.4, 0.4, 0.4}, alln[NODES] = {5e6, 5e6, 5e6};
    CHECK_INT(run_fault(all, 0.3, alln, 30, &v), 0);
    init(0.6, 0.5); /* a checkpoint save longer than the window: node0 writing, no steps */
    warmup();
    double save[NODES] = {0.2, 1.0, 1.0}, saven[NODES] = {1e6, 5e7, 5e7};
    for (int k = 0; k < 2 * WIN; k++) {
        tick(save, NAN, saven);
        CHECK_INT(silent_check(&st, &v), 0);
    }
    CHECK_INT(run_fault(healthy_u, 0.1, healthy_n, 30, &v), 0);
    init(0.6, 0.5); /* low utilisation that costs no step time (an input-bound phase) */
    warmup();
    double low[NODES] = {1.0, 0.3, 1.0};
    CHECK_INT(run_fault(low, 0.1, healthy_n, 30, &v), 0);
    init(0.6, 0.5); /* an idle network: one node at 1/10 of nearly nothing */
    warmup();
    double idle[NODES] = {1e4, 1e4, 1e3};
    CHECK_INT(run_fault(healthy_u, 0.3, idle, 30, &v), 0);
    init(0.6, 0.5); /* a node that was always at 0.4 (a smaller machine), then the job slows */
    double always[NODES] = {1.0, 0.4, 1.0};
    for (int t = 0; t < WARM; t++)
        tick(always, 0.1, healthy_n);
    CHECK_INT(run_fault(always, 0.3, healthy_n, 30, &v), 0);
    init(0.6, 0.5); /* a node whose beats stopped (NAN) is the hang detector's, not ours */
    warmup();
    double gone[NODES] = {1.0, NAN, 1.0};
    CHECK_INT(run_fault(gone, 0.3, healthy_n, 30, &v), 0);
}

/* Both detectors off, a single node, and nothing before warmup + window ticks. */
static void test_edges(void)
{
    silent_verdict v;
    init(0, 0);
    warmup();
    double u[NODES] = {1.0, 0.1, 1.0};
    CHECK_INT(run_fault(u, 0.5, healthy_n, 30, &v), 0);
    silent_cfg c = {.util_factor = 0.6, .net_factor = 0.5, .window = 2, .warmup = 2,
                    .min_rate = 0, .step_slow = 1.2};
    int one[2] = {0, 0};
    CHECK_INT(silent_init(&st, &c, 2, one), GRIT_OK);
    for (int t = 0; t < 20; t++) {
        silent_record(&st, 0, 1.0, 0.1 * (t + 1), 0.0, 1e6);
        silent_record(&st, 1, 0.1, 0.1 * (t + 1), 0.0, NAN);
        silent_tick(&st);
        CHECK_INT(silent_check(&st, &v), 0);
    }
}

static void test_bad_config(void)
{
    int node_of[4] = {0, 0, 2, 2}; /* node 1 has no rank */
    silent_cfg good = {.util_factor = 0.6, .net_factor = 0.5, .window = 5, .warmup = 10,
                       .min_rate = 0, .step_slow = 1.2};
    CHECK_INT(silent_init(&st, &good, 4, node_of), GRIT_EINVAL);
    CHECK_STR_HAS(grit_errmsg(), "node 1 has no rank");
    int ok[2] = {0, 1};
    silent_cfg c = good;
    c.window = 0;
    CHECK_INT(silent_init(&st, &c, 2, ok), GRIT_EINVAL);
    CHECK_STR_HAS(grit_errmsg(), "window 0, expected 1..60");
    c = good;
    c.util_factor = 1.5;
    CHECK_INT(silent_init(&st, &c, 2, ok), GRIT_EINVAL);
    CHECK_STR_HAS(grit_errmsg(), "expected < 1");
    c = good;
    c.clock_factor = 1.0;
    CHECK_INT(silent_init(&st, &c, 2, ok), GRIT_EINVAL);
    CHECK_STR_HAS(grit_errmsg(), "(util/net/clock)");
    c = good;
    c.step_slow = 0.5;
    CHECK_INT(silent_init(&st, &c, 2, ok), GRIT_EINVAL);
    CHECK_STR_HAS(grit_errmsg(), "step_slow");
    CHECK_INT(silent_init(&st, &good, 2, ok), GRIT_OK);
    silent_record(&st, 7, 1.0, 1.0, 0.0, 1.0); /* a rank out of range is ignored */
    silent_record(&st, -1, 1.0, 1.0, 0.0, 1.0);
    silent_tick(&st);
}

/* What an idle 2-core host showed (integration.silent_cpu, GRIT_SILENT_TRACE): node1's
 * rank under a CPU quota of 0.34 cores, node0's rank sleeping in the all-reduce while it
 * waits, so node0's raw util sinks too (0.42 vs 0.34: not below 0.6 x the other); and the
 * quota throttles in bursts, 10 steps of 70 ms among 65 of 4.5 ms each second, so the
 * median step barely moves. Per rank util / compute share and the mean step time per
 * tick find node1 on the window-th tick; a job that reports no comm times cannot. */
static void one_rank_tick(int nsteps, int nslow, double util0, double util1, int comm)
{
    for (int i = 0; i < nsteps; i++) {
        double t = i < nslow ? 0.070 : 0.0045, compute = 0.0045;
        silent_record(&st, 0, i == 0 ? util0 : NAN, t, comm ? t - compute + 0.0003 : NAN, NAN);
        silent_record(&st, 1, i == 0 ? util1 : NAN, t, comm ? 0.0003 : NAN, NAN);
    }
    silent_tick(&st);
}

static void test_waiting_peer_bursty_quota(void)
{
    silent_cfg c = {.util_factor = 0.6, .net_factor = 0, .window = 5, .warmup = 8,
                    .min_rate = 0, .step_slow = 1.2};
    int two[2] = {0, 1};
    silent_verdict v;
    for (int comm = 1; comm >= 0; comm--) {
        CHECK_INT(silent_init(&st, &c, 2, two), GRIT_OK);
        for (int t = 0; t < 8; t++)
            one_rank_tick(200, 0, 0.84, 0.93, comm);
        int found = 0, t = 1;
        for (; t <= 20 && !found; t++) {
            one_rank_tick(75, 10, 0.42, 0.34, comm);
            found = silent_check(&st, &v);
        }
        if (comm) {
            CHECK(found);
            CHECK_INT(t - 1, 5);
            CHECK_INT(v.node, 1);
            CHECK_INT(v.signal, SILENT_UTIL);
            CHECK(v.value < 0.4);
            CHECK(v.others > 1.0); /* the waiting rank: 0.42 cores over a 34% compute share */
            CHECK(v.step > 2 * v.step_base);
        } else {
            CHECK_INT(found, 0);
        }
    }
}

/* --- GPUs ------------------------------------------------------------------------ */

static void ginit(int nodes, int rpn)
{
    silent_cfg c = {.util_factor = 0.6, .net_factor = 0.5, .clock_factor = 0.8, .window = WIN,
                    .warmup = WARM, .min_rate = 1e5, .step_slow = 1.2};
    int node_of[16];
    for (int r = 0; r < nodes * rpn; r++)
        node_of[r] = r / rpn;
    CHECK_INT(silent_init(&st, &c, nodes * rpn, node_of), GRIT_OK);
}

/* One tick of a GPU job on `nodes` nodes of `rpn` ranks: every rank beats cpu[node] and
 * step; the node's first rank also gpu[node] and clk[node] (NAN: no GPU / not sent),
 * jittered by rel and capped at 1 as NVML's shares are. */
static void gtick(int nodes, int rpn, const double *cpu, const double *gpu, const double *clk,
                  double step, double rel)
{
    for (int r = 0; r < nodes * rpn; r++) {
        int n = r / rpn;
        silent_record(&st, r, isfinite(cpu[n]) ? jitter(cpu[n], 0.1) : NAN,
                      isfinite(step) ? jitter(step, 0.1) : NAN, 0.0, NAN);
        if (r % rpn == 0)
            silent_record_gpu(&st, r, isfinite(gpu[n]) ? fmin(1, jitter(gpu[n], rel)) : NAN,
                              isfinite(clk[n]) ? fmin(1, jitter(clk[n], rel / 5)) : NAN);
    }
    silent_tick(&st);
}

static int grun(int nodes, const double *cpu, const double *gpu, const double *clk, double step,
                int ticks, silent_verdict *v)
{
    for (int t = 1; t <= ticks; t++) {
        gtick(nodes, RPN, cpu, gpu, clk, step, 0.05);
        if (silent_check(&st, v))
            return t;
    }
    return 0;
}

static const double g_cpu[NODES] = {0.3, 0.3, 0.3}, g_gpu[NODES] = {0.95, 0.95, 0.95},
                    g_clk[NODES] = {0.99, 0.99, 0.99};

static void gwarmup(void)
{
    for (int t = 0; t < WARM; t++)
        gtick(NODES, RPN, g_cpu, g_gpu, g_clk, 0.1, 0.05);
}

/* node1's GPU runs at 38% busy and 52% of its clock; its CPU time does not move */
static void test_gpu_slow(void)
{
    ginit(NODES, RPN);
    gwarmup();
    silent_verdict v;
    double gpu[NODES] = {0.95, 0.38, 0.95}, clk[NODES] = {0.99, 0.52, 0.99};
    CHECK_INT(grun(NODES, g_cpu, gpu, clk, 0.25, 30, &v), WIN);
    CHECK_INT(v.node, 1);
    CHECK_INT(v.signal, SILENT_GPU); /* 0.4x its peers: the weakest signal named first */
    CHECK(!strcmp(silent_signal_name(v.signal), "utilisation"));
    CHECK_INT(v.fired, (1u << SILENT_GPU) | (1u << SILENT_CLOCK));
    CHECK_NEAR(v.values[SILENT_GPU], 0.38, 0.03);
    CHECK_NEAR(v.values[SILENT_CLOCK], 0.52, 0.02);
    CHECK_NEAR(v.peers[SILENT_CLOCK], 0.99, 0.02);
    char d[300];
    silent_describe(&v, "node1", d, sizeof d);
    CHECK_STR_HAS(d, "node node1 gpu_util 0.3");
    CHECK_STR_HAS(d, "vs peers 0.9");
    CHECK_STR_HAS(d, ", sm_clock 0.5");
    CHECK_STR_HAS(d, " of max vs peers 0.9");
    CHECK_STR_HAS(d, "on each of the last 5 ticks");
    CHECK((size_t)silent_describe(&v, "node1", d, sizeof d) < 200); /* fits the incident */

    /* the slowdown comes in the middle of a tick: that tick got a beat before it and one
     * after; both signals come from the newest beat, so they flip on the same tick and the
     * verdict names both (a mean of the tick's beats would flip the clock a tick early) */
    ginit(NODES, RPN);
    gwarmup();
    silent_record_gpu(&st, RPN, 0.95, 0.99);
    CHECK_INT(grun(NODES, g_cpu, gpu, clk, 0.25, 30, &v), WIN);
    CHECK_INT(v.fired, (1u << SILENT_GPU) | (1u << SILENT_CLOCK));

    /* a throttling GPU that stays busy: the clock alone, still a utilisation incident */
    ginit(NODES, RPN);
    gwarmup();
    double busy[NODES] = {0.95, 0.95, 0.95}, thr[NODES] = {0.99, 0.99, 0.6};
    CHECK_INT(grun(NODES, g_cpu, busy, thr, 0.2, 30, &v), WIN);
    CHECK_INT(v.node, 2);
    CHECK_INT(v.signal, SILENT_CLOCK);
    CHECK_INT(v.fired, 1u << SILENT_CLOCK);
    silent_describe(&v, "node2", d, sizeof d);
    CHECK_STR_HAS(d, "node node2 sm_clock 0.6");
    CHECK(!strstr(d, "gpu_util"));

    /* GPU nodes are judged on their GPUs, not their CPU time: node1's host threads idle
     * (its GPUs busy) is no incident, however slow the job */
    ginit(NODES, RPN);
    gwarmup();
    double cpu[NODES] = {0.3, 0.05, 0.3};
    CHECK_INT(grun(NODES, cpu, g_gpu, g_clk, 0.3, 30, &v), 0);
    /* the clock factor off: the throttle alone is not judged */
    silent_cfg c = {.util_factor = 0.6, .net_factor = 0.5, .clock_factor = 0, .window = WIN,
                    .warmup = WARM, .min_rate = 1e5, .step_slow = 1.2};
    int node_of[NODES * RPN];
    for (int r = 0; r < NODES * RPN; r++)
        node_of[r] = r / RPN;
    CHECK_INT(silent_init(&st, &c, NODES * RPN, node_of), GRIT_OK);
    gwarmup();
    CHECK_INT(grun(NODES, g_cpu, busy, thr, 0.2, 30, &v), 0);
}

/* Healthy GPUs are noisy: +-30% per sample, and single-tick dips to 20% (a data loader
 * stall) on any node; a checkpoint save (every GPU idle, no steps, longer than the
 * window); clocks that boost and sag by 10% together: nobody. */
static void test_gpu_no_false_alarm(void)
{
    silent_verdict v;
    for (int run = 0; run < 20; run++) {
        ginit(NODES, RPN);
        gwarmup();
        for (int t = 0; t < 60; t++) {
            double gpu[NODES] = {0.8, 0.8, 0.8}, clk[NODES] = {0.95, 0.95, 0.95};
            if (t % 7 == run % 7)
                gpu[(t + run) % NODES] = 0.2; /* one node's dip, one tick */
            double sag = t % 10 < 5 ? 1.0 : 0.9;
            for (int n = 0; n < NODES; n++)
                clk[n] *= sag;
            gtick(NODES, RPN, g_cpu, gpu, clk, t % 7 == run % 7 ? 0.3 : 0.12, 0.3);
            CHECK_INT(silent_check(&st, &v), 0);
        }
    }
    ginit(NODES, RPN); /* a checkpoint save: GPUs idle, no steps; node0 writes longer */
    gwarmup();
    double idle[NODES] = {0.0, 0.05, 0.05}, nan3[NODES] = {NAN, NAN, NAN};
    for (int k = 0; k < 2 * WIN; k++) {
        gtick(NODES, RPN, g_cpu, idle, g_clk, NAN, 0.05);
        CHECK_INT(silent_check(&st, &v), 0);
    }
    CHECK_INT(grun(NODES, g_cpu, g_gpu, g_clk, 0.1, 30, &v), 0);
    /* a node whose GPU sampler stopped answering (NAN) is never low */
    double gone[NODES] = {0.95, NAN, 0.95};
    CHECK_INT(grun(NODES, g_cpu, gone, nan3, 0.3, 30, &v), 0);
}

/* A mixed job on 4 nodes of one rank: nodes 0 and 1 report GPUs, 2 and 3 do not. The
 * GPU nodes' CPU time (0.2 cores, feeding the GPU) is not the CPU nodes' peer (1.0), so
 * nobody is low at baseline; node1's GPU sinking is a gpu_util incident; node3's CPU
 * sinking is a cpu_util incident against node2 alone. */
static void test_gpu_mixed(void)
{
    enum { N = 4 };
    silent_verdict v;
    double cpu[N] = {0.2, 0.2, 1.0, 1.0}, gpu[N] = {0.9, 0.9, NAN, NAN},
           clk[N] = {0.99, 0.99, NAN, NAN};
    ginit(N, 1);
    for (int t = 0; t < WARM; t++)
        gtick(N, 1, cpu, gpu, clk, 0.1, 0.05);
    double gcpu[N] = {0.2, 0.05, 1.0, 1.0}; /* node1's host threads idle, its GPU busy */
    for (int t = 0; t < 30; t++) { /* healthy GPUs, the job slower: nobody */
        gtick(N, 1, gcpu, gpu, clk, 0.25, 0.05);
        CHECK_INT(silent_check(&st, &v), 0);
    }
    ginit(N, 1);
    for (int t = 0; t < WARM; t++)
        gtick(N, 1, cpu, gpu, clk, 0.1, 0.05);
    double gslow[N] = {0.9, 0.3, NAN, NAN};
    int t = 1, found = 0;
    for (; t <= 30 && !found; t++) {
        gtick(N, 1, cpu, gslow, clk, 0.25, 0.05);
        found = silent_check(&st, &v);
    }
    CHECK(found);
    CHECK_INT(t - 1, WIN);
    CHECK_INT(v.node, 1);
    CHECK_INT(v.signal, SILENT_GPU);
    ginit(N, 1);
    for (int k = 0; k < WARM; k++)
        gtick(N, 1, cpu, gpu, clk, 0.1, 0.05);
    double cslow[N] = {0.2, 0.2, 1.0, 0.4};
    found = 0;
    for (t = 1; t <= 30 && !found; t++) {
        gtick(N, 1, cslow, gpu, clk, 0.25, 0.05);
        found = silent_check(&st, &v);
    }
    CHECK(found);
    CHECK_INT(t - 1, WIN);
    CHECK_INT(v.node, 3);
    CHECK_INT(v.signal, SILENT_UTIL);
    CHECK_NEAR(v.others, 1.0, 0.1); /* node2's, not the GPU nodes' 0.2 */
}

int main(void)
{
    test_throttled_cpu();
    test_slow_link();
    test_beats_out_of_phase();
    test_noisy_throttle();
    test_waiting_peer_bursty_quota();
    test_no_false_alarm();
    test_edges();
    test_bad_config();
    test_gpu_slow();
    test_gpu_no_false_alarm();
    test_gpu_mixed();
    silent_free(&st);
    silent_free(&st);
    CHECK_DONE();
}
