/*
 * hftok_load.c - builds a `struct hftok` from a Hugging Face tokenizer.json
 * (see hftok.h for the contract, hftok_internal.h for the layout).
 *
 * Every part of the file that changes the ids is read and checked here, and
 * anything grit cannot reproduce exactly is refused with the file and the
 * JSON field named: an unknown model type, normalizer, pre-tokenizer,
 * post-processor or decoder kind; a merge whose parts (or result) are not
 * in the vocabulary; a regex Oniguruma rejects; dropout, prefixes and
 * suffixes (continuing_subword_prefix, end_of_word_suffix) that no BPE
 * tokenizer we target uses. Nothing is half-loaded: on error all is freed.
 */
#include <jansson.h>
#include <oniguruma.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/hftok_internal.h"
#include "data/pretok.h"

#define MAX_ADDED 65536

static pthread_once_t onig_once = PTHREAD_ONCE_INIT;

static void hf_onig_init(void)
{
    OnigEncoding enc = ONIG_ENCODING_UTF8;
    onig_initialize(&enc, 1);
}

/* GPT-2's byte-to-unicode table, inverted: code point -> byte, -1 if none. */
static void byte_map(int16_t inv[324], uint32_t fwd[256])
{
    for (int i = 0; i < 324; i++)
        inv[i] = -1;
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        uint32_t cp = printable ? (uint32_t)b : 256u + (uint32_t)extra++;
        inv[cp] = (int16_t)b;
        fwd[b] = cp;
    }
}

/* Undoes the byte mapping of s into out (capacity n); -1 if a char is not mapped. */
static long unmap(const int16_t inv[324], const char *s, size_t n, uint8_t *out)
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

