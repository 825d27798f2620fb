/*
 * bpe_encode.c - byte-level BPE encoding with a per-thread word cache (see
 * bpe.h for the contract; the tables it reads are built by bpe.c, their
 * layout is in bpe_internal.h).
 *
 * Encoding one piece: a one-byte piece is byte_id[b]; otherwise the ctx's
 * cache (keys up to CACHE_MAX_KEY bytes) is consulted; on a miss the merges
 * run over a linked list of symbols with a binary min-heap keyed by
 * (rank << 32 | position), stale heap entries being skipped when popped, so
 * a piece of n bytes costs O(n log n) (long letter runs such as Chinese
 * text without spaces stay cheap). Scratch buffers grow to the longest
 * piece seen and are reused: no allocation per piece in the steady state.
 * The cache is a fixed-size table; when it fills it is emptied wholesale.
 *
 * Not here: loading, token lookups and decoding (bpe.c), pre-tokenisation
 * (pretok.c).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "data/bpe_internal.h"
#include "data/minheap.h"
#include "data/pretok.h"

#define CACHE_BITS 16
#define CACHE_MAX_KEY 64
#define CACHE_KEY_BYTES (1u << 22)
#define CACHE_ID_CAP (1u << 20)

typedef struct cache_slot {
    uint64_t h;
    uint32_t koff, ioff;
    uint16_t klen, nids; /* klen == 0: empty */
} cache_slot;

struct bpe_ctx {
    const bpe *t;
    hftok_ctx *gen; /* the generic path's context (t->gen set) */
    cache_slot *slots;
    size_t used;
    uint8_t *keys;
    size_t nkeys;
    uint32_t *cids;
    size_t ncids;
    size_t scap; /* capacity of the scratch arrays below */
    uint32_t *sym;
    int32_t *prev, *next;
    uint64_t *heap;
    uint8_t *lossy; /* the U+FFFD-replaced copy of a text with invalid UTF-8 */
    size_t lossy_cap;
    uint64_t replaced; /* input bytes replaced so far */
};

/* ---- small helpers ---------------------------------------------------- */

void bpe_ids_free(bpe_ids *ids)
{
    if (!ids)
        return;
    free(ids->v);
    ids->v = NULL;
    ids->n = ids->cap = 0;
}

static grit_err ids_reserve(bpe_ids *ids, size_t extra)
{
    if (ids->n + extra <= ids->cap)
        return GRIT_OK;
    size_t cap = ids->cap ? ids->cap : 256;
    while (cap < ids->n + extra)
        cap *= 2;
    uint32_t *v = realloc(ids->v, cap * sizeof *v);
    if (!v)
        return grit_errf(GRIT_ENOMEM, "bpe: cannot grow id buffer to %zu ids", cap);
    ids->v = v;
    ids->cap = cap;
    return GRIT_OK;
}

static inline const merge_slot *merge_find(const bpe *t, uint32_t a, uint32_t b)
{
    uint64_t key = bpe__pair_key(a, b);
    for (size_t i = bpe__pair_slot(t, key);; i = (i + 1) & t->mmask) {
        const merge_slot *m = &t->mmap[i];
        if (m->key == key)
            return m;
        if (m->key == MERGE_EMPTY)
            return NULL;
    }
}

/* ---- per-thread context ---------------------------------------------- */

grit_err bpe_ctx_open(bpe_ctx **out, const bpe *t)
{
    bpe_ctx *c = calloc(1, sizeof *c);
    if (c && t->gen) {
        grit_err rc = hftok_ctx_open(&c->gen, t->gen);
        if (rc) {
            free(c);
            return rc;
        }
        c->t = t;
        *out = c;
        return GRIT_OK;
    }
    if (c) {
        c->t = t;
        c->slots = calloc((size_t)1 << CACHE_BITS, sizeof *c->slots);
        c->keys = malloc(CACHE_KEY_BYTES);
        c->cids = malloc(CACHE_ID_CAP * sizeof *c->cids);
    }
    if (!c || !c->slots || !c->keys || !c->cids) {
        bpe_ctx_close(c);
        return grit_errf(GRIT_ENOMEM, "bpe: out of memory for a context");
    }
    *out = c;
    return GRIT_OK;
}

