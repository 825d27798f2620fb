/*
 * cmd_rate.c - `grit rate`: the human evaluation loop (rate/rate.h,
 * docs/rate.md): init, add-rater, batch, serve, results, export.
 *
 * Parsing and printing only; the work is in src/rate. The rater token is
 * printed once, on stdout, by add-rater and never again (the DB keeps its hash).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/fsutil.h"
#include "rate/rate.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: grit rate init DB --prompts FILE.jsonl\n"
            "       grit rate add-rater DB NAME\n"
            "       grit rate batch DB --checkpoint DIR [--checkpoint DIR2 ...] [options]\n"
            "       grit rate watch DB --run RUN_DIR [--every S] [--once] [--baseline DIR]\n"
            "                          [batch options]\n"
            "       grit rate serve DB [--port P] [--host H] [--port-file F] [--webhook URL]\n"
            "                          [--webhook-min N]\n"
            "       grit rate results DB [--json]\n"
            "       grit rate export DB (--csv | --jsonl) OUT\n"
            "\n"
            "Human evaluation of checkpoints (docs/rate.md). DB is a SQLite file (WAL,\n"
            "synchronous=FULL: a rating the page saw accepted survives a crash).\n"
            "\n"
            "  init       store the prompt set: JSONL, one {\"id\": str, \"prompt\": str} a\n"
            "             line; its version is the file's SHA-256, recorded in the DB\n"
            "  add-rater  add rater NAME and print its token once (the DB keeps a hash);\n"
            "             the rater opens http://HOST:PORT/#token=TOKEN or pastes it\n"
            "  batch      answer every prompt with every checkpoint (in process, the\n"
            "             generation of grit generate) and store one row per answer\n"
            "    --checkpoint DIR   run directory or step folder (repeat for several)\n"
            "    --tokenizer FILE   tokenizer.json (default: DIR/tokenizer.json)\n"
            "    --chat TEMPLATE    render each prompt as a user message (as grit generate)\n"
            "    --max-tokens N     tokens per answer (default 64)\n"
            "    --temperature T    0 = greedy (default); > 0 samples\n"
            "    --seed S           sampling seed (default 0)\n"
            "    --threads N        compute threads (default: CPUs online)\n"
            "    --webhook URL      POST {\"text\": ...} (Slack-compatible) when it is ready\n"
            "  watch      a batch for each new checkpoint of a training run: every S seconds\n"
            "             (default 600) the newest checkpoint of RUN_DIR/ckpt that verifies\n"
            "             is answered unless the DB already has its answers (a restarted\n"
            "             watcher neither repeats nor skips one); SIGINT/SIGTERM stop it\n"
            "    --run DIR          the training run to watch\n"
            "    --baseline DIR     a fixed checkpoint answered in each batch beside the new one\n"
            "    --once             one poll, then exit (for cron or a scheduler)\n"
            "    (and batch's --tokenizer, --chat, --max-tokens, --temperature, --seed,\n"
            "     --threads, --webhook)\n"
            "  serve      the raters' web page: prompt and answer (model blinded, order\n"
            "             shuffled per rater), keys 1-5, f (fabrication), Enter (submit)\n"
            "    --host H           IPv4 address to bind (default 127.0.0.1 only)\n"
            "    --port P           port (default 8090; 0 = any free port)\n"
            "    --port-file F      write the port to F once listening\n"
            "    --webhook URL      POST {\"text\": ...} when every answer of a batch has\n"
            "                       --webhook-min ratings (default 2)\n"
            "  results    per checkpoint: ratings, mean with 95%% CI (Student t), fabrication\n"
            "             rate, Krippendorff's alpha (interval metric); --json for JSON\n"
            "  export     every rating (rater name, answer, checkpoint, step, prompt, version,\n"
            "             score, fabrication, comment, time) as CSV or JSONL, written durably\n");
}

static int fail(const char *what)
{
    fprintf(stderr, "grit rate %s: %s\n", what, grit_errmsg());
    return 1;
}

/* The generation options batch and watch share. 1: argv[*i] was one (and its value
 * consumed), 0: not one of them, -1: a bad value (said on stderr). */
