/*
 * prep_dedup.c - grit prep's stage 2: global deduplication over the
 * signatures of every shard (format in prep_internal.h). Order: URL dedup
 * (documents with a URL), exact dedup, then MinHash-LSH with union-find on
 * what is left; in each group the first document in input order survives.
 * Memory: 30 bytes + 8 x bands + the URL per kept document.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fsutil.h"
#include "core/progress.h"
#include "prep/prep_internal.h"

/* ---- stage 2: dedup ----------------------------------------------------- */

typedef struct hk {
    uint64_t h;
    uint32_t doc;
} hk;

static int hk_cmp(const void *a, const void *b)
{
    const hk *x = a, *y = b;
    if (x->h != y->h)
        return x->h < y->h ? -1 : 1;
    return x->doc < y->doc ? -1 : x->doc > y->doc;
}

/* Marks as dropped (alive = 0, why = reason) every alive document whose
 * hash equals that of an earlier alive one. */
static grit_err dedup_hash(const uint64_t *h, uint8_t *alive, uint8_t *why, uint8_t reason,
                           size_t n, const uint8_t *skip)
{
    hk *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return GRIT_ENOMEM;
    size_t m = 0;
    for (size_t d = 0; d < n; d++)
        if (alive[d] && !(skip && skip[d]))
            v[m++] = (hk){h[d], (uint32_t)d};
    qsort(v, m, sizeof *v, hk_cmp);
    for (size_t i = 1; i < m; i++)
        if (v[i].h == v[i - 1].h) {
            alive[v[i].doc] = 0;
            why[v[i].doc] = reason;
        }
    free(v);
    return GRIT_OK;
}

