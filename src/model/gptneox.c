/*
 * gptneox.c - decoder shapes, allocation and initialisation. The name is
 * historical: the same gx_model holds GPT-NeoX, Llama and Falcon, whose
 * tables (names, block order, presets) are in family.c. The forward/backward
 * pass is in gptneox_step.c.
 */
#include "model/gptneox.h"

#include "model/family.h"
#include "model/gx_prec.h"
#include "model/tp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/bigalloc.h"
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

const char *const gx_preset_names[] = {
    "pythia-14m",  "pythia-31m",  "pythia-70m",     "pythia-160m", "pythia-410m",
    "pythia-1b",   "llama-2-7b",  "llama-2-13b",    "llama-2-70b", "tinyllama-1.1b",
    "llama-3-8b",  "falcon-7b",   "falcon-40b",     "falcon-180b", "llama-tiny",
    "llama-70m",   "falcon-tiny", "falcon-tiny-new", "falcon-70m",  NULL};

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
    return gx__family_preset(name, cfg);
}

grit_err gx_config_check(const gx_config *c)
{
    if (c->hidden <= 0 || c->layers <= 0 || c->heads <= 0 || c->intermediate <= 0 ||
        c->vocab <= 0 || c->max_positions <= 0 || c->kv_heads < 0)
        return grit_errf(GRIT_EINVAL, "model sizes must be positive");
    if (c->hidden % c->heads != 0)
        return grit_errf(GRIT_EINVAL, "hidden_size %d is not divisible by num_heads %d",
                         c->hidden, c->heads);
    int kv = gx_kv_heads(c);
    if (c->heads % kv != 0)
        return grit_errf(GRIT_EINVAL, "num_heads %d is not a multiple of num_kv_heads %d",
                         c->heads, kv);
    if (c->qkv == GX_QKV_NEOX && kv != c->heads)
        return grit_errf(GRIT_EINVAL, "the [heads][3][head_dim] q/k/v layout needs num_kv_heads "
                                      "= num_heads %d, got %d", c->heads, kv);
    if (c->family == GX_LLAMA && c->qkv != GX_QKV_SPLIT)
        return grit_errf(GRIT_EINVAL, "llama keeps q, k and v in separate projections");
    if (c->family == GX_NEOX && (c->qkv != GX_QKV_NEOX || c->norm != GX_LAYERNORM ||
                                 c->mlp != GX_MLP_GELU || c->tied || c->shared_norm))
        return grit_errf(GRIT_EINVAL, "gpt_neox has a fused [heads][3][head_dim] q/k/v, "
                                      "LayerNorm, a GELU MLP and untied embeddings");
    if (c->shared_norm && !c->parallel_residual)
        return grit_errf(GRIT_EINVAL, "one norm per block needs a parallel residual");
    int hd = c->hidden / c->heads, rot = (int)(hd * c->rotary_pct);
    if (rot % 2 != 0)
        return grit_errf(GRIT_EINVAL,
                         "rotary dims int(head_dim %d * rotary_pct %g) = %d must be even", hd,
                         c->rotary_pct, rot);
    if (c->rope != GX_ROPE_NONE && !(c->rope_factor >= 1.0))
        return grit_errf(GRIT_EINVAL, "rope_scaling factor must be >= 1, got %g", c->rope_factor);
    if (c->rope == GX_ROPE_LLAMA3 &&
        (c->rope_orig_max <= 0 || !(c->rope_high > c->rope_low) || !(c->rope_low > 0)))
        return grit_errf(GRIT_EINVAL, "llama3 rope_scaling needs original_max_position_embeddings "
                                      "> 0 and high_freq_factor > low_freq_factor > 0");
    return GRIT_OK;
}

/* --- layout ----------------------------------------------------------------- */

