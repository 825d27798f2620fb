/*
 * prep.c - the grit prep driver: plan, the three stages, markers, report.
 * The design (stages, files, resumability) is in prep.h.
 *
 * Files: prep.c (plan check, stages 1 and 3, the thread pool, prep_run),
 * prep_dedup.c (stage 2), prep_report.c (report), prep_output.c (manifest,
 * data_mix.json, publishing to s3://); shared internals in prep_internal.h.
 *
 * Unit states, per (stage, shard):
 *
 *   TODO --run--> outputs written (durable, atomic renames) --marker--> DONE
 *     ^                 |
 *     +--- crash -------+   (a rerun redoes the unit: outputs are replaced
 *                            whole, nothing was appended)
 *
 * A marker is only ever written after its outputs, so DONE implies complete
 * outputs. Parallel stages hand shards to threads through an atomic counter;
 * each thread owns its scratch (language identifier, filter tables, MinHash
 * minima, tokenizer context). The first error stops the other threads at
 * their next shard and is reported with its message.
 */
#include "prep/prep.h"

#define XXH_INLINE_ALL
#include <xxhash.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm.h"
#include "core/fsutil.h"
#include "core/progress.h"
#include "data/bpe.h"
#include "data/indexed.h"
#include "prep/dedup.h"
#include "prep/langid.h"
#include "prep/plan.h"
#include "prep/prep_internal.h"
#include "prep/reader.h"

/* ---- small helpers ---------------------------------------------------- */

void prep__pathf(char *buf, size_t cap, const run *r, const char *fmt, size_t shard)
{
    char tail[128];
    snprintf(tail, sizeof tail, fmt, shard);
    snprintf(buf, cap, "%s/%s", r->c->output, tail);
}

void prep__pathn(char *buf, size_t cap, const run *r, const char *name)
{
    snprintf(buf, cap, "%s/%s", r->c->output, name);
}

int prep__exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* obj[a][b] += v (integers stay integers). */
void prep__jadd(json_t *obj, const char *a, const char *b, double v, int integer)
{
    json_t *o = json_object_get(obj, a);
    if (!o) {
        o = json_object();
        json_object_set_new(obj, a, o);
    }
    json_t *x = json_object_get(o, b);
    double cur = x ? json_number_value(x) : 0;
    json_object_set_new(o, b, integer ? json_integer((json_int_t)llround(cur + v))
                                      : json_real(cur + v));
}

void prep__stage_add(json_t *st, const char *stage, double din, double dout, double bin,
                      double bout)
{
    json_t *s = json_object_get(st, "stages");
    if (!s) {
        s = json_object();
        json_object_set_new(st, "stages", s);
    }
    prep__jadd(s, stage, "docs_in", din, 1);
    prep__jadd(s, stage, "docs_out", dout, 1);
    prep__jadd(s, stage, "bytes_in", bin, 1);
    prep__jadd(s, stage, "bytes_out", bout, 1);
}

void prep__stage_time(json_t *st, const char *stage, double sec)
{
    json_t *s = json_object_get(st, "stages");
    if (!s) {
        s = json_object();
        json_object_set_new(st, "stages", s);
    }
    prep__jadd(s, stage, "seconds", sec, 0);
}

/* dst += src, recursively (numbers add, objects merge). */
void prep__jsum(json_t *dst, json_t *src)
{
    const char *k;
    json_t *v;
    json_object_foreach(src, k, v) {
        json_t *d = json_object_get(dst, k);
        if (json_is_object(v)) {
            if (!d) {
                d = json_object();
                json_object_set_new(dst, k, d);
            }
            prep__jsum(d, v);
        } else if (json_is_integer(v)) {
            json_int_t cur = json_is_integer(d) ? json_integer_value(d) : 0;
            json_object_set_new(dst, k, json_integer(cur + json_integer_value(v)));
        } else if (json_is_number(v)) {
            double cur = d ? json_number_value(d) : 0;
            json_object_set_new(dst, k, json_real(cur + json_number_value(v)));
        }
    }
}

grit_err prep__write_json(const char *path, json_t *o)
{
    char *s = json_dumps(o, JSON_INDENT(1) | JSON_SORT_KEYS | JSON_REAL_PRECISION(9));
    if (!s)
        return GRIT_ENOMEM;
    const void *bufs[2] = {s, "\n"};
    size_t lens[2] = {strlen(s), 1};
    grit_err rc = fs_write_durable_iov(path, bufs, lens, 2);
    free(s);
    return rc;
}

grit_err prep__write_marker(run *r, const char *path, json_t *o)
{
    grit_err rc = prep__write_json(path, o);
    if (rc == GRIT_OK && r->h && r->h->on_marker)
        r->h->on_marker(r->h->arg, path);
    return rc;
}

