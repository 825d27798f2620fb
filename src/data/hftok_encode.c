/*
 * hftok_encode.c - the generic tokenizer's encoding pipeline (see hftok.h
 * for the steps and hftok_internal.h for the tables).
 *
 * One text is encoded in place, without allocation in the steady state:
 *   - the text is checked for valid UTF-8 and rewritten (U+FFFD) only when
 *     it is not (hftok_norm.c);
 *   - segments between added tokens are normalized into two ping-pong
 *     buffers (hftok_norm.c);
 *   - pre-tokenizers run as a recursion over pieces: stage k cuts its piece
 *     into sub-pieces and hands each to stage k+1, the model being the last
 *     stage; stages that rewrite text (ByteLevel's prefix space, Metaspace)
 *     write into a byte arena sized for the segment up front, and stages
 *     that need the list of cuts (Split behaviours) push it onto a segment
 *     stack addressed by index;
 *   - the model looks each piece up in a per-ctx word cache, else runs the
 *     merges with a min-heap keyed by (rank, position) as Hugging Face does.
 * A SentencePiece vocabulary with no pre-tokenizer gives the model whole
 * segments; when no token has U+2581 after another character (checked at
 * load), no merge can cross a cut made before such a U+2581, so the model
 * sees word-sized pieces and the cache works, with the same ids.
 */
#include <oniguruma.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "data/hftok_internal.h"
#include "data/minheap.h"
#include "data/pretok.h"

#define CACHE_BITS 16
#define CACHE_MAX_KEY 64
#define CACHE_KEY_BYTES (1u << 22)
#define CACHE_ID_CAP (1u << 20)
#define SYM_DEAD UINT32_MAX

typedef struct cache_slot {
    uint64_t h;
    uint32_t koff, ioff;
    uint16_t klen, nids; /* klen == 0: empty */
} cache_slot;

typedef struct seg {
    size_t s, e;
    int m; /* a match */
} seg;

struct hftok_ctx {
    const hftok *t;
    uint64_t replaced;
    uint8_t *fix;       /* repaired text */
    size_t fixcap;
    uint8_t *nb[2];     /* normalizer ping-pong */
    size_t nbcap[2];
    uint8_t *arena;     /* rewritten pieces */
    size_t acap, atop;
    seg *segs;          /* cut lists, a stack */
    size_t scap, stop;
    OnigRegion *region;
    cache_slot *slots;
    size_t used;
    uint8_t *keys;
    size_t nkeys;
    uint32_t *cids;
    size_t ncids;
    size_t symcap;
    uint32_t *sym;
    int32_t *prev, *next;
    uint64_t *heap;
    bpe_ids *out;
    int flags;
    int mapped;         /* pieces below a ByteLevel stage with stages after it are byte-mapped text */
    uint8_t *unm;       /* their bytes again, for the model */
    size_t unmcap;
};

/* ---- buffers ----------------------------------------------------------- */

grit_err hf__ids_reserve(bpe_ids *ids, size_t extra)
{
    if (ids->n + extra <= ids->cap)
        return GRIT_OK;
    size_t cap = ids->cap ? ids->cap : 256;
    while (cap < ids->n + extra)
        cap *= 2;
    uint32_t *v = realloc(ids->v, cap * sizeof *v);
    if (!v)
        return grit_errf(GRIT_ENOMEM, "tokenizer: cannot grow id buffer to %zu ids", cap);
    ids->v = v;
    ids->cap = cap;
    return GRIT_OK;
}

grit_err hf__grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return GRIT_OK;
    size_t c = *cap ? *cap : 256;
    while (c < need)
        c *= 2;
    void *np = realloc(*p, c * elem);
    if (!np)
        return grit_errf(GRIT_ENOMEM, "tokenizer: out of memory for %zu bytes", c * elem);
    *p = np;
    *cap = c;
    return GRIT_OK;
}

static grit_err emit(hftok_ctx *c, uint32_t id)
{
    grit_err rc = hf__ids_reserve(c->out, 1);
    if (!rc)
        c->out->v[c->out->n++] = id;
    return rc;
}

/* ---- the BPE model ----------------------------------------------------- */

