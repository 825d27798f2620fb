/* config.c - training config parsing and validation (see config.h). */
#include "train/config.h"
#include "train/parallel.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/jcfg.h"
#include "data/gptdataset.h"
#include "train/model_cfg.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

void train_cfg_defaults(train_cfg *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->preset, sizeof c->preset, "pythia-14m");
    gx_preset("pythia-14m", &c->model);
    c->vocab_divisor = 128;
    c->optim = (optim_cfg){
        .micro_batch = 8,
        .grad_accum = 1,
        .seq_len = 512,
        .lr = 1e-3,
        .min_lr = 1e-4,
        .warmup_steps = 10,
        .total_steps = 100,
        .beta1 = 0.9,
        .beta2 = 0.95,
        .eps = 1e-8,
        .weight_decay = 0.1,
        .grad_clip = 1.0,
    };
    c->seed = 1234;
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    c->threads = nc > 0 ? (int)nc : 1;
    snprintf(c->data_source, sizeof c->data_source, "synthetic");
    c->synthetic_vocab = 512;
    snprintf(c->data_split, sizeof c->data_split, "969,30,1");
    c->data_pack = true;
    snprintf(c->run_dir, sizeof c->run_dir, "runs/default");
    c->log_every = 1;
    c->ckpt_interval_steps = 100;
    c->ckpt_keep_last = 3;
    c->ckpt_async = true;
    c->resume = true;
    c->world = 1;
    c->tp = c->pp = 1;
    c->eval_samples = 16;
    s3_opts_defaults(&c->ckpt_s3);
}

static const char *const top_keys[] = {"model",   "optim",      "seed",   "threads",
                                        "data",    "run_dir",    "log_every", "checkpoint",
                                        "resume",  "init_from",  "parallel", "precision",
                                        "eval",    "recompute", NULL};
static const char *const eval_keys[] = {"interval_steps", "samples", "at_checkpoint", NULL};
static const char *const ckpt_keys[] = {"interval_steps", "interval_minutes", "keep_last",
                                        "keep_every", "async", "on_error", "dir", "s3", "cache_dir",
                                        NULL};
static const char *const s3_keys[] = {"endpoint", "region",           "part_size_mib",
                                      "concurrency", "retries", "unsigned_payload",
                                      "read_cache_mib", NULL};
static const char *const on_errors[] = {"continue", "stop", NULL};
static const char *const model_keys[] = {
    "preset", "hidden_size", "num_layers", "num_heads", "intermediate_size", "vocab_size",
    "make_vocab_size_divisible_by", "rotary_pct", "rotary_base", "max_positions",
    "layer_norm_eps", "activation", "parallel_residual", NULL};
static const char *const optim_keys[] = {
    "micro_batch", "grad_accum", "seq_len", "lr", "min_lr", "warmup_steps", "total_steps",
    "beta1", "beta2", "eps", "weight_decay", "grad_clip", "global_batch", "zero1", NULL};
static const char *const data_keys[] = {"source", "synthetic_vocab", "paths", "weights",
                                         "split", "pack", NULL};
static const char *const acts[] = {"gelu", "gelu_tanh", NULL};
static const char *const sources[] = {"synthetic", "megatron", "sft", NULL};
static const char *const precisions[] = {"fp32", "bf16", NULL};
static const char *const recomputes[] = {"none", "full", NULL};

#define TRY(expr)                                                                        \
    do {                                                                                 \
        grit_err rc_ = (expr);                                                           \
        if (rc_ != GRIT_OK)                                                              \
            return rc_;                                                                  \
    } while (0)

static grit_err load_int(const jcfg *j, json_t *o, const char *pre, const char *k, long lo,
                         long hi, int *out)
{
    long v = *out;
    TRY(jcfg_int(j, o, pre, k, lo, hi, &v));
    *out = (int)v;
    return GRIT_OK;
}