grit_err prep__put_jsonl(prep_buf *b, json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(4));
    json_decref(o);
    if (!s)
        return GRIT_ENOMEM;
    grit_err rc = prep_buf_put(b, s, strlen(s));
    free(s);
    if (rc == GRIT_OK)
        rc = prep_buf_put(b, "\n", 1);
    return rc;
}

/* Replaces invalid UTF-8 and NUL bytes by '?' / ' ' in place (CLD2 and
 * jansson need valid UTF-8). */
static void utf8_fix(char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            if (c == 0)
                s[i] = ' ';
            i++;
            continue;
        }
        size_t len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
        int ok = len > 0 && i + len <= n;
        for (size_t k = 1; ok && k < len; k++)
            ok = ((unsigned char)s[i + k] & 0xC0) == 0x80;
        if (ok && len == 3) {
            unsigned char c1 = (unsigned char)s[i + 1];
            ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);
        } else if (ok && len == 4) {
            unsigned char c1 = (unsigned char)s[i + 1];
            ok = !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
        }
        if (!ok) {
            s[i++] = '?';
            continue;
        }
        i += len;
    }
}

static void fail(run *r, grit_err e)
{
    pthread_mutex_lock(&r->mu);
    if (r->err == GRIT_OK) {
        r->err = e;
        snprintf(r->errmsg, sizeof r->errmsg, "%s", *grit_errmsg() ? grit_errmsg()
                                                                   : grit_strerror(e));
    }
    pthread_mutex_unlock(&r->mu);
    atomic_store(&r->failed, 1);
}

/* ---- stage 1: docs ---------------------------------------------------- */
static grit_err drop(tctx *t, json_t *st, const char *url, const char *stage,
                     const char *reason, const char *lang)
{
    prep__jadd(st, "drops", reason, 1, 1);
    json_t *o = json_pack("{s:s, s:s, s:s}", "url", url, "stage", stage, "reason", reason);
    if (!o)
        return GRIT_ENOMEM;
    if (lang)
        json_object_set_new(o, "lang", json_string(lang));
    return prep__put_jsonl(&t->drops, o);
}

static int lang_kept(const prep_cfg *c, const char *code)
{
    if (c->n_langs == 0)
        return 1;
    for (int i = 0; i < c->n_langs; i++)
        if (!strcmp(c->langs[i], code))
            return 1;
    return 0;
}