static inline void push_pair(hftok_ctx *c, size_t *hn, int32_t i)
{
    int32_t j = c->next[i];
    if (j < 0)
        return;
    const hf_merge *m = hf__merge(c->t, c->sym[i], c->sym[j]);
    if (m)
        minheap_push(c->heap, hn, ((uint64_t)m->rank << 32) | (uint32_t)i);
}

static grit_err sym_reserve(hftok_ctx *c, size_t n)
{
    if (n <= c->symcap)
        return GRIT_OK;
    size_t cap = c->symcap ? c->symcap : 256;
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
        return grit_errf(GRIT_ENOMEM, "tokenizer: out of memory for a piece of %zu bytes", n);
    c->symcap = cap;
    return GRIT_OK;
}

/* Initial symbols of piece w[0..n) into c->sym; returns their count. */
static size_t initial_symbols(hftok_ctx *c, const uint8_t *w, size_t n)
{
    const hftok *t = c->t;
    size_t k = 0;
    if (t->byte_level) {
        for (size_t i = 0; i < n; i++)
            if (t->byte_id[w[i]] != HF_NONE)
                c->sym[k++] = t->byte_id[w[i]];
        return k;
    }
    int last_unk = 0;
    for (size_t i = 0; i < n;) {
        size_t l = 1;
        while (i + l < n && (w[i + l] & 0xC0) == 0x80)
            l++;
        uint32_t id;
        if (hf__find(t, w + i, l, &id)) {
            c->sym[k++] = id;
            last_unk = 0;
        } else {
            int all = t->byte_fallback;
            for (size_t j = 0; all && j < l; j++)
                all = t->fallback[w[i + j]] != HF_NONE;
            if (all) {
                for (size_t j = 0; j < l; j++)
                    c->sym[k++] = t->fallback[w[i + j]];
                last_unk = 0;
            } else if (t->unk != HF_NONE) {
                if (!(t->fuse_unk && last_unk))
                    c->sym[k++] = t->unk;
                last_unk = 1;
            }
        }
        i += l;
    }
    return k;
}

static size_t merge_all(hftok_ctx *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        c->prev[i] = (int32_t)i - 1;
        c->next[i] = (int32_t)i + 1;
    }
    c->next[n - 1] = -1;
    size_t hn = 0, count = n;
    for (size_t i = 0; i + 1 < n; i++)
        push_pair(c, &hn, (int32_t)i);
    while (hn > 0) {
        uint64_t top = minheap_pop(c->heap, &hn);
        int32_t i = (int32_t)(uint32_t)top;
        uint32_t rank = (uint32_t)(top >> 32);
        int32_t j = c->next[i];
        if (c->sym[i] == SYM_DEAD || j < 0)
            continue;
        const hf_merge *m = hf__merge(c->t, c->sym[i], c->sym[j]);
        if (!m || m->rank != rank)
            continue;
        c->sym[i] = m->id;
        c->sym[j] = SYM_DEAD;
        c->next[i] = c->next[j];
        if (c->next[j] >= 0)
            c->prev[c->next[j]] = i;
        count--;
        if (c->prev[i] >= 0)
            push_pair(c, &hn, c->prev[i]);
        push_pair(c, &hn, i);
    }
    return count;
}

static void cache_clear(hftok_ctx *c)
{
    memset(c->slots, 0, ((size_t)1 << CACHE_BITS) * sizeof *c->slots);
    c->used = c->nkeys = c->ncids = 0;
}