/* checkpoint.dir and checkpoint.s3 */
static grit_err load_ckpt_dir(const jcfg *j, json_t *k, train_cfg *c)
{
    const char *dir = NULL;
    TRY(jcfg_str(j, k, "checkpoint", "dir", NULL, &dir));
    if (dir) {
        if (!*dir || strlen(dir) >= sizeof c->ckpt_dir)
            return jcfg_fail(j, "checkpoint.dir", "expected a path or s3://BUCKET/PREFIX of 1 "
                                                  "to %zu bytes", sizeof c->ckpt_dir - 1);
        if (!strncmp(dir, "s3://", 5) && (!dir[5] || dir[5] == '/'))
            return jcfg_fail(j, "checkpoint.dir", "expected s3://BUCKET[/PREFIX]");
        snprintf(c->ckpt_dir, sizeof c->ckpt_dir, "%s", dir);
    }
    const char *cache = NULL;
    TRY(jcfg_str(j, k, "checkpoint", "cache_dir", NULL, &cache));
    if (cache) {
        if (!*cache || strlen(cache) >= sizeof c->ckpt_cache || !strncmp(cache, "s3://", 5))
            return jcfg_fail(j, "checkpoint.cache_dir", "expected a local directory path");
        if (!c->ckpt_dir[0])
            return jcfg_fail(j, "checkpoint.cache_dir", "expected together with \"dir\" (the "
                                                        "remote tier it caches)");
        snprintf(c->ckpt_cache, sizeof c->ckpt_cache, "%s", cache);
    }
    json_t *s3;
    TRY(jcfg_obj(j, k, "checkpoint", "s3", &s3));
    if (!s3)
        return GRIT_OK;
    s3_opts *o = &c->ckpt_s3;
    const char *ep = NULL, *rg = NULL;
    int part = 0, conc = 0, retries = -1, rcache = 0;
    TRY(jcfg_only(j, s3, "checkpoint.s3", s3_keys));
    TRY(jcfg_str(j, s3, "checkpoint.s3", "endpoint", NULL, &ep));
    TRY(jcfg_str(j, s3, "checkpoint.s3", "region", NULL, &rg));
    if (ep && (strlen(ep) >= sizeof o->endpoint ||
               (strncmp(ep, "http://", 7) && strncmp(ep, "https://", 8))))
        return jcfg_fail(j, "checkpoint.s3.endpoint", "expected http(s)://HOST[:PORT]");
    if (rg && (!*rg || strlen(rg) >= sizeof o->region))
        return jcfg_fail(j, "checkpoint.s3.region", "expected a region name");
    TRY(load_int(j, s3, "checkpoint.s3", "part_size_mib", 5, 5120, &part));
    TRY(load_int(j, s3, "checkpoint.s3", "concurrency", 1, 256, &conc));
    TRY(load_int(j, s3, "checkpoint.s3", "retries", 0, 100, &retries));
    TRY(load_int(j, s3, "checkpoint.s3", "read_cache_mib", 1, 1 << 20, &rcache));
    TRY(jcfg_bool(j, s3, "checkpoint.s3", "unsigned_payload", &o->unsigned_payload));
    if (ep)
        snprintf(o->endpoint, sizeof o->endpoint, "%s", ep);
    if (rg)
        snprintf(o->region, sizeof o->region, "%s", rg);
    if (part)
        o->part_size = (size_t)part << 20;
    if (conc)
        o->concurrency = conc;
    if (retries >= 0)
        o->retries = retries;
    if (rcache)
        o->read_cache = (size_t)rcache << 20;
    return GRIT_OK;
}

/* model_keys plus the decoder options (model_cfg.h) */
static grit_err only_model_keys(const jcfg *j, json_t *obj)
{
    const char *all[64];
    int n = 0;
    for (const char *const *k = model_keys; *k; k++)
        all[n++] = *k;
    for (const char *const *k = train__model_option_keys; *k; k++)
        all[n++] = *k;
    all[n] = NULL;
    return jcfg_only(j, obj, "model", all);
}

