/* cmd_prep.c - `grit prep [CONFIG.json] [options] [INPUT...]`: the RefinedWeb-style
 * pipeline of src/prep (prep.h) behind flags. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "comm/comm.h"
#include "core/fault.h"
#include "prep/langid.h"
#include "prep/prep.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: grit prep [CONFIG.json] [options] [INPUT...]\n"
            "\n"
            "Turns raw web pages into training shards, RefinedWeb style: read (WARC, HTML,\n"
            "text, JSONL; gzip'ed or not; directories walked), extract the main text of HTML,\n"
            "identify the language, apply the Gopher/RefinedWeb quality filters and line\n"
            "corrections, remove URL, exact and MinHash near duplicates, then tokenize into\n"
            "Megatron .bin/.idx shards (or write clean JSONL without a tokenizer). Work is\n"
            "split into shards; every finished (stage, shard) leaves a marker, so a rerun\n"
            "after a crash or kill skips finished work and gives identical output.\n"
            "Flags override the config file; INPUTs are added to a source named 'default';\n"
            "an INPUT may be s3://bucket/prefix/ (AWS_* variables as for s3:// checkpoints).\n"
            "Under mpirun or srun (-n N) the ranks share the work on a shared output\n"
            "directory and give the same bytes as one process (docs/prep.md).\n"
            "\n"
            "options:\n"
            "  -o, --output DIR      output directory (required, here or in the config);\n"
            "                        s3://bucket/prefix: the results go there (data\n"
            "                        first, manifest.json last) and --work holds the rest\n"
            "  --work DIR            the local (shared) working directory with -o s3://\n"
            "  --tokenizer FILE      Hugging Face tokenizer.json: write tokens/NNNNN.{bin,idx}\n"
            "                        (without it: text/NNNNN.jsonl)\n"
            "  --eod TOKEN           end-of-document token (default \"<|endoftext|>\")\n"
            "  --threads N           worker threads (default 2)\n"
            "  --files-per-shard N   HTML/text files per shard (default 64)\n"
            "  --format F            input format: auto (by extension), warc, html, text, jsonl\n"
            "  --langid B            cld2 (default: CLD2's full table, ~160 languages),\n"
            "                        cld2-small (its small table, ~83) or textcat\n"
            "  --languages L,L,...   languages to keep, or 'all' (default en,de,es,fr,it,pt,\n"
            "                        pl,nl,ro,sv,cs)\n"
            "  --min-lang-score X    minimum language score in [0,1] (default 0.65)\n"
            "  --url-blocklist FILE  reject documents by URL first: domains, URLs, words\n"
            "                        (format in docs/prep.md)\n"
            "  --minhash P           near-duplicate preset: refinedweb (20x450, default),\n"
            "                        cheap (14x8), off\n"
            "  --no-filters          turn every quality filter off\n"
            "  --quiet               no progress lines or report table\n"
            "  -h, --help            show this help\n"
            "\n"
            "Outputs in DIR: tokens/ or text/ (the result), docs/ (kept documents and drops\n"
            "per shard), dedup/ (decisions), report.json (documents and bytes per stage,\n"
            "drop reasons, languages, duplicate clusters), done/ (markers), plan.json.\n");
}

/* Fault injection for tests: GRIT_PREP_CRASH_AFTER=N ends the process
 * abruptly (as a kill would) right after the N-th marker of this run
 * (GRIT_PREP_CRASH_RANK=R: only on rank R). */
static void crash_hook(void *arg, const char *marker)
{
    long *left = arg;
    (void)marker;
    if (*left > 0 && --*left == 0)
        _exit(137);
}