/* Points w's slot for tensor t at p. */
static void bind_one(const gx_tensor *t, float *p, gx_weights *w)
{
    if (t->layer >= 0 && t->slot >= 0 && t->slot <= GX_SLOT_PROJ_B) {
        gx_layer *L = &w->layer[t->layer];
        float **slots[12] = {&L->ln1_w, &L->ln1_b, &L->ln2_w,   &L->ln2_b,
                             &L->qkv_w, &L->qkv_b, &L->dense_w, &L->dense_b,
                             &L->fc_w,  &L->fc_b,  &L->proj_w,  &L->proj_b};
        *slots[t->slot] = p;
    } else if (t->slot == GX_SLOT_EMBED)
        w->embed_in = p;
    else if (t->slot == GX_SLOT_LNF_W)
        w->lnf_w = p;
    else if (t->slot == GX_SLOT_LNF_B)
        w->lnf_b = p;
    else if (t->slot == GX_SLOT_HEAD)
        w->embed_out = p;
}

static void bind(const gx_model *m, float *base, gx_weights *w)
{
    memset(w->layer, 0, sizeof(gx_layer) * (size_t)m->nl);
    w->embed_in = w->lnf_w = w->lnf_b = w->embed_out = NULL;
    for (int i = 0; i < m->num_tensors; i++)
        bind_one(&m->tensors[i], base + m->tensors[i].offset, w);
    if (m->cfg.tied && w->embed_in) /* a last pipeline stage binds its copy as the head */
        w->embed_out = w->embed_in;
}

static void bind_range(gx_model *m, size_t off, size_t n, float *base, gx_weights *w)
{
    for (int i = 0; i < m->num_tensors; i++) {
        const gx_tensor *t = &m->tensors[i];
        if (t->offset >= off && t->offset + t->numel <= off + n)
            bind_one(t, base + (t->offset - off), w);
    }
    if (m->cfg.tied && w->embed_in)
        w->embed_out = w->embed_in;
}

void gx_bind_grads(gx_model *m, size_t off, size_t n, float *base)
{
    bind_range(m, off, n, base, &m->g);
}

void gx_bind_params(gx_model *m, size_t off, size_t n, float *base)
{
    bind_range(m, off, n, base, &m->w);
}

static void unbind(gx_model *m, gx_weights *w)
{
    memset(w->layer, 0, sizeof(gx_layer) * (size_t)m->nl);
    w->embed_in = w->lnf_w = w->lnf_b = w->embed_out = NULL;
}

grit_err gx_drop_params(gx_model *m)
{
    free(m->params);
    m->params = NULL;
    unbind(m, &m->w);
    return gx__bf16_window(m); /* bf16: its weight copy becomes the window's */
}

size_t gx_layer_bucket_max(const gx_model *m)
{
    const gx_tensor *t = m->tensors;
    size_t big = 0;
    for (int l = 0; l < m->nl; l++) {
        size_t n = gx_layer_end(m, l) - t[m->lt0 + m->tpl * l].offset;
        big = n > big ? n : big;
    }
    return big;
}

size_t gx_bucket_max(const gx_model *m)
{
    const gx_tensor *t = m->tensors;
    size_t big = gx_layer_bucket_max(m), C = (size_t)m->cfg.hidden;
    size_t piece = m->vpieces > 1 ? (size_t)m->vrows * C : 0;
    if (m->pp_rank == 0) { /* the embedding */
        size_t n = piece ? piece : t[1].offset;
        big = n > big ? n : big;
    }
    if (m->pp_rank == m->pp - 1) { /* the head */
        size_t n = m->num_params - gx_layer_end(m, m->nl - 1);
        if (piece) { /* the final norm (up to the head, the block's last tensor, or with tied
                      * embeddings the block's end), and a piece */
            size_t lnf = (m->cfg.tied ? m->num_params : t[m->num_tensors - 1].offset) -
                         gx_layer_end(m, m->nl - 1);
            n = lnf > piece ? lnf : piece;
        }
        big = n > big ? n : big;
    }
    return big;
}

int gx_vocab_pieces(size_t rows, int C, size_t bucket)
{
    size_t whole = rows * (size_t)C, rb = bucket / (size_t)(C > 0 ? C : 1);
    if (whole <= bucket || rb == 0)
        return 1;
    return (int)((rows + rb - 1) / rb);
}

