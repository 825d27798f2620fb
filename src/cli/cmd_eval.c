/*
 * cmd_eval.c - `grit eval`: perplexity, per-token log-probabilities and logits, and
 * zero-shot multiple-choice / cloze accuracy of a checkpoint, or of every checkpoint
 * of a run (--all: a table, CSV and an SVG plot).
 */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "ckpt/store.h"
#include "cli/cli.h"
#include "core/fsutil.h"
#include "core/progress.h"
#include "data/indexed.h"
#include "eval/eval.h"
#include "eval/plot.h"
#include "eval/tasks.h"

#define MAX_DATA 64

static void usage(FILE *f)
{
    fprintf(f,
        "usage: grit eval --checkpoint DIR [--tokenizer FILE] WHAT [options]\n"
        "\n"
        "Scores a checkpoint. DIR is a run directory (its newest checkpoint that verifies),\n"
        "a checkpoint step folder or a Hugging Face GPT-NeoX folder.\n"
        "\n"
        "WHAT (one):\n"
        "  --data PREFIX         perplexity over a Megatron dataset (PREFIX.bin/.idx; give it\n"
        "                        again for more), every sequence in order, in windows of\n"
        "                        --seq-len + 1 tokens that share their boundary token\n"
        "  --jsonl FILE          perplexity over the documents of a JSONL file (--field, default\n"
        "                        \"text\"; each document followed by <|endoftext|>), also bits per\n"
        "                        byte; needs --tokenizer\n"
        "  --text TEXT           log-probability of every token of TEXT (needs --tokenizer)\n"
        "  --ids N,N,...         the same for token ids\n"
        "  --task FILE           zero-shot accuracy on a JSONL task file; --task-type mc\n"
        "                        ({\"context\",\"choices\",\"gold\"}: acc and acc_norm) or cloze\n"
        "                        ({\"text\"}: the last word, greedy); needs --tokenizer\n"
        "\n"
        "options:\n"
        "  --all                 every checkpoint of the run directory DIR, oldest first: a\n"
        "                        table (and --csv FILE, --plot FILE.svg)\n"
        "  --seq-len N           window for perplexity (default: the context less one, at most\n"
        "                        2048)\n"
        "  --max-tokens N        score at most N tokens of the data (default: all)\n"
        "  --limit N             score at most N task items (default: all)\n"
        "  --delim S             between a task's context and its choice (default \" \")\n"
        "  --dump-logits FILE    with --text/--ids: the logits after every token as a .npy\n"
        "                        file, float32 [tokens, vocab]\n"
        "  --details FILE        with --task: one JSON line per item (ids, scores, prediction)\n"
        "  --json                print the result as one JSON object\n"
        "  --threads N           compute threads (default: CPUs online)\n"
        "  --quiet               no progress on stderr\n"
        "  -h, --help            show this help\n"
        "\n"
        "Task files and the scoring rules: docs/eval.md.\n");
}

typedef struct eval_args {
    const char *ckpt, *tokenizer, *jsonl, *field, *text, *ids, *task, *task_type, *delim;
    const char *dump, *details, *csv, *plot;
    const char *data[MAX_DATA];
    int ndata, all, json, quiet, threads;
    long seq_len, max_tokens, limit;
} eval_args;

/* One measurement's numbers (what --all tabulates). */
typedef struct eval_res {
    long step;
    double loss, ppl, bpb;   /* perplexity modes and --text/--ids */
    long tokens, windows, bytes;
    task_result task;
} eval_res;

