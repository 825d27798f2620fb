/* dedup.c - see dedup.h. */
#include "prep/dedup.h"

#define XXH_INLINE_ALL
#include <xxhash.h>
#include <stdlib.h>
#include <string.h>

static int norm_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c >= 0x80;
}

static unsigned char lower_(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

/* Runs BODY for each normalised word (lower-cased copy in buf). */
#define FOR_WORDS(text, len, buf, wn, BODY)                                   \
    do {                                                                      \
        size_t i_ = 0;                                                        \
        while (i_ < (len)) {                                                  \
            wn = 0;                                                           \
            while (i_ < (len)) {                                              \
                unsigned char c_ = (unsigned char)(text)[i_];                 \
                if (c_ >= 'A' && c_ <= 'Z')                                   \
                    c_ = (unsigned char)(c_ + 32);                            \
                if (!norm_char(c_))                                           \
                    break;                                                    \
                if (wn < sizeof(buf))                                         \
                    (buf)[wn] = (char)c_;                                     \
                wn++;                                                         \
                i_++;                                                         \
            }                                                                 \
            if (wn > 0) {                                                     \
                if (wn > sizeof(buf))                                         \
                    wn = sizeof(buf);                                         \
                BODY                                                          \
            }                                                                 \
            while (i_ < (len) && !norm_char(lower_((unsigned char)(text)[i_]))) \
                i_++;                                                         \
        }                                                                     \
    } while (0)

uint64_t dedup_exact_hash(const char *text, size_t len)
{
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    char w[256];
    size_t wn;
    int first = 1;
    FOR_WORDS(text, len, w, wn, {
        if (!first)
            XXH3_64bits_update(&st, " ", 1);
        XXH3_64bits_update(&st, w, wn);
        first = 0;
    });
    return XXH3_64bits_digest(&st);
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

grit_err minhash_init(minhash *m, int bands, int rows, int ngram)
{
    memset(m, 0, sizeof *m);
    if (bands < 1 || rows < 1 || ngram < 1 || (long)bands * rows > 1 << 20)
        return grit_errf(GRIT_EINVAL, "minhash: bands, rows, ngram must be >= 1 (got %d x %d, "
                         "n = %d)", bands, rows, ngram);
    size_t k = (size_t)bands * (size_t)rows;
    m->bands = bands;
    m->rows = rows;
    m->ngram = ngram;
    m->a = malloc(k * sizeof *m->a);
    m->b = malloc(k * sizeof *m->b);
    m->mins = malloc(k * sizeof *m->mins);
    if (!m->a || !m->b || !m->mins) {
        minhash_free(m);
        return GRIT_ENOMEM;
    }
    uint64_t s = 0x6772697470726570ull; /* "gritprep" */
    for (size_t i = 0; i < k; i++) {
        m->a[i] = (uint32_t)splitmix(&s) | 1u;
        m->b[i] = (uint32_t)splitmix(&s);
    }
    return GRIT_OK;
}

void minhash_free(minhash *m)
{
    free(m->a);
    free(m->b);
    free(m->mins);
    free(m->words);
    memset(m, 0, sizeof *m);
}

static void update_mins(uint32_t *restrict mins, const uint32_t *restrict a,
                        const uint32_t *restrict b, size_t k, uint32_t x)
{
    for (size_t i = 0; i < k; i++) {
        uint32_t v = a[i] * x + b[i];
        mins[i] = v < mins[i] ? v : mins[i];
    }
}

grit_err minhash_keys(minhash *m, const char *text, size_t len, uint64_t *keys)
{
    size_t nw = 0, wn;
    char w[256];
    FOR_WORDS(text, len, w, wn, {
        if (nw == m->cap_words) {
            size_t cap = m->cap_words ? 2 * m->cap_words : 1024;
            uint64_t *p = realloc(m->words, cap * sizeof *p);
            if (!p)
                return GRIT_ENOMEM;
            m->words = p;
            m->cap_words = cap;
        }
        m->words[nw++] = XXH3_64bits(w, wn);
    });
    size_t k = (size_t)m->bands * (size_t)m->rows;
    if (nw == 0) {
        for (int b = 0; b < m->bands; b++)
            keys[b] = LSH_NO_KEY; /* lsh_cluster skips it */
        return GRIT_OK;
    }
    memset(m->mins, 0xFF, k * sizeof *m->mins);
    size_t n = (size_t)m->ngram, shingles = nw >= n ? nw - n + 1 : 1;
    size_t span = nw >= n ? n : nw;
    for (size_t s = 0; s < shingles; s++) {
        uint64_t h = 0x2545F4914F6CDD1Dull;
        for (size_t q = 0; q < span; q++)
            h = (h ^ m->words[s + q]) * 0x100000001B3ull + (h >> 31);
        h ^= h >> 33;
        h *= 0xFF51AFD7ED558CCDull;
        h ^= h >> 33;
        update_mins(m->mins, m->a, m->b, k, (uint32_t)h);
    }
    for (int b = 0; b < m->bands; b++)
        keys[b] = XXH3_64bits_withSeed(m->mins + (size_t)b * (size_t)m->rows,
                                       (size_t)m->rows * sizeof *m->mins, (uint64_t)b) &
                  ~(1ull << 63);
    return GRIT_OK;
}

grit_err uf_init(uf *u, size_t n)
{
    u->n = n;
    u->parent = malloc((n ? n : 1) * sizeof *u->parent);
    if (!u->parent)
        return GRIT_ENOMEM;
    for (size_t i = 0; i < n; i++)
        u->parent[i] = (uint32_t)i;
    return GRIT_OK;
}

void uf_free(uf *u)
{
    free(u->parent);
    u->parent = NULL;
    u->n = 0;
}

uint32_t uf_find(uf *u, uint32_t x)
{
    uint32_t r = x;
    while (u->parent[r] != r)
        r = u->parent[r];
    while (u->parent[x] != r) { /* path compression */
        uint32_t nx = u->parent[x];
        u->parent[x] = r;
        x = nx;
    }
    return r;
}

void uf_union(uf *u, uint32_t x, uint32_t y)
{
    uint32_t a = uf_find(u, x), b = uf_find(u, y);
    if (a == b)
        return;
    if (a < b)
        u->parent[b] = a;
    else
        u->parent[a] = b;
}

typedef struct kd {
    uint64_t key;
    uint32_t doc;
} kd;

static int kd_cmp(const void *x, const void *y)
{
    const kd *a = x, *b = y;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return a->doc < b->doc ? -1 : a->doc > b->doc;
}

grit_err lsh_cluster(const uint64_t *keys, const uint8_t *alive, size_t n, int bands, uf *u)
{
    kd *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return GRIT_ENOMEM;
    for (int b = 0; b < bands; b++) {
        size_t m = 0;
        for (size_t d = 0; d < n; d++)
            if (alive[d] && keys[d * (size_t)bands + (size_t)b] != LSH_NO_KEY)
                v[m++] = (kd){keys[d * (size_t)bands + (size_t)b], (uint32_t)d};
        qsort(v, m, sizeof *v, kd_cmp);
        for (size_t i = 1; i < m; i++)
            if (v[i].key == v[i - 1].key)
                uf_union(u, v[i - 1].doc, v[i].doc);
    }
    free(v);
    return GRIT_OK;
}