grit_err gx_set_vocab_pieces(gx_model *m, int pieces)
{
    if (pieces < 1 || pieces > m->nv || m->tp != 1 || (m->cfg.tied && m->pp > 1))
        return grit_errf(GRIT_EINVAL, "vocabulary pieces %d for %d rows at tensor parallel %d%s",
                         pieces, m->nv, m->tp,
                         m->cfg.tied && m->pp > 1 ? " with tied embeddings over stages" : "");
    free(m->vstat);
    m->vstat = NULL;
    m->vpieces = pieces;
    m->vrows = (m->nv + pieces - 1) / pieces;
    if (pieces > 1 &&
        !(m->vstat = malloc(3 * sizeof(double) * (size_t)m->B * (size_t)m->T)))
        return grit_errf(GRIT_ENOMEM, "out of memory");
    return GRIT_OK;
}

void gx_release_step(gx_model *m)
{
    gx_set_precision(m, GX_FP32, NULL); /* the bf16 copies */
    free(m->act_block);
    m->act_block = NULL;
    m->act_floats = 0;
    gx_drop_grads(m);
}

void gx_drop_grads(gx_model *m)
{
    free(m->grads);
    m->grads = NULL;
    unbind(m, &m->g);
}

const gx_tensor *gx_find(const gx_model *m, const char *name)
{
    for (int i = 0; i < m->num_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0)
            return &m->tensors[i];
    return NULL;
}

size_t gx_max_numel(const gx_model *m)
{
    size_t big = 1;
    for (int i = 0; i < m->num_tensors; i++)
        big = m->tensors[i].numel > big ? m->tensors[i].numel : big;
    return big;
}

size_t gx_act_bytes_per_token(const gx_config *c)
{
    return gx_act_bytes_layout(c, 1, false); /* model/tp.c: one formula for every layout */
}

double gx_flops_per_token(const gx_config *c, int T)
{
    double C = c->hidden, H4 = c->intermediate, V = c->vocab, L = c->layers;
    double Q = (double)(c->heads + 2 * gx_kv_heads(c)) * (C / c->heads);
    double F = c->mlp == GX_MLP_SWIGLU ? 3 * H4 : 2 * H4;
    double linear = L * (Q * C + C * C + F * C) + V * C;
    double attn = L * 2.0 * C * (T + 1) / 2.0 * 2.0; /* QK^T and PV, causal half */
    return 6.0 * linear + 3.0 * attn;                /* fwd + 2x bwd */
}

/* --- allocation --------------------------------------------------------------- */

/* zeroed and pre-faulted, huge pages from 2 MiB on (core/bigalloc.h): no page faults in
 * the step loop */
static float *alloc_floats(size_t n) { return big_alloc(n * sizeof(float)); }

/* Inverse frequency of rotary pair i (of r2), with Hugging Face's rope_scaling
 * applied (modeling_rope_utils: linear, dynamic NTK for a sequence of T, llama3). */
static double rope_inv_freq(const gx_config *c, int rot, int i, int T)
{
    double base = c->rotary_base;
    if (c->rope == GX_ROPE_DYNAMIC && T > c->max_positions)
        base *= pow(c->rope_factor * T / c->max_positions - (c->rope_factor - 1.0),
                    (double)rot / (rot - 2));
    double inv = 1.0 / pow(base, (2.0 * i) / rot);
    if (c->rope == GX_ROPE_LINEAR)
        inv /= c->rope_factor;
    else if (c->rope == GX_ROPE_LLAMA3) {
        double old = c->rope_orig_max, lo_wl = old / c->rope_low, hi_wl = old / c->rope_high;
        double wl = 2.0 * 3.14159265358979323846 / inv;
        if (wl > lo_wl)
            inv /= c->rope_factor;
        else if (wl >= hi_wl) { /* medium frequencies: interpolate */
            double sm = (old / wl - c->rope_low) / (c->rope_high - c->rope_low);
            inv = (1.0 - sm) * inv / c->rope_factor + sm * inv;
        }
    }
    return inv;
}

