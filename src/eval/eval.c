/* eval.c - log-likelihoods and windowed perplexity (see eval.h). */
#include "eval/eval.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/pretrained.h"
#include "core/fsutil.h"

#define EVAL_ROWS 128 /* positions per forward piece: the logits scratch is rows x vocab */

grit_err eval_open(eval_model *e, const char *path, int nthreads)
{
    memset(e, 0, sizeof *e);
    grit_err rc = pretrained_load(path, &e->m, nthreads, e->where, sizeof e->where);
    if (rc != GRIT_OK)
        return rc;
    e->vocab = e->m.cfg.vocab;
    e->ctx = e->m.cfg.max_positions;
    e->rows = EVAL_ROWS < e->ctx ? EVAL_ROWS : e->ctx;
    if ((rc = gxi_init(&e->s, &e->m, e->ctx, e->rows, nthreads)) != GRIT_OK)
        goto fail;
    e->logits = malloc(sizeof *e->logits * (size_t)e->rows * (size_t)e->vocab);
    e->plast = malloc(sizeof *e->plast * (size_t)e->vocab);
    e->prefix = malloc(sizeof *e->prefix * (size_t)e->ctx);
    if (!e->logits || !e->plast || !e->prefix) {
        rc = grit_errf(GRIT_ENOMEM, "out of memory for %d x %d logits", e->rows, e->vocab);
        goto fail;
    }
    return GRIT_OK;
fail:
    eval_close(e);
    return rc;
}

void eval_close(eval_model *e)
{
    free(e->logits);
    free(e->plast);
    free(e->prefix);
    gxi_free(&e->s);
    gx_free(&e->m);
    memset(e, 0, sizeof *e);
}

/* log p(next) from one row of logits, in double; *is_max: next is the argmax
 * (lowest id on ties). */
static double row_logprob(const float *x, int V, int32_t next, unsigned char *is_max)
{
    int arg = 0;
    for (int v = 1; v < V; v++)
        if (x[v] > x[arg])
            arg = v;
    double mx = x[arg], sum = 0;
    for (int v = 0; v < V; v++)
        sum += exp((double)x[v] - mx);
    if (is_max)
        *is_max = arg == next;
    return (double)x[next] - mx - log(sum);
}

static grit_err check_ids(const eval_model *e, const int32_t *tok, int n)
{
    for (int i = 0; i < n; i++)
        if (tok[i] < 0 || tok[i] >= e->vocab)
            return grit_errf(GRIT_EINVAL, "token %d at position %d: expected an id below the "
                                          "vocabulary size %d", tok[i], i, e->vocab);
    return GRIT_OK;
}

grit_err eval_score(eval_model *e, const int32_t *tok, int n, double *lp, unsigned char *greedy,
                    float *logits)
{
    if (n < 2 || n > e->ctx)
        return grit_errf(GRIT_EINVAL, "a sequence of %d tokens: expected 2 to %d (the model's "
                                      "context)", n, e->ctx);
    grit_err rc = check_ids(e, tok, n);
    if (rc != GRIT_OK)
        return rc;
    e->nprefix = 0; /* the cache is about to hold this sequence */
    gxi_reset(&e->s);
    size_t V = (size_t)e->vocab;
    for (int at = 0; at < n; at += e->rows) {
        int k = n - at < e->rows ? n - at : e->rows;
        float *out = logits ? logits + (size_t)at * V : e->logits;
        if ((rc = gxi_forward(&e->s, tok + at, k, NULL, out)) != GRIT_OK)
            return rc;
        for (int j = 0; j < k && at + j + 1 < n; j++)
            lp[at + j] = row_logprob(out + (size_t)j * V, e->vocab, tok[at + j + 1],
                                     greedy ? greedy + at + j : NULL);
    }
    return GRIT_OK;
}

