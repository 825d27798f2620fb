/*
 * family.c - the family tables: Hugging Face names and block order, the fused
 * q/k/v layouts, presets of published shapes, parameter and memory counts.
 * See family.h.
 */
#include "model/family.h"

#include <stdio.h>
#include <string.h>

static const char *const fam_names[] = {"gpt_neox", "llama", "falcon"};

const char *gx_family_name(gx_family f)
{
    return f >= GX_NEOX && f <= GX_FALCON ? fam_names[f] : "?";
}

grit_err gx_family_parse(const char *name, gx_family *out)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, fam_names[i])) {
            *out = (gx_family)i;
            return GRIT_OK;
        }
    return grit_errf(GRIT_EINVAL, "unknown model family '%s' (expected gpt_neox, llama or "
                                  "falcon)", name);
}

op_qkv_layout gx__qkv_layout(gx_qkv qkv, int H, int kv, int hd)
{
    switch (qkv) {
    case GX_QKV_SPLIT:
        return (op_qkv_layout){.ld = (H + 2 * kv) * hd, .group = H / kv, .q_gstride = H / kv * hd,
                               .k_base = H * hd, .v_base = (H + kv) * hd, .kv_stride = hd};
    case GX_QKV_GROUPED: {
        int G = H / kv;
        return (op_qkv_layout){.ld = (H + 2 * kv) * hd, .group = G, .q_gstride = (G + 2) * hd,
                               .k_base = G * hd, .v_base = (G + 1) * hd,
                               .kv_stride = (G + 2) * hd};
    }
    default:
        return op_qkv_neox(H, hd);
    }
}

op_qkv_layout gx_qkv_layout(const gx_config *c)
{
    return gx__qkv_layout(c->qkv, c->heads, gx_kv_heads(c), c->hidden / c->heads);
}

/* --- layout --------------------------------------------------------------------- */

typedef struct names {
    const char *embed, *layer, *final_norm, *head;
    const char *ln1, *ln2;   /* base names (".weight"/".bias" appended) */
    const char *qkv[3];      /* one fused name, or q, k, v */
    const char *dense, *fc[2], *proj;
} names;