/* The rotary tables in double, rounded once: cos/sin(pos * inv_freq_i). */
static void rope_fill(gx_model *m)
{
    const gx_config *cfg = &m->cfg;
    int T = m->T, rope_len = T > cfg->max_positions ? T : cfg->max_positions;
    int r2 = m->rot / 2;
    for (int i = 0; i < r2; i++) {
        double inv = cfg->family == GX_NEOX && cfg->rope == GX_ROPE_NONE
                         ? 1.0 / pow(cfg->rotary_base, (2.0 * i) / m->rot)
                         : rope_inv_freq(cfg, m->rot, i, T);
        for (int pos = 0; pos < rope_len; pos++) {
            m->rope_cos[(size_t)pos * r2 + i] = (float)cos(pos * inv);
            m->rope_sin[(size_t)pos * r2 + i] = (float)sin(pos * inv);
        }
    }
}

/* The activation block: counted, allocated, carved; with full recomputation one layer's
 * activations serve every layer (the backward recomputes each from its input resid[l]).
 * The rotary tables and the zeros live in it too. */
static grit_err act_alloc(gx_model *m, bool full)
{
    const gx_config *cfg = &m->cfg;
    int L = m->nl, C = cfg->hidden, H4 = m->ni, V = m->nv, hd = m->hd, T = m->T;
    size_t N = (size_t)m->B * (size_t)T, Ns = (size_t)m->ns; /* Ns: this rank's rows */
    int F = cfg->mlp == GX_MLP_SWIGLU ? 2 * H4 : H4;
    /* activation block: count, allocate, carve; the norm and residual regions (resid, ln1,
     * ln2, mid, lnf and their statistics) hold Ns rows (model/tp.h: sequence parallelism) */
    size_t NC = N * C, SC = Ns * C, NI = N * H4, NQ = N * (size_t)m->qkv_dim, NF = N * (size_t)F;
    size_t ln2 = cfg->shared_norm ? 0 : SC + 2 * Ns;
    size_t NA = N * (size_t)m->nh * (size_t)hd; /* attention output of this rank's heads */
    size_t per_layer = SC + 2 * Ns + NQ + NA + N * (size_t)m->nh + ln2 + NF + NI;
    if (!cfg->parallel_residual)
        per_layer += SC;
    size_t att_scr = (size_t)op_attention_scratch_floats(T, m->nthreads);
    int rope_len = T > cfg->max_positions ? T : cfg->max_positions;
    size_t rope = (size_t)rope_len * (size_t)(m->rot / 2);
    size_t nz = (size_t)(m->qkv_dim > F ? m->qkv_dim : F);
    nz = nz > (size_t)C ? nz : (size_t)C;
    /* scratch: dres dln datt [N C], dtmp [Ns C], dqkv, dfc; the forward's otmp of its own
     * under recompute (else dtmp); sequence parallel: lnx [N C], dln_l datt_l [Ns C],
     * nrm_g [4 C] (dyf and otmp are dres, o_l is dln_l: never live at the same time) */
    size_t scratch = 3 * NC + SC + NQ + NF + (!m->sp && full ? NC : 0) +
                     (m->sp ? NC + 2 * SC + 4 * (size_t)C : 0);
    size_t total = (size_t)(L + 1) * SC + (size_t)(full ? 1 : L) * per_layer + SC + 2 * Ns /* lnf */ +
                   scratch + (size_t)m->chunk * V + 3 * (size_t)m->chunk + N /* losses */ +
                   2 * N /* token ids */ + att_scr + 2 * rope + nz + 64;
    /* replicated kv heads: the gradient sum's [kv, N, 2 hd] (model/tp.h) */
    size_t kvb = m->kv_rep > 1 ? N * 2 * (size_t)hd * (size_t)gx_kv_heads(cfg) : 0;
    total += kvb;
    free(m->act_block); /* first: the peak is one block, not two */
    float *blk = m->act_block = alloc_floats(total);
    if (!blk)
        return GRIT_ENOMEM;
    m->act_floats = total;
    float *p = m->act_block;
#define TAKE(n) (p += (n), p - (n))
    for (int l = 0; l <= L; l++)
        m->resid[l] = TAKE(SC);
    for (int l = 0; l < (full ? 1 : L); l++) {
        gx_layer_acts *a = &m->acts[l];
        a->ln1 = TAKE(SC);
        a->ln1_mean = TAKE(Ns);
        a->ln1_rstd = TAKE(Ns);
        a->qkv = TAKE(NQ);
        a->att = TAKE(NA);
        a->lse = TAKE(N * (size_t)m->nh);
        a->mid = cfg->parallel_residual ? NULL : TAKE(SC);
        if (cfg->shared_norm) {
            a->ln2 = a->ln1;
            a->ln2_mean = a->ln1_mean;
            a->ln2_rstd = a->ln1_rstd;
        } else {
            a->ln2 = TAKE(SC);
            a->ln2_mean = TAKE(Ns);
            a->ln2_rstd = TAKE(Ns);
        }
        a->fc = TAKE(NF);
        a->gelu = TAKE(NI);
    }
    m->lnf = TAKE(SC);
    m->lnf_mean = TAKE(Ns);
    m->lnf_rstd = TAKE(Ns);
    m->dres = TAKE(NC);
    m->dtmp = TAKE(SC);
    if (m->sp) {
        /* dres is the head's alone (its backward's partial sums, reduce-scattered into dln_l
         * before any layer's backward): the gathered dy and the forward's scratch reuse it;
         * the forward's reduce-scattered rows reuse dln_l (the backward's, per layer) */
        m->lnx = TAKE(NC);
        m->dyf = m->dres;
        m->dln_l = TAKE(SC);
        m->datt_l = TAKE(SC);
        m->o_l = m->dln_l;
        m->nrm_g = TAKE(4 * (size_t)C);
    }
    /* the forward's scratch: dtmp is the backward's dy (kept across layers under recompute);
     * sequence parallel: dres (above) */
    m->otmp = m->sp ? m->dres : full ? TAKE(NC) : m->dtmp;
    m->dln = TAKE(NC);
    m->datt = TAKE(NC);
    m->dqkv = TAKE(NQ);
    m->dfc = TAKE(NF);
    m->logits = TAKE((size_t)m->chunk * V);
    m->tp_tmp = TAKE(3 * (size_t)m->chunk);
    m->losses = TAKE(N);
    m->inp = (int32_t *)TAKE(N);
    m->tgt = (int32_t *)TAKE(N);
    m->att_scratch = TAKE(att_scr);
    m->rope_cos = TAKE(rope);
    m->rope_sin = TAKE(rope);
    m->zeros = TAKE(nz);
    m->kv_buf = kvb ? TAKE(kvb) : NULL;
#undef TAKE
    for (int l = 1; full && l < L; l++) /* one layer's activations, recomputed per layer */
        m->acts[l] = m->acts[0];
    m->recompute = full;
    rope_fill(m);
    return GRIT_OK;
}

