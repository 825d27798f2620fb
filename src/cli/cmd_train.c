/* cmd_train.c - `grit train CONFIG.json [overrides]`. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/stopsig.h"
#include "train/parallel.h"
#include "train/train.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: grit train CONFIG.json [options]\n"
            "\n"
            "Trains the model described by CONFIG.json (see README.md, 'Configuration').\n"
            "The run directory receives config.json (resolved, every default written out),\n"
            "metrics.jsonl (one line per step) and model.safetensors (Hugging Face names).\n"
            "\n"
            "options (each overrides the config file):\n"
            "  --run-dir DIR     where the run's files go\n"
            "  --steps N         optim.total_steps\n"
            "  --threads N       threads for compute (results are bitwise reproducible\n"
            "                    for a fixed thread count)\n"
            "  --seed N          seed for initialisation and data\n"
            "  --print-config    print the resolved config and exit\n"
            "  --plan            print the memory plan per rank for the config's layout\n"
            "                    (parameters, gradients, optimiser state, activations)\n"
            "                    and exit; non-zero when it does not fit this machine\n"
            "\n"
            "Data parallel: mpirun -np N grit train CONFIG.json. Each rank takes its slice of\n"
            "every global batch (optim.global_batch keeps it fixed across world sizes);\n"
            "optim.zero1 shards the AdamW state. GRIT_DIST_TIMEOUT (seconds, default 300)\n"
            "bounds every collective, so a dead peer ends the job instead of hanging it.\n"
            "GRIT_DIST_PROGRESS_US=N starts a thread that advances gradient reductions\n"
            "every N us during backward (default off). Each rank writes its own\n"
            "optimiser shard of a checkpoint; any world size can resume it.\n"
            "Tensor parallel: \"parallel\": {\"tensor\": T, \"data\": D} in the config and\n"
            "mpirun -np T*D (docs/parallel.md). Every run prints its memory plan first and\n"
            "stops before allocating when it would not fit.\n"
            "\n"
            "SIGTERM or SIGINT (on any rank) stops every rank after the same step, with a\n"
            "final checkpoint when the last save's duration says it finishes within\n"
            "GRIT_STOP_GRACE seconds (default 25); a second signal stops at once.\n"
            "Exit status: 0 finished, 1 failed (a retry may succeed), 2 bad usage, 3 failed\n"
            "in a way a retry repeats (config error, disk full, every checkpoint or a data\n"
            "file unusable: grit launch gives up at once), 128+signal (143 SIGTERM, 130\n"
            "SIGINT) stopped by a signal (rerun the same command to resume).\n"
            "  --quiet           no progress line or summary\n"
            "  -h, --help        show this help\n");
}

int cmd_train(int argc, char **argv)
{
    const char *cfgpath = NULL, *run_dir = NULL;
    long steps = 0, threads = 0, seed = -1;
    int quiet = 0, print_cfg = 0, plan = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--quiet"))
            quiet = 1;
        else if (!strcmp(a, "--print-config"))
            print_cfg = 1;
        else if (!strcmp(a, "--plan"))
            plan = 1;
        else if (!strcmp(a, "--run-dir") && has_val)
            run_dir = argv[++i];
        else if (!strcmp(a, "--steps") && has_val) {
            if (cli_long("train", a, argv[++i], 1, 1L << 30, &steps))
                return 2;
        } else if (!strcmp(a, "--threads") && has_val) {
            if (cli_long("train", a, argv[++i], 1, 1024, &threads))
                return 2;
        } else if (!strcmp(a, "--seed") && has_val) {
            if (cli_long("train", a, argv[++i], 0, 0x7fffffffffffffffL, &seed))
                return 2;
        } else if (a[0] == '-') {
            fprintf(stderr, "grit train: unknown option or missing value: '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (!cfgpath)
            cfgpath = a;
        else {
            fprintf(stderr, "grit train: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!cfgpath) {
        usage(stderr);
        return 2;
    }
    comm d;
    if (comm_init(&d, &argc, &argv) != GRIT_OK) {
        fprintf(stderr, "grit train: %s\n", grit_errmsg());
        return 1;
    }
    int leader = d.rank == 0, world = d.size;
    train_cfg cfg;
    train_cfg_defaults(&cfg);
    grit_err rc = train_cfg_load(&cfg, cfgpath);
    if (rc == GRIT_OK) {
        if (run_dir)
            snprintf(cfg.run_dir, sizeof cfg.run_dir, "%s", run_dir);
        if (steps)
            cfg.optim.total_steps = (int)steps;
        if (threads)
            cfg.threads = (int)threads;
        if (seed >= 0)
            cfg.seed = (uint64_t)seed;
        /* a plan outside mpirun is for the config's own layout */
        if (plan && d.size == 1)
            world = cfg.tp * cfg.pp * (cfg.dp > 0 ? cfg.dp : 1);
        rc = train_cfg_resolve_world(&cfg, world);
    }
    if (rc != GRIT_OK) { /* every rank read the same file: rank 0 speaks for all */
        if (leader)
            fprintf(stderr, "grit train: %s\n", grit_errmsg());
        int code = train_fail_cause(rc, grit_errmsg()) ? 3 : 1; /* 3: a config error */
        comm_finalize(&d);
        return code;
    }
    if (plan) {
        train_plan p;
        rc = train_plan_make(&cfg, world, train_ranks_here(world), &p);
        if (rc == GRIT_OK && leader)
            train_plan_print(&p, &cfg, stdout);
        if (rc == GRIT_OK)
            rc = train_plan_fits(&p);
        if (rc != GRIT_OK && leader)
            fprintf(stderr, "grit train: %s\n", grit_errmsg());
        comm_finalize(&d);
        return rc == GRIT_OK ? 0 : 1;
    }
    if (print_cfg) {
        char *s = leader ? train_cfg_dump(&cfg) : NULL;
        if (s)
            puts(s);
        free(s);
        comm_finalize(&d);
        return 0;
    }
    stopsig_install(); /* SIGTERM/SIGINT: stop after the step, checkpoint (train.h) */
    train_result res = {0};
    rc = train_run(&cfg, &d, quiet ? NULL : stderr, &res);
    if (rc != GRIT_OK) {
        const char *cause = train_fail_cause(rc, grit_errmsg());
        int code = cause ? 3 : 1; /* 3: retrying would fail the same way */
        if (d.size > 1) {
            /* the other ranks may be waiting in a collective: take the job down now */
            fprintf(stderr, "grit train: rank %d: %s: %s\n", d.rank, grit_strerror(rc),
                    grit_errmsg());
            comm_abort(&d, code);
        }
        fprintf(stderr, "grit train: %s: %s\n", grit_strerror(rc), grit_errmsg());
        if (cause)
            fprintf(stderr, "grit train: a retry would fail the same way (%s): exit 3\n", cause);
        comm_finalize(&d);
        return code;
    }
    comm_finalize(&d);
    return res.stopped_by ? 128 + res.stopped_by : 0;
}