static names family_names(const gx_config *c)
{
    switch (c->family) {
    case GX_LLAMA:
        return (names){"model.embed_tokens.weight", "model.layers.%d.", "model.norm",
                       "lm_head.weight", "input_layernorm", "post_attention_layernorm",
                       {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"},
                       "self_attn.o_proj", {"mlp.gate_proj", "mlp.up_proj"}, "mlp.down_proj"};
    case GX_FALCON: {
        names n = {"transformer.word_embeddings.weight", "transformer.h.%d.", "transformer.ln_f",
                   "lm_head.weight", "input_layernorm", "post_attention_layernorm",
                   {"self_attention.query_key_value", NULL, NULL}, "self_attention.dense",
                   {"mlp.dense_h_to_4h", NULL}, "mlp.dense_4h_to_h"};
        if (c->shared_norm)
            n.ln2 = NULL;
        else if (c->parallel_residual) {
            n.ln1 = "ln_attn";
            n.ln2 = "ln_mlp";
        }
        return n;
    }
    default:
        return (names){"gpt_neox.embed_in.weight", "gpt_neox.layers.%d.",
                       "gpt_neox.final_layer_norm", "embed_out.weight", "input_layernorm",
                       "post_attention_layernorm", {"attention.query_key_value", NULL, NULL},
                       "attention.dense", {"mlp.dense_h_to_4h", NULL}, "mlp.dense_4h_to_h"};
    }
}

typedef struct builder {
    gx_model *m;
    size_t off;
    int layer;
    char prefix[48];
} builder;

/* pad: round the block offset up to 16 floats after this tensor (64-byte
 * alignment); off for a tensor the next one continues (q_proj before k_proj). */
static void add(builder *b, const char *base, const char *suffix, int d0, int d1, bool decay,
                int slot, bool pad)
{
    gx_model *m = b->m;
    gx_tensor *t = &m->tensors[m->num_tensors++];
    if (b->layer >= 0)
        snprintf(t->name, sizeof t->name, "%s%s%s", b->prefix, base, suffix);
    else
        snprintf(t->name, sizeof t->name, "%s%s", base, suffix);
    t->offset = b->off;
    t->ndim = d1 > 0 ? 2 : 1;
    t->shape[0] = d0;
    t->shape[1] = d1 > 0 ? d1 : 0;
    t->numel = (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1);
    t->decay = decay;
    t->slot = (signed char)slot;
    t->layer = b->layer;
    t->norm_weight = false;
    t->gshape[0] = t->shape[0];
    t->gshape[1] = t->shape[1];
    t->split = -1;
    t->nseg = 0;
    t->kv_copy = 0;
    t->tied_copy = false;
    b->off += pad ? (t->numel + 15) & ~(size_t)15 : t->numel;
}

static void add_norm(builder *b, const gx_config *c, const char *base, int slot_w)
{
    int C = c->hidden;
    add(b, base, ".weight", C, 0, false, slot_w, true);
    b->m->tensors[b->m->num_tensors - 1].norm_weight = true;
    if (c->norm == GX_LAYERNORM)
        add(b, base, ".bias", C, 0, false, slot_w + 1, true);
}

/* A projection of `rows` outputs, split over parts[] (rows[] each) stored back to back. */
static void add_proj(builder *b, const char *const *parts, const int *rows, int nparts, int in,
                     bool bias, int slot_w)
{
    for (int i = 0; i < nparts; i++)
        add(b, parts[i], ".weight", rows[i], in, true, i ? GX_SLOT_NONE : slot_w,
            i == nparts - 1);
    if (bias)
        for (int i = 0; i < nparts; i++)
            add(b, parts[i], ".bias", rows[i], 0, false, i ? GX_SLOT_NONE : slot_w + 1,
                i == nparts - 1);
}

/* Tensor parallelism: tensors [first, num_tensors) were added as nparts parts
 * (weights, then biases) each holding this rank's run of gsize[part] along dim,
 * from g0[part]; 1-D tensors of a column split (row-parallel biases) stay whole. */
static void slice_parts(builder *b, int first, int nparts, int dim, const int *gsize,
                        const int *g0)
{
    gx_model *m = b->m;
    if (m->tp <= 1)
        return;
    for (int i = first; i < m->num_tensors; i++) {
        gx_tensor *t = &m->tensors[i];
        int part = (i - first) % nparts;
        if (dim >= t->ndim)
            continue;
        t->gshape[dim] = gsize[part];
        t->split = (signed char)dim;
        t->nseg = 1;
        t->seg[0][0] = g0[part];
        t->seg[0][1] = 0;
        t->seg[0][2] = t->shape[dim];
    }
}

/* A non-first replica of its kv head (model/tp.h): its k/v rows are another rank's. */
static bool kv_copy(const gx_model *m) { return m->kv_rep > 1 && m->tp_rank % m->kv_rep; }

/* The fused q/k/v tensors [first, num_tensors) hold nseg runs of the whole (H + 2 kv) hd
 * rows; copy: the runs that are a non-first replica's k/v rows (gx_tensor.kv_copy). */
static void set_qkv_runs(gx_model *m, int first, int rows, const int (*runs)[3], int nseg,
                         unsigned copy)
{
    for (int i = first; i < m->num_tensors; i++) {
        gx_tensor *t = &m->tensors[i];
        t->gshape[0] = rows;
        t->split = 0;
        t->nseg = (signed char)nseg;
        memcpy(t->seg, runs, sizeof(int[3]) * (size_t)nseg);
        t->kv_copy = kv_copy(m) ? (unsigned char)copy : 0;
    }
}

/* A fused q/k/v of [q heads | k | v] (Falcon multi_query): three runs per rank. */
static void slice_split_qkv(builder *b, int first, int H, int kv, int hd)
{
    gx_model *m = b->m;
    if (m->tp <= 1)
        return;
    int r = m->tp_rank, nh = m->nh, nk = m->nkv, k0 = m->kv_head;
    int runs[3][3] = {{r * nh * hd, 0, nh * hd},
                      {H * hd + k0 * hd, nh * hd, nk * hd},
                      {(H + kv) * hd + k0 * hd, (nh + nk) * hd, nk * hd}};
    set_qkv_runs(m, first, (H + 2 * kv) * hd, runs, 3, 6 /* the k and v runs */);
}

/* Falcon's grouped [kv][group + 2][hd] when the ranks outnumber the kv heads: a rank holds
 * its query heads of group kv_head and the group's k and v, [nh + 2][hd]. */
static void slice_group_part(builder *b, int first, int H, int kv, int hd)
{
    gx_model *m = b->m;
    int G = H / kv, g = m->kv_head, sub = m->tp_rank % m->kv_rep, nh = m->nh;
    int runs[2][3] = {{(g * (G + 2) + sub * nh) * hd, 0, nh * hd},
                      {(g * (G + 2) + G) * hd, nh * hd, 2 * hd}};
    set_qkv_runs(m, first, (H + 2 * kv) * hd, runs, 2, 2 /* the k and v run */);
}

/* Shapes are this rank's (m->nh heads, m->nkv kv heads, m->ni intermediate columns,
 * m->nv vocabulary rows: the whole model with one TP rank). */
void gx__build_layout(gx_model *m)
{
    const gx_config *c = &m->cfg;
    names n = family_names(c);
    int C = c->hidden, I = c->intermediate, V = c->vocab, hd = C / c->heads;
    int kv = gx_kv_heads(c), r = m->tp_rank;
    int nh = m->nh, nk = m->nkv, ni = m->ni, nv = m->nv;
    builder b = {.m = m, .layer = -1};
    gx__stage_span(m);
    bool first_stage = m->pp_rank == 0, last_stage = m->pp_rank == m->pp - 1;
    m->num_tensors = 0;
    if (first_stage) {
        add(&b, n.embed, "", nv, C, true, GX_SLOT_EMBED, true);
        slice_parts(&b, 0, 1, 0, &V, &m->v0);
    }
    m->lt0 = m->num_tensors;
    for (int l = m->l0; l < m->l0 + m->nl; l++) {
        b.layer = l - m->l0; /* the stage's layer arrays; the name keeps the global number */
        snprintf(b.prefix, sizeof b.prefix, n.layer, l);
        add_norm(&b, c, n.ln1, GX_SLOT_LN1_W);
        if (n.ln2)
            add_norm(&b, c, n.ln2, GX_SLOT_LN2_W);
        int first = m->num_tensors;
        if (n.qkv[1]) {
            int rows[3] = {nh * hd, nk * hd, nk * hd};
            int gs[3] = {c->heads * hd, kv * hd, kv * hd};
            int g0[3] = {r * nh * hd, m->kv_head * hd, m->kv_head * hd};
            add_proj(&b, n.qkv, rows, 3, C, !(c->no_bias & GX_NOBIAS_QKV), GX_SLOT_QKV_W);
            slice_parts(&b, first, 3, 0, gs, g0);
            for (int i = first; kv_copy(m) && i < m->num_tensors; i++)
                if ((i - first) % 3) /* k_proj and v_proj, weights and biases */
                    m->tensors[i].kv_copy = 1;
        } else {
            int rows[1] = {(nh + 2 * nk) * hd};
            int gs[1] = {(c->heads + 2 * kv) * hd}, g0[1] = {r * rows[0]};
            add_proj(&b, n.qkv, rows, 1, C, !(c->no_bias & GX_NOBIAS_QKV), GX_SLOT_QKV_W);
            if (c->qkv == GX_QKV_SPLIT)
                slice_split_qkv(&b, first, c->heads, kv, hd);
            else if (c->qkv == GX_QKV_GROUPED && m->kv_rep > 1 && m->tp > 1)
                slice_group_part(&b, first, c->heads, kv, hd);
            else /* [heads][3][hd] and [kv][group + 2][hd]: one run of whole heads / groups */
                slice_parts(&b, first, 1, 0, gs, g0);
        }
        int crow[1] = {C}, gC[1] = {C}, a0[1] = {r * nh * hd}, gI[2] = {I, I},
            i0[2] = {r * ni, r * ni};
        const char *dn[1] = {n.dense}, *pn[1] = {n.proj};
        first = m->num_tensors;
        add_proj(&b, dn, crow, 1, nh * hd, !(c->no_bias & GX_NOBIAS_DENSE), GX_SLOT_DENSE_W);
        slice_parts(&b, first, 1, 1, gC, a0);
        bool mb = !(c->no_bias & GX_NOBIAS_MLP);
        first = m->num_tensors;
        if (c->mlp == GX_MLP_SWIGLU) {
            int rows[2] = {ni, ni};
            add_proj(&b, n.fc, rows, 2, C, mb, GX_SLOT_FC_W);
            slice_parts(&b, first, 2, 0, gI, i0);
        } else {
            int rows[1] = {ni};
            add_proj(&b, n.fc, rows, 1, C, mb, GX_SLOT_FC_W);
            slice_parts(&b, first, 1, 0, gI, i0);
        }
        first = m->num_tensors;
        add_proj(&b, pn, crow, 1, ni, mb, GX_SLOT_PROJ_W);
        slice_parts(&b, first, 1, 1, gI, i0);
    }
    b.layer = -1;
    if (!last_stage) {
        m->num_params = b.off;
        return;
    }
    add_norm(&b, c, n.final_norm, GX_SLOT_LNF_W);
    if (c->tied && m->pp > 1) { /* the head: a copy of the first stage's embedding */
        int first = m->num_tensors;
        add(&b, n.embed, "", nv, C, true, GX_SLOT_HEAD, true);
        m->tensors[first].tied_copy = true;
        slice_parts(&b, first, 1, 0, &V, &m->v0);
    } else if (!c->tied) {
        int first = m->num_tensors;
        add(&b, n.head, "", nv, C, true, GX_SLOT_HEAD, true);
        slice_parts(&b, first, 1, 0, &V, &m->v0);
    }
    m->num_params = b.off;
}

void gx__stage_span(gx_model *m)
{
    if (m->pp < 1) { /* a zeroed model (gx_tp_layout): the whole decoder */
        m->pp = 1;
        m->pp_rank = 0;
    }
    m->nl = m->cfg.layers / m->pp;
    m->l0 = m->pp_rank * m->nl;
}

int gx__tensors_per_layer(const gx_config *c)
{
    int nb = c->norm == GX_LAYERNORM ? 2 : 1;
    return (gx__num_tensors(c) - 1 - nb - (c->tied ? 0 : 1)) / c->layers;
}

int gx__num_tensors(const gx_config *c)
{
    int nb = c->norm == GX_LAYERNORM ? 2 : 1;
    bool two = !(c->family == GX_FALCON && c->shared_norm);
    int qkv = c->family == GX_LLAMA ? 3 : 1, fc = c->mlp == GX_MLP_SWIGLU ? 2 : 1;
    int per = nb * (two ? 2 : 1) + qkv * ((c->no_bias & GX_NOBIAS_QKV) ? 1 : 2) +
              ((c->no_bias & GX_NOBIAS_DENSE) ? 1 : 2) +
              (fc + 1) * ((c->no_bias & GX_NOBIAS_MLP) ? 1 : 2);
    return 1 + c->layers * per + nb + (c->tied ? 0 : 1);
}

size_t gx_param_count(const gx_config *c)
{
    size_t C = (size_t)c->hidden, I = (size_t)c->intermediate, V = (size_t)c->vocab;
    size_t hd = C / (size_t)c->heads, kv = (size_t)gx_kv_heads(c);
    size_t q = ((size_t)c->heads + 2 * kv) * hd, F = c->mlp == GX_MLP_SWIGLU ? 2 * I : I;
    size_t nb = c->norm == GX_LAYERNORM ? 2 : 1;
    bool two = !(c->family == GX_FALCON && c->shared_norm);
    size_t per = nb * C * (two ? 2 : 1) + q * C + C * C + F * C + I * C;
    if (!(c->no_bias & GX_NOBIAS_QKV))
        per += q;
    if (!(c->no_bias & GX_NOBIAS_DENSE))
        per += C;
    if (!(c->no_bias & GX_NOBIAS_MLP))
        per += F + C;
    return V * C * (c->tied ? 1 : 2) + (size_t)c->layers * per + nb * C;
}

size_t gx_memory_estimate(const gx_config *c, int B, int T)
{
    size_t N = (size_t)B * (size_t)T, V = (size_t)c->vocab, chunk = N < 512 ? N : 512;
    return 20 * gx_param_count(c) + gx_act_bytes_per_token(c) * N + 4 * chunk * V;
}

/* --- presets ----------------------------------------------------------------------- */

typedef struct fpreset {
    const char *name;
    gx_family family;
    int hidden, layers, heads, kv, intermediate, vocab, max_pos;
    double eps, theta;
    int falcon; /* 0 llama, 1 falcon 7B (multi-query, one norm), 2 new_decoder_architecture */
} fpreset;

/* Shapes from each model's published config.json. */
static const fpreset fpresets[] = {
    {"llama-2-7b", GX_LLAMA, 4096, 32, 32, 32, 11008, 32000, 4096, 1e-5, 1e4, 0},
    {"llama-2-13b", GX_LLAMA, 5120, 40, 40, 40, 13824, 32000, 4096, 1e-5, 1e4, 0},
    {"llama-2-70b", GX_LLAMA, 8192, 80, 64, 8, 28672, 32000, 4096, 1e-5, 1e4, 0},
    {"tinyllama-1.1b", GX_LLAMA, 2048, 22, 32, 4, 5632, 32000, 2048, 1e-5, 1e4, 0},
    {"llama-3-8b", GX_LLAMA, 4096, 32, 32, 8, 14336, 128256, 8192, 1e-5, 5e5, 0},
    {"falcon-7b", GX_FALCON, 4544, 32, 71, 1, 18176, 65024, 2048, 1e-5, 1e4, 1},
    {"falcon-40b", GX_FALCON, 8192, 60, 128, 8, 32768, 65024, 2048, 1e-5, 1e4, 2},
    {"falcon-180b", GX_FALCON, 14848, 80, 232, 8, 59392, 65024, 2048, 1e-5, 1e4, 2},
    /* small shapes for tests and benchmarks */
    {"llama-tiny", GX_LLAMA, 64, 2, 4, 2, 176, 512, 256, 1e-6, 1e4, 0},
    {"llama-70m", GX_LLAMA, 512, 12, 8, 2, 1408, 32000, 2048, 1e-5, 1e4, 0},
    {"falcon-tiny", GX_FALCON, 64, 2, 4, 1, 256, 512, 256, 1e-5, 1e4, 1},
    {"falcon-tiny-new", GX_FALCON, 64, 2, 4, 2, 256, 512, 256, 1e-5, 1e4, 2},
    {"falcon-70m", GX_FALCON, 512, 12, 8, 2, 2048, 65024, 2048, 1e-5, 1e4, 2},
};

grit_err gx__family_preset(const char *name, gx_config *cfg)
{
    for (size_t i = 0; i < sizeof fpresets / sizeof fpresets[0]; i++) {
        const fpreset *p = &fpresets[i];
        if (strcmp(p->name, name) != 0)
            continue;
        *cfg = (gx_config){
            .hidden = p->hidden, .layers = p->layers, .heads = p->heads,
            .intermediate = p->intermediate, .vocab = p->vocab, .max_positions = p->max_pos,
            .rotary_pct = 1.0, .rotary_base = p->theta, .ln_eps = p->eps, .act = OP_GELU,
            .family = p->family, .kv_heads = p->kv, .init_std = 0.02,
            .no_bias = GX_NOBIAS_QKV | GX_NOBIAS_DENSE | GX_NOBIAS_MLP,
        };
        if (p->family == GX_LLAMA) {
            cfg->norm = GX_RMSNORM;
            cfg->mlp = GX_MLP_SWIGLU;
            cfg->qkv = GX_QKV_SPLIT;
        } else {
            cfg->parallel_residual = true;
            cfg->tied = true;
            cfg->shared_norm = p->falcon == 1;
            cfg->qkv = p->falcon == 1 ? GX_QKV_SPLIT : GX_QKV_GROUPED;
        }
        return GRIT_OK;
    }
    return grit_errf(GRIT_ENOTFOUND, "unknown model preset '%s'", name);
}
