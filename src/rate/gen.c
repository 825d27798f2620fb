/*
 * gen.c - `grit rate batch`: every prompt of the DB answered by every checkpoint,
 * in process, on the inference path of `grit generate` (model/gptneox_infer.h:
 * the same KV cache, the same sampling and the same seed stream), so an answer
 * is the text `grit generate --chat ... --seed S` prints for that prompt.
 *
 * One checkpoint is loaded at a time; its answers go into the batch's single
 * transaction, committed after the last checkpoint: a batch interrupted half
 * way leaves no partial batch for raters to see. Each answer records the
 * folder actually loaded (a run directory resolves to its newest step), the
 * step parsed from that folder's name (step_NNNNNNNN; -1 for other folders,
 * e.g. a Hugging Face download) and the prompt-set version. Byte-level tokens
 * can end inside a UTF-8 sequence, so an answer's bytes are made valid UTF-8
 * before they are stored (each invalid byte becomes U+FFFD, as Hugging Face's
 * decode with errors="replace"): SQLite TEXT, JSON and the page need it.
 */
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "ckpt/pretrained.h"
#include "core/rng.h"
#include "data/bpe.h"
#include "data/sft.h"
#include "model/gptneox_infer.h"
#include "rate/rate_internal.h"

typedef struct gen_ctx {
    bpe *tok;
    bpe_ctx *bc;
    const char *tokpath;
    uint32_t stop[5];
    int nstop;
    gx_model m;
    gxi_state s;
    float *logits;
} gen_ctx;

static int64_t step_of(const char *where)
{
    const char *b = strrchr(where, '/');
    b = b ? b + 1 : where;
    if (strncmp(b, "step_", 5) != 0 || !b[5])
        return -1;
    char *end;
    long long v = strtoll(b + 5, &end, 10);
    return *end ? -1 : v;
}

/* Appends bytes to a growing string. */
static int append(char **buf, size_t *len, size_t *cap, const char *p, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t c = (*cap ? *cap : 256);
        while (c < *len + n + 1)
            c *= 2;
        char *t = realloc(*buf, c);
        if (!t)
            return -1;
        *buf = t, *cap = c;
    }
    memcpy(*buf + *len, p, n);
    *len += n;
    (*buf)[*len] = 0;
    return 0;
}

/* text made valid UTF-8 in place of *buf (invalid bytes -> U+FFFD); -1 without memory */
static int valid_utf8(char **buf, size_t len)
{
    char *out = malloc(3 * len + 1);
    if (!out)
        return -1;
    size_t o = 0;
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)*buf;
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t n = utf8proc_iterate(p + i, (utf8proc_ssize_t)(len - i), &cp);
        if (n > 0 && cp != 0) {
            memcpy(out + o, p + i, (size_t)n);
            o += (size_t)n, i += (size_t)n;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3, i++;
        }
    }
    out[o] = 0;
    free(*buf);
    *buf = out;
    return 0;
}

static grit_err answer(gen_ctx *g, const rate_batch_opts *o, const char *prompt, int index,
                       char **out)
{
    bpe_ids ids = {0};
    grit_err rc;
    *out = NULL;
    if (o->chat) {
        sft_template t;
        if ((rc = sft_template_parse(o->chat, &t)) == GRIT_OK)
            rc = sft_render_prompt(g->tok, g->tokpath, t, prompt, &ids, NULL);
    } else {
        rc = bpe_encode(g->bc, prompt, strlen(prompt), BPE_ALLOW_SPECIAL | BPE_ADD_SPECIAL, &ids);
    }
    if (rc)
        return rc;
    int ctxlen = g->m.cfg.max_positions;
    if (ids.n == 0 || (int)ids.n >= ctxlen) {
        bpe_ids_free(&ids);
        return grit_errf(GRIT_EINVAL, "prompt %d: %zu tokens; expected 1 to %d (the context)",
                         index + 1, ids.n, ctxlen - 1);
    }
    int want = o->max_tokens;
    if ((int)ids.n + want > ctxlen)
        want = ctxlen - (int)ids.n;
    gxi_reset(&g->s);
    rng_t rng;
    rng_seed(&rng, o->seed, 0x67656e + (uint64_t)index); /* grit generate's stream + prompt */
    char *buf = NULL;
    size_t len = 0, cap = 0;
    if (append(&buf, &len, &cap, "", 0)) {
        bpe_ids_free(&ids);
        return grit_errf(GRIT_ENOMEM, "out of memory");
    }
    rc = gxi_forward(&g->s, (const int32_t *)ids.v, (int)ids.n, g->logits, NULL);
    for (int made = 0; rc == GRIT_OK && made < want; made++) {
        int32_t next = gxi_sample(&g->s, g->logits, o->temperature, 0, 1.0, &rng);
        int end = 0;
        for (int k = 0; k < g->nstop; k++)
            end |= (uint32_t)next == g->stop[k];
        if (end)
            break;
        size_t n;
        const char *b = bpe_token_bytes(g->tok, (uint32_t)next, &n);
        if (b && append(&buf, &len, &cap, b, n))
            rc = grit_errf(GRIT_ENOMEM, "out of memory");
        if (rc == GRIT_OK && made + 1 < want)
            rc = gxi_forward(&g->s, &next, 1, g->logits, NULL);
    }
    bpe_ids_free(&ids);
    if (rc == GRIT_OK && valid_utf8(&buf, len))
        rc = grit_errf(GRIT_ENOMEM, "out of memory");
    if (rc)
        free(buf);
    else
        *out = buf;
    return rc;
}