/* The ids of --ids or --text into *out (malloc'd). */
static grit_err sequence_ids(const eval_args *a, bpe_ctx *tok, int32_t **out, int *n)
{
    bpe_ids ids = {0};
    grit_err rc = GRIT_OK;
    if (a->text) {
        rc = bpe_encode(tok, a->text, strlen(a->text), BPE_ALLOW_SPECIAL, &ids);
    } else {
        for (const char *p = a->ids; rc == GRIT_OK && *p;) {
            char *end;
            errno = 0;
            long v = strtol(p, &end, 10);
            if (errno || end == p || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
                rc = grit_errf(GRIT_EINVAL, "--ids: expected comma-separated token ids, got '%s'",
                               a->ids);
                break;
            }
            uint32_t u = (uint32_t)v;
            if (ids.n == ids.cap) {
                size_t cap = ids.cap ? 2 * ids.cap : 64;
                uint32_t *nv = realloc(ids.v, cap * sizeof *nv);
                if (!nv) {
                    rc = grit_errf(GRIT_ENOMEM, "out of memory");
                    break;
                }
                ids.v = nv, ids.cap = cap;
            }
            ids.v[ids.n++] = u;
            p = *end ? end + 1 : end;
        }
    }
    if (rc == GRIT_OK && ids.n < 2)
        rc = grit_errf(GRIT_EINVAL, "%s: expected at least two tokens, got %zu",
                       a->text ? "--text" : "--ids", ids.n);
    if (rc == GRIT_OK) {
        *out = (int32_t *)ids.v; /* same width; every id checked against the vocabulary later */
        *n = (int)ids.n;
        return GRIT_OK;
    }
    bpe_ids_free(&ids);
    return rc;
}

/* .npy version 1.0: magic, version, a header dict padded with spaces to a multiple of 64
 * bytes (ending in a newline), then the little-endian float32 data. */
static grit_err write_npy(const char *path, const float *x, int rows, int cols)
{
    char hdr[128];
    int n = snprintf(hdr + 10, sizeof hdr - 10,
                     "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", rows, cols);
    int total = (10 + n + 1 + 63) / 64 * 64;
    memset(hdr + 10 + n, ' ', (size_t)(total - 10 - n));
    hdr[total - 1] = '\n';
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    hdr[8] = (char)((total - 10) & 0xff);
    hdr[9] = (char)((total - 10) >> 8);
    const void *bufs[2] = {hdr, x};
    size_t lens[2] = {(size_t)total, sizeof *x * (size_t)rows * (size_t)cols};
    return fs_write_durable_iov(path, bufs, lens, 2);
}

static void show_progress(void *ctx, long done)
{
    progress_update(ctx, done, NULL);
}