static grit_err load_model(const jcfg *j, train_cfg *c)
{
    json_t *v = json_object_get(j->root, "model");
    if (!v)
        return GRIT_OK;
    const char *preset = NULL;
    json_t *obj = NULL;
    if (json_is_string(v)) {
        TRY(jcfg_str(j, j->root, "", "model", gx_preset_names, &preset));
    } else {
        TRY(jcfg_obj(j, j->root, "", "model", &obj));
        TRY(only_model_keys(j, obj));
        TRY(jcfg_str(j, obj, "model", "preset", gx_preset_names, &preset));
        if (!preset) {
            /* no preset: the shape fields are all required */
            static const char *const need[] = {"hidden_size", "num_layers", "num_heads",
                                               "intermediate_size", "vocab_size", NULL};
            for (const char *const *k = need; *k; k++)
                if (!json_object_get(obj, *k))
                    return jcfg_fail(j, "model", "missing field '%s' (required without a "
                                                 "\"preset\")", *k);
            c->preset[0] = '\0';
        }
    }
    if (preset) {
        gx_preset(preset, &c->model);
        snprintf(c->preset, sizeof c->preset, "%s", preset);
    }
    if (!obj)
        return GRIT_OK;
    gx_config *m = &c->model;
    const char *act = NULL;
    long vocab = m->vocab;
    TRY(load_int(j, obj, "model", "hidden_size", 1, 65536, &m->hidden));
    TRY(load_int(j, obj, "model", "num_layers", 1, 1024, &m->layers));
    TRY(load_int(j, obj, "model", "num_heads", 1, 1024, &m->heads));
    TRY(load_int(j, obj, "model", "intermediate_size", 1, 1 << 20, &m->intermediate));
    TRY(jcfg_int(j, obj, "model", "vocab_size", 2, 1 << 24, &vocab));
    TRY(load_int(j, obj, "model", "make_vocab_size_divisible_by", 1, 4096, &c->vocab_divisor));
    TRY(jcfg_num(j, obj, "model", "rotary_pct", 0.0, 1.0, &m->rotary_pct));
    TRY(jcfg_num(j, obj, "model", "rotary_base", 1.0, 1e12, &m->rotary_base));
    TRY(load_int(j, obj, "model", "max_positions", 1, 1 << 20, &m->max_positions));
    TRY(jcfg_num(j, obj, "model", "layer_norm_eps", 1e-12, 1.0, &m->ln_eps));
    TRY(jcfg_str(j, obj, "model", "activation", acts, &act));
    TRY(jcfg_bool(j, obj, "model", "parallel_residual", &m->parallel_residual));
    if (act)
        m->act = strcmp(act, "gelu") == 0 ? OP_GELU : OP_GELU_TANH;
    m->vocab = (int)((vocab + c->vocab_divisor - 1) / c->vocab_divisor * c->vocab_divisor);
    if (m->hidden % m->heads != 0)
        return jcfg_fail(j, "model.num_heads", "expected a divisor of hidden_size %d, got %d",
                         m->hidden, m->heads);
    int hd = m->hidden / m->heads, rot = (int)(hd * m->rotary_pct);
    if (rot % 2 != 0 && !json_object_get(obj, "family")) /* else checked with the family's */
        return jcfg_fail(j, "model.rotary_pct",
                         "expected int(head_dim %d * rotary_pct) to be even, got %d", hd, rot);
    return train__model_options(j, obj, preset != NULL, m);
}

static grit_err load_optim(const jcfg *j, train_cfg *c)
{
    json_t *o;
    TRY(jcfg_obj(j, j->root, "", "optim", &o));
    if (!o)
        return GRIT_OK;
    optim_cfg *p = &c->optim;
    TRY(jcfg_only(j, o, "optim", optim_keys));
    TRY(load_int(j, o, "optim", "micro_batch", 1, 1 << 16, &p->micro_batch));
    TRY(load_int(j, o, "optim", "grad_accum", 1, 1 << 16, &p->grad_accum));
    TRY(load_int(j, o, "optim", "seq_len", 1, 1 << 20, &p->seq_len));
    TRY(jcfg_num(j, o, "optim", "lr", 0.0, 10.0, &p->lr));
    TRY(jcfg_num(j, o, "optim", "min_lr", 0.0, 10.0, &p->min_lr));
    TRY(load_int(j, o, "optim", "warmup_steps", 0, 1 << 30, &p->warmup_steps));
    TRY(load_int(j, o, "optim", "total_steps", 1, 1 << 30, &p->total_steps));
    TRY(jcfg_num(j, o, "optim", "beta1", 0.0, 0.999999, &p->beta1));
    TRY(jcfg_num(j, o, "optim", "beta2", 0.0, 0.999999, &p->beta2));
    TRY(jcfg_num(j, o, "optim", "eps", 0.0, 1.0, &p->eps));
    TRY(jcfg_num(j, o, "optim", "weight_decay", 0.0, 10.0, &p->weight_decay));
    TRY(jcfg_num(j, o, "optim", "grad_clip", 0.0, 1e6, &p->grad_clip));
    TRY(load_int(j, o, "optim", "global_batch", 0, 1 << 24, &p->global_batch));
    TRY(jcfg_bool(j, o, "optim", "zero1", &p->zero1));
    if (p->global_batch > 0 && json_object_get(o, "grad_accum"))
        return jcfg_fail(j, "optim.grad_accum", "expected either grad_accum or global_batch, "
                                                "not both (global_batch derives grad_accum)");
    if (p->global_batch > 0 && p->global_batch % p->micro_batch != 0)
        return jcfg_fail(j, "optim.global_batch", "expected a multiple of micro_batch %d, got %d",
                         p->micro_batch, p->global_batch);
    if (p->min_lr > p->lr)
        return jcfg_fail(j, "optim.min_lr", "expected a value <= optim.lr (%g), got %g", p->lr,
                         p->min_lr);
    return GRIT_OK;
}