static int gen_opt(const char *sub, int argc, char **argv, int *i, rate_batch_opts *o,
                   const char **webhook)
{
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    double x;
    int bad = 0;
    if (!v)
        return 0;
    if (!strcmp(a, "--tokenizer"))
        o->tokenizer = v;
    else if (!strcmp(a, "--chat"))
        o->chat = v;
    else if (!strcmp(a, "--webhook"))
        *webhook = v;
    else if (!strcmp(a, "--max-tokens"))
        bad = cli_int(sub, a, v, 1, 1 << 20, &o->max_tokens);
    else if (!strcmp(a, "--temperature"))
        bad = cli_num(sub, a, v, 0, 100, &o->temperature);
    else if (!strcmp(a, "--seed")) {
        bad = cli_num(sub, a, v, 0, 9007199254740991.0, &x);
        o->seed = (uint64_t)x;
    } else if (!strcmp(a, "--threads"))
        bad = cli_int(sub, a, v, 1, 1024, &o->threads);
    else
        return 0;
    ++*i;
    return bad ? -1 : 1;
}

static void batch_defaults(rate_batch_opts *o)
{
    *o = (rate_batch_opts){.max_tokens = 64, .log = stderr,
                           .threads = (int)sysconf(_SC_NPROCESSORS_ONLN)};
}

static int do_batch(rate_db *d, int argc, char **argv)
{
    const char *cks[64];
    rate_batch_opts o;
    batch_defaults(&o);
    o.checkpoints = cks;
    const char *webhook = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int r = gen_opt("rate batch", argc, argv, &i, &o, &webhook);
        if (r < 0)
            return 2;
        if (r)
            continue;
        if (!strcmp(a, "--checkpoint") && i + 1 < argc) {
            if (o.ncheckpoints == 64) {
                fprintf(stderr, "grit rate batch: at most 64 --checkpoint\n");
                return 2;
            }
            cks[o.ncheckpoints++] = argv[++i];
        } else {
            fprintf(stderr, "grit rate batch: unknown option or missing value: '%s'\n", a);
            return 2;
        }
    }
    if (!o.ncheckpoints) {
        fprintf(stderr, "grit rate batch: missing --checkpoint DIR\n");
        return 2;
    }
    int64_t batch;
    int n;
    if (rate_batch(d, &o, &batch, &n))
        return fail("batch");
    printf("batch %lld: %d answers from %d checkpoint(s)\n", (long long)batch, n, o.ncheckpoints);
    if (webhook) {
        char text[512];
        snprintf(text, sizeof text, "grit rate: batch %lld is ready: %d answers from %d "
                 "checkpoint(s) to rate in %s", (long long)batch, n, o.ncheckpoints,
                 rate_db_path(d));
        if (rate_webhook(webhook, text))
            return fail("batch");
    }
    return 0;
}

static int do_watch(rate_db *d, int argc, char **argv)
{
    rate_watch_opts w = {.every = 600};
    batch_defaults(&w.batch);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int r = gen_opt("rate watch", argc, argv, &i, &w.batch, &w.webhook);
        if (r < 0)
            return 2;
        if (r)
            continue;
        if (!strcmp(a, "--run") && i + 1 < argc)
            w.run = argv[++i];
        else if (!strcmp(a, "--baseline") && i + 1 < argc)
            w.baseline = argv[++i];
        else if (!strcmp(a, "--every") && i + 1 < argc) {
            if (cli_num("rate watch", a, argv[++i], 1, 86400 * 7, &w.every))
                return 2;
        } else if (!strcmp(a, "--once"))
            w.once = 1;
        else {
            fprintf(stderr, "grit rate watch: unknown option or missing value: '%s'\n", a);
            return 2;
        }
    }
    if (!w.run) {
        fprintf(stderr, "grit rate watch: missing --run DIR\n");
        return 2;
    }
    sigset_t set; /* taken between polls by sigtimedwait (rate_watch) */
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    int n = 0;
    if (rate_watch(d, &w, &n))
        return fail("watch");
    printf("watch: %d new batch(es)\n", n);
    return 0;
}