/* Perplexity over the data, the sequence or the task: one checkpoint. */
static grit_err measure(const eval_args *a, eval_model *e, const bpe *tk, bpe_ctx *tok, uint32_t eod,
                        eval_res *r)
{
    grit_err rc = GRIT_OK;
    int seq = a->seq_len ? (int)a->seq_len : (e->ctx - 1 < 2048 ? e->ctx - 1 : 2048);
    if (a->task) {
        FILE *det = NULL;
        if (a->details && !(det = fopen(a->details, "w")))
            return grit_errf(GRIT_EIO, "%s: cannot write: %s", a->details, strerror(errno));
        long items = 0; /* for the progress line: non-blank lines, at most --limit */
        FILE *tf = a->quiet ? NULL : fopen(a->task, "r");
        for (int c, blank = 1; tf && (c = getc(tf)) != EOF;) {
            if (c == '\n')
                items += !blank, blank = 1;
            else if (c != ' ' && c != '\t' && c != '\r')
                blank = 0;
        }
        if (tf)
            fclose(tf);
        progress p;
        progress_init(&p, a->quiet ? NULL : stderr, a->limit && a->limit < items ? a->limit : items,
                      a->limit ? 1 : 10);
        task_opts o = {.kind = !strcmp(a->task_type, "mc") ? TASK_MC : TASK_CLOZE,
                       .delim = a->delim, .start = eod, .limit = a->limit, .details = det,
                       .on_item = a->quiet ? NULL : show_progress, .ctx = &p};
        rc = task_run(e, tok, a->task, &o, &r->task);
        progress_finish(&p);
        if (det && fclose(det) != 0 && rc == GRIT_OK)
            rc = grit_errf(GRIT_EIO, "%s: write failed", a->details);
        return rc;
    }
    double *lp = NULL;
    int32_t *stream = NULL;
    size_t n = 0;
    if (a->text || a->ids) {
        int k;
        float *logits = NULL;
        if ((rc = sequence_ids(a, tok, &stream, &k)) != GRIT_OK)
            return rc;
        if (k > e->ctx)
            rc = grit_errf(GRIT_EINVAL, "the sequence has %d tokens; the model's context is %d", k,
                           e->ctx);
        if (rc == GRIT_OK && !(lp = malloc(sizeof *lp * (size_t)k)))
            rc = grit_errf(GRIT_ENOMEM, "out of memory");
        if (rc == GRIT_OK && a->dump &&
            !(logits = malloc(sizeof *logits * (size_t)k * (size_t)e->vocab)))
            rc = grit_errf(GRIT_ENOMEM, "out of memory for %d x %d logits", k, e->vocab);
        if (rc == GRIT_OK)
            rc = eval_score(e, stream, k, lp, NULL, logits);
        if (rc == GRIT_OK && a->dump)
            rc = write_npy(a->dump, logits, k, e->vocab);
        if (rc == GRIT_OK && !a->json && !a->all) {
            printf("%5s %8s %12s  %s\n", "pos", "id", "log p", "token");
            for (int i = 0; i < k; i++) {
                size_t len = 0;
                const char *b = tk ? bpe_token_bytes(tk, (uint32_t)stream[i], &len) : NULL;
                if (i == 0)
                    printf("%5d %8d %12s  %.*s\n", i, stream[i], "-", (int)len, b ? b : "");
                else
                    printf("%5d %8d %12.6f  %.*s\n", i, stream[i], lp[i - 1], (int)len, b ? b : "");
            }
        }
        for (int i = 0; rc == GRIT_OK && i + 1 < k; i++)
            r->loss -= lp[i];
        r->tokens = k - 1;
        r->windows = 1;
        free(logits);
    } else {
        size_t cap = 0;
        for (int d = 0; rc == GRIT_OK && d < a->ndata; d++) { /* Megatron datasets, in order */
            idx_reader *ir = NULL;
            if ((rc = idx_open(&ir, a->data[d])) != GRIT_OK)
                break;
            for (size_t s = 0; rc == GRIT_OK && s < idx_num_seqs(ir); s++) {
                size_t len = idx_seq_len(ir, s);
                if (a->max_tokens && n + len > (size_t)a->max_tokens)
                    len = (size_t)a->max_tokens - n;
                if (n + len > cap) {
                    size_t nc = (n + len) * 2;
                    int32_t *ns = realloc(stream, nc * sizeof *ns);
                    if (!ns) {
                        rc = grit_errf(GRIT_ENOMEM, "out of memory for %zu tokens", nc);
                        break;
                    }
                    stream = ns, cap = nc;
                }
                rc = idx_read(ir, s, 0, len, (uint32_t *)(stream + n));
                n += len;
                if (a->max_tokens && n >= (size_t)a->max_tokens)
                    break;
            }
            idx_close(ir);
        }
        if (rc == GRIT_OK && a->jsonl)
            rc = eval_jsonl_tokens(a->jsonl, a->field ? a->field : "text", tok, eod, a->max_tokens,
                                   &stream, &n, &r->bytes);
        if (rc == GRIT_OK && n < 2)
            rc = grit_errf(GRIT_EINVAL, "%s: fewer than two tokens to score",
                           a->jsonl ? a->jsonl : a->data[0]);
        if (rc == GRIT_OK && !(lp = malloc(sizeof *lp * (size_t)seq)))
            rc = grit_errf(GRIT_ENOMEM, "out of memory");
        eval_total t = {0};
        progress p;
        progress_init(&p, a->quiet ? NULL : stderr, (long)((n - 1 + (size_t)seq - 1) / (size_t)seq), 1);
        for (size_t at = 0; rc == GRIT_OK && at + 1 < n; at += (size_t)seq) {
            size_t k = n - at < (size_t)seq + 1 ? n - at : (size_t)seq + 1;
            rc = eval_stream(e, stream + at, k, seq, lp, &t);
            progress_update(&p, t.windows, NULL);
        }
        progress_finish(&p);
        r->loss = t.nll, r->tokens = t.tokens, r->windows = t.windows;
    }
    if (rc == GRIT_OK && r->tokens > 0) {
        if (r->bytes > 0)
            r->bpb = r->loss / log(2.0) / (double)r->bytes;
        r->loss /= (double)r->tokens;
        r->ppl = exp(r->loss);
    }
    free(lp);
    free(stream);
    return rc;
}