static grit_err model_piece(hftok_ctx *c, const uint8_t *w, size_t n)
{
    const hftok *t = c->t;
    bpe_ids *ids = c->out;
    grit_err rc;
    uint32_t id;
    if (n == 0)
        return GRIT_OK;
    if (t->ignore_merges && hf__find(t, w, n, &id))
        return emit(c, id);
    uint64_t h = 0;
    size_t slot = 0;
    const size_t mask = ((size_t)1 << CACHE_BITS) - 1;
    if (n <= CACHE_MAX_KEY) {
        h = XXH3_64bits(w, n);
        for (slot = h & mask; c->slots[slot].klen; slot = (slot + 1) & mask) {
            const cache_slot *s = &c->slots[slot];
            if (s->h == h && s->klen == n && memcmp(c->keys + s->koff, w, n) == 0) {
                if ((rc = hf__ids_reserve(ids, s->nids)))
                    return rc;
                memcpy(ids->v + ids->n, c->cids + s->ioff, s->nids * sizeof *ids->v);
                ids->n += s->nids;
                return GRIT_OK;
            }
        }
    }
    if ((rc = sym_reserve(c, n)) || (rc = hf__ids_reserve(ids, n)))
        return rc;
    size_t k = initial_symbols(c, w, n), count = k ? merge_all(c, k) : 0;
    uint32_t *dst = ids->v + ids->n;
    size_t o = 0;
    for (int32_t i = count ? 0 : -1; i >= 0; i = c->next[i])
        dst[o++] = c->sym[i];
    ids->n += count;
    if (n <= CACHE_MAX_KEY && count < 65536) {
        if (c->used * 2 >= mask || c->nkeys + n > CACHE_KEY_BYTES || c->ncids + count > CACHE_ID_CAP) {
            cache_clear(c);
            for (slot = h & mask; c->slots[slot].klen; slot = (slot + 1) & mask)
                ;
        }
        cache_slot *s = &c->slots[slot];
        *s = (cache_slot){h, (uint32_t)c->nkeys, (uint32_t)c->ncids, (uint16_t)n, (uint16_t)count};
        memcpy(c->keys + c->nkeys, w, n);
        memcpy(c->cids + c->ncids, dst, count * sizeof *dst);
        c->nkeys += n;
        c->ncids += count;
        c->used++;
    }
    return GRIT_OK;
}

static int is_meta(const uint8_t *s, size_t n, size_t i)
{
    return i + 3 <= n && s[i] == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81;
}

/* The model's entry: SentencePiece vocabularies are cut before each U+2581
 * that follows another character (safe, see the top of the file). */
static grit_err model_run(hftok_ctx *c, const uint8_t *s, size_t n)
{
    if (c->mapped) { /* byte-mapped text (code points < 324) back to bytes */
        grit_err rc = hf__grow((void **)&c->unm, &c->unmcap, n + 1, 1);
        if (rc)
            return rc;
        size_t o = 0;
        for (size_t i = 0; i < n;) {
            uint32_t cp = s[i];
            size_t l = s[i] < 0x80 ? 1 : pretok_utf8(s, n, i, &cp);
            c->unm[o++] = cp < 324 && c->t->unmap[cp] >= 0 ? (uint8_t)c->t->unmap[cp] : '?';
            i += l ? l : 1;
        }
        return model_piece(c, c->unm, o);
    }
    if (!c->t->spm_split_safe || n <= CACHE_MAX_KEY)
        return model_piece(c, s, n);
    size_t b = 0;
    for (size_t i = 1; i < n; i++) {
        if (is_meta(s, n, i) && !(i >= 3 && is_meta(s, n, i - 3))) {
            grit_err rc = model_piece(c, s + b, i - b);
            if (rc)
                return rc;
            b = i;
        }
    }
    return model_piece(c, s + b, n - b);
}

/* ---- pre-tokenizers ------------------------------------------------------ */

static grit_err pre_run(hftok_ctx *c, int k, const uint8_t *s, size_t n, int at_start);

static grit_err seg_push(hftok_ctx *c, size_t s, size_t e, int m)
{
    grit_err rc = hf__grow((void **)&c->segs, &c->scap, c->stop + 1, sizeof *c->segs);
    if (!rc)
        c->segs[c->stop++] = (seg){s, e, m};
    return rc;
}

/* Applies a split behaviour to the cut list segs[base..stop) over s and
 * hands the resulting pieces to stage k + 1. */
