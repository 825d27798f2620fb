/*
 * bpe.c - byte-level BPE: loading (GPT-2 vocab.json + merges.txt, Hugging
 * Face tokenizer.json), token lookups and decoding (see bpe.h for the
 * contract; encoding is in bpe_encode.c).
 *
 * Tables (all built at open, read-only afterwards; layout in bpe_internal.h):
 *   tok_off/tok_bytes  id -> raw bytes (GPT-2's byte-to-unicode mapping is
 *                      undone at load, so BPE works on bytes directly)
 *   vmap               raw bytes -> id, open addressing, xxh3 of the bytes
 *   mmap               (left id, right id) -> (rank, merged id), open
 *                      addressing on a multiplicative hash of the pair
 *   byte_id[256]       the token of each single byte (all ASCII must exist;
 *                      SYM_DEAD for a byte with none)
 *   added              added tokens, longest first, with first[] flagging
 *                      the bytes they can start with
 *
 * A file that breaks any of these (an id twice, a merge of unknown tokens,
 * an unsupported normalizer) is refused at open with the file and the entry
 * named; nothing is half-loaded.
 */
#include "data/bpe.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/fsutil.h"
#include "data/bpe_internal.h"
#include "data/pretok.h"

#define MAX_ADDED 4096

void bpe__free_all(void *const *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(p[i]);
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
        if (bpe__vmap_find(t, s, len, &dup)) {
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
        if (bpe__vmap_find(t, &c, 1, &t->byte_id[b]))
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
    if (!bpe__vmap_find(t, scratch, (size_t)na, &ia) || !bpe__vmap_find(t, scratch + na, (size_t)nb, &ib))
        return grit_errf(GRIT_EFORMAT, "%s: merge %u: '%.*s %.*s': a part is not in the vocabulary",
                         file, rank, (int)la, a, (int)lb, b);
    if (!bpe__vmap_find(t, scratch, (size_t)(na + nb), &im))
        return grit_errf(GRIT_EFORMAT, "%s: merge %u: '%.*s%.*s': the merged token is not in the vocabulary",
                         file, rank, (int)la, a, (int)lb, b);
    uint64_t key = bpe__pair_key(ia, ib);
    size_t i = bpe__pair_slot(t, key);
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
    hftok_close(t->gen);
    void *owned[] = {t->tok_off, t->tok_used, t->tok_bytes, t->vmap, t->mmap, t->added, t};
    bpe__free_all(owned, sizeof owned / sizeof *owned);
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
    if (nvocab > json_object_size(vocab)) { /* a tiny file must not size huge tables */
        rc = grit_errf(GRIT_EFORMAT, "%s: id %u: expected ids below the %zu tokens the file defines",
                       vocab_json, nvocab - 1, json_object_size(vocab));
        goto out;
    }
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
    if (bpe__vmap_find(t, (const uint8_t *)"<|endoftext|>", 13, &eot)) {
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

static grit_err open_fast_hf(bpe **out, const char *path)
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
    size_t ntok = json_object_size(vocab) + json_array_size(added);
    if (nvocab > ntok) { /* a tiny file must not size huge tables */
        rc = grit_errf(GRIT_EFORMAT, "%s: model.vocab / added_tokens: id %u: expected ids below the "
                       "%zu tokens the file defines", path, nvocab - 1, ntok);
        goto out;
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

/* Dispatch: the fast path when it is exact for the file, else hftok. */
grit_err bpe_open_file(bpe **out, const char *path, int flags)
{
    *out = NULL;
    size_t pl = strlen(path);
    json_t *root = NULL;
    if (!(pl > 6 && !strcmp(path + pl - 6, ".model"))) {
        json_error_t jerr;
        if (!(root = json_load_file(path, 0, &jerr)))
            return grit_errf(GRIT_EFORMAT, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
        if (!(flags & BPE_OPEN_GENERIC) && hftok_fast_path_ok(root)) {
            json_decref(root);
            return open_fast_hf(out, path);
        }
    }
    bpe *t = calloc(1, sizeof *t);
    grit_err rc = t ? hftok_open(&t->gen, path, root) : grit_errf(GRIT_ENOMEM, "%s: out of memory", path);
    json_decref(root);
    if (rc) {
        free(t);
        return rc;
    }
    *out = t;
    return GRIT_OK;
}

grit_err bpe_open_hf(bpe **out, const char *path)
{
    return bpe_open_file(out, path, 0);
}

int bpe_is_generic(const bpe *t)
{
    return t->gen != NULL;
}

size_t bpe_vocab_size(const bpe *t)
{
    if (t->gen)
        return hftok_vocab_size(t->gen);
    return t->nvocab;
}

grit_err bpe_token_id(const bpe *t, const char *bytes, size_t len, uint32_t *id)
{
    if (t->gen)
        return hftok_token_id(t->gen, bytes, len, id);
    if (len == 0 || !bpe__vmap_find(t, (const uint8_t *)bytes, len, id))
        return grit_errf(GRIT_ENOTFOUND, "token '%.*s' is not in the vocabulary", (int)(len > 64 ? 64 : len), bytes);
    return GRIT_OK;
}

const char *bpe_token_bytes(const bpe *t, uint32_t id, size_t *len)
{
    if (t->gen)
        return hftok_token_bytes(t->gen, id, len);
    if (id >= t->nvocab || !t->tok_used[id])
        return NULL;
    *len = t->tok_off[id + 1] - t->tok_off[id];
    return (const char *)t->tok_bytes + t->tok_off[id];
}

grit_err bpe_decode(const bpe *t, const uint32_t *ids, size_t n, char *out, size_t cap, size_t *outlen)
{
    if (t->gen)
        return hftok_decode(t->gen, ids, n, out, cap, outlen);
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