static void print_result(const eval_args *a, const eval_res *r, const char *where)
{
    if (a->json) {
        printf("{\"checkpoint\":\"%s\",\"step\":%ld", where, r->step);
        if (a->task) {
            const task_result *t = &r->task;
            printf(",\"task\":\"%s\",\"items\":%ld,\"acc\":%.10g,\"acc_stderr\":%.10g", a->task_type,
                   t->n, task_acc(t->correct, t->n), task_stderr(t->correct, t->n));
            if (t->kind == TASK_MC)
                printf(",\"acc_norm\":%.10g,\"acc_norm_stderr\":%.10g", task_acc(t->correct_norm, t->n),
                       task_stderr(t->correct_norm, t->n));
            else
                printf(",\"ppl\":%.10g,\"loglikelihood\":%.17g", exp(-t->sum_ll / (double)t->n),
                       t->sum_ll);
        } else {
            printf(",\"loss\":%.17g,\"ppl\":%.10g,\"tokens\":%ld,\"windows\":%ld", r->loss, r->ppl,
                   r->tokens, r->windows);
            if (r->bytes)
                printf(",\"bytes\":%ld,\"bits_per_byte\":%.10g", r->bytes, r->bpb);
        }
        printf("}\n");
        return;
    }
    if (a->task) {
        const task_result *t = &r->task;
        printf("%s on %ld items (%s): acc %.4f ± %.4f", a->task_type, t->n, a->task,
               task_acc(t->correct, t->n), task_stderr(t->correct, t->n));
        if (t->kind == TASK_MC)
            printf(", acc_norm %.4f ± %.4f\n", task_acc(t->correct_norm, t->n),
                   task_stderr(t->correct_norm, t->n));
        else
            printf(", target perplexity %.4f\n", exp(-t->sum_ll / (double)t->n));
    } else {
        printf("loss %.6f, perplexity %.4f over %ld tokens in %ld window%s", r->loss, r->ppl,
               r->tokens, r->windows, r->windows == 1 ? "" : "s");
        if (r->bytes)
            printf(", %.4f bits per byte", r->bpb);
        printf("\n");
    }
}

static double metric(const eval_args *a, const eval_res *r, const char **name)
{
    if (!a->task) {
        *name = "perplexity";
        return r->ppl;
    }
    *name = "accuracy";
    return task_acc(r->task.correct, r->task.n);
}

