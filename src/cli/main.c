/*
 * main.c - the grit command: dispatches to one subcommand per file in src/cli/.
 * Only code under src/cli/ prints errors and chooses exit codes.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/ompenv.h"

static void usage(FILE *f)
{
    fprintf(f,
            "grit %s - train language models that survive hardware failures\n"
            "\n"
            "usage: grit <command> [options]\n"
            "\n"
            "commands:\n"
            "  train CONFIG.json   train a GPT-NeoX (Pythia) model from a JSON config\n"
            "  ckpt ...            list, verify, export, import and prune checkpoints\n"
            "  health              check this node (compute, memory, disk, GPU, system)\n"
            "  launch ... -- CMD   run CMD supervised: detect failures, replace nodes, resume\n"
            "  tokenize INPUT...   text / JSONL / directories -> Megatron .bin/.idx\n"
            "  generate            prompt -> text from a checkpoint\n"
            "  eval                perplexity, log-probabilities and zero-shot tasks of checkpoints\n"
            "  dashboard RUN_DIR   serve a run's dashboard and Prometheus /metrics\n"
            "  serve CHECKPOINT    an OpenAI-compatible HTTP endpoint generating from a checkpoint\n"
            "  rate ...            human evaluation: answers from checkpoints rated 1-5 in a browser\n"
            "  prep [CONFIG] ...   web pages (WARC/HTML/text/JSONL) -> clean, deduplicated shards\n"
            "  s3 ...              put, get, list and delete S3 objects (s3:// checkpoints)\n"
            "  cluster ...         create, describe, heal and delete a Slurm cluster from a spec\n"
            "\n"
            "Run 'grit <command> --help' for the options of a command.\n"
            "  --help, -h          show this help\n"
            "  --version           print the version\n",
            GRIT_VERSION);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("grit %s\n", GRIT_VERSION);
        return 0;
    }
    /* libgomp read its wait policy when it loaded: set grit's and start again, once
     * (core/ompenv.h); if that cannot be done, go on under libgomp's default */
    if (ompenv_apply() == 1) {
        execv("/proc/self/exe", argv);
        ompenv_revert();
    }
    if (!strcmp(cmd, "train"))
        return cmd_train(argc - 1, argv + 1);
    if (!strcmp(cmd, "ckpt"))
        return cmd_ckpt(argc - 1, argv + 1);
#ifdef GRIT_HAVE_S3
    if (!strcmp(cmd, "s3"))
        return cmd_s3(argc - 1, argv + 1);
#endif
    if (!strcmp(cmd, "health"))
        return cmd_health(argc - 1, argv + 1);
    if (!strcmp(cmd, "launch"))
        return cmd_launch(argc - 1, argv + 1);
    if (!strcmp(cmd, "tokenize"))
        return cmd_tokenize(argc - 1, argv + 1);
    if (!strcmp(cmd, "generate"))
        return cmd_generate(argc - 1, argv + 1);
    if (!strcmp(cmd, "eval"))
        return cmd_eval(argc - 1, argv + 1);
    if (!strcmp(cmd, "rate"))
        return cmd_rate(argc - 1, argv + 1);
    if (!strcmp(cmd, "serve"))
        return cmd_serve(argc - 1, argv + 1);
    if (!strcmp(cmd, "dashboard"))
        return cmd_dashboard(argc - 1, argv + 1);
    if (!strcmp(cmd, "prep"))
        return cmd_prep(argc - 1, argv + 1);
    if (!strcmp(cmd, "cluster"))
        return cmd_cluster(argc - 1, argv + 1);
    fprintf(stderr, "grit: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}
