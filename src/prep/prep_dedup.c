/*
 * prep_dedup.c - grit prep's stage 2: deduplication over the signatures of
 * every shard (format in prep_internal.h), distributed over the ranks of
 * the run (one rank: the same code with every exchange a copy).
 *
 * Order: URL dedup (documents with a URL), exact dedup, then MinHash-LSH
 * with union-find on what is left. In each duplicate group the document
 * with the smallest global id (input order) survives; every other member is
 * dropped with dup_of = that survivor.
 *
 * Who holds what. A rank reads only the signatures of the shards it owns
 * (shard s belongs to rank s mod size). Each round sends one 16-byte
 * message per (document, key) to the key's owner rank (a mix of the key,
 * mod size): URL hash, exact hash, or (band, band key). The owner sorts what
 * it received by (band, key, doc) and finds the groups:
 *   URL / exact: every member after the first is dropped; the decision goes
 *                back to the document's owner (a second all-to-all).
 *   LSH:         a group joins its members; the owner compresses its edges
 *                with a local union-find into (member, local root) pairs,
 *                and those are merged on rank 0 with a second union-find
 *                (roots are the smallest id, so the merge order does not
 *                matter). Rank 0 sends each non-root member's decision back.
 * Memory per rank: the owned shards' signatures (30 bytes + 8 x bands + the
 * URL per document) and the messages (16 x bands per owned document, sent
 * and received); rank 0 also holds the near-duplicate pairs (16 bytes per
 * document that has a near duplicate). Measured and reported per rank.
 *
 * Outputs per shard, written by its owner: dedup/NNNNN.keep (one byte per
 * stage-1 document: 1 kept, 0 dropped) and dedup/NNNNN.drops.jsonl; then
 * rank 0 writes the marker done/dedup.json (statistics summed over the
 * ranks, the cluster-size histogram, memory per rank) once every rank has
 * reported its files durable. The stage is one unit: a run killed inside
 * it redoes it whole, and the files are replaced, never appended.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "comm/comm.h"
#include "core/fsutil.h"
#include "core/progress.h"
#include "prep/prep_internal.h"

enum { W_KEEP = 0, W_URL, W_EXACT, W_NEAR };
static const char *const why_name[] = {"", "url_dup", "exact_dup", "near_dup"};

/* One exchanged item: a key and a document (requests), or a document, the
 * survivor it duplicates and the reason (replies: key = dup_of). */
typedef struct dmsg {
    uint64_t key;
    uint32_t doc;
    uint32_t aux; /* band (LSH requests), reason (replies), 0 */
} dmsg;

static int dmsg_cmp(const void *a, const void *b)
{
    const dmsg *x = a, *y = b;
    if (x->aux != y->aux)
        return x->aux < y->aux ? -1 : 1;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->doc < y->doc ? -1 : x->doc > y->doc;
}

/* The owned documents: shards mine[0..n_mine), documents in shard order. */
typedef struct dd {
    run *r;
    size_t n;          /* owned documents */
    size_t bands;
    uint32_t *gid;     /* global id */
    uint64_t *uh, *eh, *tl;
    const uint64_t *keys; /* per document: bands keys (pointers into sigs) */
    const char **urls;
    uint16_t *ul;
    uint8_t *alive, *why;
    uint32_t *dup_of;
    size_t *base;      /* first owned-document index of each owned shard */
    char **sigs;
    size_t mem;        /* bytes held by the arrays above, peak of the buffers */
    size_t mem_peak;
} dd;