static grit_err split_emit(hftok_ctx *c, int k, const uint8_t *s, size_t base, int bh, int invert, int at_start)
{
    size_t n = c->stop - base, o = base;
    grit_err rc = GRIT_OK;
    if (invert)
        for (size_t i = base; i < c->stop; i++)
            c->segs[i].m = !c->segs[i].m;
    /* merge in place into segs[base..o) with m = keep flag */
    if (bh == SPLIT_ISOLATED || bh == SPLIT_REMOVED) {
        for (size_t i = base; i < base + n; i++)
            c->segs[i].m = bh == SPLIT_REMOVED ? !c->segs[i].m : 1;
        o = base + n;
    } else if (bh == SPLIT_PREV || bh == SPLIT_CONTIG) {
        int prevm = 0;
        for (size_t i = base; i < base + n; i++) {
            seg g = c->segs[i];
            int join = bh == SPLIT_PREV ? (g.m && !prevm) : (g.m == prevm);
            if (join && o > base)
                c->segs[o - 1].e = g.e;
            else
                c->segs[o++] = (seg){g.s, g.e, 1};
            prevm = g.m;
        }
    } else { /* SPLIT_NEXT: fold from the end */
        int nextm = 0;
        size_t w = base + n; /* write downward */
        for (size_t i = base + n; i-- > base;) {
            seg g = c->segs[i];
            if (g.m && !nextm && w < base + n)
                c->segs[w].s = g.s;
            else
                c->segs[--w] = (seg){g.s, g.e, 1};
            nextm = g.m;
        }
        memmove(c->segs + base, c->segs + w, (base + n - w) * sizeof *c->segs);
        o = base + (base + n - w);
    }
    for (size_t i = base; i < o && !rc; i++) {
        seg g = c->segs[i];
        if (g.m && g.e > g.s)
            rc = pre_run(c, k + 1, s + g.s, g.e - g.s, at_start && g.s == 0);
    }
    c->stop = base;
    return rc;
}

static int is_numeric_cp(uint32_t cp)
{
    utf8proc_category_t g = utf8proc_category((utf8proc_int32_t)cp);
    return g == UTF8PROC_CATEGORY_ND || g == UTF8PROC_CATEGORY_NL || g == UTF8PROC_CATEGORY_NO;
}

static int is_punct_cp(uint32_t cp)
{
    if (cp < 0x80)
        return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
               (cp >= 0x7B && cp <= 0x7E);
    utf8proc_category_t g = utf8proc_category((utf8proc_int32_t)cp);
    return g >= UTF8PROC_CATEGORY_PC && g <= UTF8PROC_CATEGORY_PO;
}

/* Cuts by a per-character predicate: each matching char is a match. */
static grit_err split_chars(hftok_ctx *c, int k, const uint8_t *s, size_t n, int at_start)
{
    const hf_pre *p = &c->t->pre[k];
    size_t base = c->stop, gap = 0;
    grit_err rc = GRIT_OK;
    for (size_t i = 0; i < n && !rc;) {
        uint32_t cp = 0xFFFD;
        int cls;
        size_t l = pretok_utf8(s, n, i, &cp);
        if (!l)
            l = 1;
        int m = p->kind == PRE_DIGITS ? is_numeric_cp(cp)
                : p->kind == PRE_PUNCT ? is_punct_cp(cp)
                                       : (pretok_char(s, n, i, &cls), cls == PRETOK_SPACE);
        if (m) {
            if (gap < i)
                rc = seg_push(c, gap, i, 0);
            if (!rc)
                rc = seg_push(c, i, i + l, 1);
            gap = i + l;
        }
        i += l;
    }
    if (!rc && gap < n)
        rc = seg_push(c, gap, n, 0);
    if (rc)
        return rc;
    return split_emit(c, k, s, base, p->kind == PRE_WSSPLIT ? SPLIT_REMOVED : p->behavior, 0, at_start);
}

static grit_err split_pattern(hftok_ctx *c, int k, const uint8_t *s, size_t n, int at_start)
{
    const hf_pre *p = &c->t->pre[k];
    size_t base = c->stop, gap = 0, i = 0;
    grit_err rc = GRIT_OK;
    while (i < n && !rc) {
        size_t ms, me;
        if (p->re) {
            int r = onig_search((regex_t *)p->re, s, s + n, s + i, s + n, c->region, ONIG_OPTION_NONE);
            if (r == ONIG_MISMATCH)
                break;
            if (r < 0)
                return grit_errf(GRIT_EINVAL, "%s: pre_tokenizer regex failed (code %d)", c->t->path, r);
            ms = (size_t)c->region->beg[0];
            me = (size_t)c->region->end[0];
        } else {
            size_t f = i;
            while (f + p->llit <= n && memcmp(s + f, p->lit, p->llit) != 0)
                f++;
            if (f + p->llit > n)
                break;
            ms = f;
            me = ms + p->llit;
        }
        if (me == ms) { /* an empty match cuts nothing; step one character */
            i = ms + 1;
            while (i < n && (s[i] & 0xC0) == 0x80)
                i++;
            continue;
        }
        if (gap < ms)
            rc = seg_push(c, gap, ms, 0);
        if (!rc)
            rc = seg_push(c, ms, me, 1);
        gap = i = me;
    }
    if (!rc && gap < n)
        rc = seg_push(c, gap, n, 0);
    if (rc)
        return rc;
    return split_emit(c, k, s, base, p->behavior, p->invert, at_start);
}