/* data.paths / data.weights / data.split of the "megatron" source; data.paths,
 * data.split and data.pack of the "sft" source (one prefix, docs/sft.md). */
static grit_err load_megatron(const jcfg *j, json_t *d, train_cfg *c)
{
    json_t *paths = json_object_get(d, "paths"), *ws = json_object_get(d, "weights");
    bool sft = !strcmp(c->data_source, "sft"), mg = sft || !strcmp(c->data_source, "megatron");
    if (!mg && (paths || ws || json_object_get(d, "split")))
        return jcfg_fail(j, paths ? "data.paths" : ws ? "data.weights" : "data.split",
                         "expected only with \"source\": \"megatron\" or \"sft\"");
    if (!sft && json_object_get(d, "pack"))
        return jcfg_fail(j, "data.pack", "expected only with \"source\": \"sft\"");
    if (!mg)
        return GRIT_OK;
    if (!paths)
        return jcfg_fail(j, "data.source", "missing field 'data.paths' (required by "
                                           "\"%s\": a list of .bin/.idx prefixes)",
                         c->data_source);
    size_t n = json_is_array(paths) ? json_array_size(paths) : 0;
    if (sft && n != 1)
        return jcfg_fail(j, "data.paths", "expected exactly one prefix with \"source\": "
                                          "\"sft\" (a dataset from grit tokenize --sft)");
    if (sft && ws)
        return jcfg_fail(j, "data.weights", "expected only with \"source\": \"megatron\"");
    if (sft)
        TRY(jcfg_bool(j, d, "data", "pack", &c->data_pack));
    if (n < 1 || n > TRAIN_DATA_MAX_PATHS)
        return jcfg_fail(j, "data.paths", "expected a list of 1 to %d dataset prefixes "
                                          "(strings)", TRAIN_DATA_MAX_PATHS);
    for (size_t i = 0; i < n; i++) {
        json_t *p = json_array_get(paths, i);
        if (!json_is_string(p) || json_string_length(p) == 0)
            return jcfg_fail(j, "data.paths", "expected entry %zu to be a non-empty string "
                                              "(a .bin/.idx prefix)", i);
        if (json_string_length(p) >= sizeof c->data_paths[0])
            return jcfg_fail(j, "data.paths", "expected entry %zu shorter than %zu bytes", i,
                             sizeof c->data_paths[0]);
        snprintf(c->data_paths[i], sizeof c->data_paths[i], "%s", json_string_value(p));
        c->data_weights[i] = 1.0;
    }
    c->data_npaths = (int)n;
    if (ws) {
        if (!json_is_array(ws) || json_array_size(ws) != n)
            return jcfg_fail(j, "data.weights", "expected a list of %zu numbers (one per path)",
                             n);
        double sum = 0;
        for (size_t i = 0; i < n; i++) {
            json_t *w = json_array_get(ws, i);
            double v = json_is_number(w) ? json_number_value(w) : -1;
            if (!(v >= 0) || !isfinite(v))
                return jcfg_fail(j, "data.weights", "expected entry %zu to be a number >= 0", i);
            c->data_weights[i] = v;
            sum += v;
        }
        if (!(sum > 0))
            return jcfg_fail(j, "data.weights", "expected weights summing to more than 0");
        c->data_has_weights = true;
    }
    const char *split = NULL;
    TRY(jcfg_str(j, d, "data", "split", NULL, &split));
    if (split) {
        size_t b[4];
        if (strlen(split) >= sizeof c->data_split || gpt_split(split, 1000, b) != GRIT_OK)
            return jcfg_fail(j, "data.split", "expected train,valid,test shares like "
                                              "\"969,30,1\", got \"%s\"", split);
        snprintf(c->data_split, sizeof c->data_split, "%s", split);
    }
    if (!sft && c->seed > 0xffffffffULL)
        return jcfg_fail(j, "seed", "expected a seed below 2^32 with the \"megatron\" data "
                                    "source (numpy's RandomState), got %llu",
                         (unsigned long long)c->seed);
    return GRIT_OK;
}

