/*
 * gptneox_step.c - forward and backward of GPT-NeoX on one micro-batch.
 *
 * Layer (x = resid[l], y = resid[l+1]):
 *   h   = LN1(x);  qkv = rotary(h Wqkv^T + bqkv);  a = attn(qkv);  o = a Wd^T + bd
 *   parallel:   y = x + o + mlp(LN2(x))
 *   sequential: mid = x + o;  y = mid + mlp(LN2(mid))
 *   mlp(u) = gelu(u Wfc^T + bfc) Wproj^T + bproj
 * Head: logits = LN_f(resid[L]) Wout^T, cross-entropy averaged over B*T.
 *
 * The LM head is processed in chunks of rows: logits of a chunk are
 * computed, turned into dlogits in place, and consumed by both gradient
 * matmuls before the next chunk, so the [B*T, V] logits never exist.
 *
 * Backward keeps one running gradient of the residual stream (dy); each
 * layer accumulates the layer norms' input gradients into it, which is the
 * residual connection's identity term. Matmuls whose result is the same for
 * every thread count (OpenBLAS splits output tiles, not the K reduction)
 * and the fixed-order reductions in ops.c make the whole step bitwise
 * reproducible for a given thread count.
 */
#include <string.h>

#include "model/gptneox.h"
#include "tensor/matmul.h"
#include "tensor/ops.h"

static void fill_rows(float *out, const float *bias, int N, int C)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        memcpy(out + (long)n * C, bias, sizeof(float) * (size_t)C);
}

static void mlp_fwd(gx_model *m, int l, const float *u, float *y)
{
    const gx_config *c = &m->cfg;
    int N = m->B * m->T, C = c->hidden, H4 = c->intermediate;
    gx_layer *w = &m->w.layer[l];
    gx_layer_acts *a = &m->acts[l];
    op_layernorm_fwd(a->ln2, a->ln2_mean, a->ln2_rstd, u, w->ln2_w, w->ln2_b, N, C,
                     (float)c->ln_eps);
    fill_rows(a->fc, w->fc_b, N, H4);
    mm_nt(N, H4, C, 1.0f, a->ln2, C, w->fc_w, C, 1.0f, a->fc, H4);
    op_gelu_fwd(a->gelu, a->fc, (long)N * H4, c->act);
    mm_nt(N, C, H4, 1.0f, a->gelu, H4, w->proj_w, H4, 1.0f, y, C);
}

static void layer_fwd(gx_model *m, int l)
{
    const gx_config *c = &m->cfg;
    int N = m->B * m->T, C = c->hidden, hd = C / c->heads;
    gx_layer *w = &m->w.layer[l];
    gx_layer_acts *a = &m->acts[l];
    const float *x = m->resid[l];
    float *y = m->resid[l + 1], *o = m->dtmp;

    op_layernorm_fwd(a->ln1, a->ln1_mean, a->ln1_rstd, x, w->ln1_w, w->ln1_b, N, C,
                     (float)c->ln_eps);
    fill_rows(a->qkv, w->qkv_b, N, 3 * C);
    mm_nt(N, 3 * C, C, 1.0f, a->ln1, C, w->qkv_w, C, 1.0f, a->qkv, 3 * C);
    op_rotary(a->qkv, m->rope_cos, m->rope_sin, N, m->T, c->heads, hd, m->rot, 0);
    op_attention_fwd(a->att, a->lse, a->qkv, m->B, m->T, c->heads, hd, m->att_scratch);
    mm_nt(N, C, C, 1.0f, a->att, C, w->dense_w, C, 0.0f, o, C);
    if (c->parallel_residual) {
        op_add3_bias(y, x, o, w->dense_b, N, C);
        op_add_bias(y, y, w->proj_b, N, C);
        mlp_fwd(m, l, x, y);
    } else {
        op_add3_bias(a->mid, x, o, w->dense_b, N, C);
        op_add_bias(y, a->mid, w->proj_b, N, C);
        mlp_fwd(m, l, a->mid, y);
    }
}

/* MLP backward from dy (gradient of its output); leaves dLN2-output in m->dln. */
static void mlp_bwd(gx_model *m, int l, const float *dy)
{
    const gx_config *c = &m->cfg;
    int N = m->B * m->T, C = c->hidden, H4 = c->intermediate;
    gx_layer *w = &m->w.layer[l], *g = &m->g.layer[l];
    gx_layer_acts *a = &m->acts[l];
    op_bias_grad(g->proj_b, dy, N, C, C);
    mm_tn(C, H4, N, 1.0f, dy, C, a->gelu, H4, 1.0f, g->proj_w, H4);
    mm_nn(N, H4, C, 1.0f, dy, C, w->proj_w, H4, 0.0f, m->dfc, H4);
    op_gelu_bwd(m->dfc, m->dfc, a->fc, (long)N * H4, c->act);
    op_bias_grad(g->fc_b, m->dfc, N, H4, H4);
    mm_tn(H4, C, N, 1.0f, m->dfc, H4, a->ln2, C, 1.0f, g->fc_w, C);
    mm_nn(N, C, H4, 1.0f, m->dfc, H4, w->fc_w, C, 0.0f, m->dln, C);
}

