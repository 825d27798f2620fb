/*
 * sft_set.c - training rows from an SFT dataset (see sft.h): the training
 * split's examples in a seeded shuffle per epoch, packed or padded into rows.
 *
 * The whole layout is built once in sft_open, for the rows the run needs:
 * row r is the pieces row_start[r] .. row_start[r+1]-1, each an example and
 * how many of its tokens fit. sft_fill only copies (no allocation), so the
 * rows are a pure function of (dataset, split, row_len, seed, pack): a resumed
 * run reads exactly the rows an uninterrupted one would have.
 */
#include "data/sft.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "data/gptdataset.h"
#include "data/indexed.h"

/* rng stream of the epoch shuffles ("sft" in ASCII) */
#define SFT_STREAM 0x736674ULL

struct sft_set {
    char prefix[512];
    idx_reader *tok, *mask;
    int row_len;
    int64_t first, n_ex, epoch_tokens;
    int64_t nrows, npieces;
    int64_t *row_start;  /* [nrows + 1] */
    int64_t *piece_ex;   /* [npieces] sequence number in the dataset */
    int32_t *piece_len;  /* [npieces] tokens of it in the row */
    int64_t *row_done;   /* [nrows] examples started before the row ends (epochs) */
    uint32_t *buf;       /* [row_len] read scratch */
};

static grit_err check_pair(const sft_set *s)
{
    size_t n = idx_num_seqs(s->tok);
    if (idx_dtype(s->mask) != IDX_DTYPE_U8)
        return grit_errf(GRIT_EFORMAT, "%s.mask.idx: dtype: expected 1 (uint8 loss mask), got %d",
                         s->prefix, idx_dtype(s->mask));
    if (idx_num_seqs(s->mask) != n)
        return grit_errf(GRIT_EFORMAT, "%s.mask.idx: sequence count: expected %zu (as %s.idx), "
                                       "got %zu", s->prefix, n, s->prefix,
                         idx_num_seqs(s->mask));
    for (size_t i = 0; i < n; i++)
        if (idx_seq_len(s->mask, i) != idx_seq_len(s->tok, i))
            return grit_errf(GRIT_EFORMAT, "%s.mask.idx: sizes[%zu]: expected %zu (as %s.idx), "
                                           "got %zu", s->prefix, i, idx_seq_len(s->tok, i),
                             s->prefix, idx_seq_len(s->mask, i));
    return GRIT_OK;
}

static grit_err check_vocab(const sft_set *s, int vocab, uint32_t *buf, size_t cap)
{
    for (int64_t e = 0; e < s->n_ex; e++) {
        size_t len = idx_seq_len(s->tok, (size_t)(s->first + e));
        for (size_t off = 0; off < len; off += cap) {
            size_t k = len - off < cap ? len - off : cap;
            grit_err rc = idx_read(s->tok, (size_t)(s->first + e), off, k, buf);
            if (rc != GRIT_OK)
                return grit_errf(rc, "%s.bin: %s", s->prefix, grit_errmsg());
            for (size_t i = 0; i < k; i++)
                if (buf[i] >= (uint32_t)vocab)
                    return grit_errf(GRIT_EINVAL, "%s.bin: example %lld: token id %u is outside "
                                                  "the model's vocabulary of %d", s->prefix,
                                     (long long)(s->first + e), buf[i], vocab);
        }
    }
    return GRIT_OK;
}

static grit_err grow(sft_set *s, int64_t *cap)
{
    int64_t c = *cap ? *cap * 2 : 1024;
    int64_t *ex = realloc(s->piece_ex, sizeof *ex * (size_t)c);
    if (ex)
        s->piece_ex = ex;
    int32_t *len = realloc(s->piece_len, sizeof *len * (size_t)c);
    if (len)
        s->piece_len = len;
    if (!ex || !len)
        return grit_errf(GRIT_ENOMEM, "%s: out of memory for the SFT row layout", s->prefix);
    *cap = c;
    return GRIT_OK;
}

/* Lays out nrows rows (see the file comment). */
static grit_err layout(sft_set *s, uint64_t seed, bool pack)
{
    int64_t *perm = malloc(sizeof *perm * (size_t)s->n_ex), cap = 0, done = 0;
    s->row_start = malloc(sizeof *s->row_start * (size_t)(s->nrows + 1));
    s->row_done = malloc(sizeof *s->row_done * (size_t)s->nrows);
    if (!perm || !s->row_start || !s->row_done) {
        free(perm);
        return grit_errf(GRIT_ENOMEM, "%s: out of memory for the SFT row layout", s->prefix);
    }
    grit_err rc = GRIT_OK;
    int64_t r = 0, used = 0, k = s->n_ex; /* k: position in the epoch's order */
    uint64_t epoch = 0;
    s->row_start[0] = 0;
    while (r < s->nrows) {
        if (k == s->n_ex) { /* next epoch's order: Fisher-Yates from (seed, epoch) */
            rng_t g;
            rng_seed(&g, seed ^ (epoch++ * 0x9e3779b97f4a7c15ULL), SFT_STREAM);
            for (int64_t i = 0; i < s->n_ex; i++)
                perm[i] = i;
            for (int64_t i = s->n_ex - 1; i > 0; i--) {
                int64_t j = (int64_t)(rng_next(&g) % (uint64_t)(i + 1)), t = perm[i];
                perm[i] = perm[j];
                perm[j] = t;
            }
            k = 0;
        }
        int64_t ex = s->first + perm[k];
        int64_t len = (int64_t)idx_seq_len(s->tok, (size_t)ex);
        if (used > 0 && (!pack || used + len > s->row_len)) { /* close the row */
            s->row_done[r] = done;
            s->row_start[++r] = s->npieces;
            used = 0;
            continue;
        }
        if (s->npieces == cap && (rc = grow(s, &cap)) != GRIT_OK)
            break;
        s->piece_ex[s->npieces] = ex;
        s->piece_len[s->npieces++] = (int32_t)(len < s->row_len - used ? len : s->row_len - used);
        used += len < s->row_len - used ? len : s->row_len - used;
        done++;
        k++;
        if (used == s->row_len) {
            s->row_done[r] = done;
            s->row_start[++r] = s->npieces;
            used = 0;
        }
    }
    free(perm);
    return rc;
}

