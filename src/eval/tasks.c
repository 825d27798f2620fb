/* tasks.c - multiple-choice and cloze scoring from JSONL task files (see tasks.h). */
#include "eval/tasks.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fsutil.h"

/* One item's scratch, reused across items: token ids and log-probabilities. */
typedef struct task_buf {
    bpe_ids ctx, cont;
    int32_t *a, *b; /* the ids as the model takes them */
    double *lp;
    unsigned char *greedy;
    size_t cap;
} task_buf;

static grit_err buf_fit(task_buf *t, size_t n)
{
    if (n <= t->cap)
        return GRIT_OK;
    int32_t *a = realloc(t->a, n * sizeof *a), *b = a ? realloc(t->b, n * sizeof *b) : NULL;
    if (a)
        t->a = a;
    if (b)
        t->b = b;
    double *lp = b ? realloc(t->lp, n * sizeof *lp) : NULL;
    if (lp)
        t->lp = lp;
    unsigned char *g = lp ? realloc(t->greedy, n) : NULL;
    if (!g)
        return grit_errf(GRIT_ENOMEM, "out of memory for %zu tokens", n);
    t->greedy = g;
    t->cap = n;
    return GRIT_OK;
}

static void buf_free(task_buf *t)
{
    bpe_ids_free(&t->ctx);
    bpe_ids_free(&t->cont);
    free(t->a);
    free(t->b);
    free(t->lp);
    free(t->greedy);
}