grit_err gx_set_recompute(gx_model *m, bool full)
{
    if (m->prec != GX_FP32)
        return grit_errf(GRIT_EINVAL, "gx_set_recompute: call it before gx_set_precision");
    if (full == m->recompute)
        return GRIT_OK;
    if (act_alloc(m, full) != GRIT_OK)
        return grit_errf(GRIT_ENOMEM, "out of memory allocating the activations");
    return GRIT_OK;
}

grit_err gx_init(gx_model *m, const gx_config *cfg, int B, int T, int nthreads)
{
    return gx_init_tp(m, cfg, B, T, nthreads, 1, 0);
}

grit_err gx_init_tp(gx_model *m, const gx_config *cfg, int B, int T, int nthreads, int tp,
                    int tp_rank)
{
    return gx_init_tp_rc(m, cfg, B, T, nthreads, tp, tp_rank, false);
}

grit_err gx_init_tp_rc(gx_model *m, const gx_config *cfg, int B, int T, int nthreads, int tp,
                       int tp_rank, bool recompute)
{
    return gx_init_stage(m, cfg, B, T, nthreads, tp, tp_rank, recompute, 1, 0);
}

grit_err gx_init_stage(gx_model *m, const gx_config *cfg, int B, int T, int nthreads, int tp,
                       int tp_rank, bool recompute, int pp, int pp_rank)
{
    return gx_init_stage_f(m, cfg, B, T, nthreads, tp, tp_rank, recompute, pp, pp_rank, 0);
}

