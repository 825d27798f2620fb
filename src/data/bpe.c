/*
 * bpe.c - byte-level BPE: loading, encoding with a per-thread word cache,
 * decoding (see bpe.h for the contract).
 *
 * Tables (all built at open, read-only afterwards):
 *   tok_off/tok_bytes  id -> raw bytes (GPT-2's byte-to-unicode mapping is
 *                      undone at load, so BPE works on bytes directly)
 *   vmap               raw bytes -> id, open addressing, xxh3 of the bytes
 *   mmap               (left id, right id) -> (rank, merged id), open
 *                      addressing on a multiplicative hash of the pair
 *   byte_id[256]       the token of each single byte (all 256 must exist)
 *
 * Encoding one piece: a one-byte piece is byte_id[b]; otherwise the ctx's
 * cache (keys up to CACHE_MAX_KEY bytes) is consulted; on a miss the merges
 * run over a linked list of symbols with a binary min-heap keyed by
 * (rank << 32 | position), stale heap entries being skipped when popped, so
 * a piece of n bytes costs O(n log n) (long letter runs such as Chinese
 * text without spaces stay cheap). Scratch buffers grow to the longest
 * piece seen and are reused: no allocation per piece in the steady state.
 * The cache is a fixed-size table; when it fills it is emptied wholesale.
 */
#include "data/bpe.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/fsutil.h"
#include "data/pretok.h"

#define MERGE_EMPTY UINT64_MAX
#define SYM_DEAD UINT32_MAX
#define CACHE_BITS 16
#define CACHE_MAX_KEY 64
#define CACHE_KEY_BYTES (1u << 22)
#define CACHE_ID_CAP (1u << 20)
#define MAX_ADDED 4096

typedef struct merge_slot {
    uint64_t key; /* left << 32 | right, MERGE_EMPTY when free */
    uint32_t rank, id;
} merge_slot;

typedef struct added_tok {
    const uint8_t *s; /* raw bytes, points into tok_bytes */
    uint32_t len, id;
    uint8_t special, normalized;
} added_tok;

struct bpe {
    uint32_t nvocab;      /* one past the largest id */
    uint32_t *tok_off;    /* [nvocab + 1] */
    uint8_t *tok_used;    /* [nvocab] */
    uint8_t *tok_bytes;   /* concatenated raw bytes */
    size_t nbytes, capbytes;
    uint32_t *vmap;       /* slots hold id + 1, 0 = empty */
    size_t vmask;
    merge_slot *mmap;
    size_t mmask;
    int mshift;
    uint32_t byte_id[256];
    added_tok *added;     /* sorted by length, longest first */
    int nadded;
    uint8_t first[256];   /* bit 0: a non-normalized token starts with this byte, bit 1: normalized */
    int nfc;
    int whole_word;       /* emit a piece found in the vocabulary as is (tiktoken) */
};

typedef struct cache_slot {
    uint64_t h;
    uint32_t koff, ioff;
    uint16_t klen, nids; /* klen == 0: empty */
} cache_slot;

struct bpe_ctx {
    const bpe *t;
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

static inline uint64_t pair_key(uint32_t a, uint32_t b)
{
    return ((uint64_t)a << 32) | b;
}

static inline size_t pair_slot(const bpe *t, uint64_t key)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> t->mshift) & t->mmask;
}

static inline const merge_slot *merge_find(const bpe *t, uint32_t a, uint32_t b)
{
    uint64_t key = pair_key(a, b);
    for (size_t i = pair_slot(t, key);; i = (i + 1) & t->mmask) {
        const merge_slot *m = &t->mmap[i];
        if (m->key == key)
            return m;
        if (m->key == MERGE_EMPTY)
            return NULL;
    }
}

static int vmap_find(const bpe *t, const uint8_t *s, size_t len, uint32_t *id)
{
    for (size_t i = XXH3_64bits(s, len) & t->vmask;; i = (i + 1) & t->vmask) {
        uint32_t v = t->vmap[i];
        if (v == 0)
            return 0;
        uint32_t k = v - 1;
        if (t->tok_off[k + 1] - t->tok_off[k] == len && memcmp(t->tok_bytes + t->tok_off[k], s, len) == 0) {
            *id = k;
            return 1;
        }
    }
}

/* ---- building --------------------------------------------------------- */