/* Every checkpoint of the run directory a->ckpt, oldest first. */
static int eval_all(const eval_args *a, const bpe *tk, bpe_ctx *tok, uint32_t eod)
{
    char dir[4200];
    store *st = NULL;
    long *steps = NULL;
    int n = 0, code = 1;
    snprintf(dir, sizeof dir, "%s/ckpt", a->ckpt);
    if (store_open_posix(dir, &st) != GRIT_OK || ckpt_list(st, &steps, &n) != GRIT_OK) {
        fprintf(stderr, "grit eval: --all: %s\n", grit_errmsg());
        store_close(st);
        return 1;
    }
    if (n == 0) {
        fprintf(stderr, "grit eval: --all: %s has no checkpoints\n", dir);
        store_close(st);
        return 1;
    }
    double *xs = calloc((size_t)n, sizeof *xs), *ys = calloc((size_t)n, sizeof *ys),
           *ys2 = calloc((size_t)n, sizeof *ys2);
    eval_res *res = calloc((size_t)n, sizeof *res);
    FILE *csv = NULL;
    int done = 0;
    if (!xs || !ys || !ys2 || !res) {
        fprintf(stderr, "grit eval: out of memory\n");
        goto out;
    }
    if (!a->json)
        printf("%10s  %s\n", "step", a->task ? (!strcmp(a->task_type, "mc") ? "acc ± se    acc_norm ± se"
                                                                          : "acc ± se    target ppl")
                                             : "loss       perplexity");
    for (int i = 0; i < n; i++) {
        char sd[64], why[512], path[4300];
        ckpt_dirname(sd, sizeof sd, steps[i]);
        if (ckpt_verify(st, sd, why, sizeof why) != GRIT_OK) {
            fprintf(stderr, "grit eval: step %ld skipped: it does not verify (%s)\n", steps[i], why);
            continue;
        }
        snprintf(path, sizeof path, "%s/%s", dir, sd);
        eval_model e;
        grit_err rc = eval_open(&e, path, a->threads);
        eval_res *r = &res[done];
        r->step = steps[i];
        if (rc == GRIT_OK)
            rc = measure(a, &e, tk, tok, eod, r);
        eval_close(&e);
        if (rc != GRIT_OK) {
            fprintf(stderr, "grit eval: %s: %s\n", path, grit_errmsg());
            goto out;
        }
        const char *name;
        xs[done] = (double)r->step;
        ys[done] = metric(a, r, &name);
        ys2[done] = a->task && r->task.kind == TASK_MC ? task_acc(r->task.correct_norm, r->task.n) : NAN;
        if (a->json) {
            print_result(a, r, path);
        } else if (a->task) {
            const task_result *t = &r->task;
            printf("%10ld  %.4f ± %.4f  %.4f%s%.4f\n", r->step, task_acc(t->correct, t->n),
                   task_stderr(t->correct, t->n),
                   t->kind == TASK_MC ? task_acc(t->correct_norm, t->n) : exp(-t->sum_ll / (double)t->n),
                   t->kind == TASK_MC ? " ± " : "", t->kind == TASK_MC ? task_stderr(t->correct_norm, t->n) : 0);
        } else {
            printf("%10ld  %.6f   %.4f\n", r->step, r->loss, r->ppl);
        }
        fflush(stdout);
        done++;
    }
    if (done == 0) {
        fprintf(stderr, "grit eval: --all: no checkpoint of %s verifies\n", dir);
        goto out;
    }
    if (a->csv) {
        if (!(csv = fopen(a->csv, "w"))) {
            fprintf(stderr, "grit eval: %s: cannot write: %s\n", a->csv, strerror(errno));
            goto out;
        }
        fprintf(csv, a->task ? "step,items,acc,acc_stderr,acc_norm,acc_norm_stderr\n"
                             : "step,loss,perplexity,tokens\n");
        for (int i = 0; i < done; i++) {
            const task_result *t = &res[i].task;
            if (a->task)
                fprintf(csv, "%ld,%ld,%.10g,%.10g,%.10g,%.10g\n", res[i].step, t->n,
                        task_acc(t->correct, t->n), task_stderr(t->correct, t->n),
                        task_acc(t->correct_norm, t->n), task_stderr(t->correct_norm, t->n));
            else
                fprintf(csv, "%ld,%.17g,%.10g,%ld\n", res[i].step, res[i].loss, res[i].ppl,
                        res[i].tokens);
        }
        if (fclose(csv) != 0) {
            csv = NULL;
            fprintf(stderr, "grit eval: %s: write failed\n", a->csv);
            goto out;
        }
        csv = NULL;
    }
    if (a->plot) {
        const char *name;
        metric(a, &res[0], &name);
        plot_series sr[2] = {{a->task ? "acc" : "perplexity", xs, ys, done},
                             {"acc_norm", xs, ys2, done}};
        char title[512];
        snprintf(title, sizeof title, "%s of %s per checkpoint", name, a->ckpt);
        if (plot_svg(a->plot, title, "step", name, sr,
                     a->task && !strcmp(a->task_type, "mc") ? 2 : 1) != GRIT_OK) {
            fprintf(stderr, "grit eval: %s\n", grit_errmsg());
            goto out;
        }
        if (!a->quiet)
            fprintf(stderr, "grit eval: plot written to %s\n", a->plot);
    }
    code = 0;
out:
    if (csv)
        fclose(csv);
    free(xs);
    free(ys);
    free(ys2);
    free(res);
    free(steps);
    store_close(st);
    return code;
}

int cmd_eval(int argc, char **argv)
{
    eval_args a = {.threads = (int)sysconf(_SC_NPROCESSORS_ONLN)};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        int v = i + 1 < argc, bad = 0;
        long t;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            usage(stdout);
            return 0;
        }