static grit_err load_all(const jcfg *j, train_cfg *c)
{
    TRY(jcfg_only(j, j->root, "", top_keys));
    TRY(load_model(j, c));
    TRY(load_optim(j, c));
    long seed = (long)c->seed;
    TRY(jcfg_int(j, j->root, "", "seed", 0, 0x7fffffffffffffffL, &seed));
    c->seed = (uint64_t)seed;
    TRY(load_int(j, j->root, "", "threads", 1, 1024, &c->threads));
    const char *prec = NULL;
    TRY(jcfg_str(j, j->root, "", "precision", precisions, &prec));
    if (prec)
        TRY(gx_precision_parse(prec, &c->precision));
    const char *rec = NULL;
    TRY(jcfg_str(j, j->root, "", "recompute", recomputes, &rec));
    if (rec)
        c->recompute = !strcmp(rec, "full");
    TRY(load_int(j, j->root, "", "log_every", 1, 1 << 30, &c->log_every));
    const char *rd = NULL;
    TRY(jcfg_str(j, j->root, "", "run_dir", NULL, &rd));
    if (rd) {
        if (strlen(rd) >= sizeof c->run_dir - 64)
            return jcfg_fail(j, "run_dir", "expected a path shorter than %zu bytes",
                             sizeof c->run_dir - 64);
        snprintf(c->run_dir, sizeof c->run_dir, "%s", rd);
    }
    json_t *k;
    TRY(jcfg_obj(j, j->root, "", "checkpoint", &k));
    if (k) {
        const char *oe = NULL;
        TRY(jcfg_only(j, k, "checkpoint", ckpt_keys));
        TRY(load_int(j, k, "checkpoint", "interval_steps", 0, 1 << 30, &c->ckpt_interval_steps));
        TRY(jcfg_num(j, k, "checkpoint", "interval_minutes", 0, 1e6, &c->ckpt_interval_minutes));
        TRY(load_int(j, k, "checkpoint", "keep_last", 1, 1 << 20, &c->ckpt_keep_last));
        TRY(load_int(j, k, "checkpoint", "keep_every", 0, 1 << 30, &c->ckpt_keep_every));
        TRY(jcfg_bool(j, k, "checkpoint", "async", &c->ckpt_async));
        TRY(jcfg_str(j, k, "checkpoint", "on_error", on_errors, &oe));
        if (oe)
            c->ckpt_stop_on_error = !strcmp(oe, "stop");
        TRY(load_ckpt_dir(j, k, c));
    }
    TRY(train__parallel_load(j, c));
    json_t *ev;
    TRY(jcfg_obj(j, j->root, "", "eval", &ev));
    if (ev) {
        TRY(jcfg_only(j, ev, "eval", eval_keys));
        TRY(load_int(j, ev, "eval", "interval_steps", 0, 1 << 30, &c->eval_interval_steps));
        TRY(load_int(j, ev, "eval", "samples", 1, 1 << 24, &c->eval_samples));
        TRY(jcfg_bool(j, ev, "eval", "at_checkpoint", &c->eval_at_checkpoint));
    }
    TRY(jcfg_bool(j, j->root, "", "resume", &c->resume));
    const char *init = NULL;
    TRY(jcfg_str(j, j->root, "", "init_from", NULL, &init));
    if (init) {
        if (strlen(init) >= sizeof c->init_from)
            return jcfg_fail(j, "init_from", "expected a shorter path");
        snprintf(c->init_from, sizeof c->init_from, "%s", init);
    }
    json_t *d;
    TRY(jcfg_obj(j, j->root, "", "data", &d));
    if (d) {
        const char *src = NULL;
        TRY(jcfg_only(j, d, "data", data_keys));
        TRY(jcfg_str(j, d, "data", "source", sources, &src));
        if (src)
            snprintf(c->data_source, sizeof c->data_source, "%s", src);
        TRY(load_int(j, d, "data", "synthetic_vocab", 2, 1 << 24, &c->synthetic_vocab));
        TRY(load_megatron(j, d, c));
    }
    if (!strcmp(c->data_source, "synthetic") && c->synthetic_vocab > c->model.vocab)
        return jcfg_fail(j, "data.synthetic_vocab",
                         "expected at most the model's vocab_size %d, got %d", c->model.vocab,
                         c->synthetic_vocab);
    if (c->optim.seq_len > c->model.max_positions && c->model.rope != GX_ROPE_DYNAMIC)
        return jcfg_fail(j, "optim.seq_len", "expected at most model.max_positions %d, got %d",
                         c->model.max_positions, c->optim.seq_len);
    return GRIT_OK;
}