/* GPT-2's byte-to-unicode table, inverted: code point -> byte, -1 if none.
 * Printable Latin-1 bytes (!..~, ¡..¬, ®..ÿ) stand for themselves; the other
 * 68 bytes map, in order, to U+0100 onwards. */
static void unicode_to_byte(int16_t inv[324])
{
    for (int i = 0; i < 324; i++)
        inv[i] = -1;
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        inv[printable ? b : 256 + extra++] = (int16_t)b;
    }
}

/* Converts a byte-mapped vocabulary string to raw bytes in out (capacity:
 * strlen(s) suffices since each char yields one byte). Returns the length or
 * -1 if s holds a character outside the mapping. */
static long unmap_string(const int16_t inv[324], const char *s, size_t n, uint8_t *out)
{
    size_t i = 0, o = 0;
    while (i < n) {
        uint32_t cp;
        size_t len = pretok_utf8((const uint8_t *)s, n, i, &cp);
        if (len == 0 || cp >= 324 || inv[cp] < 0)
            return -1;
        out[o++] = (uint8_t)inv[cp];
        i += len;
    }
    return (long)o;
}

static grit_err tok_set(bpe *t, uint32_t id, const uint8_t *s, size_t len, const char *file)
{
    if (id >= t->nvocab)
        return grit_errf(GRIT_EFORMAT, "%s: token id %u: expected below %u", file, id, t->nvocab);
    if (t->tok_used[id])
        return grit_errf(GRIT_EFORMAT, "%s: token id %u: assigned twice", file, id);
    if (len == 0)
        return grit_errf(GRIT_EFORMAT, "%s: token id %u: empty token", file, id);
    /* tok_off is filled in id order at finish; stash offset+len in a side
     * representation: we append bytes now and record start in tok_off[id]. */
    if (t->nbytes + len > t->capbytes) {
        size_t cap = t->capbytes ? t->capbytes * 2 : 1 << 20;
        while (cap < t->nbytes + len)
            cap *= 2;
        uint8_t *nb = realloc(t->tok_bytes, cap);
        if (!nb)
            return grit_errf(GRIT_ENOMEM, "%s: out of memory for token bytes", file);
        t->tok_bytes = nb;
        t->capbytes = cap;
    }
    memcpy(t->tok_bytes + t->nbytes, s, len);
    t->tok_off[id] = (uint32_t)t->nbytes;
    t->tok_used[id] = (uint8_t)(len > 255 ? 255 : len); /* nonzero marks used */
    t->nbytes += len;
    return GRIT_OK;
}

/* Rebuilds tok_bytes in id order so that tok_off[id + 1] - tok_off[id] is
 * the length, then builds vmap and byte_id. lens[id] holds each length. */
static grit_err tok_finish(bpe *t, const uint32_t *lens, const char *file)
{
    uint8_t *nb = malloc(t->nbytes ? t->nbytes : 1);
    if (!nb)
        return grit_errf(GRIT_ENOMEM, "%s: out of memory", file);
    size_t o = 0;
    for (uint32_t id = 0; id < t->nvocab; id++) {
        uint32_t start = t->tok_off[id];
        t->tok_off[id] = (uint32_t)o;
        if (t->tok_used[id]) {
            memcpy(nb + o, t->tok_bytes + start, lens[id]);
            o += lens[id];
        }
    }
    t->tok_off[t->nvocab] = (uint32_t)o;
    free(t->tok_bytes);
    t->tok_bytes = nb;
    size_t cap = 1;
    while (cap < 2 * (size_t)t->nvocab)
        cap *= 2;
    t->vmap = calloc(cap, sizeof *t->vmap);
    if (!t->vmap)
        return grit_errf(GRIT_ENOMEM, "%s: out of memory", file);
    t->vmask = cap - 1;
    for (uint32_t id = 0; id < t->nvocab; id++) {
        if (!t->tok_used[id])
            continue;
        const uint8_t *s = t->tok_bytes + t->tok_off[id];
        size_t len = t->tok_off[id + 1] - t->tok_off[id];
        uint32_t dup;
        if (vmap_find(t, s, len, &dup)) {
            /* Same bytes under two ids (an added token repeating a vocab
             * entry): the lower id wins, as vocabulary lookups see it. */
            continue;
        }
        size_t i = XXH3_64bits(s, len) & t->vmask;
        while (t->vmap[i])
            i = (i + 1) & t->vmask;
        t->vmap[i] = id + 1;
    }
    int have = 0;
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        if (vmap_find(t, &c, 1, &t->byte_id[b]))
            have++;
        else
            t->byte_id[b] = SYM_DEAD;
    }
    /* GPT-NeoX-20B lacks the bytes that never occur in UTF-8 (0xC0, 0xC1,
     * 0xF5-0xFF); ASCII at least must be there. */
    for (int b = 0; b < 128; b++)
        if (t->byte_id[b] == SYM_DEAD)
            return grit_errf(GRIT_EFORMAT, "%s: vocabulary: expected a token for every ASCII byte, 0x%02x has none",
                             file, b);
    return GRIT_OK;
}

