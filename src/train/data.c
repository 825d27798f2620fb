/* data.c - the trainer's data sources behind one interface (see data.h). */
#include "train/data.h"

#include <stdlib.h>
#include <string.h>

#include "data/gptdataset.h"
#include "data/indexed.h"
#include "data/sft.h"
#include "data/synthetic.h"
#include "train/s3cache.h"

typedef struct train_megatron {
    int k;                               /* datasets */
    idx_reader *r[TRAIN_DATA_MAX_PATHS];
    gpt_index ix[TRAIN_DATA_MAX_PATHS];
    int64_t total;                       /* samples the source provides */
    uint8_t *which;                      /* [total] blend: dataset of sample i (k > 1) */
    int64_t *at;                         /* [total] blend: its sample in that dataset */
} train_megatron;

/* Opens prefix i, takes its training split and builds its index. */
static grit_err open_one(train_megatron *g, const train_cfg *cfg, int i, int64_t nsamples)
{
    const char *path = cfg->data_paths[i];
    char local[4096];
    grit_err rc = train_s3cache_prefix(path, local, sizeof local); /* s3://: fetched once */
    if (rc == GRIT_OK)
        rc = idx_open(&g->r[i], local);
    if (rc != GRIT_OK)
        return rc;
    size_t n = idx_num_seqs(g->r[i]), b[4];
    if ((rc = gpt_split(cfg->data_split, n, b)) != GRIT_OK)
        return rc;
    if (b[1] <= b[0])
        return grit_errf(GRIT_EINVAL, "%s: the training split of %zu documents is empty "
                                      "(split \"%s\")", path, n, cfg->data_split);
    int32_t *sizes = malloc(sizeof *sizes * (n ? n : 1));
    if (!sizes)
        return grit_errf(GRIT_ENOMEM, "%s: out of memory", path);
    for (size_t s = 0; s < n; s++)
        sizes[s] = (int32_t)idx_seq_len(g->r[i], s);
    rc = gpt_index_build(&g->ix[i], sizes, b[0], b[1], nsamples, cfg->optim.seq_len,
                         (uint32_t)cfg->seed);
    free(sizes);
    if (rc != GRIT_OK)
        return grit_errf(rc, "%s: %s", path, grit_errmsg());
    return GRIT_OK;
}

static grit_err open_megatron(train_data *d, const train_cfg *cfg)
{
    train_megatron *g = calloc(1, sizeof *g);
    if (!g)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    d->mg = g;
    g->k = cfg->data_npaths;
    const optim_cfg *o = &cfg->optim;
    int64_t global = (int64_t)o->micro_batch * o->grad_accum * (cfg->world > 0 ? cfg->world : 1);
    int64_t need = (int64_t)o->total_steps * global;
    grit_err rc;
    if (g->k == 1) { /* no blending, as Megatron with one prefix */
        if ((rc = open_one(g, cfg, 0, need)) != GRIT_OK)
            return rc;
        g->total = g->ix[0].n_samples;
        return GRIT_OK;
    }
    double w1[TRAIN_DATA_MAX_PATHS], w2[TRAIN_DATA_MAX_PATHS];
    if ((rc = gpt_blend_weights(cfg->data_weights, g->k, w1, w2)) != GRIT_OK)
        return rc;
    for (int i = 0; i < g->k; i++) {
        if ((rc = open_one(g, cfg, i, gpt_blend_samples(w1[i], need))) != GRIT_OK)
            return rc;
        g->total += g->ix[i].n_samples;
    }
    g->which = malloc((size_t)g->total);
    g->at = malloc(sizeof *g->at * (size_t)g->total);
    if (!g->which || !g->at)
        return grit_errf(GRIT_ENOMEM, "blend index: out of memory (%lld samples)",
                         (long long)g->total);
    gpt_blend_build(w2, g->k, g->total, g->which, g->at);
    return GRIT_OK;
}