grit_err sft_open(sft_set **out, const char *prefix, const char *split, int row_len,
                  uint64_t seed, int64_t nrows, bool pack, int vocab)
{
    *out = NULL;
    sft_set *s = calloc(1, sizeof *s);
    if (!s)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    snprintf(s->prefix, sizeof s->prefix, "%s", prefix);
    s->row_len = row_len;
    s->nrows = nrows > 0 ? nrows : 1;
    char mp[600];
    snprintf(mp, sizeof mp, "%s.mask", prefix);
    grit_err rc = idx_open(&s->tok, prefix);
    if (rc == GRIT_OK && (rc = idx_open(&s->mask, mp)) != GRIT_OK)
        rc = grit_errf(rc, "%s (the loss mask written by grit tokenize --sft)", grit_errmsg());
    if (rc == GRIT_OK)
        rc = check_pair(s);
    size_t b[4];
    if (rc == GRIT_OK && (rc = gpt_split(split, idx_num_seqs(s->tok), b)) == GRIT_OK) {
        s->first = (int64_t)b[0];
        s->n_ex = (int64_t)(b[1] - b[0]);
        if (s->n_ex <= 0)
            rc = grit_errf(GRIT_EINVAL, "%s: the training split of %zu examples is empty "
                                        "(split \"%s\")", prefix, idx_num_seqs(s->tok), split);
    }
    s->buf = malloc(sizeof *s->buf * (size_t)row_len);
    if (rc == GRIT_OK && !s->buf)
        rc = grit_errf(GRIT_ENOMEM, "out of memory");
    if (rc == GRIT_OK)
        rc = check_vocab(s, vocab, s->buf, (size_t)row_len);
    for (int64_t e = 0; rc == GRIT_OK && e < s->n_ex; e++) {
        size_t len = idx_seq_len(s->tok, (size_t)(s->first + e));
        if (len == 0)
            rc = grit_errf(GRIT_EFORMAT, "%s.idx: sizes[%lld]: an empty example",
                           prefix, (long long)(s->first + e));
        s->epoch_tokens += (int64_t)len;
    }
    if (rc == GRIT_OK)
        rc = layout(s, seed, pack);
    if (rc != GRIT_OK) {
        sft_close(s);
        return rc;
    }
    *out = s;
    return GRIT_OK;
}

void sft_close(sft_set *s)
{
    if (!s)
        return;
    idx_close(s->tok);
    idx_close(s->mask);
    free(s->row_start);
    free(s->piece_ex);
    free(s->piece_len);
    free(s->row_done);
    free(s->buf);
    free(s);
}

int64_t sft_rows(const sft_set *s) { return s->nrows; }
int64_t sft_examples(const sft_set *s) { return s->n_ex; }
int64_t sft_epoch_tokens(const sft_set *s) { return s->epoch_tokens; }

double sft_epochs(const sft_set *s, int64_t rows)
{
    if (rows <= 0)
        return 0.0;
    if (rows > s->nrows)
        rows = s->nrows;
    return (double)s->row_done[rows - 1] / (double)s->n_ex;
}

grit_err sft_fill(const sft_set *s, int64_t row, int32_t *tok, uint8_t *mask, int32_t *seg)
{
    if (row < 0 || row >= s->nrows)
        return grit_errf(GRIT_EINVAL, "%s: row %lld is past the %lld rows laid out for this run "
                                      "(total_steps x global batch)", s->prefix,
                         (long long)row, (long long)s->nrows);
    int L = s->row_len, pos = 0;
    for (int64_t p = s->row_start[row]; p < s->row_start[row + 1]; p++) {
        size_t ex = (size_t)s->piece_ex[p];
        int n = s->piece_len[p];
        grit_err rc = idx_read(s->tok, ex, 0, (size_t)n, s->buf);
        if (rc != GRIT_OK)
            return grit_errf(rc, "%s.bin: %s", s->prefix, grit_errmsg());
        for (int i = 0; i < n; i++)
            tok[pos + i] = (int32_t)s->buf[i];
        if ((rc = idx_read(s->mask, ex, 0, (size_t)n, s->buf)) != GRIT_OK)
            return grit_errf(rc, "%s.mask.bin: %s", s->prefix, grit_errmsg());
        for (int i = 0; i < n; i++) {
            mask[pos + i] = i > 0 && s->buf[i] != 0; /* never predict an example's first token */
            if (pos + i < L - 1)
                seg[pos + i] = pos;
        }
        pos += n;
    }
    for (int i = pos; i < L; i++) { /* padding: its own segment, no loss */
        tok[i] = 0;
        mask[i] = 0;
        if (i < L - 1)
            seg[i] = pos;
    }
    return GRIT_OK;
}
