/*
 * dedup.h - exact and fuzzy (MinHash-LSH) duplicate detection.
 *
 * Normalisation (both kinds): ASCII letters lower-cased, every run of
 * characters that are not letters or digits (ASCII punctuation, white
 * space) becomes one word break; bytes >= 0x80 count as letters, so
 * non-Latin text is kept as is.
 *
 * Exact: XXH3-64 of the normalised word sequence; equal hashes are treated
 * as duplicates (a 64-bit collision is vanishingly rare at corpus scale).
 *
 * MinHash: shingles are word n-grams (n = 5 by default; a document with
 * fewer words is one shingle); each shingle gets a 32-bit hash x, and hash
 * function i maps it to a_i * x + b_i (mod 2^32, a_i odd: a permutation of
 * the 32-bit values), seeds from a fixed splitmix64 stream. The signature
 * is bands x rows minima; each band is reduced to one 64-bit bucket key.
 * Presets: refinedweb = 20 bands x 450 rows (9,000 hashes, as RefinedWeb),
 * cheap = 14 bands x 8 rows. Two documents are candidates when any band
 * key matches; candidates are joined with union-find (connected
 * components), and each component keeps its first document in input order.
 *
 * Ownership: minhash_init allocates the seed tables, minhash_free frees
 * them; uf_* likewise for the union-find arrays.
 */
#ifndef GRIT_PREP_DEDUP_H
#define GRIT_PREP_DEDUP_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"

/* Exact-duplicate key of text[0..len). */
uint64_t dedup_exact_hash(const char *text, size_t len);

typedef struct minhash {
    int bands, rows, ngram;
    uint32_t *a, *b;     /* bands*rows seeds */
    uint32_t *mins;      /* scratch: bands*rows (per handle: one per thread) */
    uint64_t *words;     /* scratch: word hashes */
    size_t cap_words;
} minhash;

grit_err minhash_init(minhash *m, int bands, int rows, int ngram);
void minhash_free(minhash *m);
/* Writes m->bands bucket keys of text into keys (never LSH_NO_KEY, the top
 * bit is clear). GRIT_ENOMEM only. A text with no words gets LSH_NO_KEY in
 * every band: it matches nothing. */
#define LSH_NO_KEY (1ull << 63)
grit_err minhash_keys(minhash *m, const char *text, size_t len, uint64_t *keys);

typedef struct uf {
    uint32_t *parent;
    size_t n;
} uf;
grit_err uf_init(uf *u, size_t n);
void uf_free(uf *u);
uint32_t uf_find(uf *u, uint32_t x);
/* Joins the sets of x and y; the smaller index becomes the root, so a
 * component's root is its first member. */
void uf_union(uf *u, uint32_t x, uint32_t y);

/* LSH over n documents' band keys (keys[d*bands + b]); alive[d] = 0 excludes
 * d. Unions every pair sharing a band key into u. GRIT_ENOMEM only. */
grit_err lsh_cluster(const uint64_t *keys, const uint8_t *alive, size_t n, int bands, uf *u);

#endif