#define STR(flag, field) else if (!strcmp(f, flag) && v) a.field = argv[++i];
        if (!strcmp(f, "--all"))
            a.all = 1;
        else if (!strcmp(f, "--json"))
            a.json = 1;
        else if (!strcmp(f, "--quiet"))
            a.quiet = 1;
        else if (!strcmp(f, "--data") && v) {
            if (a.ndata == MAX_DATA) {
                fprintf(stderr, "grit eval: --data: at most %d datasets\n", MAX_DATA);
                return 2;
            }
            a.data[a.ndata++] = argv[++i];
        }
        STR("--checkpoint", ckpt) STR("--tokenizer", tokenizer) STR("--jsonl", jsonl)
        STR("--field", field) STR("--text", text) STR("--ids", ids) STR("--task", task)
        STR("--task-type", task_type) STR("--delim", delim) STR("--dump-logits", dump)
        STR("--details", details) STR("--csv", csv) STR("--plot", plot)
        else if (!strcmp(f, "--seq-len") && v) bad = cli_long("eval", f, argv[++i], 1, 1 << 20, &a.seq_len);
        else if (!strcmp(f, "--max-tokens") && v) bad = cli_long("eval", f, argv[++i], 2, 1L << 40, &a.max_tokens);
        else if (!strcmp(f, "--limit") && v) bad = cli_long("eval", f, argv[++i], 1, 1L << 40, &a.limit);
        else if (!strcmp(f, "--threads") && v) {
            bad = cli_long("eval", f, argv[++i], 1, 1024, &t);
            a.threads = (int)t;
        } else {
            fprintf(stderr, "grit eval: unknown option or missing value: '%s'\n", f);
            usage(stderr);
            return 2;
        }
#undef STR
        if (bad)
            return 2;
    }
    int what = (a.ndata > 0) + !!a.jsonl + !!a.text + !!a.ids + !!a.task;
    const char *err = !a.ckpt ? "missing --checkpoint DIR"
        : what != 1 ? "give exactly one of --data, --jsonl, --text, --ids, --task"
        : (a.jsonl || a.text || a.task) && !a.tokenizer ? "--jsonl, --text and --task need --tokenizer FILE"
        : a.task && (!a.task_type || (strcmp(a.task_type, "mc") && strcmp(a.task_type, "cloze")))
            ? "--task needs --task-type mc or cloze"
        : a.dump && !(a.text || a.ids) ? "--dump-logits goes with --text or --ids"
        : a.details && !a.task ? "--details goes with --task"
        : (a.csv || a.plot) && !a.all ? "--csv and --plot go with --all"
        : a.all && a.dump ? "--dump-logits writes one checkpoint's logits: not with --all" : NULL;
    if (err) {
        fprintf(stderr, "grit eval: %s\n", err);
        usage(stderr);
        return 2;
    }
    omp_set_num_threads(a.threads);
    openblas_set_num_threads(a.threads);
    bpe *tk = NULL;
    bpe_ctx *tok = NULL;
    uint32_t eod = 0;
    int code = 1;
    if (a.tokenizer && (bpe_open_hf(&tk, a.tokenizer) != GRIT_OK || bpe_ctx_open(&tok, tk) != GRIT_OK)) {
        fprintf(stderr, "grit eval: %s\n", grit_errmsg());
        goto out;
    }
    /* the end-of-text token of the family: GPT-NeoX/Falcon, Llama 2, Llama 3 */
    if (tk && bpe_token_id(tk, "<|endoftext|>", 13, &eod) != GRIT_OK &&
        bpe_token_id(tk, "</s>", 4, &eod) != GRIT_OK &&
        bpe_token_id(tk, "<|end_of_text|>", 15, &eod) != GRIT_OK && (a.jsonl || a.task)) {
        fprintf(stderr, "grit eval: %s has none of <|endoftext|>, </s>, <|end_of_text|> (needed "
                        "between documents and before an empty context)\n", a.tokenizer);
        goto out;
    }
    if (a.all) {
        code = eval_all(&a, tk, tok, eod);
        goto out;
    }
    eval_model e;
    eval_res r = {.step = -1};
    if (eval_open(&e, a.ckpt, a.threads) != GRIT_OK) {
        fprintf(stderr, "grit eval: %s\n", grit_errmsg());
        goto out;
    }
    double t0 = now_seconds();
    grit_err rc = measure(&a, &e, tk, tok, eod, &r);
    if (rc != GRIT_OK) {
        fprintf(stderr, "grit eval: %s\n", grit_errmsg());
    } else {
        print_result(&a, &r, e.where);
        if (!a.quiet && !a.json)
            fprintf(stderr, "grit eval: %s, %.2f s\n", e.where, now_seconds() - t0);
        code = 0;
    }
    eval_close(&e);
out:
    bpe_ctx_close(tok);
    bpe_close(tk);
    return code;
}