static grit_err merges_alloc(bpe *t, size_t nmerges, const char *file)
{
    size_t cap = 16;
    int bits = 4;
    while (cap < 2 * nmerges + 16) {
        cap *= 2;
        bits++;
    }
    t->mmap = malloc(cap * sizeof *t->mmap);
    if (!t->mmap)
        return grit_errf(GRIT_ENOMEM, "%s: out of memory for merges", file);
    for (size_t i = 0; i < cap; i++)
        t->mmap[i].key = MERGE_EMPTY;
    t->mmask = cap - 1;
    t->mshift = 64 - bits;
    return GRIT_OK;
}

/* Adds merge number `rank`: the byte-mapped strings a and b (lengths la, lb). */
static grit_err merge_add(bpe *t, const int16_t inv[324], const char *a, size_t la, const char *b,
                          size_t lb, uint32_t rank, const char *file, uint8_t *scratch)
{
    long na = unmap_string(inv, a, la, scratch);
    long nb = na < 0 ? -1 : unmap_string(inv, b, lb, scratch + na);
    if (na <= 0 || nb <= 0)
        return grit_errf(GRIT_EFORMAT, "%s: merge %u: expected two byte-mapped tokens, got '%.*s' '%.*s'",
                         file, rank, (int)la, a, (int)lb, b);
    uint32_t ia, ib, im;
    if (!vmap_find(t, scratch, (size_t)na, &ia) || !vmap_find(t, scratch + na, (size_t)nb, &ib))
        return grit_errf(GRIT_EFORMAT, "%s: merge %u: '%.*s %.*s': a part is not in the vocabulary",
                         file, rank, (int)la, a, (int)lb, b);
    if (!vmap_find(t, scratch, (size_t)(na + nb), &im))
        return grit_errf(GRIT_EFORMAT, "%s: merge %u: '%.*s%.*s': the merged token is not in the vocabulary",
                         file, rank, (int)la, a, (int)lb, b);
    uint64_t key = pair_key(ia, ib);
    size_t i = pair_slot(t, key);
    while (t->mmap[i].key != MERGE_EMPTY) {
        if (t->mmap[i].key == key)
            return GRIT_OK; /* a repeated pair keeps its first (lowest) rank */
        i = (i + 1) & t->mmask;
    }
    t->mmap[i].key = key;
    t->mmap[i].rank = rank;
    t->mmap[i].id = im;
    return GRIT_OK;
}

static int added_cmp(const void *x, const void *y)
{
    const added_tok *a = x, *b = y;
    if (a->len != b->len)
        return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : (a->id > b->id);
}

static void added_finish(bpe *t)
{
    qsort(t->added, (size_t)t->nadded, sizeof *t->added, added_cmp);
    memset(t->first, 0, sizeof t->first);
    for (int i = 0; i < t->nadded; i++) {
        const added_tok *a = &t->added[i];
        a = &t->added[i];
        t->first[a->s[0]] |= a->normalized ? 2 : 1;
    }
}

void bpe_close(bpe *t)
{
    if (!t)
        return;
    free(t->tok_off);
    free(t->tok_used);
    free(t->tok_bytes);
    free(t->vmap);
    free(t->mmap);
    free(t->added);
    free(t);
}

static grit_err bpe_alloc(bpe **out, uint32_t nvocab, const char *file)
{
    bpe *t = calloc(1, sizeof *t);
    if (t) {
        t->nvocab = nvocab;
        t->tok_off = calloc((size_t)nvocab + 1, sizeof *t->tok_off);
        t->tok_used = calloc(nvocab ? nvocab : 1, 1);
        t->added = calloc(MAX_ADDED, sizeof *t->added);
    }
    if (!t || !t->tok_off || !t->tok_used || !t->added) {
        bpe_close(t);
        return grit_errf(GRIT_ENOMEM, "%s: out of memory", file);
    }
    *out = t;
    return GRIT_OK;
}