int cmd_prep(int argc, char **argv)
{
    prep_cfg c;
    comm cm;
    int cm_on = 0;
    prep_cfg_default(&c);
    int code = 2, format = -1;
    const char *out = NULL, *work = NULL, *tok = NULL, *eod = NULL, *langs = NULL, *mh = NULL, *lid = NULL;
    long threads = -1, fps = -1;
    double min_score = -1;
    int no_filters = 0, quiet = 0;
    char *ubl = NULL;
    const char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
    int n_in = 0;
    if (!inputs)
        return 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int hv = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            code = 0;
            goto done;
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (!strcmp(a, "--no-filters")) {
            no_filters = 1;
        } else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && hv) {
            out = argv[++i];
        } else if (!strcmp(a, "--url-blocklist") && hv) {
            free(ubl);
            ubl = strdup(argv[++i]);
        } else if (!strcmp(a, "--work") && hv) {
            work = argv[++i];
        } else if (!strcmp(a, "--tokenizer") && hv) {
            tok = argv[++i];
        } else if (!strcmp(a, "--eod") && hv) {
            eod = argv[++i];
        } else if (!strcmp(a, "--languages") && hv) {
            langs = argv[++i];
        } else if (!strcmp(a, "--minhash") && hv) {
            mh = argv[++i];
        } else if (!strcmp(a, "--langid") && hv) {
            lid = argv[++i];
            if (langid_backend_parse(lid) < 0) {
                fprintf(stderr, "grit prep: --langid: expected cld2, cld2-small or textcat, "
                                "got '%s'\n", lid);
                goto done;
            }
        } else if (!strcmp(a, "--min-lang-score") && hv) {
            char *end;
            min_score = strtod(argv[++i], &end);
            if (*end || end == argv[i] || !(min_score >= 0 && min_score <= 1)) {
                fprintf(stderr, "grit prep: --min-lang-score: expected a number in [0, 1], "
                                "got '%s'\n", argv[i]);
                goto done;
            }
        } else if (!strcmp(a, "--format") && hv) {
            const char *f = argv[++i];
            static const char *const names[] = {"auto", "warc", "html", "text", "jsonl", NULL};
            for (int k = 0; names[k]; k++)
                if (!strcmp(f, names[k]))
                    format = k;
            if (format < 0) {
                fprintf(stderr, "grit prep: --format: expected auto, warc, html, text or jsonl, "
                                "got '%s'\n", f);
                goto done;
            }
        } else if (!strcmp(a, "--threads") && hv) {
            if (cli_long("prep", "--threads", argv[++i], 1, 1024, &threads))
                goto done;
        } else if (!strcmp(a, "--files-per-shard") && hv) {
            if (cli_long("prep", "--files-per-shard", argv[++i], 1, 1000000, &fps))
                goto done;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "grit prep: unknown option or missing value: '%s'\n", a);
            usage(stderr);
            goto done;
        } else {
            inputs[n_in++] = a;
        }
    }
    code = 1;
    /* a first argument ending in .json that is not a JSONL input is the config */
    int first = 0;
    if (n_in > 0) {
        size_t l = strlen(inputs[0]);
        if (l > 5 && !strcmp(inputs[0] + l - 5, ".json")) {
            if (prep_cfg_load(&c, inputs[0]) != GRIT_OK) {
                fprintf(stderr, "grit prep: %s\n", grit_errmsg());
                goto done;
            }
            first = 1;
        }
    }
    for (int i = first; i < n_in; i++)
        if (prep_cfg_add_input(&c, inputs[i]) != GRIT_OK) {
            fprintf(stderr, "grit prep: out of memory\n");
            goto done;
        }
    if (format >= 0)
        for (int s = 0; s < c.n_sources; s++)
            c.sources[s].format = format;
    if (out) {
        free(c.output);
        c.output = strdup(out);
    }
    if (c.output && !strncmp(c.output, "s3://", 5)) {
        if (!work) {
            fprintf(stderr, "grit prep: -o %s: an s3:// output needs --work DIR (a local or "
                            "shared directory for the work and the markers)\n", c.output);
            code = 2;
            goto done;
        }
        size_t l = strlen(c.output);
        while (l > 5 && c.output[l - 1] == '/')
            c.output[--l] = 0;
        c.publish = c.output;
        c.output = strdup(work);
    } else if (work) {
        fprintf(stderr, "grit prep: --work is for an s3:// output (-o s3://bucket/prefix)\n");
        code = 2;
        goto done;
    }
    if (ubl) {
        free(c.url_blocklist);
        c.url_blocklist = ubl;
        ubl = NULL;
    }
    if (tok) {
        free(c.tokenizer);
        c.tokenizer = strdup(tok);
    }
    if (eod) {
        free(c.eod);
        c.eod = strdup(eod);
    }
    if (threads > 0)
        c.threads = (int)threads;
    if (fps > 0)
        c.files_per_shard = (int)fps;
    if (min_score >= 0)
        c.min_lang_score = min_score;
    if (lid)
        c.langid_backend = langid_backend_parse(lid);
    if (no_filters)
        c.filters.enabled = 0;
    c.quiet = quiet;
    if (mh && prep_cfg_minhash_preset(&c, mh) != GRIT_OK) {
        fprintf(stderr, "grit prep: --minhash: %s\n", grit_errmsg());
        code = 2;
        goto done;
    }
    if (langs) {
        c.n_langs = 0;
        if (strcmp(langs, "all")) {
            const char *p = langs;
            while (*p) {
                size_t n = strcspn(p, ",");
                if (n == 0 || n > 7 || c.n_langs == PREP_MAX_LANGS) {
                    fprintf(stderr, "grit prep: --languages: expected comma-separated codes "
                                    "such as en,de (each at most 7 characters), got '%s'\n",
                            langs);
                    code = 2;
                    goto done;
                }
                memcpy(c.langs[c.n_langs], p, n);
                c.langs[c.n_langs++][n] = 0;
                p += n + (p[n] == ',');
            }
        }
    }
    if (!c.output || c.n_sources == 0) {
        fprintf(stderr, "grit prep: %s\n", !c.output ? "missing -o DIR (or \"output\" in the "
                                                       "config)"
                                                     : "no input given");
        usage(stderr);
        code = 2;
        goto done;
    }
    long crash_after = 0;
    const char *ca = fault_spec(FAULT_PREP_CRASH_AFTER);
    if (*ca)
        crash_after = strtol(ca, NULL, 10);
    /* under mpirun / srun every rank runs this with the same arguments */
    if (comm_init(&cm, &argc, &argv) != GRIT_OK) {
        fprintf(stderr, "grit prep: %s\n", grit_errmsg());
        goto done;
    }
    cm_on = 1;
    if (!getenv("GRIT_DIST_TIMEOUT"))
        cm.timeout_s = 7 * 24 * 3600.0; /* ranks wait for the slowest at each stage's end */
    const char *cr = getenv("GRIT_PREP_CRASH_RANK");
    if (cr && strtol(cr, NULL, 10) != cm.rank)
        crash_after = 0;
    prep_hooks h = {.on_marker = crash_after > 0 ? crash_hook : NULL, .arg = &crash_after};
    if (prep_run(&c, &h, &cm) != GRIT_OK) {
        if (cm.size > 1)
            fprintf(stderr, "grit prep: rank %d: %s\n", cm.rank, grit_errmsg());
        else
            fprintf(stderr, "grit prep: %s\n", grit_errmsg());
        goto done;
    }
    code = 0;
done:
    free(ubl);
    if (cm_on)
        comm_finalize(&cm);
    prep_cfg_free(&c);
    free(inputs);
    return code;
}
