/* cmd_health.c - `grit health`: node health checks, table or JSON, Slurm drain/resume. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "comm/comm.h"
#include "health/baseline.h"
#include "health/health.h"
#include "health/report.h"
#include "health/slurm.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: grit health [--quick|--deep] [--json] [--baseline FILE] [--slurm] [options]\n"
            "\n"
            "Checks this node: compute known-answer test (sgemm, layernorm, attention, AdamW\n"
            "against double precision; bitwise determinism digest; GEMM throughput vs a\n"
            "baseline), memory patterns and bandwidth, disk (writable, fsync, free space,\n"
            "bandwidth), network (between MPI ranks), GPU via NVML when present, system\n"
            "limits, binaries and clock skew. Exit 0 healthy, 1 unhealthy (reasons listed),\n"
            "2 could not run.\n"
            "\n"
            "Under mpirun (mpirun -np N grit health) every rank checks its node and all ranks\n"
            "measure the network together: an all-reduce sweep (time, algbw, busbw, exact\n"
            "sums) and a ping-pong between every pair of ranks (latency, bandwidth), naming\n"
            "the slowest pair and node. Rank 0 prints the report; every rank exits with the\n"
            "same code.\n"
            "\n"
            "mode and output:\n"
            "  --quick               fast checks, under 10 s (default)\n"
            "  --deep                larger tests; compute timing runs --deep-seconds\n"
            "  --deep-seconds S      seconds of timed GEMM in deep mode (default 20)\n"
            "  --json                machine-readable report on stdout\n"
            "  --slurm               HealthCheckProgram mode: drain this node on failure\n"
            "                        (Reason=\"grit: <check>\"), resume it when healthy again\n"
            "                        if grit drained it (scontrol from $GRIT_SCONTROL or PATH)\n"
            "compute:\n"
            "  --baseline FILE       compare throughput (and digest) with this baseline\n"
            "  --write-baseline FILE record this run's measurements as a baseline\n"
            "  --slow-factor F       flag throughput below baseline / F (default 1.25)\n"
            "  --threads N           compute threads of the known-answer test (default: OpenMP's)\n"
            "  --gemm-threads N      threads of the throughput GEMM (default 1: stable on shared\n"
            "                        cores; 0: all compute threads)\n"
            "  --seed N              seed of the known-answer inputs\n"
            "memory:\n"
            "  --mem-fraction F      fraction of MemAvailable to test (quick 0.01, deep 0.10)\n"
            "  --mem-max-bytes N     cap on the tested size (quick 128 MiB, deep 8 GiB)\n"
            "  --min-mem-gbps F      memory copy bandwidth floor (default 0.5 GB/s)\n"
            "disk:\n"
            "  --dir DIR             checkpoint directory to check (default .)\n"
            "  --need-bytes N        free space required (default 1 GiB)\n"
            "  --ckpt-model PRESET   derive free space from this model's checkpoint size...\n"
            "  --ckpt-count N        ...times N checkpoints (default 3)\n"
            "  --disk-bytes N        bytes written by the bandwidth test (quick 16 MiB, deep 256 MiB)\n"
            "  --min-disk-mbps F     write+fsync bandwidth floor (default 10 MB/s)\n"
            "gpu:\n"
            "  --expect-gpus N       fail unless exactly N GPUs are visible (default: any)\n"
            "  --max-gpu-temp C      temperature limit (default 85)\n"
            "  --xid-seconds S       deep mode: watch for Xid events this long (default 2; 0 off)\n"
            "  --nvml-lib PATH       NVML library to load (default libnvidia-ml.so.1, or\n"
            "                        $GRIT_NVML_LIB)\n"
            "network (under mpirun):\n"
            "  --net-max-bytes N     largest all-reduce (quick 1 MiB, deep 64 MiB)\n"
            "  --net-pair-bytes N    ping-pong message for pair bandwidth (quick 8 MiB, deep 64 MiB)\n"
            "  --min-busbw F         all-reduce busbw floor at the largest size (default 0.1 GB/s)\n"
            "  --max-allreduce-us F  8-byte all-reduce time ceiling (default 5000 us)\n"
            "  --min-pair-gbps F     bandwidth floor for every pair (default 0.1 GB/s)\n"
            "  --max-pair-us F       one-way latency ceiling for every pair (default 1000 us)\n"
            "  --net-rel-factor F    fail a pair or rank worse than the median by F (default 4;\n"
            "                        needs 3 or more ranks)\n"
            "                        (each network operation has a deadline: $GRIT_DIST_TIMEOUT\n"
            "                        seconds, default 300; a dead or hung peer is an error)\n"
            "system:\n"
            "  --min-nofile N        open-file soft limit floor (default 4096)\n"
            "  --min-memlock BYTES   locked-memory soft limit floor (default 65536)\n"
            "  --require-bin A,B     binaries that must be in PATH (default sh)\n"
            "  --require-lib A,B     shared libraries that must load (default none)\n"
            "  --ref-time T          supervisor's clock, seconds since the epoch\n"
            "                        (or $GRIT_HEALTH_REF_TIME); clock skew skipped without it\n"
            "  --max-skew S          clock skew limit (default 2 s)\n"
            "  -h, --help            show this help\n"
            "\n"
            "fault injection (tests): GRIT_HEALTH_FAULT=name[,name...] with names\n"
            "  gemm_bitflip layernorm_corrupt attention_corrupt adamw_corrupt slow_compute\n"
            "  memory_corrupt slow_memory disk_readonly fsync_fail disk_full slow_disk gpu_ecc\n"
            "  nofile_limit memlock_limit missing_binary clock_skew slow_link allreduce_corrupt;\n"
            "  GRIT_HEALTH_FAULT_BIT=0..31 (bit flipped, default 30), GRIT_HEALTH_SLOWDOWN=F;\n"
            "  slow_link/allreduce_corrupt hit rank GRIT_HEALTH_FAULT_RANK (default the last),\n"
            "  slow_link by GRIT_HEALTH_NET_DELAY_US per message (default 5000).\n");
}

/* Splits a comma list in place into list (at most HEALTH_MAX_LIST). */
static int split_list(const char *flag, char *s, const char **list, int *n)
{
    *n = 0;
    char *save = NULL;
    for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (*n >= HEALTH_MAX_LIST) {
            fprintf(stderr, "grit health: %s: at most %d entries\n", flag, HEALTH_MAX_LIST);
            return -1;
        }
        list[(*n)++] = t;
    }
    return 0;
}