static const char *jstr(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static int is_kind(json_t *o, const char *kind)
{
    const char *t = jstr(o, "type");
    return t && strcmp(t, kind) == 0;
}

/* ---- normalizer -------------------------------------------------------- */

static grit_err parse_norm(hftok *t, json_t *n, const char *field)
{
    const char *p = t->path;
    if (!n || json_is_null(n))
        return GRIT_OK;
    const char *k = jstr(n, "type");
    if (!k)
        return grit_errf(GRIT_EFORMAT, "%s: %s.type: expected a string", p, field);
    if (!strcmp(k, "Sequence")) {
        json_t *a = json_object_get(n, "normalizers"), *e;
        size_t i;
        if (!json_is_array(a))
            return grit_errf(GRIT_EFORMAT, "%s: %s.normalizers: expected an array", p, field);
        json_array_foreach(a, i, e) {
            char f[256];
            snprintf(f, sizeof f, "%s.normalizers[%zu]", field, i);
            grit_err rc = parse_norm(t, e, f);
            if (rc)
                return rc;
        }
        return GRIT_OK;
    }
    if (t->nnorm == HF_MAX_STEPS)
        return grit_errf(GRIT_EFORMAT, "%s: %s: more than %d normalizer steps", p, field, HF_MAX_STEPS);
    hf_norm *s = &t->norm[t->nnorm];
    memset(s, 0, sizeof *s);
    if (!strcmp(k, "NFC"))
        s->kind = NORM_NFC;
    else if (!strcmp(k, "NFD"))
        s->kind = NORM_NFD;
    else if (!strcmp(k, "NFKC"))
        s->kind = NORM_NFKC;
    else if (!strcmp(k, "NFKD"))
        s->kind = NORM_NFKD;
    else if (!strcmp(k, "Lowercase"))
        s->kind = NORM_LOWER;
    else if (!strcmp(k, "Prepend")) {
        const char *v = jstr(n, "prepend");
        if (!v)
            return grit_errf(GRIT_EFORMAT, "%s: %s.prepend: expected a string", p, field);
        s->kind = NORM_PREPEND;
        s->a = strdup(v);
        s->la = strlen(v);
    } else if (!strcmp(k, "Replace")) {
        const char *pat = jstr(json_object_get(n, "pattern"), "String"), *c = jstr(n, "content");
        if (!pat || !*pat || !c)
            return grit_errf(GRIT_EFORMAT,
                             "%s: %s: expected pattern {\"String\": non-empty} and a string content "
                             "(a Regex pattern is not supported in a normalizer)",
                             p, field);
        s->kind = NORM_REPLACE;
        s->a = strdup(pat);
        s->la = strlen(pat);
        s->b = strdup(c);
        s->lb = strlen(c);
    } else if (!strcmp(k, "Strip")) {
        s->kind = NORM_STRIP;
        s->left = json_is_true(json_object_get(n, "strip_left"));
        s->right = json_is_true(json_object_get(n, "strip_right"));
    } else
        return grit_errf(GRIT_EFORMAT,
                         "%s: %s.type: unknown normalizer '%s' (expected NFC, NFD, NFKC, NFKD, Lowercase, Prepend, "
                         "Replace, Strip or Sequence)",
                         p, field, k);
    if ((s->kind == NORM_PREPEND && !s->a) || (s->kind == NORM_REPLACE && (!s->a || !s->b)))
        return grit_errf(GRIT_ENOMEM, "%s: out of memory", p);
    t->nnorm++;
    return GRIT_OK;
}

/* ---- pre-tokenizer ----------------------------------------------------- */

static int behavior(const char *b)
{
    if (!b)
        return 0;
    return !strcmp(b, "Removed") ? SPLIT_REMOVED : !strcmp(b, "Isolated") ? SPLIT_ISOLATED
           : !strcmp(b, "MergedWithPrevious") ? SPLIT_PREV : !strcmp(b, "MergedWithNext") ? SPLIT_NEXT
           : !strcmp(b, "Contiguous") ? SPLIT_CONTIG : 0;
}

static grit_err compile_re(hftok *t, hf_pre *s, const char *pat, const char *field)
{
    pthread_once(&onig_once, hf_onig_init);
    regex_t *re = NULL;
    OnigErrorInfo ei;
    int r = onig_new(&re, (const UChar *)pat, (const UChar *)pat + strlen(pat), ONIG_OPTION_NONE,
                     ONIG_ENCODING_UTF8, ONIG_SYNTAX_DEFAULT, &ei);
    if (r != ONIG_NORMAL) {
        UChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
        onig_error_code_to_str(msg, r, &ei);
        return grit_errf(GRIT_EFORMAT, "%s: %s: invalid regex '%.200s': %s", t->path, field, pat, (char *)msg);
    }
    s->re = re;
    return GRIT_OK;
}

static grit_err parse_pre(hftok *t, json_t *n, const char *field)
{
    const char *p = t->path;
    if (!n || json_is_null(n))
        return GRIT_OK;
    const char *k = jstr(n, "type");
    if (!k)
        return grit_errf(GRIT_EFORMAT, "%s: %s.type: expected a string", p, field);
    if (!strcmp(k, "Sequence")) {
        json_t *a = json_object_get(n, "pretokenizers"), *e;
        size_t i;
        if (!json_is_array(a))
            return grit_errf(GRIT_EFORMAT, "%s: %s.pretokenizers: expected an array", p, field);
        json_array_foreach(a, i, e) {
            char f[256];
            snprintf(f, sizeof f, "%s.pretokenizers[%zu]", field, i);
            grit_err rc = parse_pre(t, e, f);
            if (rc)
                return rc;
        }
        return GRIT_OK;
    }
    if (t->npre == HF_MAX_STEPS)
        return grit_errf(GRIT_EFORMAT, "%s: %s: more than %d pre-tokenizer steps", p, field, HF_MAX_STEPS);
    hf_pre *s = &t->pre[t->npre];
    memset(s, 0, sizeof *s);
    json_t *v;
    if (!strcmp(k, "ByteLevel")) {
        s->kind = PRE_BYTELEVEL;
        v = json_object_get(n, "add_prefix_space");
        s->add_prefix_space = v ? json_is_true(v) : 1;
        v = json_object_get(n, "use_regex");
        s->use_regex = v ? json_is_true(v) : 1;
        t->byte_level = 1;
    } else if (!strcmp(k, "Split")) {
        s->kind = PRE_SPLIT;
        json_t *pat = json_object_get(n, "pattern");
        const char *b = jstr(n, "behavior");
        s->behavior = behavior(b);
        s->invert = json_is_true(json_object_get(n, "invert"));
        if (!s->behavior)
            return grit_errf(GRIT_EFORMAT,
                             "%s: %s.behavior: expected Removed, Isolated, MergedWithPrevious, MergedWithNext or "
                             "Contiguous, got %s",
                             p, field, b ? b : "nothing");
        const char *str = jstr(pat, "String"), *re = jstr(pat, "Regex");
        char f[300];
        snprintf(f, sizeof f, "%s.pattern.Regex", field);
        if (re) {
            grit_err rc = compile_re(t, s, re, f);
            if (rc)
                return rc;
        } else if (str && *str) {
            s->lit = strdup(str);
            s->llit = strlen(str);
            if (!s->lit)
                return grit_errf(GRIT_ENOMEM, "%s: out of memory", p);
        } else
            return grit_errf(GRIT_EFORMAT, "%s: %s.pattern: expected {\"Regex\": ...} or {\"String\": non-empty}",
                             p, field);
    } else if (!strcmp(k, "Metaspace")) {
        s->kind = PRE_METASPACE;
        const char *r = jstr(n, "replacement");
        if (!r || !*r || strlen(r) >= sizeof s->rep)
            return grit_errf(GRIT_EFORMAT, "%s: %s.replacement: expected one character", p, field);
        strcpy(s->rep, r);
        s->lrep = strlen(r);
        const char *ps = jstr(n, "prepend_scheme");
        if (ps) {
            s->prepend = !strcmp(ps, "always") ? PREPEND_ALWAYS : !strcmp(ps, "first") ? PREPEND_FIRST
                         : !strcmp(ps, "never") ? PREPEND_NEVER : -1;
            if (s->prepend < 0)
                return grit_errf(GRIT_EFORMAT, "%s: %s.prepend_scheme: expected always, first or never, got %s",
                                 p, field, ps);
        } else {
            v = json_object_get(n, "add_prefix_space");
            s->prepend = (!v || json_is_true(v)) ? PREPEND_ALWAYS : PREPEND_NEVER;
        }
        v = json_object_get(n, "split");
        s->split = v ? json_is_true(v) : 1;
    } else if (!strcmp(k, "Digits")) {
        s->kind = PRE_DIGITS;
        s->behavior = json_is_true(json_object_get(n, "individual_digits")) ? SPLIT_ISOLATED : SPLIT_CONTIG;
    } else if (!strcmp(k, "Punctuation")) {
        s->kind = PRE_PUNCT;
        const char *b = jstr(n, "behavior");
        s->behavior = b ? behavior(b) : SPLIT_ISOLATED;
        if (!s->behavior)
            return grit_errf(GRIT_EFORMAT, "%s: %s.behavior: unknown behavior %s", p, field, b);
    } else if (!strcmp(k, "Whitespace")) {
        s->kind = PRE_WHITESPACE;
        s->behavior = SPLIT_REMOVED;
        s->invert = 1;
        char f[300];
        snprintf(f, sizeof f, "%s (Whitespace)", field);
        grit_err rc = compile_re(t, s, "\\w+|[^\\w\\s]+", f);
        if (rc)
            return rc;
    } else if (!strcmp(k, "WhitespaceSplit")) {
        s->kind = PRE_WSSPLIT;
    } else
        return grit_errf(GRIT_EFORMAT,
                         "%s: %s.type: unknown pre-tokenizer '%s' (expected ByteLevel, Split, Metaspace, Digits, "
                         "Punctuation, Whitespace, WhitespaceSplit or Sequence)",
                         p, field, k);
    t->npre++;
    return GRIT_OK;
}

/* ---- post-processor: the single-sequence template ---------------------- */

static grit_err tpl_push(hftok *t, int after, json_int_t id, const char *field)
{
    if (id < 0 || id >= (json_int_t)t->nvocab)
        return grit_errf(GRIT_EFORMAT, "%s: %s: id %lld is not in the vocabulary", t->path, field, (long long)id);
    uint32_t **v = after ? &t->tpl_post : &t->tpl_pre;
    size_t *n = after ? &t->ntpl_post : &t->ntpl_pre;
    uint32_t *nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv)
        return grit_errf(GRIT_ENOMEM, "%s: out of memory", t->path);
    nv[(*n)++] = (uint32_t)id;
    *v = nv;
    return GRIT_OK;
}

