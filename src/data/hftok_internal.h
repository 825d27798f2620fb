/*
 * hftok_internal.h - the layout of `struct hftok`, shared by hftok_load.c
 * (building it from tokenizer.json), hftok_encode.c (reading it) and
 * hftok_decode.c. Private to src/data/hftok*.c.
 *
 * Tokens are stored in "model form": for a byte-level tokenizer the GPT-2
 * byte-to-unicode mapping is undone at load so the model works on raw bytes;
 * otherwise tokens are their UTF-8 strings (with U+2581 for spaces in
 * SentencePiece vocabularies).
 */
#ifndef GRIT_DATA_HFTOK_INTERNAL_H
#define GRIT_DATA_HFTOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "data/hftok.h"

#define HF_NONE UINT32_MAX
#define HF_MAX_STEPS 16

typedef struct spm spm;

typedef struct hf_merge {
    uint64_t key; /* left << 32 | right, UINT64_MAX when free */
    uint32_t rank, id;
} hf_merge;

enum { NORM_NFC = 1, NORM_NFD, NORM_NFKC, NORM_NFKD, NORM_LOWER, NORM_PREPEND, NORM_REPLACE, NORM_STRIP };

typedef struct hf_norm {
    int kind;
    char *a, *b;   /* PREPEND: a = prefix; REPLACE: a -> b (literal) */
    size_t la, lb;
    int left, right; /* STRIP */
} hf_norm;

enum { SPLIT_REMOVED = 1, SPLIT_ISOLATED, SPLIT_PREV, SPLIT_NEXT, SPLIT_CONTIG };
enum { PRE_BYTELEVEL = 1, PRE_SPLIT, PRE_METASPACE, PRE_DIGITS, PRE_PUNCT, PRE_WHITESPACE, PRE_WSSPLIT };
enum { PREPEND_ALWAYS = 0, PREPEND_FIRST, PREPEND_NEVER };

typedef struct hf_pre {
    int kind;
    int behavior, invert;     /* SPLIT, PUNCT, DIGITS */
    void *re;                 /* SPLIT with a regex: regex_t* (Oniguruma) */
    char *lit;                /* SPLIT with a string */
    size_t llit;
    int add_prefix_space;     /* BYTELEVEL */
    int use_regex;            /* BYTELEVEL */
    char rep[8];              /* METASPACE replacement (UTF-8) */
    size_t lrep;
    int prepend, split;       /* METASPACE */
} hf_pre;

typedef struct hf_added {
    uint8_t *s; /* content (normalized form for normalized tokens) */
    uint32_t len, id;
    uint8_t special, normalized, lstrip, rstrip, single_word;
} hf_added;

struct hftok {
    char *path;
    spm *sp;              /* a SentencePiece .model: everything else unused */
    uint32_t nvocab;      /* one past the largest id */
    uint32_t *tok_off;    /* [nvocab + 1] model-form bytes of each id */
    uint8_t *tok_bytes;
    uint8_t *tok_used;    /* [nvocab] */
    uint32_t *vmap;       /* model-form bytes -> id + 1 (0 empty) */
    size_t vmask;
    hf_merge *mmap;
    size_t mmask;
    int mshift;
    uint32_t *dec_off;    /* [nvocab + 1] decoded bytes of each id */
    uint8_t *dec_bytes;
    int byte_level;       /* the model sees bytes (a ByteLevel pre-tokenizer) */
    uint32_t byte_id[256];/* byte level: the token of each byte */
    uint32_t bmap[256];   /* GPT-2's byte -> code point map, and its inverse (-1: none) */
    int16_t unmap[324];
    uint32_t fallback[256]; /* byte_fallback: the id of <0xXX>, HF_NONE if off */
    int byte_fallback;
    uint32_t unk;         /* HF_NONE when none */
    int fuse_unk, ignore_merges;
    int spm_split_safe;   /* no token has U+2581 after another char: pieces may be cut before it */
    hf_norm norm[HF_MAX_STEPS];
    int nnorm;
    hf_pre pre[HF_MAX_STEPS];
    int npre;
    hf_added *added;      /* longest first */
    int nadded, any_normalized_added;
    uint8_t first[256];   /* bit 0: a raw added token starts with this byte, bit 1: a normalized one */
    uint32_t *tpl_pre, *tpl_post; /* ids before / after the sequence (single template) */
    size_t ntpl_pre, ntpl_post;
    int dec_strip;        /* leading spaces the decoder strips from the text */
};

static inline size_t hf__vslot(const uint8_t *s, size_t n, size_t mask)
{
    return (size_t)XXH3_64bits(s, n) & mask;
}

/* Looks model-form bytes up: 1 and *id when found. */
static inline int hf__find(const hftok *t, const uint8_t *s, size_t len, uint32_t *id)
{
    for (size_t i = hf__vslot(s, len, t->vmask);; i = (i + 1) & t->vmask) {
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

static inline const hf_merge *hf__merge(const hftok *t, uint32_t a, uint32_t b)
{
    uint64_t key = ((uint64_t)a << 32) | b;
    for (size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> t->mshift) & t->mmask;; i = (i + 1) & t->mmask) {
        const hf_merge *m = &t->mmap[i];
        if (m->key == key)
            return m;
        if (m->key == UINT64_MAX)
            return NULL;
    }
}

/* SentencePiece shim (spm.cc). */
grit_err spm_open(spm **out, const char *path);
void spm_close(spm *s);
size_t spm_vocab_size(const spm *s);
/* Appends the ids of the (valid UTF-8) text; add_bos/eos per the model. */
grit_err spm_encode(const spm *s, const char *text, size_t len, int add_special, bpe_ids *ids);
/* Piece of id as bytes (U+2581 kept), NULL for a bad id. */
const char *spm_piece(const spm *s, uint32_t id, size_t *len);
int spm_piece_id(const spm *s, const char *piece, size_t len, uint32_t *id);
grit_err spm_decode(const spm *s, const uint32_t *ids, size_t n, char *out, size_t cap, size_t *outlen);

grit_err hf__ids_reserve(bpe_ids *ids, size_t extra);

/* Grows *p (elements of elem bytes) to at least need; GRIT_ENOMEM. */
grit_err hf__grow(void **p, size_t *cap, size_t need, size_t elem);

/* hftok_norm.c: runs t's normalizers over s[0..n); *res points into nb[0],
 * nb[1] (grown as needed) or at s. */
grit_err hf__normalize(const hftok *t, const uint8_t *s, size_t n, uint8_t *nb[2], size_t nbcap[2],
                       const uint8_t **res, size_t *rn);

/* The same into a new NUL-terminated buffer the caller frees. */
grit_err hf__normalize_alloc(const hftok *t, const uint8_t *s, size_t n, uint8_t **out, size_t *outlen);

#endif
