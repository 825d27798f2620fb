/*
 * cmd_serve.c - `grit serve`: flags, the job's secret, run until SIGINT/SIGTERM.
 *
 * The secret: GRIT_SERVE_TOKEN when set; else --token-file FILE, read when it
 * exists, otherwise created with a fresh random token (32 bytes from
 * rand_hex, 64 hex digits), mode 0600, written durably. The token is never
 * printed: the start line names the file it is in.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/fsutil.h"
#include "core/randhex.h"
#include "serve/serve.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: grit serve CHECKPOINT [--tokenizer FILE] (--token-file FILE | env\n"
            "                  GRIT_SERVE_TOKEN) [--host ADDR] [--port N] [options]\n"
            "\n"
            "Serves text generation from CHECKPOINT (a checkpoint step folder, a run\n"
            "directory: its newest checkpoint that verifies, or a Hugging Face GPT-NeoX\n"
            "folder) over HTTP, OpenAI-compatible:\n"
            "  POST /v1/completions       {\"prompt\", \"max_tokens\", \"temperature\",\n"
            "                             \"top_p\", \"top_k\", \"seed\", \"stop\", \"stream\"}\n"
            "  POST /v1/chat/completions  the same with \"messages\": [{\"role\", \"content\"}]\n"
            "                             instead of \"prompt\", rendered with the chat template\n"
            "  GET  /v1/models            (the /v1 routes need the bearer token)\n"
            "  GET  /health, GET /metrics (Prometheus: requests by status, latency and\n"
            "                             time-to-first-token histograms, tokens, queue)\n"
            "\"stream\": true answers with server-sent events (data: {chunk}, then data:\n"
            "[DONE]); a client that disconnects stops its generation. Greedy output\n"
            "(temperature 0) equals grit generate's (--chat for a chat). Concurrent\n"
            "requests are batched continuously (one decode step for every active request,\n"
            "each with its own KV cache); others wait in a bounded queue. See\n"
            "docs/serve.md.\n"
            "\n"
            "options:\n"
            "  --tokenizer FILE   tokenizer.json (default: CHECKPOINT's tokenizer.json)\n"
            "  --chat TEMPLATE    chat template: llama2, llama3, chatml, zephyr, plain or\n"
            "                     auto (tokenizer_config.json's chat_template beside the\n"
            "                     tokenizer). Default: auto when recognised, else the chat\n"
            "                     route answers 400 saying to give --chat\n"
            "  --token-file FILE  the bearer token: read from FILE, or created there (mode\n"
            "                     0600, random) when FILE does not exist. GRIT_SERVE_TOKEN,\n"
            "                     when set, is the token instead\n"
            "  --host ADDR        IPv4 address to bind (default 127.0.0.1: loopback only)\n"
            "  --port N           port (default 8000; 0 = any free port, printed)\n"
            "  --queue N          requests that may wait for the model (default 32)\n"
            "  --threads N        compute threads (default: CPUs online)\n"
            "  --max-batch N      requests generating at once, one decode step for all\n"
            "                     (default 32; 1 = one at a time)\n"
            "  --kv-budget-mib X  memory for the requests' KV caches, in MiB (default 1024;\n"
            "                     fractions allowed). A request's cache holds its prompt and\n"
            "                     max_tokens; one that can never fit gets a 400, others wait\n"
            "  --quiet            no line per request on stderr\n"
            "  -h, --help         show this help\n");
}

/* The token from FILE, or a new one written there. 0 on success. */
static int token_from_file(const char *path, char *tok, size_t cap)
{
    char *text = NULL;
    size_t len = 0;
    if (access(path, F_OK) == 0) {
        if (fs_read_all(path, &text, &len) != GRIT_OK) {
            fprintf(stderr, "grit serve: %s\n", grit_errmsg());
            return -1;
        }
        while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' '))
            len--;
        if (len < SERVE_TOKEN_MIN || len >= cap) {
            fprintf(stderr, "grit serve: %s: expected a token of %d to %zu characters, found %zu\n",
                    path, SERVE_TOKEN_MIN, cap - 1, len);
            free(text);
            return -1;
        }
        memcpy(tok, text, len);
        tok[len] = 0;
        explicit_bzero(text, len);
        free(text);
        return 0;
    }
    if (rand_hex(tok, 32, "grit serve's token") != GRIT_OK) {
        fprintf(stderr, "grit serve: %s\n", grit_errmsg());
        return -1;
    }
    char line[300];
    snprintf(line, sizeof line, "%s\n", tok);
    mode_t old = umask(077); /* the file is the secret: owner only */
    grit_err rc = fs_write_durable(path, line, strlen(line));
    umask(old);
    explicit_bzero(line, sizeof line);
    if (rc != GRIT_OK) {
        fprintf(stderr, "grit serve: %s\n", grit_errmsg());
        return -1;
    }
    return 0;
}