static grit_err shard_docs(tctx *t, size_t s)
{
    run *r = t->r;
    const prep_cfg *c = r->c;
    const plan_shard *sh = &r->pl.shards[s];
    const char *srcfield = c->sources[sh->source].field;
    json_t *st = json_object();
    grit_err rc = GRIT_OK;
    uint32_t kept = 0, bands = (uint32_t)c->mh_bands;
    uint64_t keys[4096];
    char *url = NULL, spool[4096 + 64];
    if (!st)
        return GRIT_ENOMEM;
    t->docs.len = t->sig.len = t->drops.len = 0;
    if ((rc = prep_buf_put(&t->sig, SIG_MAGIC "\0\0\0\0\0\0\0\0", 16)) != GRIT_OK)
        goto out;
    for (size_t f = sh->first; f < sh->first + sh->count && rc == GRIT_OK; f++) {
        prep_reader *rd = NULL;
        const plan_file *pf = &r->pl.files[f];
        if (prep_s3_is_url(pf->path)) {
            /* a local spool copy, read and removed here (a stale one: remove_stale_temps) */
            snprintf(spool, sizeof spool, "%s/docs/%05zu.%zu.in.tmp.%ld", c->output, s, f,
                     (long)getpid());
            if ((!t->s3 && (rc = prep_s3_open(&t->s3)) != GRIT_OK) ||
                (rc = prep_s3_fetch(t->s3, pf->path, pf->size, spool)) != GRIT_OK ||
                (rc = prep_reader_open_as(&rd, spool, pf->path, pf->format, srcfield)) != GRIT_OK) {
                unlink(spool);
                break;
            }
        } else if ((rc = prep_reader_open(&rd, pf->path, pf->format, srcfield)) != GRIT_OK) {
            break;
        }
        for (;;) {
            prep_doc d;
            double t0 = now_seconds();
            int k = prep_reader_next(rd, &d);
            double t1 = now_seconds();
            prep__stage_time(st, "read", t1 - t0);
            if (k < 0) {
                rc = (grit_err)k;
                break;
            }
            if (k == 0)
                break;
            prep__stage_add(st, "read", 1, 1, 0, (double)d.len);
            free(url);
            if (!(url = strndup(d.url, d.url_len))) {
                rc = GRIT_ENOMEM;
                break;
            }
            utf8_fix(url, strlen(url));
            /* URL block-list */
            if (r->uf) {
                int why = urlf_check(r->uf, url, strlen(url));
                prep__stage_add(st, "url", 1, why == URLF_KEEP, (double)d.len,
                                why == URLF_KEEP ? (double)d.len : 0);
                if (why != URLF_KEEP) {
                    rc = drop(t, st, url, "url", urlf_reason_name(why), NULL);
                    continue;
                }
            }
            prep__stage_time(st, "url", now_seconds() - t1);
            t1 = now_seconds();
            /* extract */
            if (d.is_html) {
                rc = extract_html(d.body, d.len, &c->extract, &t->tx);
            } else {
                t->tx.len = 0;
                rc = prep_buf_put(&t->tx, d.body, d.len);
                if (rc == GRIT_OK)
                    rc = prep_buf_reserve(&t->tx, 0);
            }
            if (rc != GRIT_OK)
                break;
            utf8_fix(t->tx.p, t->tx.len);
            double t2 = now_seconds();
            prep__stage_time(st, "extract", t2 - t1);
            int empty = 1;
            for (size_t i = 0; i < t->tx.len && empty; i++)
                empty = t->tx.p[i] == ' ' || t->tx.p[i] == '\n' || t->tx.p[i] == '\t';
            prep__stage_add(st, "extract", 1, !empty, (double)d.len, empty ? 0 : (double)t->tx.len);
            if (empty) { /* no text, or too large / too deeply nested to parse (extract.h) */
                const char *refused = d.is_html ? extract_refusal(d.body, d.len, &c->extract) : NULL;
                rc = drop(t, st, url, "extract", refused ? refused : "empty_text", NULL);
                continue;
            }
            /* language */
            char code[8];
            double score;
            langid_detect(t->lid, t->tx.p, t->tx.len, code, &score);
            double t3 = now_seconds();
            prep__stage_time(st, "langid", t3 - t2);
            prep__jadd(st, "languages", code, 1, 1);
            int lk = lang_kept(c, code), sk = score >= c->min_lang_score;
            prep__stage_add(st, "langid", 1, lk && sk, (double)t->tx.len,
                      lk && sk ? (double)t->tx.len : 0);
            if (!lk || !sk) {
                rc = drop(t, st, url, "langid", !lk ? "lang" : "lang_score", code);
                continue;
            }
            /* quality */
            size_t before = t->tx.len;
            int fr = filter_doc(&c->filters, code, t->tx.p, &t->tx.len, &t->fs);
            double t4 = now_seconds();
            prep__stage_time(st, "filter", t4 - t3);
            if (fr == FILTER_ENOMEM) {
                rc = GRIT_ENOMEM;
                break;
            }
            prep__stage_add(st, "filter", 1, fr == FILTER_KEEP, (double)before,
                      fr == FILTER_KEEP ? (double)t->tx.len : 0);
            if (fr != FILTER_KEEP) {
                rc = drop(t, st, url, "filter", filter_name(fr), NULL);
                continue;
            }
            /* signatures */
            uint64_t uh = XXH3_64bits(url, strlen(url));
            uint64_t eh = dedup_exact_hash(t->tx.p, t->tx.len);
            if (bands && (rc = minhash_keys(&t->mh, t->tx.p, t->tx.len, keys)) != GRIT_OK)
                break;
            uint32_t tl = (uint32_t)(t->tx.len > UINT32_MAX ? UINT32_MAX : t->tx.len);
            size_t ul = strlen(url);
            uint16_t ul16 = (uint16_t)(ul > 65535 ? 65535 : ul);
            if ((rc = prep_buf_put(&t->sig, (char *)&uh, 8)) ||
                (rc = prep_buf_put(&t->sig, (char *)&eh, 8)) ||
                (rc = prep_buf_put(&t->sig, (char *)&tl, 4)) ||
                (rc = prep_buf_put(&t->sig, (char *)&ul16, 2)) ||
                (rc = prep_buf_put(&t->sig, url, ul16)) ||
                (rc = prep_buf_put(&t->sig, (char *)keys, bands * sizeof *keys)))
                break;
            json_t *o = json_pack("{s:s, s:s, s:f, s:s%}", "url", url, "lang", code, "score",
                                  score, "text", t->tx.p, t->tx.len);
            if (!o || (rc = prep__put_jsonl(&t->docs, o)) != GRIT_OK) {
                rc = rc ? rc : GRIT_ENOMEM;
                break;
            }
            prep__stage_time(st, "signature", now_seconds() - t4);
            prep__stage_add(st, "signature", 1, 1, (double)t->tx.len, (double)t->tx.len);
            kept++;
            atomic_fetch_add(&r->docs, 1);
        }
        const prep_reader_stats *rs = prep_reader_stats_get(rd);
        prep__stage_add(st, "read", 0, 0, (double)rs->bytes, 0);
        prep__jadd(st, "input", "files", 1, 1);
        prep__jadd(st, "input", "skipped_records", (double)rs->skipped_records, 1);
        prep__jadd(st, "input", "oversized_records", (double)rs->oversized, 1);
        atomic_fetch_add(&r->bytes, rs->bytes);
        prep_reader_close(rd);
        if (prep_s3_is_url(pf->path))
            unlink(spool);
    }
    if (rc != GRIT_OK)
        goto out;
    memcpy(t->sig.p + 8, &kept, 4);
    memcpy(t->sig.p + 12, &bands, 4);
    char p1[4096];
    prep__pathf(p1, sizeof p1, r, "docs/%05zu.jsonl", s);
    if ((rc = fs_write_durable(p1, t->docs.p ? t->docs.p : "", t->docs.len)) != GRIT_OK)
        goto out;
    prep__pathf(p1, sizeof p1, r, "docs/%05zu.sig", s);
    if ((rc = fs_write_durable(p1, t->sig.p, t->sig.len)) != GRIT_OK)
        goto out;
    prep__pathf(p1, sizeof p1, r, "docs/%05zu.drops.jsonl", s);
    if ((rc = fs_write_durable(p1, t->drops.p ? t->drops.p : "", t->drops.len)) != GRIT_OK)
        goto out;
    json_object_set_new(st, "kept", json_integer(kept));
    prep__pathf(p1, sizeof p1, r, "done/docs.%05zu.json", s);
    rc = prep__write_marker(r, p1, st);
out:
    free(url);
    json_decref(st);
    return rc;
}