grit_err eval_score_after(eval_model *e, const int32_t *prefix, int n, const int32_t *cont, int m,
                          double *lp, unsigned char *greedy)
{
    if (n < 1 || m < 1 || n + m > e->ctx)
        return grit_errf(GRIT_EINVAL, "%d + %d tokens: expected at least one of each and at most "
                                      "%d together (the model's context)", n, m, e->ctx);
    grit_err rc = check_ids(e, prefix, n);
    if (rc == GRIT_OK)
        rc = check_ids(e, cont, m);
    if (rc != GRIT_OK)
        return rc;
    size_t V = (size_t)e->vocab;
    if (e->nprefix != n || memcmp(e->prefix, prefix, sizeof *prefix * (size_t)n)) {
        e->nprefix = 0;
        gxi_reset(&e->s);
        for (int at = 0; at < n; at += e->rows) {
            int k = n - at < e->rows ? n - at : e->rows;
            if ((rc = gxi_forward(&e->s, prefix + at, k, e->plast, NULL)) != GRIT_OK)
                return rc;
        }
        memcpy(e->prefix, prefix, sizeof *prefix * (size_t)n);
        e->nprefix = n;
    }
    /* forget what a previous continuation appended: the cache's first n positions are the
     * prefix (gxi_state.pos counts the positions in use; later ones are overwritten) */
    e->s.pos = n;
    lp[0] = row_logprob(e->plast, e->vocab, cont[0], greedy);
    for (int at = 0; at + 1 < m; at += e->rows) {
        int k = m - 1 - at < e->rows ? m - 1 - at : e->rows;
        if ((rc = gxi_forward(&e->s, cont + at, k, NULL, e->logits)) != GRIT_OK)
            return rc;
        for (int j = 0; j < k; j++)
            lp[at + j + 1] = row_logprob(e->logits + (size_t)j * V, e->vocab, cont[at + j + 1],
                                         greedy ? greedy + at + j + 1 : NULL);
    }
    return GRIT_OK;
}

grit_err eval_stream(eval_model *e, const int32_t *tok, size_t n, int seq_len, double *lp_scratch,
                     eval_total *t)
{
    if (seq_len < 1 || seq_len >= e->ctx)
        return grit_errf(GRIT_EINVAL, "seq_len %d: expected 1 to %d (the model's context less "
                                      "one)", seq_len, e->ctx - 1);
    for (size_t at = 0; at + 1 < n; at += (size_t)seq_len) {
        size_t k = n - at < (size_t)seq_len + 1 ? n - at : (size_t)seq_len + 1;
        grit_err rc = eval_score(e, tok + at, (int)k, lp_scratch, NULL, NULL);
        if (rc != GRIT_OK)
            return rc;
        for (size_t i = 0; i + 1 < k; i++)
            t->nll -= lp_scratch[i];
        t->tokens += (long)(k - 1);
        t->windows++;
    }
    return GRIT_OK;
}

grit_err eval_jsonl_tokens(const char *path, const char *field, bpe_ctx *tok, uint32_t eod,
                           long max_tokens, int32_t **stream, size_t *n, long *bytes)
{
    char *text = NULL;
    size_t len = 0;
    grit_err rc = fs_read_all(path, &text, &len);
    if (rc != GRIT_OK)
        return rc;
    bpe_ids ids = {0};
    long line = 0, docs = 0;
    for (char *p = text, *end = text + len; rc == GRIT_OK && p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p)), *cur = p;
        size_t k = (size_t)((nl ? nl : end) - p);
        p = nl ? nl + 1 : end;
        line++;
        if (k == 0 || (k == 1 && cur[0] == '\r'))
            continue;
        if (max_tokens && (long)*n >= max_tokens)
            break;
        json_error_t je;
        json_t *o = json_loadb(cur, k, 0, &je), *v = json_object_get(o, field);
        if (!json_is_object(o))
            rc = grit_errf(GRIT_EFORMAT, "%s:%ld:%d: expected a JSON object per line%s%s", path,
                           line, o ? 1 : je.column, o ? "" : ": ", o ? "" : je.text);
        else if (!json_is_string(v))
            rc = grit_errf(GRIT_EFORMAT, "%s:%ld: field '%s': expected a string%s", path, line,
                           field, v ? "" : " (missing)");
        else {
            size_t sl = json_string_length(v);
            ids.n = 0;
            rc = bpe_encode(tok, json_string_value(v), sl, 0, &ids);
            size_t add = ids.n + 1;
            if (max_tokens && (long)(*n + add) > max_tokens)
                add = (size_t)max_tokens - *n;
            int32_t *ns = rc == GRIT_OK ? realloc(*stream, sizeof *ns * (*n + add)) : NULL;
            if (rc == GRIT_OK && !ns)
                rc = grit_errf(GRIT_ENOMEM, "out of memory for %zu tokens", *n + add);
            if (rc == GRIT_OK) {
                *stream = ns;
                for (size_t i = 0; i < add; i++)
                    ns[*n + i] = i < ids.n ? (int32_t)ids.v[i] : (int32_t)eod;
                *n += add;
                *bytes += (long)sl;
                docs++;
            }
        }
        json_decref(o);
    }
    if (rc == GRIT_OK && docs == 0)
        rc = grit_errf(GRIT_EFORMAT, "%s: no documents (one JSON object per line, with a string "
                       "field '%s')", path, field);
    bpe_ids_free(&ids);
    free(text);
    return rc;
}