grit_err gx_init_stage_f(gx_model *m, const gx_config *cfg, int B, int T, int nthreads, int tp,
                         int tp_rank, bool recompute, int pp, int pp_rank, unsigned flags)
{
    memset(m, 0, sizeof *m);
    grit_err rc = gx_config_check(cfg);
    if (rc != GRIT_OK)
        return rc;
    if ((rc = gx_tp_check(cfg, tp)) != GRIT_OK)
        return rc;
    if (tp_rank < 0 || tp_rank >= tp)
        return grit_errf(GRIT_EINVAL, "tensor-parallel rank %d outside [0, %d)", tp_rank, tp);
    if (pp < 1 || pp_rank < 0 || pp_rank >= pp)
        return grit_errf(GRIT_EINVAL, "pipeline stage %d outside [0, %d)", pp_rank, pp);
    if (cfg->layers % pp != 0)
        return grit_errf(GRIT_EINVAL, "num_layers %d is not divisible by %d pipeline stages",
                         cfg->layers, pp);
    if (B <= 0 || T <= 0 || (T > cfg->max_positions && cfg->rope != GX_ROPE_DYNAMIC))
        return grit_errf(GRIT_EINVAL, "seq_len %d must be in [1, max_positions %d]", T,
                         cfg->max_positions);
    bool sp = (flags & GX_SEQ_PAR) && tp > 1;
    if (sp && ((size_t)B * (size_t)T) % (size_t)tp)
        return grit_errf(GRIT_EINVAL, "sequence parallel: micro batch %d x seq_len %d = %zu "
                         "token rows is not divisible by tensor parallel %d", B, T,
                         (size_t)B * (size_t)T, tp);
    /* a stage's estimate: its layers, and (conservatively) the embedding and head */
    gx_config sc = *cfg;
    sc.layers = cfg->layers / pp;
    size_t need = gx_tp_memory_estimate_sp(&sc, B, T, tp, recompute, sp), have = big_mem_available();
    size_t np_est = gx_tp_param_count(&sc, tp), lean = 0; /* blocks ZeRO keeps elsewhere */
    lean += flags & GX_NO_PARAMS ? 4 * np_est : 0;
    lean += flags & GX_NO_GRADS ? 4 * np_est : 0;
    lean += flags & GX_NO_OPTIM ? 8 * np_est : 0;
    need = need > lean ? need - lean : 0;
    if (have && need > have)
        return grit_errf(GRIT_ENOMEM, "%s model of %.2fB parameters needs about %.1f GiB for "
                         "weights, gradients, AdamW state and activations (micro-batch %d x %d); "
                         "%.1f GiB is available",
                         gx_family_name(cfg->family), gx_tp_param_count(cfg, tp) / 1e9,
                         need / 1073741824.0, B, T, have / 1073741824.0);
    m->cfg = *cfg;
    m->B = B;
    m->T = T;
    m->nthreads = nthreads > 0 ? nthreads : 1;
    /* this rank's share of heads, MLP columns and vocabulary (all of it at tp 1) */
    m->tp = tp;
    m->tp_rank = tp_rank;
    m->hd = cfg->hidden / cfg->heads;
    m->nh = cfg->heads / tp;
    m->nkv = gx_tp_kv_local(cfg, tp);
    m->kv_head = gx_tp_kv_head0(cfg, tp, tp_rank);
    m->kv_rep = gx_tp_kv_rep(cfg, tp);
    m->ni = cfg->intermediate / tp;
    m->nv = cfg->vocab / tp;
    m->v0 = tp_rank * m->nv;
    m->lay = gx__qkv_layout(cfg->qkv, m->nh, m->nkv, m->hd);
    m->pp = pp;
    m->pp_rank = pp_rank;
    gx__stage_span(m);
    int L = m->nl, hd = m->hd, kv = m->nkv;
    size_t N = (size_t)B * T;
    m->sp = sp;
    m->ns = sp ? (int)(N / (size_t)tp) : (int)N;
    m->s0 = sp ? tp_rank * m->ns : 0;
    m->rot = (int)(hd * cfg->rotary_pct);
    m->chunk = N < 512 ? (int)N : 512;
    m->qkv_dim = (m->nh + 2 * kv) * hd;
    int nt = gx__num_tensors(cfg); /* the whole decoder's: a stage uses fewer */

    m->tensors = calloc((size_t)nt, sizeof *m->tensors);
    m->w.layer = calloc((size_t)L, sizeof(gx_layer));
    m->g.layer = calloc((size_t)L, sizeof(gx_layer));
    m->resid = calloc((size_t)L + 1, sizeof(float *));
    m->acts = calloc((size_t)L, sizeof(gx_layer_acts));
    if (!m->tensors || !m->w.layer || !m->g.layer || !m->resid || !m->acts)
        goto oom;
    gx__build_layout(m);
    m->tpl = gx__tensors_per_layer(cfg);
    m->params = flags & GX_NO_PARAMS ? NULL : alloc_floats(m->num_params);
    m->grads = flags & GX_NO_GRADS ? NULL : alloc_floats(m->num_params);
    m->adam_m = flags & GX_NO_OPTIM ? NULL : alloc_floats(m->num_params);
    m->adam_v = flags & GX_NO_OPTIM ? NULL : alloc_floats(m->num_params);
    if ((!(flags & GX_NO_PARAMS) && !m->params) || (!(flags & GX_NO_GRADS) && !m->grads) ||
        (!(flags & GX_NO_OPTIM) && (!m->adam_m || !m->adam_v)))
        goto oom;
    if (m->params) /* else the pointers stay NULL until a window is bound */
        bind(m, m->params, &m->w);
    if (m->grads)
        bind(m, m->grads, &m->g);

    if (act_alloc(m, recompute) != GRIT_OK)
        goto oom;
    return GRIT_OK;
oom:
    gx_free(m);
    return grit_errf(GRIT_ENOMEM, "out of memory allocating the model");
}