/* ---- stage 3: tokenize / text ------------------------------------------ */

static grit_err shard_tokenize(tctx *t, size_t s)
{
    run *r = t->r;
    const prep_cfg *c = r->c;
    const prep_source *src = &c->sources[r->pl.shards[s].source];
    double w = src->weight;
    double uniq_docs = 0, uniq_tokens = 0, uniq_bytes = 0;
    double whole = floor(w), frac = w - whole;
    char in[4096], outp[4096];
    prep__pathf(in, sizeof in, r, "docs/%05zu.jsonl", s);
    prep_reader *rd = NULL;
    idx_writer *iw = NULL;
    json_t *st = json_object();
    grit_err rc = st ? prep_reader_open(&rd, in, PREP_FMT_JSONL, "text") : GRIT_ENOMEM;
    uint64_t di = 0, tokens = 0, replaced = 0;
    uint64_t n_docs = (s + 1 < r->pl.n_shards ? r->first_doc[s + 1] : r->n_docs) -
                      r->first_doc[s];
    double t0 = now_seconds();
    char *keep = NULL;
    size_t kl = 0;
    t->docs.len = 0;
    if (rc != GRIT_OK)
        goto out;
    prep__pathf(outp, sizeof outp, r, "dedup/%05zu.keep", s);
    if ((rc = fs_read_all(outp, &keep, &kl)) != GRIT_OK)
        goto out;
    if (kl != n_docs) {
        rc = grit_errf(GRIT_EFORMAT, "%s: %zu decisions for %llu documents; delete the output "
                       "directory and rerun", outp, kl, (unsigned long long)n_docs);
        goto out;
    }
    if (r->tok) {
        prep__pathf(outp, sizeof outp, r, "tokens/%05zu", s);
        if ((rc = idx_writer_open(&iw, outp, r->dtype)) != GRIT_OK)
            goto out;
    }
    for (;;) {
        prep_doc d;
        int k = prep_reader_next(rd, &d);
        if (k < 0) {
            rc = (grit_err)k;
            goto out;
        }
        if (k == 0)
            break;
        if (di >= kl) {
            rc = grit_errf(GRIT_EFORMAT, "%s: more documents than dedup/%05zu.keep has "
                           "decisions; delete the output directory and rerun", in, s);
            goto out;
        }
        int kd = keep[di++];
        prep__stage_add(st, "tokenize", kd, 0, kd ? (double)d.len : 0, 0);
        if (!kd)
            continue;
        uniq_docs++;
        uniq_bytes += (double)d.len;
        int copies = (int)whole;
        if (frac > 0 && (double)(XXH3_64bits(d.body, d.len) >> 11) * 0x1.0p-53 < frac)
            copies++;
        if (copies == 0 && r->tok) { /* left out by its weight: still counted as produced */
            t->ids.n = 0;
            if ((rc = bpe_encode(t->bc, d.body, d.len, BPE_ALLOW_SPECIAL, &t->ids)))
                goto out;
            uniq_tokens += (double)t->ids.n + 1;
        }
        for (int cp = 0; cp < copies; cp++) {
            prep__stage_add(st, "tokenize", 0, 1, 0, (double)d.len);
            if (iw) {
                /* one sequence per document, its end-of-document token appended to it, as
                 * grit tokenize and Megatron's preprocess_data write it */
                t->ids.n = 0;
                uint64_t rep0 = bpe_ctx_replaced(t->bc);
                if ((rc = bpe_encode(t->bc, d.body, d.len, BPE_ALLOW_SPECIAL, &t->ids)))
                    goto out;
                replaced += bpe_ctx_replaced(t->bc) - rep0;
                if (t->ids.n == t->ids.cap) {
                    uint32_t *v = realloc(t->ids.v, sizeof *v * (t->ids.cap + 1));
                    if (!v) {
                        rc = grit_errf(GRIT_ENOMEM, "out of memory tokenizing");
                        goto out;
                    }
                    t->ids.v = v;
                    t->ids.cap++;
                }
                t->ids.v[t->ids.n++] = r->eod;
                if ((rc = idx_writer_add(iw, t->ids.v, t->ids.n)) ||
                    (rc = idx_writer_end_doc(iw)))
                    goto out;
                tokens += t->ids.n;
                if (cp == 0)
                    uniq_tokens += (double)t->ids.n;
            } else {
                json_t *o = json_pack("{s:s%, s:s%}", "url", d.url, d.url_len, "text", d.body,
                                      d.len);
                if (!o || (rc = prep__put_jsonl(&t->docs, o)) != GRIT_OK) {
                    rc = rc ? rc : GRIT_ENOMEM;
                    goto out;
                }
            }
        }
    }
    if (iw) {
        rc = idx_writer_finish(iw);
        iw = NULL;
    } else {
        prep__pathf(outp, sizeof outp, r, "text/%05zu.jsonl", s);
        rc = fs_write_durable(outp, t->docs.p ? t->docs.p : "", t->docs.len);
    }
    if (rc != GRIT_OK)
        goto out;
    prep__jadd(st, "output", "tokens", (double)tokens, 1);
    if (r->tok) /* invalid UTF-8 bytes the tokenizer saw as U+FFFD */
        prep__jadd(st, "output", "replaced_utf8_bytes", (double)replaced, 1);
    {
        /* per source, after dedup: documents, bytes and tokens (each document
         * once; tokens_written counts the weight's copies) */
        json_t *so = json_object_get(st, "sources");
        if (!so) {
            so = json_object();
            json_object_set_new(st, "sources", so);
        }
        prep__jadd(so, src->name, "documents", uniq_docs, 1);
        prep__jadd(so, src->name, "bytes", uniq_bytes, 1);
        if (r->tok) {
            prep__jadd(so, src->name, "tokens", uniq_tokens, 1);
            prep__jadd(so, src->name, "tokens_written", (double)tokens, 1);
        }
    }
    if ((rc = prep__hash_outputs(r, s, st)) != GRIT_OK)
        goto out;
    prep__stage_time(st, "tokenize", now_seconds() - t0);
    prep__pathf(outp, sizeof outp, r, "done/tokenize.%05zu.json", s);
    rc = prep__write_marker(r, outp, st);
out:
    free(keep);
    idx_writer_abort(iw);
    prep_reader_close(rd);
    json_decref(st);
    return rc;
}