grit_err prep__stage_dedup(run *r)
{
    char marker[4096], p[4096];
    prep__pathn(marker, sizeof marker, r, "done/dedup.json");
    if (prep__exists(marker)) {
        r->skipped[1] = 1;
        if (!r->c->quiet)
            fprintf(stderr, "grit prep: dedup: already done, skipped\n");
        return GRIT_OK;
    }
    r->ran[1] = 1;
    double t0 = now_seconds();
    size_t n = 0, bands = (size_t)r->c->mh_bands;
    grit_err rc = GRIT_OK;
    char **sigs = calloc(r->pl.n_shards, sizeof *sigs);
    size_t *sig_len = calloc(r->pl.n_shards, sizeof *sig_len);
    uint64_t *uh = NULL, *eh = NULL, *keys = NULL, *tl = NULL;
    uint8_t *alive = NULL, *why = NULL, *nourl = NULL;
    const char **urls = NULL;
    uint16_t *ul = NULL;
    uint32_t *csize = NULL;
    uf u = {0};
    json_t *st = json_object();
    prep_buf drops = {0};
    if (!sigs || !sig_len || !st) {
        rc = GRIT_ENOMEM;
        goto out;
    }
    for (size_t s = 0; s < r->pl.n_shards; s++) {
        prep__pathf(p, sizeof p, r, "docs/%05zu.sig", s);
        if ((rc = fs_read_all(p, &sigs[s], &sig_len[s])) != GRIT_OK)
            goto out;
        uint32_t k, b;
        if (sig_len[s] < 16 || memcmp(sigs[s], SIG_MAGIC, 8)) {
            rc = grit_errf(GRIT_EFORMAT, "%s: not a grit prep signature file (bad magic); "
                           "delete the output directory and rerun", p);
            goto out;
        }
        memcpy(&k, sigs[s] + 8, 4);
        memcpy(&b, sigs[s] + 12, 4);
        if (b != bands) {
            rc = grit_errf(GRIT_EFORMAT, "%s: %u MinHash bands, configuration says %zu", p, b,
                           bands);
            goto out;
        }
        r->first_doc[s] = n;
        n += k;
    }
    if (n > UINT32_MAX - 1) {
        rc = grit_errf(GRIT_EINVAL, "dedup: %zu documents, at most %u per run", n,
                       UINT32_MAX - 1);
        goto out;
    }
    uh = malloc((n + 1) * 8);
    eh = malloc((n + 1) * 8);
    tl = malloc((n + 1) * 8);
    keys = malloc((n * bands + 1) * 8);
    alive = malloc(n + 1);
    why = calloc(n + 1, 1);
    nourl = calloc(n + 1, 1);
    urls = malloc((n + 1) * sizeof *urls);
    ul = malloc((n + 1) * sizeof *ul);
    if (!uh || !eh || !tl || !keys || !alive || !why || !nourl || !urls || !ul) {
        rc = GRIT_ENOMEM;
        goto out;
    }
    memset(alive, 1, n + 1);
    size_t d = 0;
    for (size_t s = 0; s < r->pl.n_shards; s++) {
        const char *q = sigs[s] + 16, *end = sigs[s] + sig_len[s];
        size_t cnt = (s + 1 < r->pl.n_shards ? r->first_doc[s + 1] : n) - r->first_doc[s];
        for (size_t i = 0; i < cnt; i++, d++) {
            uint32_t t32;
            if (end - q < 22) {
                rc = grit_errf(GRIT_EFORMAT, "docs/%05zu.sig: truncated at document %zu", s, i);
                goto out;
            }
            memcpy(&uh[d], q, 8);
            memcpy(&eh[d], q + 8, 8);
            memcpy(&t32, q + 16, 4);
            memcpy(&ul[d], q + 20, 2);
            tl[d] = t32;
            q += 22;
            if ((size_t)(end - q) < ul[d] + bands * 8) {
                rc = grit_errf(GRIT_EFORMAT, "docs/%05zu.sig: truncated at document %zu", s, i);
                goto out;
            }
            urls[d] = q;
            nourl[d] = ul[d] == 0 || !r->c->url_dedup;
            q += ul[d];
            memcpy(keys + d * bands, q, bands * 8);
            q += bands * 8;
        }
    }
    enum { W_KEEP = 0, W_URL, W_EXACT, W_NEAR };
    static const char *const wn[] = {"", "url_dup", "exact_dup", "near_dup"};
    if (r->c->url_dedup && (rc = dedup_hash(uh, alive, why, W_URL, n, nourl)) != GRIT_OK)
        goto out;
    if (r->c->exact_dedup && (rc = dedup_hash(eh, alive, why, W_EXACT, n, NULL)) != GRIT_OK)
        goto out;
    if (bands) {
        if ((rc = uf_init(&u, n)) != GRIT_OK ||
            (rc = lsh_cluster(keys, alive, n, (int)bands, &u)) != GRIT_OK)
            goto out;
        csize = calloc(n + 1, sizeof *csize);
        if (!csize) {
            rc = GRIT_ENOMEM;
            goto out;
        }
        for (size_t i = 0; i < n; i++)
            if (alive[i])
                csize[uf_find(&u, (uint32_t)i)]++;
        for (size_t i = 0; i < n; i++) {
            if (!alive[i])
                continue;
            uint32_t root = uf_find(&u, (uint32_t)i);
            if (root != i) {
                alive[i] = 0;
                why[i] = W_NEAR;
            } else if (csize[i] > 1) {
                char key[32];
                snprintf(key, sizeof key, "%u", csize[i]);
                prep__jadd(st, "clusters", key, 1, 1);
            }
        }
    }
    double bin = 0, bout = 0;
    size_t out_docs = 0;
    for (size_t i = 0; i < n; i++) {
        bin += (double)tl[i];
        if (alive[i]) {
            bout += (double)tl[i];
            out_docs++;
            continue;
        }
        prep__jadd(st, "drops", wn[why[i]], 1, 1);
        json_t *o = json_pack("{s:s%, s:s, s:s}", "url", urls[i], (size_t)ul[i], "stage",
                              "dedup", "reason", wn[why[i]]);
        if (!o || (rc = prep__put_jsonl(&drops, o)) != GRIT_OK) {
            rc = rc ? rc : GRIT_ENOMEM;
            goto out;
        }
    }
    prep__stage_add(st, "dedup", (double)n, (double)out_docs, bin, bout);
    prep__pathn(p, sizeof p, r, "dedup/keep.bin");
    if ((rc = fs_write_durable(p, alive, n)) != GRIT_OK)
        goto out;
    prep__pathn(p, sizeof p, r, "dedup/drops.jsonl");
    if ((rc = fs_write_durable(p, drops.p ? drops.p : "", drops.len)) != GRIT_OK)
        goto out;
    prep__stage_time(st, "dedup", now_seconds() - t0);
    rc = prep__write_marker(r, marker, st);
    if (!r->c->quiet)
        fprintf(stderr, "grit prep: dedup: %zu documents -> %zu (%.2fs)\n", n, out_docs,
                now_seconds() - t0);
out:
    for (size_t s = 0; sigs && s < r->pl.n_shards; s++)
        free(sigs[s]);
    free(sigs);
    free(sig_len);
    free(uh);
    free(eh);
    free(tl);
    free(keys);
    free(alive);
    free(why);
    free(nourl);
    free(urls);
    free(ul);
    free(csize);
    uf_free(&u);
    prep_buf_free(&drops);
    json_decref(st);
    return rc;
}

/* First kept-document index of each shard, from the docs markers (used
 * when the dedup stage was skipped on a rerun). */
grit_err prep__shard_offsets(run *r)
{
    uint64_t n = 0;
    for (size_t s = 0; s < r->pl.n_shards; s++) {
        char p[4096];
        prep__pathf(p, sizeof p, r, "done/docs.%05zu.json", s);
        json_error_t je;
        json_t *o = json_load_file(p, 0, &je);
        json_t *k = o ? json_object_get(o, "kept") : NULL;
        if (!json_is_integer(k)) {
            json_decref(o);
            return grit_errf(GRIT_EFORMAT, "%s: expected a marker with an integer 'kept'", p);
        }
        r->first_doc[s] = n;
        n += (uint64_t)json_integer_value(k);
        json_decref(o);
    }
    return GRIT_OK;
}
