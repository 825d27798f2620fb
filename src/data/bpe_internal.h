/*
 * bpe_internal.h - what bpe.c (loading, lookups, decoding) and bpe_encode.c
 * (encoding) share: the layout of `struct bpe` and the lookups on its
 * tables. Private to src/data/bpe*.c; everyone else uses bpe.h.
 *
 * A `bpe` is filled in by bpe.c at open and read-only afterwards, so
 * bpe_encode.c only ever reads it (see bpe.h on threads).
 */
#ifndef GRIT_DATA_BPE_INTERNAL_H
#define GRIT_DATA_BPE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "data/bpe.h"
#include "data/hftok.h"

#define MERGE_EMPTY UINT64_MAX /* merge_slot.key of a free slot */
#define SYM_DEAD UINT32_MAX    /* byte_id of a byte with no token; a merged-away symbol */

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
    hftok *gen;           /* the generic path: when set, every call forwards to it */
};

static inline uint64_t bpe__pair_key(uint32_t a, uint32_t b)
{
    return ((uint64_t)a << 32) | b;
}

/* The home slot of a pair key in t->mmap (probing goes on linearly). */
static inline size_t bpe__pair_slot(const bpe *t, uint64_t key)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> t->mshift) & t->mmask;
}

/* Looks s[0..len) up in the vocabulary: 1 with its id in *id, else 0. */
static inline int bpe__vmap_find(const bpe *t, const uint8_t *s, size_t len, uint32_t *id)
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

/* Frees each of the n pointers in p (NULL entries are no-ops): the close
 * functions list what they own once and free it here. */
void bpe__free_all(void *const *p, size_t n);

#endif