/* ---- thread pool -------------------------------------------------------- */

static void *worker(void *arg)
{
    tctx *t = arg;
    run *r = t->r;
    for (;;) {
        if (atomic_load(&r->failed))
            break;
        size_t i = atomic_fetch_add(&r->next, 1);
        if (i >= r->n_mine)
            break;
        size_t s = r->mine[i];
        char m[4096];
        prep__pathf(m, sizeof m, r, r->stage == ST_DOCS ? "done/docs.%05zu.json"
                                                  : "done/tokenize.%05zu.json", s);
        if (prep__exists(m)) {
            atomic_fetch_add(&r->done, 1);
            continue;
        }
        grit_errclear();
        grit_err rc = r->stage == ST_DOCS ? shard_docs(t, s) : shard_tokenize(t, s);
        if (rc != GRIT_OK) {
            fail(r, rc);
            break;
        }
        atomic_fetch_add(&r->done, 1);
    }
    return NULL;
}

static void tctx_free(tctx *t)
{
    prep_s3_close(t->s3);
    langid_close(t->lid);
    filter_scratch_free(&t->fs);
    minhash_free(&t->mh);
    prep_buf_free(&t->tx);
    prep_buf_free(&t->docs);
    prep_buf_free(&t->sig);
    prep_buf_free(&t->drops);
    bpe_ctx_close(t->bc);
    bpe_ids_free(&t->ids);
}