static uint8_t *arena_take(hftok_ctx *c, size_t n)
{
    if (c->atop + n > c->acap)
        return NULL;
    uint8_t *r = c->arena + c->atop;
    c->atop += n;
    return r;
}

static grit_err pre_run(hftok_ctx *c, int k, const uint8_t *s, size_t n, int at_start)
{
    const hftok *t = c->t;
    if (k == t->npre)
        return model_run(c, s, n);
    const hf_pre *p = &t->pre[k];
    size_t mark = c->atop;
    grit_err rc = GRIT_OK;
    switch (p->kind) {
    case PRE_BYTELEVEL:
        if (p->add_prefix_space && (n == 0 || s[0] != ' ')) {
            uint8_t *d = arena_take(c, n + 1);
            if (!d)
                return grit_errf(GRIT_ENOMEM, "tokenizer: piece arena exhausted");
            d[0] = ' ';
            memcpy(d + 1, s, n);
            s = d, n++;
        }
        /* Stages after ByteLevel see its byte-mapped text (cut by the
         * regex first), as in Hugging Face: Falcon's Digits finds U+00BC in
         * the mapped "\xc3\xbc". */
        for (size_t i = 0; i < n && !rc;) {
            size_t e = p->use_regex ? pretok_next(s, n, i) : n;
            const uint8_t *q = s + i;
            size_t qn = e - i;
            if (k + 1 < t->npre) {
                uint8_t *d = arena_take(c, 2 * qn);
                if (!d)
                    return grit_errf(GRIT_ENOMEM, "tokenizer: piece arena exhausted");
                size_t o = 0;
                for (size_t j = 0; j < qn; j++)
                    o += (size_t)utf8proc_encode_char((utf8proc_int32_t)t->bmap[q[j]], d + o);
                q = d, qn = o;
                c->mapped = 1;
            }
            rc = pre_run(c, k + 1, q, qn, at_start && i == 0);
            i = e;
        }
        c->mapped = 0;
        break;
    case PRE_METASPACE: {
        size_t spaces = 0;
        for (size_t i = 0; i < n; i++)
            spaces += s[i] == ' ';
        int pre = (p->prepend == PREPEND_ALWAYS || (p->prepend == PREPEND_FIRST && at_start)) &&
                  !(n >= p->lrep && !memcmp(s, p->rep, p->lrep));
        size_t m = n + spaces * (p->lrep - 1) + (pre ? p->lrep : 0);
        uint8_t *d = arena_take(c, m);
        if (!d)
            return grit_errf(GRIT_ENOMEM, "tokenizer: piece arena exhausted");
        size_t o = 0;
        if (pre) {
            memcpy(d, p->rep, p->lrep);
            o = p->lrep;
        }
        for (size_t i = 0; i < n; i++) {
            if (s[i] == ' ') {
                memcpy(d + o, p->rep, p->lrep);
                o += p->lrep;
            } else
                d[o++] = s[i];
        }
        if (!p->split) {
            rc = pre_run(c, k + 1, d, m, at_start);
            break;
        }
        size_t b = 0;
        for (size_t i = 1; i < m && !rc; i++)
            if (d[i] == (uint8_t)p->rep[0] && m - i >= p->lrep && !memcmp(d + i, p->rep, p->lrep)) {
                rc = pre_run(c, k + 1, d + b, i - b, at_start && b == 0);
                b = i;
            }
        if (!rc)
            rc = pre_run(c, k + 1, d + b, m - b, at_start && b == 0);
        break;
    }
    case PRE_SPLIT:
    case PRE_WHITESPACE:
        rc = split_pattern(c, k, s, n, at_start);
        break;
    default:
        rc = split_chars(c, k, s, n, at_start);
        break;
    }
    c->atop = mark;
    return rc;
}

