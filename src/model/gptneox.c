/*
 * gptneox.c - GPT-NeoX shapes, parameter layout, allocation and Pythia init.
 * The forward/backward pass is in gptneox_step.c.
 */
#include "model/gptneox.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

typedef struct preset {
    const char *name;
    int hidden, layers, heads, intermediate;
} preset;

/* Shapes of EleutherAI's Pythia suite (config.json of each model). */
static const preset presets[] = {
    {"pythia-14m", 128, 6, 4, 512},     {"pythia-31m", 256, 6, 8, 1024},
    {"pythia-70m", 512, 6, 8, 2048},    {"pythia-160m", 768, 12, 12, 3072},
    {"pythia-410m", 1024, 24, 16, 4096}, {"pythia-1b", 2048, 16, 8, 8192},
};

const char *const gx_preset_names[] = {"pythia-14m",  "pythia-31m",  "pythia-70m",
                                       "pythia-160m", "pythia-410m", "pythia-1b",
                                       NULL};

grit_err gx_preset(const char *name, gx_config *cfg)
{
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (strcmp(presets[i].name, name) != 0)
            continue;
        *cfg = (gx_config){
            .hidden = presets[i].hidden,
            .layers = presets[i].layers,
            .heads = presets[i].heads,
            .intermediate = presets[i].intermediate,
            .vocab = 50304, /* 50277 tokens padded to a multiple of 128 */
            .max_positions = 2048,
            .rotary_pct = 0.25,
            .rotary_base = 10000.0,
            .ln_eps = 1e-5,
            .act = OP_GELU,
            .parallel_residual = true,
        };
        return GRIT_OK;
    }
    return grit_errf(GRIT_ENOTFOUND, "unknown model preset '%s'", name);
}

grit_err gx_config_check(const gx_config *c)
{
    if (c->hidden <= 0 || c->layers <= 0 || c->heads <= 0 || c->intermediate <= 0 ||
        c->vocab <= 0 || c->max_positions <= 0)
        return grit_errf(GRIT_EINVAL, "model sizes must be positive");
    if (c->hidden % c->heads != 0)
        return grit_errf(GRIT_EINVAL, "hidden_size %d is not divisible by num_heads %d",
                         c->hidden, c->heads);
    int hd = c->hidden / c->heads, rot = (int)(hd * c->rotary_pct);
    if (rot % 2 != 0)
        return grit_errf(GRIT_EINVAL,
                         "rotary dims int(head_dim %d * rotary_pct %g) = %d must be even", hd,
                         c->rotary_pct, rot);
    return GRIT_OK;
}

/* --- layout ----------------------------------------------------------------- */