/* Attention backward from dy (gradient of the dense output); leaves dLN1-output in m->datt. */
static void attn_bwd(gx_model *m, int l, const float *dy)
{
    const gx_config *c = &m->cfg;
    int N = m->B * m->T, C = c->hidden, hd = C / c->heads;
    gx_layer *w = &m->w.layer[l], *g = &m->g.layer[l];
    gx_layer_acts *a = &m->acts[l];
    op_bias_grad(g->dense_b, dy, N, C, C);
    mm_tn(C, C, N, 1.0f, dy, C, a->att, C, 1.0f, g->dense_w, C);
    mm_nn(N, C, C, 1.0f, dy, C, w->dense_w, C, 0.0f, m->datt, C);
    op_attention_bwd(m->dqkv, m->datt, a->att, a->lse, a->qkv, m->B, m->T, c->heads, hd,
                     m->att_scratch);
    op_rotary(m->dqkv, m->rope_cos, m->rope_sin, N, m->T, c->heads, hd, m->rot, 1);
    op_bias_grad(g->qkv_b, m->dqkv, N, 3 * C, 3 * C);
    mm_tn(3 * C, C, N, 1.0f, m->dqkv, 3 * C, a->ln1, C, 1.0f, g->qkv_w, C);
    mm_nn(N, C, 3 * C, 1.0f, m->dqkv, 3 * C, w->qkv_w, C, 0.0f, m->datt, C);
}

/* dy: gradient w.r.t. resid[l+1] on entry, w.r.t. resid[l] on return. */
static void layer_bwd(gx_model *m, int l, float *dy)
{
    const gx_config *c = &m->cfg;
    int N = m->B * m->T, C = c->hidden;
    gx_layer *w = &m->w.layer[l], *g = &m->g.layer[l];
    gx_layer_acts *a = &m->acts[l];
    const float *x = m->resid[l];
    if (c->parallel_residual) {
        mlp_bwd(m, l, dy);
        attn_bwd(m, l, dy);
        op_layernorm_bwd(dy, g->ln2_w, g->ln2_b, m->dln, x, a->ln2_mean, a->ln2_rstd, w->ln2_w,
                         N, C);
    } else {
        mlp_bwd(m, l, dy);
        op_layernorm_bwd(dy, g->ln2_w, g->ln2_b, m->dln, a->mid, a->ln2_mean, a->ln2_rstd,
                         w->ln2_w, N, C);
        attn_bwd(m, l, dy);
    }
    op_layernorm_bwd(dy, g->ln1_w, g->ln1_b, m->datt, x, a->ln1_mean, a->ln1_rstd, w->ln1_w, N,
                     C);
}

float gx_step(gx_model *m, const int32_t *tokens, float grad_scale, float *logits_out)
{
    const gx_config *c = &m->cfg;
    int B = m->B, T = m->T, N = B * T, C = c->hidden, V = c->vocab, L = c->layers;
    for (int b = 0; b < B; b++) {
        memcpy(m->inp + (long)b * T, tokens + (long)b * (T + 1), sizeof(int32_t) * (size_t)T);
        memcpy(m->tgt + (long)b * T, tokens + (long)b * (T + 1) + 1, sizeof(int32_t) * (size_t)T);
    }
    op_embed_fwd(m->resid[0], m->w.embed_in, m->inp, N, C);
    for (int l = 0; l < L; l++)
        layer_fwd(m, l);
    op_layernorm_fwd(m->lnf, m->lnf_mean, m->lnf_rstd, m->resid[L], m->w.lnf_w, m->w.lnf_b, N,
                     C, (float)c->ln_eps);

    float gs = grad_scale / (float)N; /* d(mean loss)/d(row loss) */
    for (int r0 = 0; r0 < N; r0 += m->chunk) {
        int M = N - r0 < m->chunk ? N - r0 : m->chunk;
        const float *h = m->lnf + (long)r0 * C;
        mm_nt(M, V, C, 1.0f, h, C, m->w.embed_out, C, 0.0f, m->logits, V);
        if (logits_out)
            memcpy(logits_out + (long)r0 * V, m->logits, sizeof(float) * (size_t)M * V);
        op_xent_rows(m->logits, m->losses + r0, m->tgt + r0, M, V, gs);
        if (grad_scale == 0.0f)
            continue;
        mm_tn(V, C, M, 1.0f, m->logits, V, h, C, 1.0f, m->g.embed_out, C);
        mm_nn(M, C, V, 1.0f, m->logits, V, m->w.embed_out, C, 0.0f, m->dres + (long)r0 * C, C);
    }
    double sum = 0.0;
    for (int n = 0; n < N; n++)
        sum += m->losses[n];
    float loss = (float)(sum / N);
    if (grad_scale == 0.0f)
        return loss;

    float *dy = m->dtmp;
    memset(dy, 0, sizeof(float) * (size_t)N * C);
    op_layernorm_bwd(dy, m->g.lnf_w, m->g.lnf_b, m->dres, m->resid[L], m->lnf_mean, m->lnf_rstd,
                     m->w.lnf_w, N, C);
    const gx_tensor *t = m->tensors; /* layer l's tensors are t[1 + 12 l .. 12 + 12 l] */
    if (m->grad_ready)
        m->grad_ready(m->grad_ctx, t[1 + 12 * L].offset, m->num_params - t[1 + 12 * L].offset);
    for (int l = L - 1; l >= 0; l--) {
        layer_bwd(m, l, dy);
        if (m->grad_ready)
            m->grad_ready(m->grad_ctx, t[1 + 12 * l].offset,
                          t[1 + 12 * (l + 1)].offset - t[1 + 12 * l].offset);
    }
    op_embed_bwd(m->g.embed_in, dy, m->inp, N, C);
    if (m->grad_ready)
        m->grad_ready(m->grad_ctx, 0, t[1].offset);
    return loss;
}