static int owner_of_key(uint64_t key, uint32_t band, int size)
{
    uint64_t h = (key ^ ((uint64_t)band * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    return (int)(((h >> 32) * (uint64_t)size) >> 32);
}

/* Owned index of global document g (g must be owned). */
static size_t local_of(const dd *x, uint32_t g)
{
    size_t lo = 0, hi = x->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (x->gid[mid] < g)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Rank owning global document g: the rank of its shard. */
static int owner_of_doc(const run *r, uint32_t g)
{
    size_t lo = 0, hi = r->pl.n_shards;
    while (hi - lo > 1) { /* last shard with first_doc <= g */
        size_t mid = (lo + hi) / 2;
        if (r->first_doc[mid] <= g)
            lo = mid;
        else
            hi = mid;
    }
    return (int)(lo % (size_t)r->size);
}

static void note_mem(dd *x, size_t extra)
{
    if (x->mem + extra > x->mem_peak)
        x->mem_peak = x->mem + extra;
}

/* Sends msgs[i] to rank dest[i]; returns what this rank received. */
static grit_err exchange(dd *x, dmsg *msgs, const int *dest, size_t n, dmsg **got,
                         size_t *n_got)
{
    int size = x->r->size;
    size_t *cnt = calloc((size_t)size * 2, sizeof *cnt);
    dmsg *sb = malloc((n ? n : 1) * sizeof *sb);
    grit_err rc = GRIT_OK;
    *got = NULL;
    *n_got = 0;
    if (!cnt || !sb) {
        rc = GRIT_ENOMEM;
        goto out;
    }
    size_t *off = cnt + size;
    for (size_t i = 0; i < n; i++)
        cnt[dest[i]]++;
    for (int k = 1; k < size; k++)
        off[k] = off[k - 1] + cnt[k - 1];
    for (size_t i = 0; i < n; i++)
        sb[off[dest[i]]++] = msgs[i];
    void *rb = NULL;
    rc = comm_alltoallv(x->r->cm, sb, cnt, sizeof(dmsg), &rb, n_got, NULL);
    *got = rb;
    note_mem(x, (2 * n + *n_got) * sizeof(dmsg) + n * sizeof(int));
out:
    free(cnt);
    free(sb);
    return rc;
}

/* Applies replies (doc, dup_of, reason) to the owned documents. */
static void apply(dd *x, const dmsg *rep, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t l = local_of(x, rep[i].doc);
        if (l < x->n && x->gid[l] == rep[i].doc && x->alive[l]) {
            x->alive[l] = 0;
            x->why[l] = (uint8_t)rep[i].aux;
            x->dup_of[l] = (uint32_t)rep[i].key;
        }
    }
}

/* One hash round (URL or exact): the first document of each group survives. */
static grit_err hash_round(dd *x, const uint64_t *h, int reason, int skip_nourl)
{
    run *r = x->r;
    dmsg *m = malloc((x->n ? x->n : 1) * sizeof *m), *got = NULL, *rep = NULL;
    int *dest = malloc((x->n ? x->n : 1) * sizeof *dest);
    size_t k = 0, n_got = 0, n_rep = 0, n_back = 0;
    dmsg *back = NULL;
    grit_err rc = m && dest ? GRIT_OK : GRIT_ENOMEM;
    for (size_t i = 0; rc == GRIT_OK && i < x->n; i++) {
        if (!x->alive[i] || (skip_nourl && x->ul[i] == 0))
            continue;
        m[k] = (dmsg){h[i], x->gid[i], 0};
        dest[k++] = owner_of_key(h[i], 0, r->size);
    }
    if (rc == GRIT_OK)
        rc = exchange(x, m, dest, k, &got, &n_got);
    if (rc != GRIT_OK)
        goto out;
    qsort(got, n_got, sizeof *got, dmsg_cmp);
    free(dest);
    rep = malloc((n_got + 1) * sizeof *rep);
    dest = malloc((n_got + 1) * sizeof *dest);
    if (!rep || !dest) {
        rc = GRIT_ENOMEM;
        goto out;
    }
    for (size_t i = 0, g0 = 0; i < n_got; i++) {
        if (i > 0 && got[i].key == got[g0].key) {
            dest[n_rep] = owner_of_doc(r, got[i].doc);
            rep[n_rep++] = (dmsg){got[g0].doc, got[i].doc, (uint32_t)reason};
        } else {
            g0 = i;
        }
    }
    if ((rc = exchange(x, rep, dest, n_rep, &back, &n_back)) != GRIT_OK)
        goto out;
    apply(x, back, n_back);
out:
    free(m);
    free(dest);
    free(got);
    free(rep);
    free(back);
    return rc;
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Connected components of the edges (pairs[2i], pairs[2i+1]) over sparse
 * ids: writes for every id that is not its component's root the pair
 * (id, root) to out (key = root, doc = id), root = smallest id; returns the
 * count in *n_out. sizes (optional, json): histogram of component sizes. */
static grit_err components(const uint32_t *pairs, size_t n_pairs, dmsg **out, size_t *n_out,
                           json_t *sizes)
{
    size_t m = 0;
    uint32_t *ids = malloc((2 * n_pairs + 1) * sizeof *ids);
    uint32_t *cs = NULL;
    uf u = {0};
    *out = NULL;
    *n_out = 0;
    if (!ids)
        return GRIT_ENOMEM;
    memcpy(ids, pairs, 2 * n_pairs * sizeof *ids);
    qsort(ids, 2 * n_pairs, sizeof *ids, u32_cmp);
    for (size_t i = 0; i < 2 * n_pairs; i++)
        if (m == 0 || ids[m - 1] != ids[i])
            ids[m++] = ids[i];
    grit_err rc = uf_init(&u, m);
    if (rc == GRIT_OK && !(*out = malloc((m + 1) * sizeof **out)))
        rc = GRIT_ENOMEM;
    if (rc == GRIT_OK && sizes && !(cs = calloc(m + 1, sizeof *cs)))
        rc = GRIT_ENOMEM;
    if (rc != GRIT_OK)
        goto out;
    for (size_t i = 0; i < n_pairs; i++) {
        uint32_t *a = bsearch(&pairs[2 * i], ids, m, sizeof *ids, u32_cmp);
        uint32_t *b = bsearch(&pairs[2 * i + 1], ids, m, sizeof *ids, u32_cmp);
        uf_union(&u, (uint32_t)(a - ids), (uint32_t)(b - ids));
    }
    for (size_t i = 0; i < m; i++) {
        uint32_t root = uf_find(&u, (uint32_t)i);
        if (cs)
            cs[root]++;
        if (root != i)
            (*out)[(*n_out)++] = (dmsg){ids[root], ids[i], W_NEAR};
    }
    for (size_t i = 0; cs && i < m; i++)
        if (cs[i] > 1) {
            char key[32];
            snprintf(key, sizeof key, "%u", cs[i]);
            prep__jadd(sizes, "clusters", key, 1, 1);
        }
out:
    free(ids);
    free(cs);
    uf_free(&u);
    if (rc != GRIT_OK) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

/* The MinHash-LSH round; st (rank 0) gets the cluster-size histogram. */
static grit_err lsh_round(dd *x, json_t *st)
{
    run *r = x->r;
    size_t alive = 0, b = x->bands;
    for (size_t i = 0; i < x->n; i++)
        alive += x->alive[i];
    size_t cap = alive * b + 1;
    dmsg *m = malloc(cap * sizeof *m), *got = NULL, *loc = NULL, *all = NULL, *fin = NULL;
    dmsg *back = NULL;
    int *dest = malloc(cap * sizeof *dest);
    uint32_t *pairs = NULL;
    size_t k = 0, n_got = 0, n_loc = 0, n_all = 0, n_fin = 0, n_back = 0, n_pairs = 0;
    grit_err rc = m && dest ? GRIT_OK : GRIT_ENOMEM;
    if (rc != GRIT_OK)
        goto out;
    for (size_t i = 0; i < x->n; i++) {
        if (!x->alive[i])
            continue;
        for (size_t j = 0; j < b; j++) {
            uint64_t key = x->keys[i * b + j];
            if (key == LSH_NO_KEY)
                continue;
            m[k] = (dmsg){key, x->gid[i], (uint32_t)j};
            dest[k++] = owner_of_key(key, (uint32_t)j, r->size);
        }
    }
    rc = exchange(x, m, dest, k, &got, &n_got);
    free(m);
    m = NULL;
    free(dest);
    dest = NULL;
    if (rc != GRIT_OK)
        goto out;
    qsort(got, n_got, sizeof *got, dmsg_cmp);
    /* edges (first of the group, member) */
    if (!(pairs = malloc((2 * n_got + 1) * sizeof *pairs))) {
        rc = GRIT_ENOMEM;
        goto out;
    }
    for (size_t i = 0, g0 = 0; i < n_got; i++) {
        if (i > 0 && got[i].key == got[g0].key && got[i].aux == got[g0].aux) {
            pairs[2 * n_pairs] = got[g0].doc;
            pairs[2 * n_pairs + 1] = got[i].doc;
            n_pairs++;
        } else {
            g0 = i;
        }
    }
    free(got);
    got = NULL;
    rc = components(pairs, n_pairs, &loc, &n_loc, NULL);
    note_mem(x, n_pairs * 8 * 3);
    free(pairs);
    pairs = NULL;
    if (rc != GRIT_OK)
        goto out;
    /* merge on rank 0 */
    {
        int *d0 = calloc(n_loc + 1, sizeof *d0); /* every pair to rank 0 */
        if (!d0) {
            rc = GRIT_ENOMEM;
            goto out;
        }
        rc = exchange(x, loc, d0, n_loc, &all, &n_all);
        free(d0);
        if (rc != GRIT_OK)
            goto out;
    }
    uint32_t *ap = malloc((2 * n_all + 1) * sizeof *ap);
    if (!ap) {
        rc = GRIT_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n_all; i++) {
        ap[2 * i] = (uint32_t)all[i].key;
        ap[2 * i + 1] = all[i].doc;
    }
    free(all);
    all = NULL;
    rc = components(ap, n_all, &fin, &n_fin, r->rank == 0 ? st : NULL);
    note_mem(x, n_all * 8 * 3);
    free(ap);
    if (rc != GRIT_OK)
        goto out;
    if (!(dest = malloc((n_fin + 1) * sizeof *dest))) {
        rc = GRIT_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n_fin; i++)
        dest[i] = owner_of_doc(r, fin[i].doc);
    if ((rc = exchange(x, fin, dest, n_fin, &back, &n_back)) != GRIT_OK)
        goto out;
    apply(x, back, n_back);
out:
    free(m);
    free(dest);
    free(got);
    free(loc);
    free(all);
    free(fin);
    free(back);
    free(pairs);
    return rc;
}

static void dd_free(dd *x)
{
    for (size_t i = 0; x->sigs && i < x->r->n_mine; i++)
        free(x->sigs[i]);
    free(x->sigs);
    free(x->gid);
    free(x->uh);
    free(x->eh);
    free(x->tl);
    free(x->urls);
    free(x->ul);
    free((void *)x->keys);
    free(x->alive);
    free(x->why);
    free(x->dup_of);
    free(x->base);
}

/* Reads the owned shards' signatures. */
static grit_err dd_load(dd *x)
{
    run *r = x->r;
    char p[4096];
    size_t *len = calloc(r->n_mine + 1, sizeof *len);
    x->sigs = calloc(r->n_mine + 1, sizeof *x->sigs);
    x->base = calloc(r->n_mine + 1, sizeof *x->base);
    grit_err rc = len && x->sigs && x->base ? GRIT_OK : GRIT_ENOMEM;
    size_t n = 0, b = x->bands;
    for (size_t i = 0; rc == GRIT_OK && i < r->n_mine; i++) {
        size_t s = r->mine[i];
        prep__pathf(p, sizeof p, r, "docs/%05zu.sig", s);
        if ((rc = fs_read_all(p, &x->sigs[i], &len[i])) != GRIT_OK)
            break;
        x->mem += len[i];
        uint32_t k, bb;
        if (len[i] < 16 || memcmp(x->sigs[i], SIG_MAGIC, 8)) {
            rc = grit_errf(GRIT_EFORMAT, "%s: not a grit prep signature file (bad magic); "
                           "delete the output directory and rerun", p);
            break;
        }
        memcpy(&k, x->sigs[i] + 8, 4);
        memcpy(&bb, x->sigs[i] + 12, 4);
        if (bb != b) {
            rc = grit_errf(GRIT_EFORMAT, "%s: %u MinHash bands, configuration says %zu", p, bb, b);
            break;
        }
        uint64_t want = (s + 1 < r->pl.n_shards ? r->first_doc[s + 1] : r->n_docs) -
                        r->first_doc[s];
        if (k != want) {
            rc = grit_errf(GRIT_EFORMAT, "%s: %u documents, its marker says %llu; delete the "
                           "output directory and rerun", p, k, (unsigned long long)want);
            break;
        }
        x->base[i] = n;
        n += k;
    }
    x->base[r->n_mine] = n;
    x->n = n;
    if (rc == GRIT_OK) {
        x->gid = malloc((n + 1) * sizeof *x->gid);
        x->uh = malloc((n + 1) * 8);
        x->eh = malloc((n + 1) * 8);
        x->tl = malloc((n + 1) * 8);
        x->urls = malloc((n + 1) * sizeof *x->urls);
        x->ul = malloc((n + 1) * sizeof *x->ul);
        x->keys = malloc((n * b + 1) * 8);
        x->alive = malloc(n + 1);
        x->why = calloc(n + 1, 1);
        x->dup_of = calloc(n + 1, sizeof *x->dup_of);
        x->mem += n * (4 + 8 * 3 + sizeof(char *) + 2 + 8 * b + 1 + 1 + 4);
        if (!x->gid || !x->uh || !x->eh || !x->tl || !x->urls || !x->ul || !x->keys ||
            !x->alive || !x->why || !x->dup_of)
            rc = GRIT_ENOMEM;
    }
    for (size_t i = 0; rc == GRIT_OK && i < r->n_mine; i++) {
        size_t s = r->mine[i];
        const char *q = x->sigs[i] + 16, *end = x->sigs[i] + len[i];
        for (size_t j = 0, d = x->base[i]; d < x->base[i + 1]; j++, d++) {
            uint32_t t32;
            if (end - q < 22 ||
                (memcpy(&x->ul[d], q + 20, 2), (size_t)(end - q - 22) < x->ul[d] + b * 8)) {
                rc = grit_errf(GRIT_EFORMAT, "docs/%05zu.sig: truncated at document %zu", s, j);
                break;
            }
            x->gid[d] = (uint32_t)(r->first_doc[s] + j);
            memcpy(&x->uh[d], q, 8);
            memcpy(&x->eh[d], q + 8, 8);
            memcpy(&t32, q + 16, 4);
            x->tl[d] = t32;
            q += 22;
            x->urls[d] = q;
            q += x->ul[d];
            memcpy((uint64_t *)x->keys + d * b, q, b * 8);
            q += b * 8;
        }
    }
    if (rc == GRIT_OK)
        memset(x->alive, 1, n + 1);
    note_mem(x, 0);
    free(len);
    return rc;
}

/* The owned shards' decisions: dedup/NNNNN.keep and dedup/NNNNN.drops.jsonl. */
static grit_err dd_write(dd *x, json_t *st)
{
    run *r = x->r;
    grit_err rc = GRIT_OK;
    prep_buf drops = {0};
    double bin = 0, bout = 0;
    size_t out_docs = 0;
    char p[4096];
    for (size_t i = 0; rc == GRIT_OK && i < r->n_mine; i++) {
        size_t s = r->mine[i];
        drops.len = 0;
        for (size_t d = x->base[i]; d < x->base[i + 1]; d++) {
            bin += (double)x->tl[d];
            if (x->alive[d]) {
                bout += (double)x->tl[d];
                out_docs++;
                continue;
            }
            prep__jadd(st, "drops", why_name[x->why[d]], 1, 1);
            json_t *o = json_pack("{s:s%, s:s, s:s, s:I}", "url", x->urls[d], (size_t)x->ul[d],
                                  "stage", "dedup", "reason", why_name[x->why[d]], "dup_of",
                                  (json_int_t)x->dup_of[d]);
            if (!o || (rc = prep__put_jsonl(&drops, o)) != GRIT_OK) {
                rc = rc ? rc : GRIT_ENOMEM;
                break;
            }
        }
        if (rc != GRIT_OK)
            break;
        prep__pathf(p, sizeof p, r, "dedup/%05zu.keep", s);
        if ((rc = fs_write_durable(p, x->alive + x->base[i], x->base[i + 1] - x->base[i])))
            break;
        prep__pathf(p, sizeof p, r, "dedup/%05zu.drops.jsonl", s);
        rc = fs_write_durable(p, drops.p ? drops.p : "", drops.len);
    }
    prep__stage_add(st, "dedup", (double)x->n, (double)out_docs, bin, bout);
    prep_buf_free(&drops);
    return rc;
}

/* Gathers every rank's statistics (JSON text) on rank 0 and sums them in
 * rank order into st; also collects each rank's memory into mem[]. */
static grit_err gather_stats(run *r, json_t *st, json_t *mine)
{
    char *s = json_dumps(mine, JSON_COMPACT | JSON_SORT_KEYS);
    if (!s)
        return GRIT_ENOMEM;
    size_t *cnt = calloc((size_t)r->size, sizeof *cnt);
    char *got = NULL;
    size_t n_got = 0;
    grit_err rc = cnt ? GRIT_OK : GRIT_ENOMEM;
    if (rc == GRIT_OK) {
        cnt[0] = strlen(s) + 1;
        void *g = NULL;
        rc = comm_alltoallv(r->cm, s, cnt, 1, &g, &n_got, NULL);
        got = g;
    }
    json_t *ranks = json_array();
    for (size_t off = 0; rc == GRIT_OK && off < n_got;) {
        json_error_t je;
        json_t *o = json_loads(got + off, 0, &je);
        if (!o) {
            rc = grit_errf(GRIT_EFORMAT, "dedup: bad statistics from a rank: %s", je.text);
            break;
        }
        json_t *m = json_object_get(o, "memory");
        if (m)
            json_array_append(ranks, m);
        json_object_del(o, "memory");
        prep__jsum(st, o);
        json_decref(o);
        off += strlen(got + off) + 1;
    }
    if (r->rank == 0)
        json_object_set_new(st, "ranks", ranks);
    else
        json_decref(ranks);
    free(got);
    free(cnt);
    free(s);
    return rc;
}

grit_err prep__stage_dedup(run *r)
{
    char marker[4096];
    prep__pathn(marker, sizeof marker, r, "done/dedup.json");
    if (prep__exists(marker)) {
        r->skipped[1] = 1;
        if (!r->quiet)
            fprintf(stderr, "grit prep: dedup: already done, skipped\n");
        return GRIT_OK;
    }
    r->ran[1] = 1;
    double t0 = now_seconds();
    dd x;
    memset(&x, 0, sizeof x);
    x.r = r;
    x.bands = (size_t)r->c->mh_bands;
    json_t *st = json_object(), *tot = json_object();
    grit_err rc = st && tot ? GRIT_OK : GRIT_ENOMEM;
    if (rc == GRIT_OK && r->n_docs > UINT32_MAX - 1)
        rc = grit_errf(GRIT_EINVAL, "dedup: %llu documents, at most %u per run",
                       (unsigned long long)r->n_docs, UINT32_MAX - 1);
    if (rc == GRIT_OK)
        rc = dd_load(&x);
    /* every rank takes part in every exchange, so a local failure is agreed
     * on before the first one */
    rc = prep__agree(r, rc, "dedup (reading signatures)");
    if (rc == GRIT_OK && r->c->url_dedup)
        rc = hash_round(&x, x.uh, W_URL, 1);
    if (rc == GRIT_OK && r->c->exact_dedup)
        rc = hash_round(&x, x.eh, W_EXACT, 0);
    if (rc == GRIT_OK && x.bands)
        rc = lsh_round(&x, st);
    if (rc == GRIT_OK)
        rc = dd_write(&x, st);
    rc = prep__agree(r, rc, "dedup");
    if (rc == GRIT_OK) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        prep__stage_time(st, "dedup", now_seconds() - t0);
        json_object_set_new(st, "memory",
                            json_pack("{s:i, s:I, s:I, s:I}", "rank", r->rank, "documents",
                                      (json_int_t)x.n, "dedup_bytes", (json_int_t)x.mem_peak,
                                      "peak_rss_bytes", (json_int_t)ru.ru_maxrss * 1024));
        rc = gather_stats(r, tot, st);
    }
    if (rc == GRIT_OK && r->rank == 0)
        rc = prep__write_marker(r, marker, tot);
    rc = prep__agree(r, rc, "dedup (marker)");
    if (rc == GRIT_OK && !r->quiet) {
        json_t *d = json_object_get(json_object_get(tot, "stages"), "dedup");
        fprintf(stderr, "grit prep: dedup: %lld documents -> %lld (%.2fs, %d rank%s)\n",
                (long long)json_integer_value(json_object_get(d, "docs_in")),
                (long long)json_integer_value(json_object_get(d, "docs_out")),
                now_seconds() - t0, r->size, r->size > 1 ? "s" : "");
    }
    dd_free(&x);
    json_decref(st);
    json_decref(tot);
    return rc;
}

/* First kept-document index of each shard, from the docs markers. */
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
    r->n_docs = n;
    return GRIT_OK;
}