void bpe_ctx_close(bpe_ctx *c)
{
    if (!c)
        return;
    hftok_ctx_close(c->gen);
    void *owned[] = {c->slots, c->keys, c->cids, c->sym, c->prev, c->next, c->heap, c->lossy, c};
    bpe__free_all(owned, sizeof owned / sizeof *owned);
}

static grit_err scratch_reserve(bpe_ctx *c, size_t n)
{
    if (n <= c->scap)
        return GRIT_OK;
    size_t cap = c->scap ? c->scap : 256;
    while (cap < n)
        cap *= 2;
    uint32_t *sym = realloc(c->sym, cap * sizeof *sym);
    if (sym)
        c->sym = sym;
    int32_t *prev = realloc(c->prev, cap * sizeof *prev);
    if (prev)
        c->prev = prev;
    int32_t *next = realloc(c->next, cap * sizeof *next);
    if (next)
        c->next = next;
    uint64_t *heap = realloc(c->heap, 2 * cap * sizeof *heap);
    if (heap)
        c->heap = heap;
    if (!sym || !prev || !next || !heap || cap > INT32_MAX)
        return grit_errf(GRIT_ENOMEM, "bpe: out of memory for a piece of %zu bytes", n);
    c->scap = cap;
    return GRIT_OK;
}

static inline void push_pair(const bpe *t, bpe_ctx *c, size_t *hn, int32_t i)
{
    int32_t j = c->next[i];
    if (j < 0)
        return;
    const merge_slot *m = merge_find(t, c->sym[i], c->sym[j]);
    if (m)
        minheap_push(c->heap, hn, ((uint64_t)m->rank << 32) | (uint32_t)i);
}

/* Runs the merges over piece w[0..n), n >= 2; leaves the result in c->sym
 * along the next[] chain from 0 and returns the number of tokens. */
static size_t merge_piece(bpe_ctx *c, const uint8_t *w, size_t n)
{
    const bpe *t = c->t;
    size_t alive = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t id = t->byte_id[w[i]];
        if (id == SYM_DEAD)
            continue; /* unreachable: bpe_encode refuses bytes with no token first */
        c->sym[alive] = id;
        c->prev[alive] = (int32_t)alive - 1;
        c->next[alive] = (int32_t)alive + 1;
        alive++;
    }
    if (alive == 0)
        return 0;
    c->next[alive - 1] = -1;
    n = alive;
    size_t hn = 0, count = n;
    for (size_t i = 0; i + 1 < n; i++)
        push_pair(t, c, &hn, (int32_t)i);
    while (hn > 0) {
        uint64_t top = minheap_pop(c->heap, &hn);
        int32_t i = (int32_t)(uint32_t)top;
        uint32_t rank = (uint32_t)(top >> 32);
        int32_t j = c->next[i];
        if (c->sym[i] == SYM_DEAD || j < 0)
            continue;
        const merge_slot *m = merge_find(t, c->sym[i], c->sym[j]);
        if (!m || m->rank != rank)
            continue; /* stale: a neighbour changed since this was pushed */
        c->sym[i] = m->id;
        c->sym[j] = SYM_DEAD;
        c->next[i] = c->next[j];
        if (c->next[j] >= 0)
            c->prev[c->next[j]] = i;
        count--;
        if (c->prev[i] >= 0)
            push_pair(t, c, &hn, c->prev[i]);
        push_pair(t, c, &hn, i);
    }
    return count;
}

static void cache_clear(bpe_ctx *c)
{
    memset(c->slots, 0, ((size_t)1 << CACHE_BITS) * sizeof *c->slots);
    c->used = c->nkeys = c->ncids = 0;
}