/* Loads a {"token": id} object: the byte-mapped vocabulary. lens[] gets each
 * token's length. Ids above the largest must fit nvocab (already sized). */
static grit_err load_vocab_obj(bpe *t, json_t *vocab, const int16_t inv[324], uint32_t *lens,
                               const char *file)
{
    const char *key;
    json_t *val;
    size_t maxlen = 1;
    json_object_foreach(vocab, key, val) {
        size_t klen = strlen(key);
        if (klen > maxlen)
            maxlen = klen;
    }
    uint8_t *buf = malloc(maxlen);
    if (!buf)
        return grit_errf(GRIT_ENOMEM, "%s: out of memory", file);
    grit_err rc = GRIT_OK;
    json_object_foreach(vocab, key, val) {
        size_t klen = strlen(key);
        if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) >= t->nvocab) {
            rc = grit_errf(GRIT_EFORMAT, "%s: vocab['%.64s']: expected a non-negative integer id", file, key);
            break;
        }
        long n = unmap_string(inv, key, klen, buf);
        if (n <= 0) {
            rc = grit_errf(GRIT_EFORMAT, "%s: vocab['%.64s']: expected a byte-mapped token (GPT-2 byte-to-unicode)",
                           file, key);
            break;
        }
        uint32_t id = (uint32_t)json_integer_value(val);
        if ((rc = tok_set(t, id, buf, (size_t)n, file)))
            break;
        lens[id] = (uint32_t)n;
    }
    free(buf);
    return rc;
}

static uint32_t max_id_of(json_t *vocab)
{
    const char *key;
    json_t *val;
    uint32_t mx = 0;
    json_object_foreach(vocab, key, val) {
        json_int_t v = json_integer_value(val);
        if (v >= 0 && v < (json_int_t)0x7fffffff && (uint32_t)v + 1 > mx)
            mx = (uint32_t)v + 1;
    }
    return mx;
}

grit_err bpe_open_gpt2(bpe **out, const char *vocab_json, const char *merges_txt)
{
    *out = NULL;
    json_error_t jerr;
    json_t *vocab = json_load_file(vocab_json, 0, &jerr);
    if (!vocab)
        return grit_errf(GRIT_EFORMAT, "%s:%d:%d: %s", vocab_json, jerr.line, jerr.column, jerr.text);
    char *mtxt = NULL;
    size_t mlen = 0;
    uint32_t *lens = NULL;
    uint8_t *scratch = NULL;
    bpe *t = NULL;
    int16_t inv[324];
    unicode_to_byte(inv);
    grit_err rc;
    if (!json_is_object(vocab)) {
        rc = grit_errf(GRIT_EFORMAT, "%s: expected a JSON object of token -> id", vocab_json);
        goto out;
    }
    if ((rc = fs_read_all(merges_txt, &mtxt, &mlen)))
        goto out;
    uint32_t nvocab = max_id_of(vocab);
    if ((rc = bpe_alloc(&t, nvocab, vocab_json)))
        goto out;
    lens = calloc(nvocab ? nvocab : 1, sizeof *lens);
    scratch = malloc(mlen + 16);
    if (!lens || !scratch) {
        rc = grit_errf(GRIT_ENOMEM, "%s: out of memory", vocab_json);
        goto out;
    }
    if ((rc = load_vocab_obj(t, vocab, inv, lens, vocab_json)) || (rc = tok_finish(t, lens, vocab_json)))
        goto out;
    size_t nlines = 0;
    for (size_t i = 0; i < mlen; i++)
        nlines += mtxt[i] == '\n';
    if ((rc = merges_alloc(t, nlines + 1, merges_txt)))
        goto out;
    uint32_t rank = 0;
    size_t lineno = 0;
    for (char *p = mtxt, *end = mtxt + mlen; p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *le = nl ? nl : end;
        lineno++;
        size_t ll = (size_t)(le - p);
        if (ll > 0 && p[ll - 1] == '\r')
            ll--;
        if (ll > 0 && !(lineno == 1 && strncmp(p, "#version", 8) == 0)) {
            char *sp = memchr(p, ' ', ll);
            if (!sp || sp == p || sp == p + ll - 1 || memchr(sp + 1, ' ', (size_t)(p + ll - sp - 1))) {
                rc = grit_errf(GRIT_EFORMAT, "%s:%zu: expected 'left right' (two tokens, one space), got '%.*s'",
                               merges_txt, lineno, (int)(ll > 80 ? 80 : ll), p);
                goto out;
            }
            rc = merge_add(t, inv, p, (size_t)(sp - p), sp + 1, (size_t)(p + ll - sp - 1), rank++, merges_txt,
                           scratch);
            if (rc)
                goto out;
        }
        p = le + 1;
    }
    uint32_t eot;
    if (vmap_find(t, (const uint8_t *)"<|endoftext|>", 13, &eot)) {
        t->added[0] = (added_tok){t->tok_bytes + t->tok_off[eot], 13, eot, 1, 0};
        t->nadded = 1;
    }
    added_finish(t);
    t->whole_word = 1;
out:
    json_decref(vocab);
    free(mtxt);
    free(lens);
    free(scratch);
    if (rc) {
        bpe_close(t);
        return rc;
    }
    *out = t;
    return GRIT_OK;
}