grit_err train_data_open(train_data *d, const train_cfg *cfg)
{
    memset(d, 0, sizeof *d);
    d->cfg = cfg;
    if (!strcmp(cfg->data_source, "synthetic"))
        return GRIT_OK;
    if (!strcmp(cfg->data_source, "megatron")) {
        if (cfg->seed > 0xffffffffULL) /* numpy's RandomState takes 32-bit seeds */
            return grit_errf(GRIT_EINVAL, "seed %llu: the \"megatron\" data source needs a "
                                          "seed below 2^32", (unsigned long long)cfg->seed);
        return open_megatron(d, cfg);
    }
    if (!strcmp(cfg->data_source, "sft")) {
        const optim_cfg *o = &cfg->optim;
        int64_t need = (int64_t)o->total_steps * o->micro_batch * o->grad_accum *
                       (cfg->world > 0 ? cfg->world : 1);
        char local[4096];
        grit_err rc = train_s3cache_prefix(cfg->data_paths[0], local, sizeof local);
        if (rc != GRIT_OK)
            return rc;
        return sft_open(&d->sft, local, cfg->data_split, o->seq_len + 1, cfg->seed, need,
                        cfg->data_pack, cfg->model.vocab);
    }
    return grit_errf(GRIT_EINVAL, "data source '%s' is not supported", cfg->data_source);
}

grit_err train_data_fill_sft(train_data *d, long first, int n, int len, int32_t *out,
                             uint8_t *mask, int32_t *seg)
{
    if (!d->sft)
        return grit_errf(GRIT_EINVAL, "data: the \"%s\" source has no loss mask",
                         d->cfg->data_source);
    if (len != d->cfg->optim.seq_len + 1)
        return grit_errf(GRIT_EINVAL, "data: rows are %d tokens, %d asked for",
                         d->cfg->optim.seq_len + 1, len);
    for (int j = 0; j < n; j++) {
        grit_err rc = sft_fill(d->sft, (int64_t)first + j, out + (size_t)j * (size_t)len,
                               mask + (size_t)j * (size_t)len, seg + (size_t)j * (size_t)(len - 1));
        if (rc != GRIT_OK)
            return rc;
    }
    return GRIT_OK;
}

grit_err train_data_fill(train_data *d, long first, int n, int len, int32_t *out)
{
    const train_megatron *g = d->mg;
    if (d->sft)
        return grit_errf(GRIT_EINVAL, "data: the \"sft\" source fills masks too "
                                      "(train_data_fill_sft)");
    if (!g) {
        syn_fill(d->cfg->seed, d->cfg->synthetic_vocab, first, n, len, out);
        return GRIT_OK;
    }
    if (len != d->cfg->optim.seq_len + 1)
        return grit_errf(GRIT_EINVAL, "data: samples are %d tokens, %d asked for",
                         d->cfg->optim.seq_len + 1, len);
    int vocab = d->cfg->model.vocab;
    for (int j = 0; j < n; j++) {
        int64_t s = (int64_t)first + j;
        if (s < 0 || s >= g->total)
            return grit_errf(GRIT_EINVAL, "data: sample %lld is past the %lld samples built "
                                          "for this run (total_steps x global batch)",
                             (long long)s, (long long)g->total);
        int ds = g->which ? g->which[s] : 0;
        int64_t at = g->which ? g->at[s] : s;
        int32_t *o = out + (size_t)j * (size_t)len;
        grit_err rc = gpt_sample(g->r[ds], &g->ix[ds], at, o);
        if (rc != GRIT_OK)
            return grit_errf(rc, "%s: %s", d->cfg->data_paths[ds], grit_errmsg());
        for (int t = 0; t < len; t++)
            if (o[t] < 0 || o[t] >= vocab)
                return grit_errf(GRIT_EINVAL, "%s: token id %d is outside the model's "
                                              "vocabulary of %d", d->cfg->data_paths[ds],
                                 o[t], vocab);
    }
    return GRIT_OK;
}

double train_data_epochs(const train_data *d, long samples)
{
    const train_megatron *g = d->mg;
    if (d->sft)
        return sft_epochs(d->sft, samples);
    if (!g || samples <= 0)
        return 0.0;
    double T = d->cfg->optim.seq_len, best = 0;
    if (!g->which)
        return (double)samples * T / (double)g->ix[0].tokens_per_epoch;
    int64_t used[TRAIN_DATA_MAX_PATHS] = {0};
    for (int64_t s = 0; s < samples && s < g->total; s++)
        used[g->which[s]]++;
    for (int i = 0; i < g->k; i++) {
        double e = (double)used[i] * T / (double)g->ix[i].tokens_per_epoch;
        best = e > best ? e : best;
    }
    return best;
}

void train_data_close(train_data *d)
{
    if (!d)
        return;
    train_megatron *g = d->mg;
    if (g) {
        for (int i = 0; i < g->k; i++) {
            gpt_index_free(&g->ix[i]);
            idx_close(g->r[i]);
        }
        free(g->which);
        free(g->at);
        free(g);
    }
    sft_close(d->sft);
    memset(d, 0, sizeof *d);
}