int cmd_health(int argc, char **argv)
{
    health_mode mode = HEALTH_QUICK;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--deep"))
            mode = HEALTH_DEEP;
    }
    health_opts o;
    health_opts_defaults(&o, mode);
    int json = 0, slurm = 0;
    const char *baseline_path = NULL, *write_baseline = NULL;
    const char *env_nvml = getenv("GRIT_NVML_LIB");
    if (env_nvml && *env_nvml)
        o.nvml_path = env_nvml;
    const char *env_ref = getenv("GRIT_HEALTH_REF_TIME");
    if (env_ref && *env_ref && cli_num("health", "GRIT_HEALTH_REF_TIME", env_ref, 0, 1e12, &o.ref_time))
        return 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t u = 0;
        int bad = 0;
        if (!strcmp(a, "--quick") || !strcmp(a, "--deep"))
            continue;
        else if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        } else if (!strcmp(a, "--slurm")) {
            slurm = 1;
            continue;
        } else if (!v) {
            fprintf(stderr, "grit health: unknown option or missing value: '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (!strcmp(a, "--baseline"))
            baseline_path = v;
        else if (!strcmp(a, "--write-baseline"))
            write_baseline = v;
        else if (!strcmp(a, "--slow-factor"))
            bad = cli_num("health", a, v, 1.0, 100.0, &o.slow_factor);
        else if (!strcmp(a, "--deep-seconds"))
            bad = cli_num("health", a, v, 0.1, 86400.0, &o.deep_seconds);
        else if (!strcmp(a, "--threads")) {
            bad = cli_u64("health", a, v, 1, 1024, &u);
            o.threads = (int)u;
        } else if (!strcmp(a, "--gemm-threads")) {
            bad = cli_u64("health", a, v, 0, 1024, &u);
            o.gemm_threads = (int)u;
        } else if (!strcmp(a, "--seed"))
            bad = cli_u64("health", a, v, 0, UINT64_MAX, &o.seed);
        else if (!strcmp(a, "--mem-fraction"))
            bad = cli_num("health", a, v, 0.0, 0.95, &o.mem_fraction);
        else if (!strcmp(a, "--mem-max-bytes")) {
            bad = cli_u64("health", a, v, 1 << 20, SIZE_MAX, &u);
            o.mem_max_bytes = (size_t)u;
        } else if (!strcmp(a, "--min-mem-gbps"))
            bad = cli_num("health", a, v, 0.0, 1e6, &o.min_mem_gbps);
        else if (!strcmp(a, "--dir"))
            o.dir = v;
        else if (!strcmp(a, "--need-bytes"))
            bad = cli_u64("health", a, v, 0, UINT64_MAX, &o.need_bytes);
        else if (!strcmp(a, "--ckpt-model"))
            o.ckpt_model = v;
        else if (!strcmp(a, "--ckpt-count")) {
            bad = cli_u64("health", a, v, 1, 100000, &u);
            o.ckpt_count = (int)u;
        } else if (!strcmp(a, "--disk-bytes")) {
            bad = cli_u64("health", a, v, 1 << 20, SIZE_MAX, &u);
            o.disk_test_bytes = (size_t)u;
        } else if (!strcmp(a, "--min-disk-mbps"))
            bad = cli_num("health", a, v, 0.0, 1e7, &o.min_disk_mbps);
        else if (!strcmp(a, "--expect-gpus")) {
            bad = cli_u64("health", a, v, 0, 1024, &u);
            o.expect_gpus = (int)u;
        } else if (!strcmp(a, "--max-gpu-temp"))
            bad = cli_num("health", a, v, 0.0, 200.0, &o.max_gpu_temp_c);
        else if (!strcmp(a, "--xid-seconds"))
            bad = cli_num("health", a, v, 0.0, 3600.0, &o.xid_window_s);
        else if (!strcmp(a, "--nvml-lib"))
            o.nvml_path = v;
        else if (!strcmp(a, "--net-max-bytes")) {
            bad = cli_u64("health", a, v, 8, (uint64_t)1 << 31, &u);
            o.net_max_bytes = (size_t)u;
        } else if (!strcmp(a, "--net-pair-bytes")) {
            bad = cli_u64("health", a, v, 8, (uint64_t)1 << 30, &u);
            o.net_pair_bytes = (size_t)u;
        } else if (!strcmp(a, "--min-busbw"))
            bad = cli_num("health", a, v, 0.0, 1e6, &o.min_busbw_gbps);
        else if (!strcmp(a, "--max-allreduce-us"))
            bad = cli_num("health", a, v, 0.0, 1e9, &o.max_allreduce_us);
        else if (!strcmp(a, "--min-pair-gbps"))
            bad = cli_num("health", a, v, 0.0, 1e6, &o.min_pair_gbps);
        else if (!strcmp(a, "--max-pair-us"))
            bad = cli_num("health", a, v, 0.0, 1e9, &o.max_pair_us);
        else if (!strcmp(a, "--net-rel-factor"))
            bad = cli_num("health", a, v, 1.0, 1e6, &o.net_rel_factor);
        else if (!strcmp(a, "--min-nofile"))
            bad = cli_u64("health", a, v, 0, UINT64_MAX, &o.min_nofile);
        else if (!strcmp(a, "--min-memlock"))
            bad = cli_u64("health", a, v, 0, UINT64_MAX, &o.min_memlock);
        else if (!strcmp(a, "--require-bin"))
            bad = split_list(a, argv[i + 1], o.require_bins, &o.n_require_bins);
        else if (!strcmp(a, "--require-lib"))
            bad = split_list(a, argv[i + 1], o.require_libs, &o.n_require_libs);
        else if (!strcmp(a, "--ref-time"))
            bad = cli_num("health", a, v, 0.0, 1e12, &o.ref_time);
        else if (!strcmp(a, "--max-skew"))
            bad = cli_num("health", a, v, 0.0, 1e9, &o.max_skew_s);
        else {
            fprintf(stderr, "grit health: unknown option or missing value: '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (bad)
            return 2;
        i++; /* consumed the value */
    }
    if (health_faults_from_env(&o) != GRIT_OK) {
        fprintf(stderr, "grit health: %s\n", grit_errmsg());
        return 2;
    }
    char down[1200];
    if (health_node_down(down, sizeof down)) { /* a node that is down runs no check */
        printf("grit health: %s\n", down);
        return 1;
    }
    health_baseline bl;
    if (baseline_path) {
        if (health_baseline_load(&bl, baseline_path) != GRIT_OK) {
            fprintf(stderr, "grit health: %s\n", grit_errmsg());
            return 2;
        }
        o.baseline = &bl;
    }
    comm d;
    if (comm_init(&d, NULL, NULL) != GRIT_OK) {
        fprintf(stderr, "grit health: %s\n", grit_errmsg());
        return 2;
    }
    if (d.size > 1 && slurm) {
        fprintf(stderr, "grit health: --slurm checks one node (Slurm's HealthCheckProgram); "
                        "do not run it under mpirun\n");
        comm_finalize(&d);
        return 2;
    }
    /* The network check runs on d; the merge of the ranks' verdicts on ctl, its
     * own communicator, so a network operation abandoned at its deadline cannot
     * be matched by the merge. The merge waits for the slowest rank's checks. */
    comm ctl;
    if (comm_dup(&d, &ctl) != GRIT_OK) {
        fprintf(stderr, "grit health: %s\n", grit_errmsg());
        comm_finalize(&d);
        return 2;
    }
    ctl.timeout_s = 3 * d.timeout_s + 30;
    o.comm = &d;
    health_report r;
    health_report_init(&r, mode);
    r.rank = d.rank;
    r.nranks = d.size;
    if (health_run(&r, &o) != GRIT_OK) {
        fprintf(stderr, "grit health: %s\n", grit_errmsg());
        health_report_free(&r);
        if (d.size > 1)
            comm_abort(&d, 2); /* peers may be waiting in a collective */
        comm_dup_free(&ctl);
        comm_finalize(&d);
        return 2;
    }
    int code = health_exit_code(&r);
    if (d.size > 1 && health_merge_ranks(&r, &ctl, &code) != GRIT_OK) {
        fprintf(stderr, "grit health: rank %d: %s\n", d.rank, grit_errmsg());
        code = code ? code : 2;
    }
    comm_dup_free(&ctl);
    if (d.rank != 0) { /* rank 0 reports for everyone */
        health_report_free(&r);
        comm_finalize(&d);
        return code;
    }
    health_slurm_result sr;
    int slurm_ok = 1;
    if (slurm && health_slurm_apply(&r, &sr) != GRIT_OK) {
        slurm_ok = 0;
        snprintf(sr.detail, sizeof sr.detail, "%s", grit_errmsg());
    }
    if (json) {
        json_t *root = health_report_json(&r);
        if (slurm) {
            json_t *s = json_object();
            json_object_set_new(s, "node", json_string(sr.node));
            json_object_set_new(s, "action", json_string(!slurm_ok ? "error"
                                                         : sr.action == HEALTH_SLURM_DRAINED ? "drain"
                                                         : sr.action == HEALTH_SLURM_RESUMED ? "resume"
                                                                                             : "none"));
            json_object_set_new(s, "detail", json_string(sr.detail));
            json_object_set_new(root, "slurm", s);
        }
        char *s = json_dumps(root, JSON_INDENT(2));
        if (s)
            puts(s);
        free(s);
        json_decref(root);
    } else {
        /* Under mpirun stdout is mpirun's pty even when mpirun's own output is a
         * file, so colours only for one process on a terminal. */
        health_report_print(&r, stdout, d.size == 1 && isatty(STDOUT_FILENO));
        if (slurm)
            printf("slurm: %s\n", sr.detail);
    }
    if (!slurm_ok) {
        fprintf(stderr, "grit health: slurm: %s\n", sr.detail);
        if (code == 0)
            code = 2;
    }
    if (write_baseline) {
        if (code != 0) {
            fprintf(stderr, "grit health: not writing a baseline from an unhealthy run\n");
        } else if (health_baseline_save(&r, r.threads, r.digest, write_baseline) != GRIT_OK) {
            fprintf(stderr, "grit health: %s\n", grit_errmsg());
            code = 2;
        } else {
            fprintf(stderr, "grit health: baseline written to %s\n", write_baseline);
        }
    }
    health_report_free(&r);
    comm_finalize(&d);
    return code;
}
