/* cmd_launch.c - `grit launch [options] -- CMD...`: run CMD supervised (src/supervise/sup.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/obs_cli.h"
#include "core/fsutil.h"
#include "core/runlock.h"
#include "core/stopsig.h"
#include "supervise/sup.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: grit launch [options] -- CMD [ARGS...]\n"
            "\n"
            "Runs CMD as N nodes x R ranks with mpirun, watches it (heartbeats, exit, hangs,\n"
            "NaN, stragglers), and on a failure stops it, checks the implicated nodes with\n"
            "grit health, cordons the bad ones, swaps in spares and relaunches; CMD resumes\n"
            "from its newest good checkpoint (grit train does so by itself).\n"
            "\n"
            "options:\n"
            "  --run DIR              run directory: events.jsonl, cluster.json, logs/ (required;\n"
            "                         give grit train the same --run-dir)\n"
            "  --nodes N              active node slots (default 4)\n"
            "  --spares K             spare node slots (default 1)\n"
            "  --ranks-per-node R     MPI ranks per node slot (default 1)\n"
            "  --max-restarts M       give up after M restarts (default 10)\n"
            "  --hang-timeout S       no step progress for S seconds is a hang (default: 10x the\n"
            "                         median step time within [--hang-floor, --hang-cap])\n"
            "  --hang-floor S         (default 30)    --hang-cap S (default 600)\n"
            "  --startup-timeout S    time allowed before the first step (default 120)\n"
            "  --grace S              SIGTERM to SIGKILL when stopping a job (default 3)\n"
            "  --stop-grace S         on SIGTERM/SIGINT to grit launch: seconds the job has to\n"
            "                         stop by itself (grit train saves a checkpoint if one\n"
            "                         fits in S - 2 s) before it is killed (default 25)\n"
            "  --backoff S            first restart delay, doubling per restart (default 0.5)\n"
            "  --straggler-factor F   a node whose compute time (step minus communication) is\n"
            "                         above F x the median of the other nodes on each of the\n"
            "                         last --straggler-window steps that every rank reported,\n"
            "                         and above it by more than --straggler-min-gap, is\n"
            "                         replaced (default 2.5, 0 off); a node is as slow as its\n"
            "                         slowest rank\n"
            "  --straggler-window N   steps, 1..32 (default 5)\n"
            "  --straggler-min-gap S  seconds: a smaller difference is timer and scheduler noise,\n"
            "                         whatever the ratio (default 0.01)\n"
            "  --util-factor F        silent slowdowns (docs/heartbeat.md): a node whose\n"
            "                         utilisation (its GPUs' busy share where it reports\n"
            "                         GPUs, else the CPU cores busy of its ranks, from their\n"
            "                         heartbeats) is below F x the other nodes' median and F x\n"
            "                         its own baseline over the last --signal-window seconds\n"
            "                         (the first, the last and all but one between), while\n"
            "                         the job's steps are --signal-step-slow x\n"
            "                         slower than at its baseline, is replaced (default 0.6,\n"
            "                         0 off; F < 1)\n"
            "  --net-factor F         the same for the node's peak network throughput (bytes/s\n"
            "                         on its interfaces; default 0.5, 0 off)\n"
            "  --clock-factor F       the same for its GPUs' lowest SM clock / maximum clock\n"
            "                         (a throttling GPU; a utilisation incident; default 0.8,\n"
            "                         0 off)\n"
            "  --signal-window S      seconds judged, 1..60 (default 5; a dip must span them)\n"
            "  --signal-warmup S      seconds after each launch that set the baseline, 1..600\n"
            "                         (default 30)\n"
            "  --net-min-rate B       bytes/s: when the other nodes' peak is below B the network\n"
            "                         is idle and judges no link (default 1000000)\n"
            "  --signal-step-slow X   the step-time cross-check, >= 1 (default 1.2)\n"
            "  --spike-z Z            a loss more than Z robust standard deviations above the\n"
            "                         median of the last 32 steps is a spike: roll back, and\n"
            "                         skip the batch if it repeats (default 8, 0 off)\n"
            "  --health-every S       run grit health --quick every S seconds (default 0, off)\n"
            "  --no-spare POLICY      give_up (default), wait (up to --spare-wait S, default 600,\n"
            "                         for a node set back to \"spare\" in cluster.json), or shrink\n"
            "                         (fewer nodes; needs optim.global_batch)\n"
            "  --shrink-unit N        shrink by whole data-parallel replicas of N nodes\n"
            "                         (default: from the job's layout, tensor x pipeline\n"
            "                         ranks / --ranks-per-node; nodes left over wait as spares)\n"
            "  --on-no-spare CMD      when a node must be cordoned and no spare is left, run\n"
            "                         CMD (split at spaces, no shell; environment\n"
            "                         GRIT_FAILED_NODE, GRIT_FAILED_REASON, GRIT_RUN,\n"
            "                         GRIT_CLUSTER_JSON): it prints the new node's name on\n"
            "                         stdout (one line) and exits 0; the node is checked,\n"
            "                         takes the failed node's place and the job resumes. A\n"
            "                         failure, a timeout or anything but a usable name gives\n"
            "                         up with the reason. E.g. \"grit cluster provide-spare\n"
            "                         NAME\" (docs/cluster.md). Only with --no-spare give_up\n"
            "  --on-no-spare-timeout S  seconds CMD may take, then it is killed (default 600)\n"
            "  --strikes K            a node named by K incidents within --strike-window is\n"
            "                         quarantined for the rest of the run: cordoned even when\n"
            "                         its health check passes, never a spare again (default 2;\n"
            "                         0 off; a node's first incident is handled as before)\n"
            "  --strike-window S      seconds (default 3600; 0: the whole run)\n"
            "  --bind ADDR            heartbeat address (IPv4). Default: 127.0.0.1 (loopback\n"
            "                         only); --backend slurm: this machine's address on the\n"
            "                         allocation's network (its Slurm NodeAddr when it is one\n"
            "                         of the job's hosts, else the address its route to them\n"
            "                         leaves from; loopback when every host is this machine).\n"
            "                         0.0.0.0 (every interface) only when given here\n"
            "  --heartbeat-wait S     ranks on other hosts that sent no heartbeat S seconds\n"
            "                         after a launch, or by step 3: a warning on stderr and a\n"
            "                         heartbeats_missing event (default 30, 0 off)\n"
            "  --backend NAME         local (default: mpirun on this machine) or slurm: inside\n"
            "                         an sbatch/salloc allocation, node slots are its hosts\n"
            "                         (--spares K of them kept spare, --nodes ignored), steps\n"
            "                         run with srun --mpi=pmix, suspects are checked with\n"
            "                         srun -w NODE grit health, failed nodes are drained\n"
            "                         (scontrol update State=DRAIN Reason=\"grit: ...\")\n"
"  --health-timeout S     slurm: a node whose grit health does not answer within S\n"
            "                         seconds is unhealthy (default 15)\n"
            "  --srun-arg ARG         slurm: one more srun option for every step (repeatable)\n"
            "  --no-spare requeue     slurm: with no spare left, drain the node and requeue the\n"
            "                         job (scontrol requeue); the batch script runs again on\n"
            "                         healthy nodes and resumes from the checkpoint\n"
            "  --inject SPEC          faults for tests and demos, comma list:\n"
            "                           kill:node=X|rank=R:step=S   hang:rank=R:step=S\n"
            "                           slow:node=X:factor=F        nan:step=S   spike:step=S\n"
            "                           val_spike:step=S            ckpt_crash:phase=P\n"
            "                           health_fail:node=X\n"
            "                           periodic_health_fail (the first --health-every check)\n"
            "                           disk_full:put=N (checkpoint writes fail with ENOSPC from\n"
            "                           the N-th file on, on every later attempt too)\n"
            "                         attempt=K applies a fault to the K-th launch (default 0)\n"
            "%s"
            "  --quiet                no progress lines\n"
            "  -h, --help             this help\n"
            "\n"
            "Exit status: 0 the job finished, 1 the supervisor gave up (reason printed and in\n"
            "events.jsonl), 2 bad usage or the job could not start, 3 the job failed in a way\n"
            "a retry repeats (it sent a \"fatal\" event or exited 3: no restart), 128+signal (143 SIGTERM,\n"
            "130 SIGINT) stopped by a signal after a graceful stop and the summary (a second\n"
            "signal stops at once); rerun the same command to resume.\n"
            "Heartbeat protocol for any program: docs/heartbeat.md.\n",
            obs_cli_help);
}

int cmd_launch(int argc, char **argv)
{
    sup_opts o = {.nodes = 4, .spares = 1, .ranks_per_node = 1, .max_restarts = 10,
                  .hang_floor = 30, .hang_cap = 600, .startup_timeout = 120, .grace = 3,
                  .backoff = 0.5, .stop_grace = 25, .straggler_factor = 2.5, .straggler_window = 5,
                  .straggler_min_gap = 0.01, .util_factor = 0.6, .net_factor = 0.5,
                  .clock_factor = 0.8,
                  .signal_window = 5, .signal_warmup = 30, .net_min_rate = 1e6,
                  .signal_step_slow = 1.2,
                  .spike_z = 8, .health_every = 0, .spare_wait = 600, .no_spare = "give_up",
                  .health_timeout = 15, .on_no_spare_timeout = 600, .strikes = 2,
                  .strike_window = 3600, .heartbeat_wait = 30};
    const char *on_no_spare = NULL;
    obs_cli ob = {0}; /* dashboard, /metrics, cost and CO2 (src/obs) */
    static char *srun_args[64];
    int i, r, nsrun = 0;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        int v = i + 1 < argc;
        if ((r = obs_cli_opt(argc, argv, &i, &ob)) != 0) {
            if (r < 0)
                return 2;
        } else if (!strcmp(a, "--")) {
            i++;
            break;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--quiet"))
            o.quiet = 1;
#define INT_OPT(name, field, lo, hi)                                                     \
    else if (!strcmp(a, name)) {                                                         \
        if (cli_int("launch", name, v ? argv[++i] : NULL, lo, hi, &o.field))             \
            return 2;                                                                    \
    }
#define NUM_OPT(name, field, lo, hi)                                                     \
    else if (!strcmp(a, name)) {                                                         \
        if (cli_num("launch", name, v ? argv[++i] : NULL, lo, hi, &o.field))             \
            return 2;                                                                    \
    }
#define STR_OPT(name, field)                                                             \
    else if (!strcmp(a, name) && v) o.field = argv[++i];
        INT_OPT("--nodes", nodes, 1, 100000)
        INT_OPT("--spares", spares, 0, 100000)
        INT_OPT("--ranks-per-node", ranks_per_node, 1, 4096)
        INT_OPT("--shrink-unit", shrink_unit, 1, 100000)
        INT_OPT("--max-restarts", max_restarts, 0, 1000000)
        INT_OPT("--straggler-window", straggler_window, 1, 32)
        INT_OPT("--signal-window", signal_window, 1, 60)
        INT_OPT("--signal-warmup", signal_warmup, 1, 600)
        INT_OPT("--strikes", strikes, 0, 1000000)
        NUM_OPT("--strike-window", strike_window, 0, 1e9)
        NUM_OPT("--on-no-spare-timeout", on_no_spare_timeout, 1e-3, 1e7)
        NUM_OPT("--hang-timeout", hang_timeout, 0, 1e7)
        NUM_OPT("--hang-floor", hang_floor, 0, 1e7)
        NUM_OPT("--hang-cap", hang_cap, 0, 1e7)
        NUM_OPT("--startup-timeout", startup_timeout, 0, 1e7)
        NUM_OPT("--grace", grace, 0, 1e7)
        NUM_OPT("--stop-grace", stop_grace, 0, 1e7)
        NUM_OPT("--backoff", backoff, 0, 1e7)
        NUM_OPT("--straggler-factor", straggler_factor, 0, 1e6)
        NUM_OPT("--straggler-min-gap", straggler_min_gap, 0, 1e7)
        NUM_OPT("--util-factor", util_factor, 0, 1)
        NUM_OPT("--net-factor", net_factor, 0, 1)
        NUM_OPT("--clock-factor", clock_factor, 0, 1)
        NUM_OPT("--net-min-rate", net_min_rate, 0, 1e15)
        NUM_OPT("--signal-step-slow", signal_step_slow, 1, 1e6)
        NUM_OPT("--spike-z", spike_z, 0, 1e6)
        NUM_OPT("--health-every", health_every, 0, 1e7)
        NUM_OPT("--spare-wait", spare_wait, 0, 1e7)
        NUM_OPT("--health-timeout", health_timeout, 0, 1e7)
        NUM_OPT("--heartbeat-wait", heartbeat_wait, 0, 1e7)
        STR_OPT("--run", run_dir)
        STR_OPT("--inject", inject)
        STR_OPT("--no-spare", no_spare)
        STR_OPT("--bind", bind)
        STR_OPT("--backend", backend)
        else if (!strcmp(a, "--on-no-spare") && v)
            on_no_spare = argv[++i];
        else if (!strcmp(a, "--srun-arg") && v) {
            if (nsrun >= 63) {
                fprintf(stderr, "grit launch: --srun-arg: at most 63 expected\n");
                return 2;
            }
            srun_args[nsrun++] = argv[++i];
        }
#undef INT_OPT
#undef NUM_OPT
#undef STR_OPT
        else {
            fprintf(stderr, "grit launch: unknown option or missing value: '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!o.run_dir || i >= argc) {
        fprintf(stderr, "grit launch: --run DIR and a command after -- are required\n");
        usage(stderr);
        return 2;
    }
    const struct { const char *name; double v; } factors[] = {
        {"--util-factor", o.util_factor}, {"--net-factor", o.net_factor},
        {"--clock-factor", o.clock_factor}};
    for (size_t k = 0; k < sizeof factors / sizeof *factors; k++)
        if (factors[k].v >= 1) { /* the parse allowed [0, 1] */
            fprintf(stderr, "grit launch: %s: expected a number in [0, 1), got %g\n",
                    factors[k].name, factors[k].v);
            return 2;
        }
    int slurm = o.backend && !strcmp(o.backend, "slurm");
    if (o.backend && !slurm && strcmp(o.backend, "local")) {
        fprintf(stderr, "grit launch: --backend '%s': expected local or slurm\n", o.backend);
        return 2;
    }
    if (o.shrink_unit > 0 && o.nodes % o.shrink_unit) {
        fprintf(stderr, "grit launch: --nodes %d is not a multiple of --shrink-unit %d (nodes per "
                        "data-parallel replica)\n", o.nodes, o.shrink_unit);
        return 2;
    }
    if (strcmp(o.no_spare, "give_up") && strcmp(o.no_spare, "wait") &&
        strcmp(o.no_spare, "shrink") && (!slurm || strcmp(o.no_spare, "requeue"))) {
        fprintf(stderr, "grit launch: --no-spare: expected give_up, wait or shrink%s\n",
                slurm ? " or requeue" : " (requeue needs --backend slurm)");
        return 2;
    }
    static char *nsargv[64], nsbuf[4096];
    if (on_no_spare) { /* argv split at spaces: no shell, no quoting */
        int k = 0;
        snprintf(nsbuf, sizeof nsbuf, "%s", on_no_spare);
        char *tok = strtok(nsbuf, " \t");
        for (; tok && k < 63; tok = strtok(NULL, " \t"))
            nsargv[k++] = tok;
        if (!k || strlen(on_no_spare) >= sizeof nsbuf || tok) {
            fprintf(stderr, "grit launch: --on-no-spare '%.80s': expected a command of at most "
                            "63 words and %zu characters\n", on_no_spare, sizeof nsbuf - 1);
            return 2;
        }
        if (strcmp(o.no_spare, "give_up")) {
            fprintf(stderr, "grit launch: --on-no-spare with --no-spare %s: expected give_up "
                            "(the default): the command is the policy\n", o.no_spare);
            return 2;
        }
        nsargv[k] = NULL;
        o.on_no_spare = nsargv;
    }
    if (nsrun && !slurm) {
        fprintf(stderr, "grit launch: --srun-arg needs --backend slurm\n");
        return 2;
    }
    srun_args[nsrun] = NULL;
    o.srun_args = srun_args;
    static char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    o.grit = n > 0 ? self : "grit";
    o.cmd = argv + i;
    /* one supervisor per run directory, taken before anything writes into it */
    runlock lock;
    if (fs_mkdirs(o.run_dir) != GRIT_OK || runlock_take(&lock, o.run_dir, 0.5) != GRIT_OK) {
        fprintf(stderr, "grit launch: %s\n", grit_errmsg());
        return 2;
    }
    o.lock = &lock;
    if (obs_cli_start(&ob, o.run_dir, o.quiet) != 0) {
        runlock_release(&lock);
        return 2;
    }
    stopsig_install(); /* SIGTERM/SIGINT: a graceful stop (src/supervise/sup_stop.c) */
    int rc = sup_run(&o);
    obs_cli_finish(&ob, o.run_dir);
    runlock_release(&lock);
    return rc;
}