void gx_free(gx_model *m)
{
    if (!m)
        return;
    gx_set_precision(m, GX_FP32, NULL); /* frees the bf16 copies */
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
    free(m->vstat);
    memset(m, 0, sizeof *m);
}

/* Tensor i's index in the whole decoder's table (a pipeline stage's table starts at its
 * first layer, or holds the embedding and then its layers). */
static int global_index(const gx_model *m, int i)
{
    if (m->tensors[i].tied_copy) /* the embedding's values */
        return 0;
    return i < m->lt0 ? i : i - m->lt0 + 1 + m->tpl * m->l0;
}

/* The whole Hugging Face tensor's stream of initial values, read at non-decreasing flat
 * positions: Box-Muller pairs (k, k + 1) drawn in order, a pair that holds no position read
 * only advanced (two xoshiro steps, no logarithm or cosine), the last pair kept for a
 * position in it read after its neighbour. */
typedef struct init_stream {
    rng_t r;
    size_t k; /* the next pair's first position (even) */
    double z[2], std;
} init_stream;

static float stream_at(init_stream *s, size_t p)
{
    while (s->k + 2 <= p) { /* pair [k, k + 1] wholly before p */
        rng_next(&s->r);
        rng_next(&s->r);
        s->k += 2;
    }
    if (p >= s->k) {
        rng_normal2(&s->r, &s->z[0], &s->z[1]);
        s->k += 2;
    }
    return (float)(s->std * s->z[p - (s->k - 2)]);
}

/* Tensor i's initial values for its local elements [lo, hi) (this rank's slice, numbered as
 * the block holds it) into out[0 .. hi - lo): the whole tensor's own stream, numbered by
 * the tensor's place in the whole decoder, so every layout draws the same values, without a
 * buffer for the whole tensor (a tensor-parallel rank reads its slice's runs, in the whole
 * tensor's order). */