static void add_tensor(gx_model *m, size_t *off, const char *name, int d0, int d1, bool decay)
{
    gx_tensor *t = &m->tensors[m->num_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->offset = *off;
    t->ndim = d1 > 0 ? 2 : 1;
    t->shape[0] = d0;
    t->shape[1] = d1 > 0 ? d1 : 0;
    t->numel = (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1);
    t->decay = decay;
    /* keep every tensor 64-byte aligned for the vector kernels */
    *off += (t->numel + 15) & ~(size_t)15;
}

static void build_layout(gx_model *m)
{
    const gx_config *c = &m->cfg;
    int C = c->hidden, H4 = c->intermediate, V = c->vocab;
    size_t off = 0;
    char nm[96];
    add_tensor(m, &off, "gpt_neox.embed_in.weight", V, C, true);
    for (int l = 0; l < c->layers; l++) {
#define LT(suffix, d0, d1, decay)                                                  \
    snprintf(nm, sizeof nm, "gpt_neox.layers.%d.%s", l, suffix);                    \
    add_tensor(m, &off, nm, d0, d1, decay)
        LT("input_layernorm.weight", C, 0, false);
        LT("input_layernorm.bias", C, 0, false);
        LT("post_attention_layernorm.weight", C, 0, false);
        LT("post_attention_layernorm.bias", C, 0, false);
        LT("attention.query_key_value.weight", 3 * C, C, true);
        LT("attention.query_key_value.bias", 3 * C, 0, false);
        LT("attention.dense.weight", C, C, true);
        LT("attention.dense.bias", C, 0, false);
        LT("mlp.dense_h_to_4h.weight", H4, C, true);
        LT("mlp.dense_h_to_4h.bias", H4, 0, false);
        LT("mlp.dense_4h_to_h.weight", C, H4, true);
        LT("mlp.dense_4h_to_h.bias", C, 0, false);
#undef LT
    }
    add_tensor(m, &off, "gpt_neox.final_layer_norm.weight", C, 0, false);
    add_tensor(m, &off, "gpt_neox.final_layer_norm.bias", C, 0, false);
    add_tensor(m, &off, "embed_out.weight", V, C, true);
    m->num_params = off;
}

static void bind(const gx_model *m, float *base, gx_weights *w)
{
    const gx_tensor *t = m->tensors;
    w->embed_in = base + t[0].offset;
    for (int l = 0; l < m->cfg.layers; l++) {
        const gx_tensor *lt = t + 1 + 12 * l;
        gx_layer *L = &w->layer[l];
        float **slots[12] = {&L->ln1_w,   &L->ln1_b, &L->ln2_w,   &L->ln2_b,
                             &L->qkv_w,   &L->qkv_b, &L->dense_w, &L->dense_b,
                             &L->fc_w,    &L->fc_b,  &L->proj_w,  &L->proj_b};
        for (int i = 0; i < 12; i++)
            *slots[i] = base + lt[i].offset;
    }
    int k = 1 + 12 * m->cfg.layers;
    w->lnf_w = base + t[k].offset;
    w->lnf_b = base + t[k + 1].offset;
    w->embed_out = base + t[k + 2].offset;
}

const gx_tensor *gx_find(const gx_model *m, const char *name)
{
    for (int i = 0; i < m->num_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0)
            return &m->tensors[i];
    return NULL;
}

size_t gx_act_bytes_per_token(const gx_config *c)
{
    size_t C = (size_t)c->hidden, H4 = (size_t)c->intermediate;
    size_t per_layer = C + 2 + 3 * C + C + (size_t)c->heads + C + 2 + 2 * H4 + C /* resid */;
    if (!c->parallel_residual)
        per_layer += C;
    size_t scratch = 4 * C + 3 * C + H4 + 2; /* backward buffers, ids */
    return 4 * ((size_t)c->layers * per_layer + C /* embeddings */ + C + 2 /* final ln */ +
                scratch);
}

double gx_flops_per_token(const gx_config *c, int T)
{
    double C = c->hidden, H4 = c->intermediate, V = c->vocab, L = c->layers;
    double linear = L * (3 * C * C + C * C + 2 * C * H4) + V * C;
    double attn = L * 2.0 * C * (T + 1) / 2.0 * 2.0; /* QK^T and PV, causal half */
    return 6.0 * linear + 3.0 * attn;                /* fwd + 2x bwd */
}

/* --- allocation --------------------------------------------------------------- */

static float *alloc_floats(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, (n ? n : 1) * sizeof(float)) != 0)
        return NULL;
    memset(p, 0, n * sizeof(float));
    return p;
}