int cmd_serve(int argc, char **argv)
{
    serve_opts o = {.port = 8000, .threads = (int)sysconf(_SC_NPROCESSORS_ONLN), .log = stderr};
    const char *token_file = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int v = i + 1 < argc, bad = 0;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--quiet")) {
            o.log = NULL;
        } else if (!strcmp(a, "--tokenizer") && v) {
            o.tokenizer = argv[++i];
        } else if (!strcmp(a, "--chat") && v) {
            o.chat = argv[++i];
        } else if (!strcmp(a, "--token-file") && v) {
            token_file = argv[++i];
        } else if (!strcmp(a, "--host") && v) {
            o.bind = argv[++i];
        } else if (!strcmp(a, "--port") && v) {
            bad = cli_int("serve", a, argv[++i], 0, 65535, &o.port);
        } else if (!strcmp(a, "--queue") && v) {
            bad = cli_int("serve", a, argv[++i], 1, 100000, &o.max_queue);
        } else if (!strcmp(a, "--threads") && v) {
            bad = cli_int("serve", a, argv[++i], 1, 1024, &o.threads);
        } else if (!strcmp(a, "--max-batch") && v) {
            bad = cli_int("serve", a, argv[++i], 1, SERVE_MAX_BATCH, &o.max_batch);
        } else if (!strcmp(a, "--kv-budget-mib") && v) {
            char *end;
            errno = 0;
            o.kv_budget_mib = strtod(argv[++i], &end);
            if (errno || *end || end == argv[i] || !(o.kv_budget_mib > 0) ||
                o.kv_budget_mib > 1048576) {
                fprintf(stderr, "grit serve: --kv-budget-mib: expected a number of MiB in (0, "
                                "1048576], got '%s'\n", argv[i]);
                bad = 1;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "grit serve: unknown option or missing value: '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (!o.checkpoint) {
            o.checkpoint = a;
        } else {
            fprintf(stderr, "grit serve: unexpected argument '%s'\n", a);
            return 2;
        }
        if (bad)
            return 2;
    }
    if (!o.checkpoint) {
        fprintf(stderr, "grit serve: missing CHECKPOINT\n");
        usage(stderr);
        return 2;
    }
    char tok[256];
    const char *env = getenv("GRIT_SERVE_TOKEN");
    if (env && *env) {
        snprintf(tok, sizeof tok, "%s", env);
    } else if (!token_file) {
        fprintf(stderr, "grit serve: no secret: set GRIT_SERVE_TOKEN or give --token-file FILE "
                        "(created with a random token when missing)\n");
        return 2;
    } else if (token_from_file(token_file, tok, sizeof tok) != 0) {
        return 1;
    }
    o.token = tok;
    /* SIGINT / SIGTERM end the server; blocked here so every thread inherits the mask */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    serve_server *s = NULL;
    grit_err rc = serve_open(&o, &s);
    explicit_bzero(tok, sizeof tok);
    if (rc != GRIT_OK) {
        fprintf(stderr, "grit serve: %s\n", grit_errmsg());
        return 1;
    }
    fprintf(stderr, "grit serve: model %s on http://%s:%d/v1 (token %s)\n", serve_model_id(s),
            o.bind ? o.bind : "127.0.0.1", serve_port(s),
            env && *env ? "from GRIT_SERVE_TOKEN" : token_file);
    fflush(stderr);
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "grit serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    serve_close(s);
    return 0;
}