/* Encodes one piece (n >= 1) and appends its ids. */
static grit_err encode_piece(bpe_ctx *c, const uint8_t *w, size_t n, bpe_ids *ids)
{
    const bpe *t = c->t;
    grit_err rc;
    if (n == 1) {
        if (t->byte_id[w[0]] == SYM_DEAD)
            return GRIT_OK;
        if ((rc = ids_reserve(ids, 1)))
            return rc;
        ids->v[ids->n++] = t->byte_id[w[0]];
        return GRIT_OK;
    }
    uint32_t id;
    if (t->whole_word && bpe__vmap_find(t, w, n, &id)) {
        if ((rc = ids_reserve(ids, 1)))
            return rc;
        ids->v[ids->n++] = id;
        return GRIT_OK;
    }
    uint64_t h = 0;
    size_t slot = 0;
    const size_t mask = ((size_t)1 << CACHE_BITS) - 1;
    if (n <= CACHE_MAX_KEY) {
        h = XXH3_64bits(w, n);
        for (slot = h & mask; c->slots[slot].klen; slot = (slot + 1) & mask) {
            const cache_slot *s = &c->slots[slot];
            if (s->h == h && s->klen == n && memcmp(c->keys + s->koff, w, n) == 0) {
                if ((rc = ids_reserve(ids, s->nids)))
                    return rc;
                memcpy(ids->v + ids->n, c->cids + s->ioff, s->nids * sizeof *ids->v);
                ids->n += s->nids;
                return GRIT_OK;
            }
        }
    }
    if ((rc = scratch_reserve(c, n)) || (rc = ids_reserve(ids, n)))
        return rc;
    size_t count = merge_piece(c, w, n);
    uint32_t *dst = ids->v + ids->n;
    size_t k = 0;
    for (int32_t i = count ? 0 : -1; i >= 0; i = c->next[i])
        dst[k++] = c->sym[i];
    ids->n += count;
    if (n <= CACHE_MAX_KEY) {
        if (c->used * 2 >= mask || c->nkeys + n > CACHE_KEY_BYTES || c->ncids + count > CACHE_ID_CAP) {
            cache_clear(c);
            for (slot = h & mask; c->slots[slot].klen; slot = (slot + 1) & mask)
                ;
        }
        cache_slot *s = &c->slots[slot];
        s->h = h;
        s->koff = (uint32_t)c->nkeys;
        s->klen = (uint16_t)n;
        s->ioff = (uint32_t)c->ncids;
        s->nids = (uint16_t)count;
        memcpy(c->keys + c->nkeys, w, n);
        memcpy(c->cids + c->ncids, dst, count * sizeof *dst);
        c->nkeys += n;
        c->ncids += count;
        c->used++;
    }
    return GRIT_OK;
}

static grit_err encode_plain(bpe_ctx *c, const uint8_t *s, size_t n, bpe_ids *ids)
{
    for (size_t i = 0; i < n;) {
        size_t e = pretok_next(s, n, i);
        grit_err rc = encode_piece(c, s + i, e - i, ids);
        if (rc)
            return rc;
        i = e;
    }
    return GRIT_OK;
}

/* Finds the leftmost, then longest, added token in s[0..n) among those with
 * the given normalized flag (specials only if allow_special). Returns its
 * index or -1, with its start in *at. */
static int find_added(const bpe *t, const uint8_t *s, size_t n, int normalized, int allow_special, size_t *at)
{
    uint8_t bit = normalized ? 2 : 1;
    for (size_t p = 0; p < n; p++) {
        if (!(t->first[s[p]] & bit))
            continue;
        for (int k = 0; k < t->nadded; k++) {
            const added_tok *a = &t->added[k];
            if (a->normalized != normalized || (a->special && !allow_special) || a->s[0] != s[p] ||
                a->len > n - p || memcmp(a->s, s + p, a->len) != 0)
                continue;
            *at = p;
            return k;
        }
    }
    return -1;
}

static int has_normalized_added(const bpe *t)
{
    for (int k = 0; k < t->nadded; k++)
        if (t->added[k].normalized)
            return 1;
    return 0;
}

static grit_err encode_segment(bpe_ctx *c, const uint8_t *s, size_t n, int allow_special, bpe_ids *ids);

/* Splits s[0..n) on the added tokens whose normalized flag is `normalized`
 * (specials only if allow_special), appending each one found as its id. The
 * text between goes to encode_plain when normalized (it is normalized text
 * already) and to encode_segment otherwise (raw text, normalized there). */