static grit_err parse_post(hftok *t, json_t *n, const char *field)
{
    const char *p = t->path;
    if (!n || json_is_null(n) || is_kind(n, "ByteLevel"))
        return GRIT_OK;
    const char *k = jstr(n, "type");
    grit_err rc;
    if (k && !strcmp(k, "Sequence")) {
        json_t *a = json_object_get(n, "processors"), *e;
        size_t i;
        json_array_foreach(a, i, e) {
            char f[256];
            snprintf(f, sizeof f, "%s.processors[%zu]", field, i);
            if ((rc = parse_post(t, e, f)))
                return rc;
        }
        return GRIT_OK;
    }
    if (k && (!strcmp(k, "BertProcessing") || !strcmp(k, "RobertaProcessing"))) {
        json_t *cls = json_array_get(json_object_get(n, "cls"), 1), *sep = json_array_get(json_object_get(n, "sep"), 1);
        if (!json_is_integer(cls) || !json_is_integer(sep))
            return grit_errf(GRIT_EFORMAT, "%s: %s.cls / .sep: expected [token, id]", p, field);
        if ((rc = tpl_push(t, 0, json_integer_value(cls), field)) ||
            (rc = tpl_push(t, 1, json_integer_value(sep), field)))
            return rc;
        return GRIT_OK;
    }
    if (!k || strcmp(k, "TemplateProcessing") != 0)
        return grit_errf(GRIT_EFORMAT,
                         "%s: %s.type: unknown post-processor '%s' (expected TemplateProcessing, ByteLevel, "
                         "BertProcessing, RobertaProcessing or Sequence)",
                         p, field, k ? k : "nothing");
    json_t *single = json_object_get(n, "single"), *specials = json_object_get(n, "special_tokens"), *e;
    size_t i;
    int after = 0, seen_a = 0;
    if (!json_is_array(single))
        return grit_errf(GRIT_EFORMAT, "%s: %s.single: expected an array", p, field);
    json_array_foreach(single, i, e) {
        char f[300];
        snprintf(f, sizeof f, "%s.single[%zu]", field, i);
        json_t *sp = json_object_get(e, "SpecialToken");
        if (json_object_get(e, "Sequence")) {
            if (seen_a++)
                return grit_errf(GRIT_EFORMAT, "%s: %s: a second Sequence in the single template", p, f);
            after = 1;
            continue;
        }
        const char *name = jstr(sp, "id");
        json_t *ids = json_object_get(json_object_get(specials, name ? name : ""), "ids"), *x;
        if (!name || !json_is_array(ids))
            return grit_errf(GRIT_EFORMAT, "%s: %s: expected a SpecialToken named in %s.special_tokens", p, f,
                             field);
        size_t j;
        json_array_foreach(ids, j, x) {
            if ((rc = tpl_push(t, after, json_integer_value(x), f)))
                return rc;
        }
    }
    return GRIT_OK;
}