/* Reserves the arena for a normalized segment of n bytes. */
static grit_err arena_reserve(hftok_ctx *c, size_t n)
{
    size_t need = 0, bound = n;
    for (int k = 0; k < c->t->npre; k++) {
        const hf_pre *p = &c->t->pre[k];
        if (p->kind == PRE_BYTELEVEL || p->kind == PRE_METASPACE) {
            bound = bound * (p->kind == PRE_METASPACE ? p->lrep : 1) + 8;
            if (p->kind == PRE_BYTELEVEL && k + 1 < c->t->npre) {
                need += bound;
                bound *= 2;
            }
            need += bound;
        }
    }
    c->atop = 0;
    return hf__grow((void **)&c->arena, &c->acap, need + 1, 1);
}

static int is_space_at(const uint8_t *s, size_t n, size_t i, size_t *len)
{
    int cls;
    *len = pretok_char(s, n, i, &cls);
    return cls == PRETOK_SPACE;
}

/* ---- added tokens ------------------------------------------------------------ */

static int word_char_before(const uint8_t *s, size_t i)
{
    if (i == 0)
        return 0;
    size_t k = i - 1;
    while (k > 0 && (s[k] & 0xC0) == 0x80)
        k--;
    int cls;
    pretok_char(s, i, k, &cls);
    return cls == PRETOK_LETTER || cls == PRETOK_NUMBER || s[k] == '_';
}

static int word_char_at(const uint8_t *s, size_t n, size_t i)
{
    int cls;
    if (i >= n)
        return 0;
    pretok_char(s, n, i, &cls);
    return cls == PRETOK_LETTER || cls == PRETOK_NUMBER || s[i] == '_';
}

/* Finds the next match at or after `from`, leftmost then longest. */
static int find_added(const hftok *t, const uint8_t *s, size_t n, size_t from, int normalized, int allow_special,
                      size_t *at)
{
    uint8_t bit = normalized ? 2 : 1;
    for (size_t p = from; p < n; p++) {
        if (!(t->first[s[p]] & bit))
            continue;
        for (int k = 0; k < t->nadded; k++) {
            const hf_added *a = &t->added[k];
            if (a->normalized != normalized || (a->special && !allow_special) || a->s[0] != s[p] ||
                a->len > n - p || memcmp(a->s, s + p, a->len) != 0)
                continue;
            *at = p;
            return k;
        }
    }
    return -1;
}

static grit_err encode_raw(hftok_ctx *c, const uint8_t *s, size_t n, int at_start);

/* Text between normalized added tokens (already normalized). */
static grit_err encode_plain(hftok_ctx *c, const uint8_t *s, size_t n, int at_start)
{
    if (n == 0)
        return GRIT_OK;
    return pre_run(c, 0, s, n, at_start);
}

/* Splits s on the added tokens of one kind; the text between goes to
 * encode_raw (raw text) or encode_plain (normalized text). */
static grit_err split_added(hftok_ctx *c, const uint8_t *s, size_t n, int normalized, int at_start)
{
    const hftok *t = c->t;
    int allow = (c->flags & BPE_ALLOW_SPECIAL) != 0;
    size_t start_off = 0, scan = 0, at;
    grit_err rc;
    for (;;) {
        int k = find_added(t, s, n, scan, normalized, allow, &at);
        if (k < 0)
            break;
        const hf_added *a = &t->added[k];
        size_t b = at, e = at + a->len, l;
        scan = e;
        if (a->single_word && (word_char_before(s, b) || word_char_at(s, n, e)))
            continue;
        if (a->lstrip) {
            size_t nb = b;
            while (nb > start_off) {
                size_t q = nb - 1;
                while (q > start_off && (s[q] & 0xC0) == 0x80)
                    q--;
                if (!is_space_at(s, nb, q, &l))
                    break;
                nb = q;
            }
            b = nb;
        }
        if (a->rstrip)
            while (e < n && is_space_at(s, n, e, &l))
                e += l;
        if (b > start_off) {
            rc = normalized ? encode_plain(c, s + start_off, b - start_off, at_start && start_off == 0)
                            : encode_raw(c, s + start_off, b - start_off, at_start && start_off == 0);
            if (rc)
                return rc;
        }
        if ((rc = emit(c, a->id)))
            return rc;
        start_off = scan = e;
    }
    if (start_off < n)
        return normalized ? encode_plain(c, s + start_off, n - start_off, at_start && start_off == 0)
                          : encode_raw(c, s + start_off, n - start_off, at_start && start_off == 0);
    return GRIT_OK;
}