static void init_slice(const gx_model *m, int i, uint64_t seed, size_t lo, size_t hi, float *out)
{
    const gx_config *c = &m->cfg;
    const gx_tensor *t = &m->tensors[i];
    const char *nm = t->name;
    if (t->ndim == 1) {
        float v = t->norm_weight ? 1.0f : 0.0f;
        for (size_t k = lo; k < hi; k++)
            out[k - lo] = v;
        return;
    }
    double small = sqrt(2.0 / (5.0 * c->hidden));
    double wang = 2.0 / (c->layers * sqrt((double)c->hidden));
    bool out_layer = strstr(nm, "attention.dense.weight") || strstr(nm, "dense_4h_to_h.weight");
    init_stream st = {.std = c->family != GX_NEOX ? (c->init_std > 0 ? c->init_std : 0.02)
                             : out_layer            ? wang
                                                    : small};
    rng_seed(&st.r, seed, (uint64_t)global_index(m, i) + 1);
    /* runs {global flat start, local flat start, count}, in the whole tensor's order */
    size_t cols = (size_t)t->shape[1], gcols = t->split < 0 ? cols : (size_t)t->gshape[1];
    int ns = t->split < 0 ? 1 : t->nseg, ord[3] = {0, 1, 2};
    for (int x = 1; x < ns; x++) /* segments by global start */
        for (int y = x; y > 0 && t->seg[ord[y]][0] < t->seg[ord[y - 1]][0]; y--) {
            int tmp = ord[y];
            ord[y] = ord[y - 1];
            ord[y - 1] = tmp;
        }
    size_t rows = t->split == 1 ? (size_t)t->shape[0] : 1; /* column slices: runs per row */
    for (size_t r = 0; r < rows; r++)
        for (int x = 0; x < ns; x++) {
            size_t g, l, n;
            if (t->split < 0)
                g = 0, l = 0, n = t->numel;
            else if (t->split == 0) {
                const int *sg = t->seg[ord[x]];
                g = (size_t)sg[0] * cols, l = (size_t)sg[1] * cols, n = (size_t)sg[2] * cols;
            } else {
                const int *sg = t->seg[ord[x]];
                g = r * gcols + (size_t)sg[0], l = r * cols + (size_t)sg[1], n = (size_t)sg[2];
            }
            size_t a = l > lo ? l : lo, b = l + n < hi ? l + n : hi;
            for (size_t q = a; q < b; q++)
                out[q - lo] = stream_at(&st, g + (q - l));
        }
}

void gx_init_weights_range(const gx_model *m, uint64_t seed, size_t lo, size_t hi, float *out)
{
    /* the tensors overlapping [lo, hi), each from its own stream */
#pragma omp parallel for schedule(dynamic)
    for (int i = 0; i < m->num_tensors; i++) {
        const gx_tensor *t = &m->tensors[i];
        size_t a = t->offset > lo ? t->offset : lo;
        size_t b = t->offset + t->numel < hi ? t->offset + t->numel : hi;
        if (a < b)
            init_slice(m, i, seed, a - t->offset, b - t->offset, out + (a - lo));
    }
}

void gx_init_weights(gx_model *m, uint64_t seed)
{
    /* each tensor draws from its own stream (seed, index), so tensors can be filled in
     * parallel and in any order with the same result; a tensor-parallel rank reads its
     * slice of the whole tensor's stream, so every layout starts from the same weights */
#pragma omp parallel for schedule(dynamic)
    for (int i = 0; i < m->num_tensors; i++)
        init_slice(m, i, seed, 0, m->tensors[i].numel, m->params + m->tensors[i].offset);
}

void gx_zero_grad(gx_model *m)
{
    if (m->grads) /* NULL: gradient windows (gx_drop_grads), zeroed per bucket */
        memset(m->grads, 0, m->num_params * sizeof(float));
}

void gx_drop_optim_state(gx_model *m)
{
    free(m->adam_m);
    free(m->adam_v);
    m->adam_m = m->adam_v = NULL;
}