grit_err bpe_open_hf(bpe **out, const char *path)
{
    *out = NULL;
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root)
        return grit_errf(GRIT_EFORMAT, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
    bpe *t = NULL;
    uint32_t *lens = NULL;
    uint8_t *scratch = NULL;
    grit_err rc = GRIT_OK;
    int16_t inv[324];
    unicode_to_byte(inv);
    json_t *model = json_object_get(root, "model");
    json_t *vocab = json_object_get(model, "vocab");
    json_t *merges = json_object_get(model, "merges");
    json_t *norm = json_object_get(root, "normalizer");
    json_t *pre = json_object_get(root, "pre_tokenizer");
    json_t *added = json_object_get(root, "added_tokens");
    const char *mtype = json_string_value(json_object_get(model, "type"));
    if (!mtype || strcmp(mtype, "BPE") != 0) {
        rc = grit_errf(GRIT_EFORMAT, "%s: model.type: expected \"BPE\", got %s", path, mtype ? mtype : "nothing");
        goto out;
    }
    if (!json_is_object(vocab) || !json_is_array(merges)) {
        rc = grit_errf(GRIT_EFORMAT, "%s: model.vocab / model.merges: expected an object and an array", path);
        goto out;
    }
    int nfc = 0;
    if (norm && !json_is_null(norm)) {
        const char *nt = json_string_value(json_object_get(norm, "type"));
        if (!nt || strcmp(nt, "NFC") != 0) {
            rc = grit_errf(GRIT_EFORMAT, "%s: normalizer.type: expected null or \"NFC\", got %s (unsupported)",
                           path, nt ? nt : "nothing");
            goto out;
        }
        nfc = 1;
    }
    const char *pt = json_string_value(json_object_get(pre, "type"));
    if (!pt || strcmp(pt, "ByteLevel") != 0 || json_is_true(json_object_get(pre, "add_prefix_space")) ||
        json_is_false(json_object_get(pre, "use_regex"))) {
        rc = grit_errf(GRIT_EFORMAT,
                       "%s: pre_tokenizer: expected ByteLevel with add_prefix_space false and the GPT-2 regex (unsupported otherwise)",
                       path);
        goto out;
    }
    uint32_t nvocab = max_id_of(vocab);
    size_t i;
    json_t *a;
    json_array_foreach(added, i, a) {
        json_int_t id = json_integer_value(json_object_get(a, "id"));
        if (id >= 0 && id < 0x7fffffff && (uint32_t)id + 1 > nvocab)
            nvocab = (uint32_t)id + 1;
    }
    if ((rc = bpe_alloc(&t, nvocab, path)))
        goto out;
    t->nfc = nfc;
    t->whole_word = json_is_true(json_object_get(model, "ignore_merges"));
    lens = calloc(nvocab ? nvocab : 1, sizeof *lens);
    if (!lens) {
        rc = grit_errf(GRIT_ENOMEM, "%s: out of memory", path);
        goto out;
    }
    if ((rc = load_vocab_obj(t, vocab, inv, lens, path)))
        goto out;
    /* Added tokens: raw text (not byte-mapped). Those not in the model's
     * vocabulary get their own entry. */
    if (json_array_size(added) > MAX_ADDED) {
        rc = grit_errf(GRIT_EFORMAT, "%s: added_tokens: %zu entries, at most %d supported", path,
                       json_array_size(added), MAX_ADDED);
        goto out;
    }
    json_array_foreach(added, i, a) {
        const char *content = json_string_value(json_object_get(a, "content"));
        json_t *jid = json_object_get(a, "id");
        if (!content || !*content || !json_is_integer(jid) || json_integer_value(jid) < 0) {
            rc = grit_errf(GRIT_EFORMAT, "%s: added_tokens[%zu]: expected non-empty content and an id", path, i);
            goto out;
        }
        if (json_is_true(json_object_get(a, "single_word")) || json_is_true(json_object_get(a, "lstrip")) ||
            json_is_true(json_object_get(a, "rstrip"))) {
            rc = grit_errf(GRIT_EFORMAT, "%s: added_tokens[%zu]: single_word/lstrip/rstrip are not supported", path, i);
            goto out;
        }
        uint32_t id = (uint32_t)json_integer_value(jid);
        size_t clen = strlen(content);
        if (!t->tok_used[id]) {
            if ((rc = tok_set(t, id, (const uint8_t *)content, clen, path)))
                goto out;
            lens[id] = (uint32_t)clen;
        }
        t->added[t->nadded++] = (added_tok){NULL, (uint32_t)clen, id,
                                            (uint8_t)json_is_true(json_object_get(a, "special")),
                                            (uint8_t)!json_is_false(json_object_get(a, "normalized"))};
    }
    if ((rc = tok_finish(t, lens, path)))
        goto out;
    /* Point added tokens at their bytes; content must equal what the id
     * decodes to, else decoding would not round-trip. */
    json_array_foreach(added, i, a) {
        const char *content = json_string_value(json_object_get(a, "content"));
        added_tok *at = &t->added[i];
        size_t len = t->tok_off[at->id + 1] - t->tok_off[at->id];
        at->s = t->tok_bytes + t->tok_off[at->id];
        if (len != at->len || memcmp(at->s, content, len) != 0) {
            rc = grit_errf(GRIT_EFORMAT, "%s: added_tokens[%zu]: content '%s' differs from vocab entry %u", path, i,
                           content, at->id);
            goto out;
        }
    }
    added_finish(t);
    if ((rc = merges_alloc(t, json_array_size(merges), path)))
        goto out;
    scratch = malloc(t->nbytes + 16); /* a merged token is at most the longest token */
    if (!scratch) {
        rc = grit_errf(GRIT_ENOMEM, "%s: out of memory", path);
        goto out;
    }
    json_array_foreach(merges, i, a) {
        const char *l, *r;
        size_t ll, rl;
        if (json_is_string(a)) {
            const char *s = json_string_value(a);
            const char *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                rc = grit_errf(GRIT_EFORMAT, "%s: model.merges[%zu]: expected \"left right\", got \"%s\"", path, i, s);
                goto out;
            }
            l = s, ll = (size_t)(sp - s), r = sp + 1, rl = strlen(sp + 1);
        } else if (json_is_array(a) && json_array_size(a) == 2 && json_is_string(json_array_get(a, 0)) &&
                   json_is_string(json_array_get(a, 1))) {
            l = json_string_value(json_array_get(a, 0)), ll = strlen(l);
            r = json_string_value(json_array_get(a, 1)), rl = strlen(r);
        } else {
            rc = grit_errf(GRIT_EFORMAT, "%s: model.merges[%zu]: expected a string or a pair of strings", path, i);
            goto out;
        }
        if (ll + rl > t->nbytes + 16) {
            rc = grit_errf(GRIT_EFORMAT, "%s: model.merges[%zu]: token too long", path, i);
            goto out;
        }
        if ((rc = merge_add(t, inv, l, ll, r, rl, (uint32_t)i, path, scratch)))
            goto out;
    }