grit_err train_cfg_load(train_cfg *c, const char *path)
{
    jcfg j;
    grit_err rc = jcfg_open(&j, path);
    if (rc == GRIT_OK)
        rc = load_all(&j, c);
    jcfg_close(&j);
    return rc;
}

grit_err train_cfg_load_string(train_cfg *c, const char *name, const char *text)
{
    jcfg j;
    grit_err rc = jcfg_open_string(&j, name, text);
    if (rc == GRIT_OK)
        rc = load_all(&j, c);
    jcfg_close(&j);
    return rc;
}

char *train_cfg_dump(const train_cfg *c)
{
    const gx_config *m = &c->model;
    const optim_cfg *o = &c->optim;
    json_t *model = json_pack(
        "{s:i,s:i,s:i,s:i,s:i,s:i,s:f,s:f,s:i,s:f,s:s,s:b}", "hidden_size", m->hidden,
        "num_layers", m->layers, "num_heads", m->heads, "intermediate_size", m->intermediate,
        "vocab_size", m->vocab, "make_vocab_size_divisible_by", c->vocab_divisor, "rotary_pct",
        m->rotary_pct, "rotary_base", m->rotary_base, "max_positions", m->max_positions,
        "layer_norm_eps", m->ln_eps, "activation", m->act == OP_GELU ? "gelu" : "gelu_tanh",
        "parallel_residual", m->parallel_residual);
    if (c->preset[0])
        json_object_set_new(model, "preset", json_string(c->preset));
    train__model_options_dump(model, m);
    json_t *optim = json_pack(
        "{s:i,s:i,s:i,s:f,s:f,s:i,s:i,s:f,s:f,s:f,s:f,s:f}", "micro_batch", o->micro_batch,
        "grad_accum", o->grad_accum, "seq_len", o->seq_len, "lr", o->lr, "min_lr", o->min_lr,
        "warmup_steps", o->warmup_steps, "total_steps", o->total_steps, "beta1", o->beta1,
        "beta2", o->beta2, "eps", o->eps, "weight_decay", o->weight_decay, "grad_clip",
        o->grad_clip);
    json_t *root = json_pack("{s:o,s:o,s:I,s:i,s:{s:s,s:i},s:s,s:i}", "model", model, "optim",
                             optim, "seed", (json_int_t)c->seed, "threads", c->threads, "data",
                             "source", c->data_source, "synthetic_vocab", c->synthetic_vocab,
                             "run_dir", c->run_dir, "log_every", c->log_every);
    json_object_set_new(
        root, "checkpoint",
        json_pack("{s:i,s:f,s:i,s:i,s:b,s:s}", "interval_steps", c->ckpt_interval_steps,
                  "interval_minutes", c->ckpt_interval_minutes, "keep_last", c->ckpt_keep_last,
                  "keep_every", c->ckpt_keep_every, "async", c->ckpt_async, "on_error",
                  c->ckpt_stop_on_error ? "stop" : "continue"));
    if (c->ckpt_dir[0]) {
        json_t *ck = json_object_get(root, "checkpoint");
        const s3_opts *so = &c->ckpt_s3;
        json_object_set_new(ck, "dir", json_string(c->ckpt_dir));
        if (c->ckpt_cache[0])
            json_object_set_new(ck, "cache_dir", json_string(c->ckpt_cache));
        if (!strncmp(c->ckpt_dir, "s3://", 5)) { /* never credentials: they stay in the env */
            json_t *s3 = json_pack("{s:i,s:i,s:i,s:b,s:I}", "part_size_mib",
                                   (int)(so->part_size >> 20), "concurrency", so->concurrency,
                                   "retries", so->retries, "unsigned_payload", so->unsigned_payload,
                                   "read_cache_mib", (json_int_t)(so->read_cache >> 20));
            if (so->endpoint[0])
                json_object_set_new(s3, "endpoint", json_string(so->endpoint));
            if (so->region[0])
                json_object_set_new(s3, "region", json_string(so->region));
            json_object_set_new(ck, "s3", s3);
        }
    }
    if (!strcmp(c->data_source, "megatron") || !strcmp(c->data_source, "sft")) {
        json_t *data = json_object_get(root, "data"), *p = json_array(), *w = json_array();
        for (int i = 0; i < c->data_npaths; i++) {
            json_array_append_new(p, json_string(c->data_paths[i]));
            json_array_append_new(w, json_real(c->data_weights[i]));
        }
        json_object_del(data, "synthetic_vocab");
        json_object_set_new(data, "paths", p);
        json_object_set_new(data, "weights", w);
        json_object_set_new(data, "split", json_string(c->data_split));
        if (!strcmp(c->data_source, "sft")) {
            json_object_del(data, "weights");
            json_object_set_new(data, "pack", json_boolean(c->data_pack));
        }
    }
    json_object_set_new(root, "resume", json_boolean(c->resume));
    json_object_set_new(root, "precision", json_string(gx_precision_name(c->precision)));
    json_object_set_new(root, "recompute", json_string(c->recompute ? "full" : "none"));
    json_object_set_new(optim, "global_batch", json_integer(o->global_batch));
    json_object_set_new(optim, "zero1", json_boolean(o->zero1));
    if (c->init_from[0])
        json_object_set_new(root, "init_from", json_string(c->init_from));
    train__parallel_dump(root, c);
    if (c->eval_interval_steps > 0 || c->eval_at_checkpoint)
        json_object_set_new(root, "eval",
                            json_pack("{s:i,s:i,s:b}", "interval_steps", c->eval_interval_steps,
                                      "samples", c->eval_samples, "at_checkpoint",
                                      c->eval_at_checkpoint));
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(root);
    return s;
}