/* ---- decoder ------------------------------------------------------------ */

typedef struct dec_spec {
    int byte_level, byte_fallback;
    char *rep_from[HF_MAX_STEPS], *rep_to[HF_MAX_STEPS];
    int nrep;
} dec_spec;

static grit_err parse_dec(hftok *t, json_t *n, dec_spec *d, int *fused, const char *field)
{
    const char *p = t->path;
    if (!n || json_is_null(n))
        return GRIT_OK;
    const char *k = jstr(n, "type");
    if (!k)
        return grit_errf(GRIT_EFORMAT, "%s: %s.type: expected a string", p, field);
    if (!strcmp(k, "Sequence")) {
        json_t *a = json_object_get(n, "decoders"), *e;
        size_t i;
        json_array_foreach(a, i, e) {
            char f[256];
            snprintf(f, sizeof f, "%s.decoders[%zu]", field, i);
            grit_err rc = parse_dec(t, e, d, fused, f);
            if (rc)
                return rc;
        }
        return GRIT_OK;
    }
    if (!strcmp(k, "ByteLevel"))
        d->byte_level = 1;
    else if (!strcmp(k, "ByteFallback"))
        d->byte_fallback = 1;
    else if (!strcmp(k, "Fuse"))
        *fused = 1;
    else if (!strcmp(k, "Replace") || !strcmp(k, "Metaspace")) {
        const char *from, *to = " ";
        if (!strcmp(k, "Metaspace")) {
            from = jstr(n, "replacement");
            const char *ps = jstr(n, "prepend_scheme");
            json_t *aps = json_object_get(n, "add_prefix_space");
            if (ps ? strcmp(ps, "never") != 0 : (!aps || json_is_true(aps)))
                t->dec_strip = 1;
        } else {
            from = jstr(json_object_get(n, "pattern"), "String");
            to = jstr(n, "content");
        }
        if (!from || !*from || !to || d->nrep == HF_MAX_STEPS)
            return grit_errf(GRIT_EFORMAT, "%s: %s: expected a string pattern and content", p, field);
        d->rep_from[d->nrep] = strdup(from);
        d->rep_to[d->nrep++] = strdup(to);
    } else if (!strcmp(k, "Strip")) {
        const char *c = jstr(n, "content");
        json_int_t stop = json_integer_value(json_object_get(n, "stop"));
        if (!*fused || !c || strcmp(c, " ") != 0 || stop != 0)
            return grit_errf(GRIT_EFORMAT,
                             "%s: %s: only Strip of leading spaces after Fuse is supported (content \" \", stop 0)",
                             p, field);
        t->dec_strip = (int)json_integer_value(json_object_get(n, "start"));
    } else
        return grit_errf(GRIT_EFORMAT,
                         "%s: %s.type: unknown decoder '%s' (expected ByteLevel, Metaspace, Replace, ByteFallback, "
                         "Fuse, Strip or Sequence)",
                         p, field, k);
    return GRIT_OK;
}

/* Decoded bytes of one token string s (its text form) into out (cap 4n+4). */
static size_t decode_token(const dec_spec *d, const int16_t inv[324], const char *s, size_t n, uint8_t *out)
{
    if (d->byte_level) {
        long m = unmap(inv, s, n, out);
        if (m >= 0)
            return (size_t)m;
        memcpy(out, s, n);
        return n;
    }
    if (d->byte_fallback && n == 6 && !memcmp(s, "<0x", 3) && s[5] == '>') {
        unsigned v;
        if (sscanf(s + 3, "%2X", &v) == 1) {
            out[0] = (uint8_t)v;
            return 1;
        }
    }
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        int hit = 0;
        for (int r = 0; r < d->nrep && !hit; r++) {
            size_t lf = strlen(d->rep_from[r]);
            if (lf <= n - i && !memcmp(s + i, d->rep_from[r], lf)) {
                size_t lt = strlen(d->rep_to[r]);
                memcpy(out + o, d->rep_to[r], lt);
                o += lt;
                i += lf;
                hit = 1;
            }
        }
        if (!hit)
            out[o++] = (uint8_t)s[i++];
    }
    return o;
}