/* Unicode code points in s (UTF-8; an invalid byte counts as one). */
static long codepoints(const char *s)
{
    long n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* Tokenizes context and (delim + cont) and scores the continuation: *ll its summed
 * log-likelihood, *all_greedy whether every token was the most likely. */
static grit_err score_pair(eval_model *e, bpe_ctx *tok, const task_opts *o, task_buf *t,
                           const char *context, const char *delim, const char *cont, double *ll,
                           int *all_greedy, const char *path, long line, FILE *det)
{
    t->ctx.n = t->cont.n = 0;
    grit_err rc = bpe_encode(tok, context, strlen(context), 0, &t->ctx);
    size_t dl = strlen(delim), cl = strlen(cont);
    char *joined = rc == GRIT_OK ? malloc(dl + cl + 1) : NULL;
    if (rc == GRIT_OK && !joined)
        rc = grit_errf(GRIT_ENOMEM, "out of memory");
    if (rc == GRIT_OK) {
        memcpy(joined, delim, dl);
        memcpy(joined + dl, cont, cl + 1);
        rc = bpe_encode(tok, joined, dl + cl, 0, &t->cont);
    }
    free(joined);
    if (rc != GRIT_OK)
        return rc;
    if (t->cont.n == 0)
        return grit_errf(GRIT_EINVAL, "%s:%ld: the continuation \"%.40s\" has no tokens", path, line,
                         cont);
    if (t->cont.n >= (size_t)e->ctx)
        return grit_errf(GRIT_EINVAL, "%s:%ld: the continuation has %zu tokens; the model's context "
                         "is %d", path, line, t->cont.n, e->ctx);
    if ((rc = buf_fit(t, t->ctx.n + t->cont.n + 1)) != GRIT_OK)
        return rc;
    size_t n = t->ctx.n, m = t->cont.n;
    if (n == 0) { /* nothing to condition on: start from the end-of-document token */
        t->a[0] = (int32_t)o->start;
        n = 1;
    } else {
        for (size_t i = 0; i < n; i++)
            t->a[i] = (int32_t)t->ctx.v[i];
    }
    for (size_t i = 0; i < m; i++)
        t->b[i] = (int32_t)t->cont.v[i];
    size_t keep = n + m > (size_t)e->ctx ? (size_t)e->ctx - m : n; /* the context's last tokens */
    if ((rc = eval_score_after(e, t->a + (n - keep), (int)keep, t->b, (int)m, t->lp, t->greedy)) !=
        GRIT_OK)
        return rc;
    *ll = 0;
    *all_greedy = 1;
    for (size_t i = 0; i < m; i++) {
        *ll += t->lp[i];
        *all_greedy &= t->greedy[i];
    }
    if (det) {
        fprintf(det, "{\"context_ids\":[");
        for (size_t i = n - keep; i < n; i++)
            fprintf(det, "%s%d", i > n - keep ? "," : "", t->a[i]);
        fprintf(det, "],\"continuation_ids\":[");
        for (size_t i = 0; i < m; i++)
            fprintf(det, "%s%d", i ? "," : "", t->b[i]);
        fprintf(det, "],\"loglikelihood\":%.17g,\"greedy\":%s}", *ll, *all_greedy ? "true" : "false");
    }
    return GRIT_OK;
}

static grit_err field_str(json_t *item, const char *key, const char *path, long line,
                          const char **out)
{
    json_t *v = json_object_get(item, key);
    if (!json_is_string(v))
        return grit_errf(GRIT_EFORMAT, "%s:%ld: field '%s': expected a string%s", path, line, key,
                         v ? "" : " (missing)");
    *out = json_string_value(v);
    return GRIT_OK;
}

static grit_err run_mc(eval_model *e, bpe_ctx *tok, const task_opts *o, task_buf *t, json_t *item,
                       const char *path, long line, task_result *r)
{
    const char *context = NULL;
    grit_err rc = field_str(item, "context", path, line, &context);
    if (rc != GRIT_OK)
        return rc;
    json_t *ch = json_object_get(item, "choices"), *g = json_object_get(item, "gold");
    size_t nc = json_array_size(ch);
    if (!json_is_array(ch) || nc < 2)
        return grit_errf(GRIT_EFORMAT, "%s:%ld: field 'choices': expected an array of at least two "
                         "strings", path, line);
    if (!json_is_integer(g) || json_integer_value(g) < 0 || (size_t)json_integer_value(g) >= nc)
        return grit_errf(GRIT_EFORMAT, "%s:%ld: field 'gold': expected the index of the right "
                         "choice, 0 to %zu", path, line, nc - 1);
    long gold = (long)json_integer_value(g);
    long best = 0, best_norm = 0;
    double best_ll = -INFINITY, best_nll = -INFINITY;
    if (o->details)
        fprintf(o->details, "{\"line\":%ld,\"gold\":%ld,\"choices\":[", line, gold);
    for (size_t c = 0; c < nc; c++) {
        json_t *cj = json_array_get(ch, c);
        if (!json_is_string(cj))
            return grit_errf(GRIT_EFORMAT, "%s:%ld: field 'choices[%zu]': expected a string", path,
                             line, c);
        if (o->details && c)
            fputc(',', o->details);
        double ll;
        int gr;
        const char *cs = json_string_value(cj);
        if ((rc = score_pair(e, tok, o, t, context, o->delim ? o->delim : " ", cs, &ll, &gr, path,
                             line, o->details)) != GRIT_OK)
            return rc;
        long len = codepoints(cs);
        double norm = ll / (double)(len > 0 ? len : 1);
        if (ll > best_ll)
            best_ll = ll, best = (long)c;
        if (norm > best_nll)
            best_nll = norm, best_norm = (long)c;
    }
    if (o->details)
        fprintf(o->details, "],\"pred\":%ld,\"pred_norm\":%ld}\n", best, best_norm);
    r->correct += best == gold;
    r->correct_norm += best_norm == gold;
    return GRIT_OK;
}

static grit_err run_cloze(eval_model *e, bpe_ctx *tok, const task_opts *o, task_buf *t,
                          json_t *item, const char *path, long line, task_result *r)
{
    const char *text = NULL;
    grit_err rc = field_str(item, "text", path, line, &text);
    if (rc != GRIT_OK)
        return rc;
    size_t len = strlen(text);
    while (len && (text[len - 1] == ' ' || text[len - 1] == '\n' || text[len - 1] == '\t'))
        len--; /* trailing white space is not part of the last word */
    size_t cut = len;
    while (cut && text[cut - 1] != ' ')
        cut--;
    if (cut == 0)
        return grit_errf(GRIT_EFORMAT, "%s:%ld: field 'text': expected words separated by spaces "
                         "(the last one is the target)", path, line);
    char *ctx = strndup(text, cut - 1), *word = strndup(text + cut, len - cut);
    if (!ctx || !word) {
        free(ctx);
        free(word);
        return grit_errf(GRIT_ENOMEM, "out of memory");
    }
    double ll;
    int gr;
    if (o->details)
        fprintf(o->details, "{\"line\":%ld,\"target\":", line);
    if (o->details) {
        json_t *w = json_string(word);
        char *s = w ? json_dumps(w, JSON_ENCODE_ANY) : NULL;
        fprintf(o->details, "%s,\"score\":", s ? s : "null");
        free(s);
        json_decref(w);
    }
    rc = score_pair(e, tok, o, t, ctx, o->delim ? o->delim : " ", word, &ll, &gr, path, line,
                    o->details);
    if (o->details)
        fprintf(o->details, "}\n");
    free(ctx);
    free(word);
    if (rc != GRIT_OK)
        return rc;
    r->correct += gr;
    r->sum_ll += ll;
    r->target_tokens += (long)t->cont.n;
    return GRIT_OK;
}

grit_err task_run(eval_model *e, bpe_ctx *tok, const char *path, const task_opts *o,
                  task_result *out)
{
    memset(out, 0, sizeof *out);
    out->kind = o->kind;
    char *text = NULL;
    size_t len = 0;
    grit_err rc = fs_read_all(path, &text, &len);
    if (rc != GRIT_OK)
        return rc;
    task_buf t = {0};
    long line = 0;
    for (char *p = text, *end = text + len; rc == GRIT_OK && p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p)), *eol = nl ? nl : end;
        line++;
        size_t n = (size_t)(eol - p);
        char *cur = p;
        p = nl ? nl + 1 : end;
        int blank = 1;
        for (size_t i = 0; i < n && blank; i++)
            blank = cur[i] == ' ' || cur[i] == '\t' || cur[i] == '\r';
        if (blank)
            continue;
        if (o->limit && out->n >= o->limit)
            break;
        json_error_t je;
        json_t *item = json_loadb(cur, n, 0, &je);
        if (!json_is_object(item)) {
            rc = grit_errf(GRIT_EFORMAT, "%s:%ld:%d: expected a JSON object per line%s%s", path, line,
                           item ? 1 : je.column, item ? "" : ": ", item ? "" : je.text);
        } else {
            rc = o->kind == TASK_MC ? run_mc(e, tok, o, &t, item, path, line, out)
                                    : run_cloze(e, tok, o, &t, item, path, line, out);
            out->n++;
            if (rc == GRIT_OK && o->on_item)
                o->on_item(o->ctx, out->n);
        }
        json_decref(item);
    }
    if (rc == GRIT_OK && out->n == 0)
        rc = grit_errf(GRIT_EFORMAT, "%s: no items (one JSON object per line expected)", path);
    buf_free(&t);
    free(text);
    return rc;
}

double task_acc(long correct, long n)
{
    return n > 0 ? (double)correct / (double)n : 0;
}

double task_stderr(long correct, long n)
{
    if (n < 2)
        return 0;
    double p = task_acc(correct, n);
    return sqrt(p * (1 - p) / (double)(n - 1));
}