grit_err gx_init(gx_model *m, const gx_config *cfg, int B, int T, int nthreads)
{
    memset(m, 0, sizeof *m);
    grit_err rc = gx_config_check(cfg);
    if (rc != GRIT_OK)
        return rc;
    if (B <= 0 || T <= 0 || T > cfg->max_positions)
        return grit_errf(GRIT_EINVAL, "seq_len %d must be in [1, max_positions %d]", T,
                         cfg->max_positions);
    m->cfg = *cfg;
    m->B = B;
    m->T = T;
    m->nthreads = nthreads > 0 ? nthreads : 1;
    int L = cfg->layers, C = cfg->hidden, H4 = cfg->intermediate, V = cfg->vocab;
    int hd = C / cfg->heads;
    size_t N = (size_t)B * T;
    m->rot = (int)(hd * cfg->rotary_pct);
    m->chunk = N < 512 ? (int)N : 512;

    m->tensors = calloc((size_t)(4 + 12 * L), sizeof *m->tensors);
    m->w.layer = calloc((size_t)L, sizeof(gx_layer));
    m->g.layer = calloc((size_t)L, sizeof(gx_layer));
    m->resid = calloc((size_t)L + 1, sizeof(float *));
    m->acts = calloc((size_t)L, sizeof(gx_layer_acts));
    if (!m->tensors || !m->w.layer || !m->g.layer || !m->resid || !m->acts)
        goto oom;
    build_layout(m);
    m->params = alloc_floats(m->num_params);
    m->grads = alloc_floats(m->num_params);
    m->adam_m = alloc_floats(m->num_params);
    m->adam_v = alloc_floats(m->num_params);
    if (!m->params || !m->grads || !m->adam_m || !m->adam_v)
        goto oom;
    bind(m, m->params, &m->w);
    bind(m, m->grads, &m->g);

    /* activation block: count, allocate, carve */
    size_t NC = N * C, NI = N * H4;
    size_t per_layer = NC + 2 * N + 3 * NC + NC + N * cfg->heads / 1 + NC + 2 * N + 2 * NI;
    if (!cfg->parallel_residual)
        per_layer += NC;
    size_t att_scr = (size_t)op_attention_scratch_floats(T, m->nthreads);
    size_t rope = (size_t)cfg->max_positions * (size_t)(m->rot / 2);
    size_t total = (size_t)(L + 1) * NC + (size_t)L * per_layer + NC + 2 * N /* lnf */ +
                   4 * NC + 3 * NC + NI /* dres dtmp dln datt dqkv dfc */ +
                   (size_t)m->chunk * V + N /* losses */ + 2 * N /* token ids */ + att_scr +
                   2 * rope + 64;
    m->act_block = alloc_floats(total);
    if (!m->act_block)
        goto oom;
    m->act_floats = total;
    float *p = m->act_block;
#define TAKE(n) (p += (n), p - (n))
    for (int l = 0; l <= L; l++)
        m->resid[l] = TAKE(NC);
    for (int l = 0; l < L; l++) {
        gx_layer_acts *a = &m->acts[l];
        a->ln1 = TAKE(NC);
        a->ln1_mean = TAKE(N);
        a->ln1_rstd = TAKE(N);
        a->qkv = TAKE(3 * NC);
        a->att = TAKE(NC);
        a->lse = TAKE(N * (size_t)cfg->heads);
        a->mid = cfg->parallel_residual ? NULL : TAKE(NC);
        a->ln2 = TAKE(NC);
        a->ln2_mean = TAKE(N);
        a->ln2_rstd = TAKE(N);
        a->fc = TAKE(NI);
        a->gelu = TAKE(NI);
    }
    m->lnf = TAKE(NC);
    m->lnf_mean = TAKE(N);
    m->lnf_rstd = TAKE(N);
    m->dres = TAKE(NC);
    m->dtmp = TAKE(NC);
    m->dln = TAKE(NC);
    m->datt = TAKE(NC);
    m->dqkv = TAKE(3 * NC);
    m->dfc = TAKE(NI);
    m->logits = TAKE((size_t)m->chunk * V);
    m->losses = TAKE(N);
    m->inp = (int32_t *)TAKE(N);
    m->tgt = (int32_t *)TAKE(N);
    m->att_scratch = TAKE(att_scr);
    m->rope_cos = TAKE(rope);
    m->rope_sin = TAKE(rope);
#undef TAKE
    /* rotary tables in double, rounded once: cos/sin(pos * base^(-2i/rot)) */
    int r2 = m->rot / 2;
    for (int pos = 0; pos < cfg->max_positions; pos++)
        for (int i = 0; i < r2; i++) {
            double inv = 1.0 / pow(cfg->rotary_base, (2.0 * i) / m->rot);
            m->rope_cos[(size_t)pos * r2 + i] = (float)cos(pos * inv);
            m->rope_sin[(size_t)pos * r2 + i] = (float)sin(pos * inv);
        }
    return GRIT_OK;
oom:
    gx_free(m);
    return grit_errf(GRIT_ENOMEM, "out of memory allocating the model");
}

void gx_free(gx_model *m)
{
    if (!m)
        return;
    free(m->tensors);
    free(m->w.layer);
    free(m->g.layer);
    free(m->resid);
    free(m->acts);
    free(m->params);
    free(m->grads);
    free(m->adam_m);
    free(m->adam_v);
    free(m->act_block);
    memset(m, 0, sizeof *m);
}

void gx_init_weights(gx_model *m, uint64_t seed)
{
    const gx_config *c = &m->cfg;
    double small = sqrt(2.0 / (5.0 * c->hidden));
    double wang = 2.0 / (c->layers * sqrt((double)c->hidden));
    /* each tensor draws from its own stream (seed, index), so tensors can be filled in
     * parallel and in any order with the same result */
#pragma omp parallel for schedule(dynamic)
    for (int i = 0; i < m->num_tensors; i++) {
        const gx_tensor *t = &m->tensors[i];
        float *p = m->params + t->offset;
        const char *nm = t->name;
        if (t->ndim == 1) {
            float v = strstr(nm, "layernorm.weight") || strstr(nm, "layer_norm.weight") ? 1.0f
                                                                                      : 0.0f;
            for (size_t k = 0; k < t->numel; k++)
                p[k] = v;
            continue;
        }
        bool out_layer = strstr(nm, "attention.dense.weight") || strstr(nm, "dense_4h_to_h.weight");
        double std = out_layer ? wang : small;
        rng_t r;
        rng_seed(&r, seed, (uint64_t)i + 1);
        for (size_t k = 0; k < t->numel; k += 2) {
            double z1, z2;
            rng_normal2(&r, &z1, &z2);
            p[k] = (float)(std * z1);
            if (k + 1 < t->numel)
                p[k + 1] = (float)(std * z2);
        }
    }
}

void gx_zero_grad(gx_model *m) { memset(m->grads, 0, m->num_params * sizeof(float)); }

void gx_drop_optim_state(gx_model *m)
{
    free(m->adam_m);
    free(m->adam_v);
    m->adam_m = m->adam_v = NULL;
}