static int do_serve(const char *db, int argc, char **argv)
{
    rate_serve_opts o = {.port = 8090, .webhook_min = 2, .log = stderr};
    const char *port_file = NULL;
    double port = 8090, wmin = 2;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int v = i + 1 < argc, bad = 0;
        if (!strcmp(a, "--host") && v)
            o.bind = argv[++i];
        else if (!strcmp(a, "--port") && v)
            bad = cli_num("rate", a, argv[++i], 0, 65535, &port);
        else if (!strcmp(a, "--port-file") && v)
            port_file = argv[++i];
        else if (!strcmp(a, "--webhook") && v)
            o.webhook = argv[++i];
        else if (!strcmp(a, "--webhook-min") && v)
            bad = cli_num("rate", a, argv[++i], 1, 1000, &wmin);
        else {
            fprintf(stderr, "grit rate serve: unknown option or missing value: '%s'\n", a);
            return 2;
        }
        if (bad)
            return 2;
    }
    o.port = (int)port, o.webhook_min = (int)wmin;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    rate_server *s;
    if (rate_serve_open(db, &o, &s))
        return fail("serve");
    fprintf(stderr, "grit rate serve: %s on http://%s:%d/\n", db, o.bind ? o.bind : "127.0.0.1",
            rate_serve_port(s));
    if (port_file) {
        char t[16];
        int n = snprintf(t, sizeof t, "%d\n", rate_serve_port(s));
        if (fs_write_durable(port_file, t, (size_t)n)) {
            rate_serve_close(s);
            return fail("serve");
        }
    }
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "grit rate serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    rate_serve_close(s);
    return 0;
}

int cmd_rate(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1];
    static const char *const subs[] = {"init",    "add-rater", "batch",
                                       "watch",   "serve",     "results", "export"};
    int known = 0;
    for (size_t k = 0; k < sizeof subs / sizeof *subs; k++)
        known |= !strcmp(sub, subs[k]);
    if (!known) {
        fprintf(stderr, "grit rate: unknown subcommand '%s' (init, add-rater, batch, watch, "
                        "serve, results, export)\n", sub);
        return 2;
    }
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
    if (argc < 3) {
        fprintf(stderr, "grit rate %s: missing DB\n", sub);
        return 2;
    }
    const char *db = argv[2];
    /* check the arguments before creating a DB file */
    const char *prompts = NULL, *name = NULL, *out = NULL;
    int json = 0, csv = -1;
    if (!strcmp(sub, "init")) {
        if (argc != 5 || strcmp(argv[3], "--prompts")) {
            fprintf(stderr, "grit rate init: expected DB --prompts FILE\n");
            return 2;
        }
        prompts = argv[4];
    } else if (!strcmp(sub, "add-rater")) {
        if (argc != 4) {
            fprintf(stderr, "grit rate add-rater: expected DB NAME\n");
            return 2;
        }
        name = argv[3];
    } else if (!strcmp(sub, "results")) {
        if (argc > 4 || (argc == 4 && strcmp(argv[3], "--json"))) {
            fprintf(stderr, "grit rate results: expected DB [--json]\n");
            return 2;
        }
        json = argc == 4;
    } else if (!strcmp(sub, "export")) {
        if (argc != 5 || (strcmp(argv[3], "--csv") && strcmp(argv[3], "--jsonl"))) {
            fprintf(stderr, "grit rate export: expected DB --csv OUT or DB --jsonl OUT\n");
            return 2;
        }
        csv = !strcmp(argv[3], "--csv");
        out = argv[4];
    }
    if (strcmp(sub, "init") && access(db, F_OK) != 0) {
        fprintf(stderr, "grit rate %s: %s: no such database (start with grit rate init)\n", sub,
                db);
        return 1;
    }
    if (prompts && access(prompts, R_OK) != 0) { /* no empty DB left behind */
        fprintf(stderr, "grit rate init: %s: cannot read: %s\n", prompts, strerror(errno));
        return 1;
    }
    if (!strcmp(sub, "serve"))
        return do_serve(db, argc - 3, argv + 3);
    rate_db *d;
    if (rate_db_open(db, &d))
        return fail(sub);
    int code = 0;
    if (prompts) {
        int n;
        char version[80];
        if (rate_init_prompts(d, prompts, &n, version))
            code = fail(sub);
        else
            printf("%s: %d prompts, version %s\n", db, n, version);
    } else if (name) {
        char token[RATE_TOKEN_HEX + 1];
        if (rate_add_rater(d, name, token))
            code = fail(sub);
        else
            printf("%s\n", token);
    } else if (!strcmp(sub, "batch")) {
        code = do_batch(d, argc - 3, argv + 3);
    } else if (!strcmp(sub, "watch")) {
        code = do_watch(d, argc - 3, argv + 3);
    } else if (!strcmp(sub, "results")) {
        rate_results r;
        if (rate_results_compute(d, &r))
            code = fail(sub);
        else
            rate_results_print(&r, stdout, json);
        rate_results_free(&r);
    } else {
        if (rate_export(d, out, csv))
            code = fail(sub);
    }
    rate_db_close(d);
    return code;
}
