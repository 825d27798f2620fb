/* gptdataset.c - Megatron's GPT sample order (see gptdataset.h). */
#include "data/gptdataset.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/mt19937.h"

static int parse_share(const char *s, size_t len, double *out)
{
    char buf[64];
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *p = buf, *end;
    while (isspace((unsigned char)*p))
        p++;
    errno = 0;
    double v = strtod(p, &end);
    if (end == p || errno == ERANGE)
        return -1;
    while (isspace((unsigned char)*end))
        end++;
    if (*end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

grit_err gpt_split(const char *spec, size_t n, size_t bounds[4])
{
    double w[3] = {0, 0, 0};
    char sep = strchr(spec, ',') ? ',' : strchr(spec, '/') ? '/' : '\0';
    const char *p = spec;
    for (int k = 0;; k++) {
        const char *e = sep ? strchr(p, sep) : NULL;
        size_t len = e ? (size_t)(e - p) : strlen(p);
        double v;
        if (parse_share(p, len, &v) != 0)
            return grit_errf(GRIT_EINVAL, "split \"%s\": expected numbers separated by ',' "
                                          "or '/', e.g. \"969,30,1\"", spec);
        if (v < 0)
            return grit_errf(GRIT_EINVAL, "split \"%s\": expected shares >= 0", spec);
        if (k < 3)
            w[k] = v; /* Megatron keeps the first three */
        if (!e)
            break;
        p = e + 1;
    }
    double sum = w[0] + w[1] + w[2];
    if (!(sum > 0.0))
        return grit_errf(GRIT_EINVAL, "split \"%s\": expected shares summing to more than 0",
                         spec);
    long long b[4] = {0};
    for (int k = 0; k < 3; k++)
        b[k + 1] = b[k] + (long long)rint(w[k] / sum * (double)n); /* round half to even */
    long long diff = b[3] - (long long)n;
    for (int k = 1; k < 4; k++)
        b[k] -= diff;
    for (int k = 0; k < 4; k++) {
        if (b[k] < 0)
            b[k] = 0; /* cannot happen for shares >= 0; keeps the bounds sane */
        bounds[k] = (size_t)b[k];
    }
    return GRIT_OK;
}

void gpt_index_free(gpt_index *g)
{
    if (!g)
        return;
    free(g->doc_idx);
    free(g->sample_idx);
    free(g->shuffle_idx);
    memset(g, 0, sizeof *g);
}

/* _build_doc_idx without a separate last epoch: documents tiled, shuffled. */
static void fill_doc_idx(int32_t *out, size_t begin, size_t end, int epochs, mt19937 *rng)
{
    size_t nd = end - begin, k = 0;
    for (int e = 0; e < epochs; e++)
        for (size_t d = begin; d < end; d++)
            out[k++] = (int32_t)d;
    mt_shuffle_i32(rng, out, nd * (size_t)epochs);
}

grit_err gpt_index_build(gpt_index *g, const int32_t *sizes, size_t doc_begin, size_t doc_end,
                         int64_t num_samples, int seq_len, uint32_t seed)
{
    memset(g, 0, sizeof *g);
    if (doc_end <= doc_begin || doc_end - doc_begin > INT32_MAX)
        return grit_errf(GRIT_EINVAL, "sample index: expected 1 to %d documents, got %zu",
                         INT32_MAX, doc_end > doc_begin ? doc_end - doc_begin : 0);
    if (seq_len < 1 || num_samples < 0)
        return grit_errf(GRIT_EINVAL, "sample index: expected seq_len >= 1 and samples >= 0");
    int64_t tpe = 0;
    for (size_t d = doc_begin; d < doc_end; d++)
        tpe += sizes[d];
    if (tpe < 1)
        return grit_errf(GRIT_EINVAL, "sample index: the documents hold no tokens");
    /* _num_epochs */
    int epochs = 0;
    int64_t total = 0;
    do {
        epochs++;
        total += tpe;
    } while ((total - 1) / seq_len < num_samples);
    int sep = 0;
    int64_t from_minus_one = 0;
    if (epochs > 1) {
        from_minus_one = ((int64_t)(epochs - 1) * tpe - 1) / seq_len;
        int64_t last = num_samples - from_minus_one;
        int64_t per_epoch = (tpe - 1) / seq_len;
        sep = last < (int64_t)(0.80 * (double)per_epoch);
    }
    size_t nd = doc_end - doc_begin;
    g->n_doc = nd * (size_t)epochs;
    g->n_samples = ((int64_t)epochs * tpe - 1) / seq_len;
    g->tokens_per_epoch = tpe;
    g->num_epochs = epochs;
    g->separate_last_epoch = sep;
    g->seq_len = seq_len;
    g->doc_idx = malloc(sizeof *g->doc_idx * g->n_doc);
    g->sample_idx = malloc(sizeof *g->sample_idx * 2 * (size_t)(g->n_samples + 1));
    g->shuffle_idx = malloc(sizeof *g->shuffle_idx * (size_t)g->n_samples);
    if (!g->doc_idx || !g->sample_idx || !g->shuffle_idx) {
        gpt_index_free(g);
        return grit_errf(GRIT_ENOMEM, "sample index: out of memory (%lld samples)",
                         (long long)num_samples);
    }
    mt19937 rng;
    mt_seed(&rng, seed);
    if (!sep) {
        fill_doc_idx(g->doc_idx, doc_begin, doc_end, epochs, &rng);
    } else {
        fill_doc_idx(g->doc_idx, doc_begin, doc_end, epochs - 1, &rng);
        fill_doc_idx(g->doc_idx + nd * (size_t)(epochs - 1), doc_begin, doc_end, 1, &rng);
    }
    /* build_sample_idx (helpers.cpp) */
    int64_t *si = g->sample_idx, s = 0, di = 0;
    int32_t off = 0;
    si[0] = 0;
    si[1] = 0;
    for (s = 1; s <= g->n_samples; s++) {
        int32_t remaining = seq_len + 1;
        while (remaining != 0) {
            if ((size_t)di >= g->n_doc) {
                gpt_index_free(g);
                return grit_errf(GRIT_EINVAL, "sample index: ran past the doc index");
            }
            int32_t dlen = sizes[g->doc_idx[di]] - off;
            remaining -= dlen;
            if (remaining <= 0) {
                off += remaining + dlen - 1;
                remaining = 0;
            } else {
                di++;
                off = 0;
            }
        }
        si[2 * s] = di;
        si[2 * s + 1] = off;
    }
    /* _build_shuffle_idx */
    int64_t first = sep ? from_minus_one : g->n_samples;
    for (int64_t i = 0; i < g->n_samples; i++)
        g->shuffle_idx[i] = i;
    mt_shuffle_i64(&rng, g->shuffle_idx, (size_t)first);
    if (first < g->n_samples)
        mt_shuffle_i64(&rng, g->shuffle_idx + first, (size_t)(g->n_samples - first));
    return GRIT_OK;
}

grit_err gpt_sample(const idx_reader *r, const gpt_index *g, int64_t i, int32_t *out)
{
    if (i < 0 || i >= g->n_samples)
        return grit_errf(GRIT_EINVAL, "sample %lld is outside the %lld samples of the index",
                         (long long)i, (long long)g->n_samples);
    int64_t row = g->shuffle_idx[i];
    int64_t df = g->sample_idx[2 * row], of = g->sample_idx[2 * row + 1];
    int64_t dl = g->sample_idx[2 * row + 2], ol = g->sample_idx[2 * row + 3];
    uint32_t *o = (uint32_t *)out; /* same size and representation for token ids */
    size_t at = 0;
    grit_err rc;
    if (df == dl)
        return idx_read(r, (size_t)g->doc_idx[df], (size_t)of, (size_t)(ol - of + 1), o);
    size_t d = (size_t)g->doc_idx[df], len = idx_seq_len(r, d);
    if ((rc = idx_read(r, d, (size_t)of, len - (size_t)of, o)) != GRIT_OK)
        return rc;
    at = len - (size_t)of;
    for (int64_t k = df + 1; k < dl; k++) {
        d = (size_t)g->doc_idx[k];
        len = idx_seq_len(r, d);
        if ((rc = idx_read(r, d, 0, len, o + at)) != GRIT_OK)
            return rc;
        at += len;
    }
    return idx_read(r, (size_t)g->doc_idx[dl], 0, (size_t)ol + 1, o + at);
}

/* numpy's pairwise summation (float64 np.sum over a contiguous array). */
static double np_sum(const double *a, size_t n)
{
    if (n < 8) {
        double res = 0.0;
        for (size_t i = 0; i < n; i++)
            res += a[i];
        return res;
    }
    if (n <= 128) {
        double r[8];
        size_t i;
        for (i = 0; i < 8; i++)
            r[i] = a[i];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++)
                r[j] += a[i + (size_t)j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++)
            res += a[i];
        return res;
    }
    size_t n2 = n / 2;
    n2 -= n2 % 8;
    return np_sum(a, n2) + np_sum(a + n2, n - n2);
}

grit_err gpt_blend_weights(const double *raw, int k, double *w1, double *w2)
{
    double sum = 0.0;
    for (int i = 0; i < k; i++) {
        if (!(raw[i] >= 0.0) || !isfinite(raw[i]))
            return grit_errf(GRIT_EINVAL, "blend weight %d: expected a number >= 0, got %g",
                             i, raw[i]);
        sum += raw[i];
    }
    if (!(sum > 0.0))
        return grit_errf(GRIT_EINVAL, "blend weights: expected a sum > 0");
    for (int i = 0; i < k; i++)
        w1[i] = raw[i] / sum;
    double s2 = np_sum(w1, (size_t)k);
    for (int i = 0; i < k; i++)
        w2[i] = w1[i] / s2;
    return GRIT_OK;
}

int64_t gpt_blend_samples(double w1, int64_t total)
{
    return (int64_t)ceil((double)total * w1 * 1.005);
}

void gpt_blend_build(const double *w2, int k, int64_t size, uint8_t *which, int64_t *at)
{
    int64_t used[256] = {0};
    for (int64_t i = 0; i < size; i++) {
        double x = i > 1 ? (double)i : 1.0;
        int best = 0;
        double err = w2[0] * x - (double)used[0];
        for (int d = 1; d < k; d++) {
            double e = w2[d] * x - (double)used[d];
            if (e > err) {
                err = e;
                best = d;
            }
        }
        which[i] = (uint8_t)best;
        at[i] = used[best]++;
    }
}