/* Loads one checkpoint and answers every prompt into the open transaction. */
static grit_err one_checkpoint(rate_db *d, const rate_batch_opts *o, const char *ck, int64_t batch,
                               const char *version, int *nanswers)
{
    gen_ctx g;
    memset(&g, 0, sizeof g);
    char tokpath[4400], where[4400];
    if (o->tokenizer)
        snprintf(tokpath, sizeof tokpath, "%s", o->tokenizer);
    else
        snprintf(tokpath, sizeof tokpath, "%s/tokenizer.json", ck);
    g.tokpath = tokpath;
    grit_err rc = bpe_open_hf(&g.tok, tokpath);
    static const char *const ends[] = {"<|endoftext|>", "</s>", "<|end_of_text|>", "<|eot_id|>",
                                       "<|im_end|>"};
    for (size_t k = 0; rc == GRIT_OK && k < sizeof ends / sizeof *ends; k++)
        if (bpe_token_id(g.tok, ends[k], strlen(ends[k]), &g.stop[g.nstop]) == GRIT_OK)
            g.nstop++;
    if (rc == GRIT_OK)
        rc = bpe_ctx_open(&g.bc, g.tok);
    if (rc == GRIT_OK)
        rc = pretrained_load(ck, &g.m, o->threads, where, sizeof where);
    if (rc == GRIT_OK)
        rc = gxi_init(&g.s, &g.m, g.m.cfg.max_positions, 256, o->threads);
    if (rc == GRIT_OK && !(g.logits = malloc(sizeof *g.logits * (size_t)g.m.cfg.vocab)))
        rc = grit_errf(GRIT_ENOMEM, "out of memory");
    int64_t step = step_of(where);
    sqlite3_stmt *q = NULL;
    if (rc == GRIT_OK)
        rc = rate__prep(d, &q, "SELECT id, prompt FROM prompts ORDER BY ord", "");
    int index = 0, made = 0;
    double t0 = rate__now();
    while (rc == GRIT_OK && sqlite3_step(q) == SQLITE_ROW) {
        char *text = NULL;
        const char *pid = (const char *)sqlite3_column_text(q, 0);
        if ((rc = answer(&g, o, (const char *)sqlite3_column_text(q, 1), index, &text)) != GRIT_OK)
            break;
        sqlite3_stmt *s;
        if ((rc = rate__prep(d, &s,
                             "INSERT INTO answers(batch, prompt, version, checkpoint, step, text,"
                             " created) VALUES(?,?,?,?,?,?,?)",
                             "lsssls" "d", batch, pid, version, where, step, text,
                             rate__now())) == GRIT_OK)
            rc = rate__run(d, s);
        free(text);
        index++, made++;
    }
    if (q)
        sqlite3_finalize(q);
    if (rc == GRIT_OK && o->log)
        fprintf(o->log, "grit rate batch: %s (step %lld): %d answers in %.1fs\n", where,
                (long long)step, made, rate__now() - t0);
    *nanswers += made;
    free(g.logits);
    gxi_free(&g.s);
    gx_free(&g.m);
    bpe_ctx_close(g.bc);
    bpe_close(g.tok);
    return rc;
}

grit_err rate_batch(rate_db *d, const rate_batch_opts *o, int64_t *batch, int *nanswers)
{
    char version[80];
    *nanswers = 0;
    *batch = 0;
    grit_err rc = rate_version(d, version, sizeof version);
    if (rc)
        return rc;
    if (!version[0])
        return grit_errf(GRIT_EINVAL, "%s: no prompt set (run grit rate init %s --prompts FILE)",
                         d->path, d->path);
    if (o->ncheckpoints < 1)
        return grit_errf(GRIT_EINVAL, "no --checkpoint given");
    if (o->chat) {
        sft_template t;
        if ((rc = sft_template_parse(o->chat, &t)))
            return rc;
    }
    omp_set_num_threads(o->threads);
    openblas_set_num_threads(o->threads);
    pthread_mutex_lock(&d->mu);
    sqlite3_stmt *s;
    rc = rate__exec(d, "BEGIN IMMEDIATE");
    if (rc == GRIT_OK &&
        (rc = rate__prep(d, &s,
                         "INSERT INTO batches(created, version, max_tokens, temperature, seed)"
                         " VALUES(?,?,?,?,?)",
                         "dsidl", rate__now(), version, o->max_tokens, o->temperature,
                         (int64_t)o->seed)) == GRIT_OK &&
        (rc = rate__run(d, s)) == GRIT_OK)
        *batch = sqlite3_last_insert_rowid(d->db);
    for (int k = 0; rc == GRIT_OK && k < o->ncheckpoints; k++)
        rc = one_checkpoint(d, o, o->checkpoints[k], *batch, version, nanswers);
    if (rc == GRIT_OK)
        rc = rate__exec(d, "COMMIT");
    else
        sqlite3_exec(d->db, "ROLLBACK", NULL, NULL, NULL);
    pthread_mutex_unlock(&d->mu);
    return rc;
}