static grit_err tctx_init(tctx *t, run *r)
{
    memset(t, 0, sizeof *t);
    t->r = r;
    grit_err rc = GRIT_OK;
    if (r->stage == ST_DOCS) {
        rc = langid_open(&t->lid, r->c->langid_backend);
        if (rc == GRIT_OK && r->c->mh_bands)
            rc = minhash_init(&t->mh, r->c->mh_bands, r->c->mh_rows, r->c->mh_ngram);
    } else if (r->tok) {
        rc = bpe_ctx_open(&t->bc, r->tok);
    }
    return rc;
}

static const char *const stage_names[] = {"docs", "tokenize"};
static grit_err pool_run(run *r, int stage, int nt);

/* Runs one per-shard stage over this rank's shards with the thread pool,
 * then agrees with the other ranks (collective: every rank calls it). */
static grit_err parallel_stage(run *r, int stage)
{
    int nt = r->c->threads < 1 ? 1 : r->c->threads;
    size_t pending = 0;
    for (size_t i = 0; i < r->n_mine; i++) {
        char m[4096];
        prep__pathf(m, sizeof m, r, stage == ST_DOCS ? "done/docs.%05zu.json"
                                               : "done/tokenize.%05zu.json", r->mine[i]);
        pending += !prep__exists(m);
    }
    int si = stage == ST_DOCS ? 0 : 2;
    /* units run and skipped, over all ranks */
    double cnt[2] = {(double)(r->n_mine - pending), (double)pending};
    grit_err rc = comm_allreduce_sum_f64(r->cm, cnt, 2);
    if (rc != GRIT_OK)
        return rc;
    r->skipped[si] = (size_t)cnt[0];
    r->ran[si] = (size_t)cnt[1];
    if (!r->quiet && r->skipped[si])
        fprintf(stderr, "grit prep: %s: %zu of %zu shards already done, skipped\n",
                stage_names[stage], r->skipped[si], r->pl.n_shards);
    rc = pending ? pool_run(r, stage, nt) : GRIT_OK;
    return prep__agree(r, rc, stage_names[stage]);
}

static grit_err pool_run(run *r, int stage, int nt)
{
    r->stage = stage;
    atomic_store(&r->next, 0);
    atomic_store(&r->done, 0);
    atomic_store(&r->docs, 0);
    atomic_store(&r->bytes, 0);
    tctx *ts = calloc((size_t)nt, sizeof *ts);
    pthread_t *th = calloc((size_t)nt, sizeof *th);
    grit_err rc = ts && th ? GRIT_OK : GRIT_ENOMEM;
    int started = 0;
    for (int i = 0; i < nt && rc == GRIT_OK; i++) {
        if ((rc = tctx_init(&ts[i], r)) != GRIT_OK)
            break;
        if (pthread_create(&th[i], NULL, worker, &ts[i]) != 0) {
            rc = grit_errf(GRIT_ENOMEM, "cannot start thread %d", i);
            break;
        }
        started++;
    }
    if (rc != GRIT_OK)
        fail(r, rc);
    progress pg;
    progress_init(&pg, stderr, (long)r->n_mine, 1);
    double t0 = now_seconds();
    size_t last = (size_t)-1;
    while (started && !r->quiet) {
        size_t d = atomic_load(&r->done);
        if (d != last) {
            double dt = now_seconds() - t0;
            char txt[160];
            snprintf(txt, sizeof txt, "%s: %.0f docs/s, %.1f MB/s", stage_names[stage],
                     dt > 0 ? (double)atomic_load(&r->docs) / dt : 0.0,
                     dt > 0 ? (double)atomic_load(&r->bytes) / 1e6 / dt : 0.0);
            progress_update(&pg, (long)d, txt);
            last = d;
        }
        if (d >= r->n_mine || atomic_load(&r->failed))
            break;
        struct timespec ts2 = {0, 100 * 1000 * 1000};
        nanosleep(&ts2, NULL);
    }
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    if (started && !r->quiet)
        progress_finish(&pg);
    for (int i = 0; ts && i < nt; i++)
        tctx_free(&ts[i]);
    free(ts);
    free(th);
    if (r->err != GRIT_OK)
        return grit_errf(r->err, "%s", r->errmsg);
    return GRIT_OK;
}

/* ---- driver ----------------------------------------------------------------- */

/* The configuration as text, for the plan fingerprint (everything that
 * changes outputs; not threads or quiet). */