out:
    free(scratch);
    json_decref(root);
    free(lens);
    if (rc) {
        bpe_close(t);
        return rc;
    }
    *out = t;
    return GRIT_OK;
}

size_t bpe_vocab_size(const bpe *t)
{
    return t->nvocab;
}

grit_err bpe_token_id(const bpe *t, const char *bytes, size_t len, uint32_t *id)
{
    if (len == 0 || !vmap_find(t, (const uint8_t *)bytes, len, id))
        return grit_errf(GRIT_ENOTFOUND, "token '%.*s' is not in the vocabulary", (int)(len > 64 ? 64 : len), bytes);
    return GRIT_OK;
}

const char *bpe_token_bytes(const bpe *t, uint32_t id, size_t *len)
{
    if (id >= t->nvocab || !t->tok_used[id])
        return NULL;
    *len = t->tok_off[id + 1] - t->tok_off[id];
    return (const char *)t->tok_bytes + t->tok_off[id];
}

grit_err bpe_decode(const bpe *t, const uint32_t *ids, size_t n, char *out, size_t cap, size_t *outlen)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *s = bpe_token_bytes(t, ids[i], &len);
        if (!s)
            return grit_errf(GRIT_EINVAL, "decode: ids[%zu] = %u: not a token of this vocabulary (size %u)", i,
                             ids[i], t->nvocab);
        if (o < cap)
            memcpy(out + o, s, len < cap - o ? len : cap - o);
        o += len;
    }
    *outlen = o;
    return GRIT_OK;
}