static grit_err encode_split(bpe_ctx *c, const uint8_t *s, size_t n, int normalized, int allow_special,
                             bpe_ids *ids)
{
    const bpe *t = c->t;
    while (n > 0) {
        size_t at;
        int k = find_added(t, s, n, normalized, allow_special, &at);
        size_t plain = k < 0 ? n : at;
        grit_err rc = normalized ? encode_plain(c, s, plain, ids) : encode_segment(c, s, plain, allow_special, ids);
        if (rc)
            return rc;
        if (k < 0)
            break;
        if ((rc = ids_reserve(ids, 1)))
            return rc;
        ids->v[ids->n++] = t->added[k].id;
        s += at + t->added[k].len;
        n -= at + t->added[k].len;
    }
    return GRIT_OK;
}

/* Normalized text: split on normalized added tokens, then pre-tokenise. */
static grit_err encode_normalized(bpe_ctx *c, const uint8_t *s, size_t n, int allow_special, bpe_ids *ids)
{
    if (!has_normalized_added(c->t))
        return encode_plain(c, s, n, ids);
    return encode_split(c, s, n, 1, allow_special, ids);
}

static grit_err encode_segment(bpe_ctx *c, const uint8_t *s, size_t n, int allow_special, bpe_ids *ids)
{
    if (!c->t->nfc || n == 0)
        return encode_normalized(c, s, n, allow_special, ids);
    size_t i = 0;
    while (i < n && s[i] < 0x80)
        i++;
    if (i == n)
        return encode_normalized(c, s, n, allow_special, ids);
    utf8proc_uint8_t *nf = NULL;
    utf8proc_ssize_t nl = utf8proc_map(s, (utf8proc_ssize_t)n, &nf, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (nl < 0) {
        /* Not valid UTF-8: no normalisation can apply; encode the bytes. */
        free(nf);
        return encode_normalized(c, s, n, allow_special, ids);
    }
    grit_err rc = encode_normalized(c, nf, (size_t)nl, allow_special, ids);
    free(nf);
    return rc;
}

uint64_t bpe_ctx_replaced(const bpe_ctx *c)
{
    return c->replaced + (c->gen ? hftok_ctx_replaced(c->gen) : 0);
}

grit_err bpe_encode(bpe_ctx *c, const char *text, size_t len, int flags, bpe_ids *ids)
{
    if (c->gen)
        return hftok_encode(c->gen, text, len, flags, ids);
    const bpe *t = c->t;
    const uint8_t *s = (const uint8_t *)text;
    if (!(flags & BPE_BYTE_EXACT)) {
        size_t ok = pretok_utf8_valid_len(s, len);
        if (ok < len) {
            if (len > (SIZE_MAX - ok) / 3)
                return grit_errf(GRIT_ENOMEM, "text of %zu bytes too large to decode", len);
            size_t need = ok + 3 * (len - ok);
            if (need > c->lossy_cap) {
                uint8_t *p = realloc(c->lossy, need);
                if (!p)
                    return grit_errf(GRIT_ENOMEM, "out of memory decoding invalid UTF-8");
                c->lossy = p;
                c->lossy_cap = need;
            }
            size_t rep;
            memcpy(c->lossy, s, ok);
            len = ok + pretok_utf8_lossy(s + ok, len - ok, c->lossy + ok, &rep);
            c->replaced += rep;
            s = c->lossy;
        }
    }
    /* never drop input: a byte the vocabulary cannot express is an error (valid UTF-8
     * never holds the bytes byte-level vocabularies leave out) */
    for (size_t i = 0; i < len; i++)
        if (t->byte_id[s[i]] == SYM_DEAD)
            return grit_errf(GRIT_EINVAL, "byte 0x%02X at offset %zu has no token in this "
                             "vocabulary (byte-exact mode; without it invalid UTF-8 becomes "
                             "U+FFFD)", s[i], i);
    int allow_special = (flags & BPE_ALLOW_SPECIAL) != 0;
    int any_raw = 0;
    for (int k = 0; k < t->nadded; k++)
        any_raw |= !t->added[k].normalized && (allow_special || !t->added[k].special);
    if (!any_raw)
        return encode_segment(c, s, len, allow_special, ids);
    return encode_split(c, s, len, 0, allow_special, ids);
}