/* ---- the vocabulary ------------------------------------------------------ */

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n)
        c *= 2;
    return c;
}

static grit_err build_vocab(hftok *t, json_t *vocab, json_t *added, const int16_t inv[324], char ***text)
{
    const char *p = t->path, *key;
    json_t *v, *a;
    size_t i;
    uint32_t n = 0;
    json_object_foreach(vocab, key, v) {
        json_int_t id = json_integer_value(v);
        if (!json_is_integer(v) || id < 0 || id >= 0x7ffffff)
            return grit_errf(GRIT_EFORMAT, "%s: model.vocab['%.64s']: expected a non-negative integer id", p, key);
        if ((uint32_t)id + 1 > n)
            n = (uint32_t)id + 1;
    }
    json_array_foreach(added, i, a) {
        json_int_t id = json_integer_value(json_object_get(a, "id"));
        if (!json_is_string(json_object_get(a, "content")) || id < 0 || id >= 0x7ffffff)
            return grit_errf(GRIT_EFORMAT, "%s: added_tokens[%zu]: expected a content string and an id", p, i);
        if ((uint32_t)id + 1 > n)
            n = (uint32_t)id + 1;
    }
    size_t ntok = json_object_size(vocab) + json_array_size(added);
    if (n > ntok) /* a tiny file must not size huge tables */
        return grit_errf(GRIT_EFORMAT, "%s: model.vocab / added_tokens: id %u: expected ids below the %zu tokens "
                         "the file defines", p, n - 1, ntok);
    t->nvocab = n;
    *text = calloc(n ? n : 1, sizeof **text);
    t->tok_off = calloc((size_t)n + 1, sizeof *t->tok_off);
    t->tok_used = calloc(n ? n : 1, 1);
    t->vmask = pow2_at_least(2 * (size_t)n) - 1;
    t->vmap = calloc(t->vmask + 1, sizeof *t->vmap);
    size_t total = 0;
    json_object_foreach(vocab, key, v) total += strlen(key);
    t->tok_bytes = malloc(total + 1);
    if (!*text || !t->tok_off || !t->tok_used || !t->vmap || !t->tok_bytes)
        return grit_errf(GRIT_ENOMEM, "%s: out of memory for %u tokens", p, n);
    json_object_foreach(vocab, key, v) {
        uint32_t id = (uint32_t)json_integer_value(v);
        if ((*text)[id])
            return grit_errf(GRIT_EFORMAT, "%s: model.vocab['%.64s']: id %u is used twice", p, key, id);
        (*text)[id] = (char *)key;
    }
    /* model-form bytes, in id order */
    uint32_t off = 0;
    for (uint32_t id = 0; id < n; id++) {
        t->tok_off[id] = off;
        const char *s = (*text)[id];
        if (!s)
            continue;
        size_t l = strlen(s);
        long m = t->byte_level ? unmap(inv, s, l, t->tok_bytes + off) : -1;
        if (m < 0) {
            memcpy(t->tok_bytes + off, s, l);
            m = (long)l;
        }
        off += (uint32_t)m;
        t->tok_used[id] = 1;
        if (m == 0)
            continue;
        size_t slot = hf__vslot(t->tok_bytes + t->tok_off[id], (size_t)m, t->vmask);
        uint32_t other;
        if (hf__find(t, t->tok_bytes + t->tok_off[id], (size_t)m, &other))
            continue;
        while (t->vmap[slot])
            slot = (slot + 1) & t->vmask;
        t->vmap[slot] = id + 1;
    }
    t->tok_off[n] = off;
    return GRIT_OK;
}