bool train_cfg_ckpt_enabled(const train_cfg *c)
{
    return c->ckpt_interval_steps > 0 || c->ckpt_interval_minutes > 0;
}

void train_cfg_fingerprint(const train_cfg *c, char out[17])
{
    char *full = train_cfg_dump(c);
    json_t *j = full ? json_loads(full, 0, NULL) : NULL;
    free(full);
    static const char *const outside[] = {"threads",    "run_dir",   "log_every",
                                          "checkpoint", "resume",    "init_from",
                                          "parallel",   "eval",      "recompute", NULL};
    for (const char *const *k = outside; j && *k; k++)
        json_object_del(j, *k);
    /* bf16 changes the numbers; fp32 hashes as before precision existed, so older
     * checkpoints still resume */
    if (c->precision == GX_FP32)
        json_object_del(j, "precision");
    /* how the work is spread over ranks (or recomputed, bit for bit) does not change what is
     * computed */
    json_t *op = json_object_get(j, "optim");
    json_object_del(op, "zero1");
    if (c->optim.global_batch > 0)
        json_object_del(op, "grad_accum");
    char *canon = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(j);
    snprintf(out, 17, "%016llx",
             canon ? (unsigned long long)XXH3_64bits(canon, strlen(canon)) : 0ULL);
    free(canon);
}

grit_err train_cfg_resolve_world(train_cfg *c, int world)
{
    optim_cfg *o = &c->optim;
    grit_err rc = train_parallel_check(c, world);
    if (rc != GRIT_OK)
        return rc;
    world = train_parallel_dp(c, world); /* the batch is split over data-parallel ranks only */
    c->world = world;
    if (o->global_batch <= 0)
        return GRIT_OK;
    long per = (long)o->micro_batch * world;
    if (o->global_batch % per != 0)
        return grit_errf(GRIT_ECONFIG,
                         "optim.global_batch %d is not a multiple of micro_batch %d x %d "
                         "data-parallel ranks",
                         o->global_batch, o->micro_batch, world);
    o->grad_accum = (int)(o->global_batch / per);
    return GRIT_OK;
}