static char *config_text(const run *r)
{
    const prep_cfg *c = r->c;
    json_t *o = json_object();
    json_t *srcs = json_array();
    for (int i = 0; i < c->n_sources; i++) {
        json_t *s = json_pack("{s:s, s:i, s:s, s:f}", "name", c->sources[i].name, "format",
                              c->sources[i].format, "field",
                              c->sources[i].field ? c->sources[i].field : "text", "weight",
                              c->sources[i].weight);
        json_array_append_new(srcs, s);
    }
    json_object_set_new(o, "sources", srcs);
    json_t *langs = json_array();
    for (int i = 0; i < c->n_langs; i++)
        json_array_append_new(langs, json_string(c->langs[i]));
    json_object_set_new(o, "langs", langs);
    json_object_set_new(o, "files_per_shard", json_integer(c->files_per_shard));
    json_object_set_new(o, "langid", json_string(langid_backend_name(c->langid_backend)));
    json_object_set_new(o, "min_lang_score", json_real(c->min_lang_score));
    json_object_set_new(o, "link_density", json_real(c->extract.max_link_density));
    /* the filter thresholds, as raw bytes (no pointers inside) */
    char hex[2 * sizeof(filter_cfg) + 1];
    const unsigned char *fb = (const unsigned char *)&c->filters;
    for (size_t i = 0; i < sizeof(filter_cfg); i++)
        snprintf(hex + 2 * i, 3, "%02x", fb[i]);
    json_object_set_new(o, "filters", json_string(hex));
    json_object_set_new(o, "dedup", json_pack("{s:b, s:b, s:i, s:i, s:i}", "url", c->url_dedup,
                                              "exact", c->exact_dedup, "bands", c->mh_bands,
                                              "rows", c->mh_rows, "ngram", c->mh_ngram));
    if (r->uf) { /* the rules, not the file's name */
        char h[24];
        snprintf(h, sizeof h, "%016llx", (unsigned long long)r->uf_hash);
        json_object_set_new(o, "url_blocklist", json_string(h));
    }
    json_object_set_new(o, "tokenizer", c->tokenizer ? json_string(c->tokenizer) : json_null());
    json_object_set_new(o, "eod", c->eod ? json_string(c->eod) : json_null());
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return s;
}

/* Removes temp files (NAME.tmp.PID) left by a killed run: they are never
 * outputs (fs_write_durable and idx_writer rename them into place), and left
 * alone they would pile up. */
static void remove_stale_temps(const run *r)
{
    static const char *const sub[] = {"", "docs", "done", "dedup", "tokens", "text", NULL};
    for (int i = 0; sub[i]; i++) {
        char d[4096];
        snprintf(d, sizeof d, "%s/%s", r->c->output, sub[i]);
        DIR *dir = opendir(d);
        if (!dir)
            continue;
        struct dirent *e;
        while ((e = readdir(dir)))
            if (strstr(e->d_name, ".tmp.")) {
                char f[4096 + 256];
                snprintf(f, sizeof f, "%s/%s", d, e->d_name);
                unlink(f);
            }
        closedir(dir);
    }
}

static grit_err check_plan(run *r)
{
    char *ct = config_text(r);
    if (!ct)
        return GRIT_ENOMEM;
    uint64_t fp = plan_fingerprint(&r->pl, ct);
    free(ct);
    char p[4096], want[128];
    prep__pathn(p, sizeof p, r, "plan.json");
    snprintf(want, sizeof want, "{\"fingerprint\": \"%016llx\", \"shards\": %zu}\n",
             (unsigned long long)fp, r->pl.n_shards);
    char *have = NULL;
    size_t hl;
    if (fs_read_all(p, &have, &hl) == GRIT_OK) {
        int same = hl == strlen(want) && !memcmp(have, want, hl);
        free(have);
        if (!same)
            return grit_errf(GRIT_EINVAL, "%s: this output directory was made from other "
                             "inputs or settings; use a new directory (or delete it) to start "
                             "over", p);
        return GRIT_OK;
    }
    grit_errclear();
    return fs_write_durable(p, want, strlen(want));
}

grit_err prep__agree(run *r, grit_err rc, const char *what)
{
    unsigned char f = rc != GRIT_OK;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", rc != GRIT_OK ? grit_errmsg() : "");
    grit_err e = comm_allreduce_or_u8(r->cm, &f, 1);
    if (rc != GRIT_OK)
        return grit_errf(rc, "%s", *msg ? msg : grit_strerror(rc));
    if (e != GRIT_OK)
        return e;
    if (f)
        return grit_errf(GRIT_EIO, "%s: another rank failed (its message is in its output); "
                         "rerun to resume", what);
    return GRIT_OK;
}