static grit_err build_merges(hftok *t, json_t *vocab, json_t *merges)
{
    const char *p = t->path;
    size_t nm = json_array_size(merges), i;
    t->mmask = pow2_at_least(2 * nm + 2) - 1;
    t->mshift = 64;
    for (size_t c = t->mmask + 1; c > 1; c >>= 1)
        t->mshift--;
    t->mmap = malloc((t->mmask + 1) * sizeof *t->mmap);
    char *buf = NULL;
    size_t bcap = 0;
    if (!t->mmap)
        return grit_errf(GRIT_ENOMEM, "%s: out of memory for %zu merges", p, nm);
    for (size_t s = 0; s <= t->mmask; s++)
        t->mmap[s].key = UINT64_MAX;
    json_t *m;
    grit_err rc = GRIT_OK;
    json_array_foreach(merges, i, m) {
        const char *a, *b;
        size_t la, lb;
        if (json_is_string(m)) {
            const char *s = json_string_value(m), *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                rc = grit_errf(GRIT_EFORMAT, "%s: model.merges[%zu]: expected \"left right\" (one space), got \"%.100s\"",
                               p, i, s);
                break;
            }
            a = s, la = (size_t)(sp - s), b = sp + 1, lb = strlen(b);
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0)), la = strlen(a);
            b = json_string_value(json_array_get(m, 1)), lb = strlen(b);
        } else {
            rc = grit_errf(GRIT_EFORMAT, "%s: model.merges[%zu]: expected a string or a pair of strings", p, i);
            break;
        }
        if (la + lb + 1 > bcap) {
            bcap = 2 * (la + lb + 1);
            char *nb = realloc(buf, bcap);
            if (!nb) {
                rc = grit_errf(GRIT_ENOMEM, "%s: out of memory", p);
                break;
            }
            buf = nb;
        }
        memcpy(buf, a, la);
        buf[la] = 0;
        json_t *ja = json_object_get(vocab, buf);
        memcpy(buf, b, lb);
        buf[lb] = 0;
        json_t *jb = json_object_get(vocab, buf);
        if (!ja || !jb) {
            rc = grit_errf(GRIT_EFORMAT, "%s: model.merges[%zu]: token '%.*s' is not in model.vocab", p, i,
                           (int)(ja ? lb : la), ja ? b : a);
            break;
        }
        memcpy(buf, a, la);
        memcpy(buf + la, b, lb);
        buf[la + lb] = 0;
        json_t *jab = json_object_get(vocab, buf);
        if (!jab) {
            rc = grit_errf(GRIT_EFORMAT, "%s: model.merges[%zu]: the merged token '%s' is not in model.vocab", p, i,
                           buf);
            break;
        }
        uint64_t key = ((uint64_t)json_integer_value(ja) << 32) | (uint32_t)json_integer_value(jb);
        size_t s = (size_t)((key * 0x9E3779B97F4A7C15ull) >> t->mshift) & t->mmask;
        while (t->mmap[s].key != UINT64_MAX && t->mmap[s].key != key)
            s = (s + 1) & t->mmask;
        /* a pair listed twice: the later rank wins, as in Hugging Face's map */
        t->mmap[s] = (hf_merge){key, (uint32_t)i, (uint32_t)json_integer_value(jab)};
    }
    free(buf);
    return rc;
}

static int added_cmp(const void *x, const void *y)
{
    const hf_added *a = x, *b = y;
    return a->len != b->len ? (a->len < b->len ? 1 : -1) : (a->id > b->id) - (a->id < b->id);
}

static grit_err build_added(hftok *t, json_t *added)
{
    const char *p = t->path;
    size_t na = json_array_size(added), i;
    if (na > MAX_ADDED)
        return grit_errf(GRIT_EFORMAT, "%s: added_tokens: %zu entries, at most %d supported", p, na, MAX_ADDED);
    t->added = calloc(na ? na : 1, sizeof *t->added);
    if (!t->added)
        return grit_errf(GRIT_ENOMEM, "%s: out of memory", p);
    json_t *a;
    json_array_foreach(added, i, a) {
        const char *c = jstr(a, "content");
        if (!*c)
            return grit_errf(GRIT_EFORMAT, "%s: added_tokens[%zu].content: expected a non-empty string", p, i);
        hf_added *d = &t->added[t->nadded];
        d->id = (uint32_t)json_integer_value(json_object_get(a, "id"));
        d->special = json_is_true(json_object_get(a, "special"));
        d->normalized = json_is_true(json_object_get(a, "normalized"));
        d->lstrip = json_is_true(json_object_get(a, "lstrip"));
        d->rstrip = json_is_true(json_object_get(a, "rstrip"));
        d->single_word = json_is_true(json_object_get(a, "single_word"));
        size_t len = strlen(c);
        if (d->normalized && t->nnorm) {
            grit_err rc = hf__normalize_alloc(t, (const uint8_t *)c, len, &d->s, &len);
            if (rc)
                return rc;
        } else {
            d->s = (uint8_t *)strdup(c);
            if (!d->s)
                return grit_errf(GRIT_ENOMEM, "%s: out of memory", p);
        }
        if (!len) {
            free(d->s);
            d->s = NULL;
            continue;
        }
        d->len = (uint32_t)len;
        t->first[d->s[0]] |= d->normalized ? 2 : 1;
        t->any_normalized_added |= d->normalized;
        t->nadded++;
    }
    qsort(t->added, (size_t)t->nadded, sizeof *t->added, added_cmp);
    return GRIT_OK;
}