/* Raw text with no raw added token in it: normalize, then split on the
 * normalized added tokens, then pre-tokenize. */
static grit_err encode_raw(hftok_ctx *c, const uint8_t *s, size_t n, int at_start)
{
    const uint8_t *ns;
    size_t nn;
    grit_err rc = hf__normalize(c->t, s, n, c->nb, c->nbcap, &ns, &nn);
    if (rc || nn == 0)
        return rc;
    if ((rc = arena_reserve(c, nn)))
        return rc;
    if (c->t->any_normalized_added)
        return split_added(c, ns, nn, 1, at_start);
    return encode_plain(c, ns, nn, at_start);
}

/* ---- the public calls ---------------------------------------------------------- */

grit_err hftok_ctx_open(hftok_ctx **out, const hftok *t)
{
    hftok_ctx *c = calloc(1, sizeof *c);
    if (c) {
        c->t = t;
        if (!t->sp) {
            c->slots = calloc((size_t)1 << CACHE_BITS, sizeof *c->slots);
            c->keys = malloc(CACHE_KEY_BYTES);
            c->cids = malloc(CACHE_ID_CAP * sizeof *c->cids);
            c->region = onig_region_new();
        }
    }
    if (!c || (!t->sp && (!c->slots || !c->keys || !c->cids || !c->region))) {
        hftok_ctx_close(c);
        return grit_errf(GRIT_ENOMEM, "tokenizer: out of memory for a context");
    }
    *out = c;
    return GRIT_OK;
}

void hftok_ctx_close(hftok_ctx *c)
{
    if (!c)
        return;
    if (c->region)
        onig_region_free(c->region, 1);
    void *owned[] = {c->unm, c->fix, c->nb[0], c->nb[1], c->arena, c->segs, c->slots, c->keys,
                     c->cids, c->sym, c->prev, c->next, c->heap, c};
    for (size_t i = 0; i < sizeof owned / sizeof *owned; i++)
        free(owned[i]);
}

uint64_t hftok_ctx_replaced(const hftok_ctx *c)
{
    return c->replaced;
}

grit_err hftok_encode(hftok_ctx *c, const char *text, size_t len, int flags, bpe_ids *ids)
{
    const hftok *t = c->t;
    const uint8_t *s = (const uint8_t *)text;
    grit_err rc;
    if (!hftok_utf8_valid(s, len)) {
        if ((rc = hf__grow((void **)&c->fix, &c->fixcap, 3 * len + 1, 1)))
            return rc;
        c->replaced += hftok_utf8_repair(s, len, c->fix, &len);
        s = c->fix;
    }
    if (t->sp)
        return spm_encode(t->sp, (const char *)s, len, (flags & BPE_ADD_SPECIAL) != 0, ids);
    c->out = ids;
    c->flags = flags;
    int add = (flags & BPE_ADD_SPECIAL) != 0;
    if (add && t->ntpl_pre && (rc = hf__ids_reserve(ids, t->ntpl_pre)) == GRIT_OK) {
        memcpy(ids->v + ids->n, t->tpl_pre, t->ntpl_pre * sizeof *ids->v);
        ids->n += t->ntpl_pre;
    }
    int any_raw = 0;
    for (int k = 0; k < t->nadded && !any_raw; k++)
        any_raw = !t->added[k].normalized && ((flags & BPE_ALLOW_SPECIAL) || !t->added[k].special);
    rc = any_raw ? split_added(c, s, len, 0, 1) : encode_raw(c, s, len, 1);
    if (!rc && add && t->ntpl_post && (rc = hf__ids_reserve(ids, t->ntpl_post)) == GRIT_OK) {
        memcpy(ids->v + ids->n, t->tpl_post, t->ntpl_post * sizeof *ids->v);
        ids->n += t->ntpl_post;
    }
    return rc;
}