/* Rank 0's part of the start: output folders, the plan check, stale temps. */
static grit_err setup_output(run *r)
{
    const prep_cfg *c = r->c;
    static const char *const dirs[] = {"", "docs", "done", "dedup", "tokens", "text", NULL};
    grit_err rc = GRIT_OK;
    for (int i = 0; dirs[i] && rc == GRIT_OK; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", c->output, dirs[i]);
        if (!strcmp(dirs[i], "tokens") && !c->tokenizer)
            continue;
        if (!strcmp(dirs[i], "text") && c->tokenizer)
            continue;
        rc = fs_mkdirs(p);
    }
    if (rc == GRIT_OK)
        rc = check_plan(r);
    if (rc == GRIT_OK)
        remove_stale_temps(r);
    return rc;
}

grit_err prep_run(const prep_cfg *c, const prep_hooks *h, comm *cm)
{
    run r;
    comm solo;
    memset(&r, 0, sizeof r);
    if (!cm) {
        memset(&solo, 0, sizeof solo);
        solo.size = 1;
        solo.timeout_s = 300;
        cm = &solo;
    }
    r.c = c;
    r.h = h;
    r.cm = cm;
    r.rank = cm->rank;
    r.size = cm->size < 1 ? 1 : cm->size;
    r.quiet = c->quiet || r.rank != 0;
    pthread_mutex_init(&r.mu, NULL);
    double t0 = now_seconds();
    grit_err rc;
    if (!c->output)
        return grit_errf(GRIT_EINVAL, "no output directory given (-o DIR or \"output\")");
    if (c->n_sources == 0)
        return grit_errf(GRIT_EINVAL, "no inputs given");
    if (c->mh_bands > 4096)
        return grit_errf(GRIT_EINVAL, "dedup.bands: at most 4096");
    rc = c->url_blocklist ? urlf_load(&r.uf, c->url_blocklist, &r.uf_hash) : GRIT_OK;
    if (rc == GRIT_OK && r.uf && !r.quiet)
        fprintf(stderr, "grit prep: URL block-list %s: %zu rules\n", c->url_blocklist,
                urlf_rules(r.uf));
    /* every rank builds the same plan from the same inputs */
    if (rc == GRIT_OK)
        rc = plan_build(&r.pl, c);
    if (rc == GRIT_OK && !(r.mine = calloc(r.pl.n_shards / (size_t)r.size + 1, sizeof *r.mine)))
        rc = GRIT_ENOMEM;
    for (size_t s = (size_t)r.rank; rc == GRIT_OK && s < r.pl.n_shards; s += (size_t)r.size)
        r.mine[r.n_mine++] = s;
    if (rc == GRIT_OK && r.rank == 0)
        rc = setup_output(&r);
    if ((rc = prep__agree(&r, rc, "start")) != GRIT_OK)
        goto out;
    if (c->tokenizer) {
        const char *eod = c->eod ? c->eod : "<|endoftext|>";
        if ((rc = bpe_open_hf(&r.tok, c->tokenizer)) != GRIT_OK)
            goto out;
        if (bpe_token_id(r.tok, eod, strlen(eod), &r.eod) != GRIT_OK) {
            rc = grit_errf(GRIT_EINVAL, "%s: the tokenizer has no token '%s' (eod)",
                           c->tokenizer, eod);
            goto out;
        }
        r.dtype = idx_dtype_for_vocab(bpe_vocab_size(r.tok));
    }
    r.first_doc = calloc(r.pl.n_shards + 1, sizeof *r.first_doc);
    if (!r.first_doc) {
        rc = GRIT_ENOMEM;
        goto out;
    }
    if (!r.quiet)
        fprintf(stderr, "grit prep: %zu files, %.1f MB, %zu shards, %d rank%s -> %s\n",
                r.pl.n_files, (double)r.pl.bytes / 1e6, r.pl.n_shards, r.size,
                r.size > 1 ? "s" : "", c->output);
    if ((rc = parallel_stage(&r, ST_DOCS)) != GRIT_OK)
        goto out;
    if ((rc = prep__shard_offsets(&r)) != GRIT_OK || (rc = prep__stage_dedup(&r)) != GRIT_OK)
        goto out;
    if ((rc = parallel_stage(&r, ST_TOKENIZE)) != GRIT_OK)
        goto out;
    if (r.rank == 0) {
        rc = prep__report(&r, now_seconds() - t0);
        if (rc == GRIT_OK)
            rc = prep__write_data_mix(&r);
        if (rc == GRIT_OK)
            rc = prep__write_manifest(&r);
    }
    rc = prep__agree(&r, rc, "report");
    if (rc == GRIT_OK && c->publish)
        rc = prep__publish(&r);
out:
    bpe_close(r.tok);
    free(r.first_doc);
    free(r.mine);
    urlf_free(r.uf);
    plan_free(&r.pl);
    pthread_mutex_destroy(&r.mu);
    return rc;
}