static grit_err build_decoded(hftok *t, json_t *decoder, json_t *added, char **text, const int16_t inv[324])
{
    dec_spec d = {0};
    int fused = 0;
    grit_err rc = parse_dec(t, decoder, &d, &fused, "decoder");
    size_t total = 0, maxl = 0;
    const char **src = NULL;
    uint8_t *tmp = NULL;
    if (rc)
        goto out;
    src = calloc(t->nvocab ? t->nvocab : 1, sizeof *src);
    if (!src) {
        rc = grit_errf(GRIT_ENOMEM, "%s: out of memory", t->path);
        goto out;
    }
    for (uint32_t id = 0; id < t->nvocab; id++)
        src[id] = text[id];
    size_t i;
    json_t *a;
    json_array_foreach(added, i, a) src[json_integer_value(json_object_get(a, "id"))] = jstr(a, "content");
    for (uint32_t id = 0; id < t->nvocab; id++) {
        size_t l = src[id] ? strlen(src[id]) : 0;
        total += 4 * l + 4;
        if (l > maxl)
            maxl = l;
    }
    t->dec_off = calloc((size_t)t->nvocab + 1, sizeof *t->dec_off);
    t->dec_bytes = malloc(total + 1);
    if (!t->dec_off || !t->dec_bytes) {
        rc = grit_errf(GRIT_ENOMEM, "%s: out of memory", t->path);
        goto out;
    }
    uint32_t off = 0;
    for (uint32_t id = 0; id < t->nvocab; id++) {
        t->dec_off[id] = off;
        if (src[id])
            off += (uint32_t)decode_token(&d, inv, src[id], strlen(src[id]), t->dec_bytes + off);
    }
    t->dec_off[t->nvocab] = off;
out:
    for (int r = 0; r < d.nrep; r++) {
        free(d.rep_from[r]);
        free(d.rep_to[r]);
    }
    free(src);
    free(tmp);
    return rc;
}

/* ---- open / close ---------------------------------------------------------- */

void hftok_close(hftok *t)
{
    if (!t)
        return;
    if (t->sp)
        spm_close(t->sp);
    for (int i = 0; i < t->nnorm; i++) {
        free(t->norm[i].a);
        free(t->norm[i].b);
    }
    for (int i = 0; i < t->npre; i++) {
        if (t->pre[i].re)
            onig_free((regex_t *)t->pre[i].re);
        free(t->pre[i].lit);
    }
    for (int i = 0; i < t->nadded; i++)
        free(t->added[i].s);
    void *owned[] = {t->path, t->tok_off, t->tok_bytes, t->tok_used, t->vmap, t->mmap, t->dec_off,
                     t->dec_bytes, t->added, t->tpl_pre, t->tpl_post, t};
    for (size_t i = 0; i < sizeof owned / sizeof *owned; i++)
        free(owned[i]);
}