/* ---- per-thread context ---------------------------------------------- */

grit_err bpe_ctx_open(bpe_ctx **out, const bpe *t)
{
    bpe_ctx *c = calloc(1, sizeof *c);
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
    free(c->slots);
    free(c->keys);
    free(c->cids);
    free(c->sym);
    free(c->prev);
    free(c->next);
    free(c->heap);
    free(c);
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

static inline void heap_push(uint64_t *h, size_t *n, uint64_t v)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p] <= v)
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

static inline uint64_t heap_pop(uint64_t *h, size_t *n)
{
    uint64_t top = h[0], v = h[--(*n)];
    size_t i = 0, m = *n;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= m)
            break;
        size_t r = l + 1, k = (r < m && h[r] < h[l]) ? r : l;
        if (h[k] >= v)
            break;
        h[i] = h[k];
        i = k;
    }
    h[i] = v;
    return top;
}

static inline void push_pair(const bpe *t, bpe_ctx *c, size_t *hn, int32_t i)
{
    int32_t j = c->next[i];
    if (j < 0)
        return;
    const merge_slot *m = merge_find(t, c->sym[i], c->sym[j]);
    if (m)
        heap_push(c->heap, hn, ((uint64_t)m->rank << 32) | (uint32_t)i);
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
            continue; /* a byte with no token is dropped, as Hugging Face does without unk */
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
        uint64_t top = heap_pop(c->heap, &hn);
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
    if (t->whole_word && vmap_find(t, w, n, &id)) {
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

/* Normalized text: split on normalized added tokens, then pre-tokenise. */
static grit_err encode_normalized(bpe_ctx *c, const uint8_t *s, size_t n, int allow_special, bpe_ids *ids)
{
    const bpe *t = c->t;
    if (!has_normalized_added(t))
        return encode_plain(c, s, n, ids);
    while (n > 0) {
        size_t at;
        int k = find_added(t, s, n, 1, allow_special, &at);
        size_t plain = k < 0 ? n : at;
        grit_err rc = encode_plain(c, s, plain, ids);
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

grit_err bpe_encode(bpe_ctx *c, const char *text, size_t len, int flags, bpe_ids *ids)
{
    const bpe *t = c->t;
    const uint8_t *s = (const uint8_t *)text;
    int allow_special = (flags & BPE_ALLOW_SPECIAL) != 0;
    int any_raw = 0;
    for (int k = 0; k < t->nadded; k++)
        any_raw |= !t->added[k].normalized && (allow_special || !t->added[k].special);
    if (!any_raw)
        return encode_segment(c, s, len, allow_special, ids);
    while (len > 0) {
        size_t at;
        int k = find_added(t, s, len, 0, allow_special, &at);
        size_t plain = k < 0 ? len : at;
        grit_err rc = encode_segment(c, s, plain, allow_special, ids);
        if (rc)
            return rc;
        if (k < 0)
            break;
        if ((rc = ids_reserve(ids, 1)))
            return rc;
        ids->v[ids->n++] = t->added[k].id;
        s += at + t->added[k].len;
        len -= at + t->added[k].len;
    }
    return GRIT_OK;
}