static grit_err open_json(hftok *t, json_t *root)
{
    const char *p = t->path;
    json_t *model = json_object_get(root, "model");
    json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    json_t *added = json_object_get(root, "added_tokens");
    const char *mt = jstr(model, "type");
    char **text = NULL;
    grit_err rc;
    int16_t inv[324];
    uint32_t fwd[256];
    byte_map(inv, fwd);
    memcpy(t->bmap, fwd, sizeof fwd);
    memcpy(t->unmap, inv, sizeof inv);
    if (!mt && json_is_object(vocab) && json_is_array(merges))
        mt = "BPE"; /* older files leave the type out */
    if (!mt || strcmp(mt, "BPE") != 0)
        return grit_errf(GRIT_EFORMAT, "%s: model.type: expected \"BPE\" (the only model grit reads), got %s", p,
                         mt ? mt : "nothing");
    if (!json_is_object(vocab) || !json_is_array(merges))
        return grit_errf(GRIT_EFORMAT, "%s: model.vocab / model.merges: expected an object and an array", p);
    if (added && !json_is_array(added))
        return grit_errf(GRIT_EFORMAT, "%s: added_tokens: expected an array", p);
    json_t *x = json_object_get(model, "dropout");
    if (x && !json_is_null(x) && (!json_is_number(x) || json_number_value(x) != 0.0))
        return grit_errf(GRIT_EFORMAT, "%s: model.dropout: expected null (BPE dropout is random)", p);
    /* null or "" (a non-string is refused too: it has no text to test) */
    x = json_object_get(model, "continuing_subword_prefix");
    json_t *y = json_object_get(model, "end_of_word_suffix");
    if ((x && !json_is_null(x) && (!json_is_string(x) || *json_string_value(x))) ||
        (y && !json_is_null(y) && (!json_is_string(y) || *json_string_value(y))))
        return grit_errf(GRIT_EFORMAT,
                         "%s: model.continuing_subword_prefix / end_of_word_suffix: expected null (unsupported)", p);
    if ((rc = parse_norm(t, json_object_get(root, "normalizer"), "normalizer")) ||
        (rc = parse_pre(t, json_object_get(root, "pre_tokenizer"), "pre_tokenizer")))
        return rc;
    if ((rc = build_vocab(t, vocab, added, inv, &text)) || (rc = build_merges(t, vocab, merges)) ||
        (rc = build_added(t, added)) ||
        (rc = parse_post(t, json_object_get(root, "post_processor"), "post_processor")) ||
        (rc = build_decoded(t, json_object_get(root, "decoder"), added, text, inv)))
        goto out;
    t->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
    t->fuse_unk = json_is_true(json_object_get(model, "fuse_unk"));
    t->byte_fallback = json_is_true(json_object_get(model, "byte_fallback"));
    t->unk = HF_NONE;
    const char *unk = jstr(model, "unk_token");
    json_t *ju = unk ? json_object_get(vocab, unk) : NULL;
    if (ju)
        t->unk = (uint32_t)json_integer_value(ju);
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        t->byte_id[b] = HF_NONE;
        t->fallback[b] = HF_NONE;
        uint32_t id;
        if (t->byte_level && hf__find(t, &c, 1, &id))
            t->byte_id[b] = id;
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        json_t *jf = t->byte_fallback ? json_object_get(vocab, name) : NULL;
        if (jf)
            t->fallback[b] = (uint32_t)json_integer_value(jf);
    }
    /* SentencePiece vocabularies: may a piece be cut before each U+2581? */
    uint32_t meta_id;
    t->spm_split_safe = !t->byte_level && hf__find(t, (const uint8_t *)"\xE2\x96\x81", 3, &meta_id);
    for (uint32_t id = 0; id < t->nvocab && t->spm_split_safe; id++) {
        const uint8_t *s = t->tok_bytes + t->tok_off[id];
        size_t l = t->tok_off[id + 1] - t->tok_off[id];
        for (size_t i = 1; i + 3 <= l; i++)
            if (s[i] == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81 &&
                !(i >= 3 && s[i - 3] == 0xE2 && s[i - 2] == 0x96 && s[i - 1] == 0x81)) {
                t->spm_split_safe = 0;
                break;
            }
    }
out:
    free(text);
    return rc;
}

grit_err hftok_open(hftok **out, const char *path, void *json_root)
{
    *out = NULL;
    hftok *t = calloc(1, sizeof *t);
    if (!t || !(t->path = strdup(path))) {
        free(t);
        return grit_errf(GRIT_ENOMEM, "%s: out of memory", path);
    }
    grit_err rc = json_root ? open_json(t, (json_t *)json_root) : spm_open(&t->sp, path);
    if (rc) {
        hftok_close(t);
        return rc;
    }
    *out = t;
    return GRIT_OK;
}

/* The fast path (bpe.c) reproduces exactly: BPE over bytes after the GPT-2
 * regex, NFC or no normalizer, added tokens without strip/word rules, no
 * template. */
int hftok_fast_path_ok(void *json_root)
{
    json_t *root = json_root, *model = json_object_get(root, "model");
    json_t *norm = json_object_get(root, "normalizer"), *pre = json_object_get(root, "pre_tokenizer");
    json_t *post = json_object_get(root, "post_processor"), *dec = json_object_get(root, "decoder");
    json_t *added = json_object_get(root, "added_tokens"), *a, *x;
    size_t i;
    if (!is_kind(model, "BPE") || json_is_true(json_object_get(model, "byte_fallback")))
        return 0;
    x = json_object_get(model, "dropout");
    if (x && !json_is_null(x))
        return 0;
    x = json_object_get(model, "continuing_subword_prefix");
    if (x && !json_is_null(x))
        return 0;
    x = json_object_get(model, "end_of_word_suffix");
    if (x && !json_is_null(x))
        return 0;
    if (norm && !json_is_null(norm) && !is_kind(norm, "NFC"))
        return 0;
    if (!is_kind(pre, "ByteLevel") || json_is_true(json_object_get(pre, "add_prefix_space")) ||
        json_is_false(json_object_get(pre, "use_regex")))
        return 0;
    if (post && !json_is_null(post) && !is_kind(post, "ByteLevel"))
        return 0;
    if (dec && !json_is_null(dec) && !is_kind(dec, "ByteLevel"))
        return 0;
    json_array_foreach(added, i, a) {
        if (json_is_true(json_object_get(a, "lstrip")) || json_is_true(json_object_get(a, "rstrip")) ||
            json_is_true(json_object_get(a, "single_word")))
            return 0;
    }
    return 1;
}
