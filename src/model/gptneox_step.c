/*
 * gptneox_step.c - forward and backward of the decoder (GPT-NeoX, Llama,
 * Falcon: one block assembled from gx_config's options) on one micro-batch.
 *
 * Layer (x = resid[l], y = resid[l+1]; N1, N2 LayerNorm or RMSNorm; biases
 * only where the options keep them):
 *   h   = N1(x);  qkv = rotary(h Wqkv^T + bqkv);  a = attn(qkv);  o = a Wd^T + bd
 *   parallel, two norms:  y = x + o + mlp(N2(x))          (GPT-NeoX, Falcon 40B/180B)
 *   parallel, one norm:   y = x + o + mlp(h)              (Falcon 7B)
 *   sequential:           mid = x + o;  y = mid + mlp(N2(mid))   (Llama)
 *   mlp(u) = gelu(u Wfc^T + bfc) Wproj^T + bproj, or SwiGLU:
 *            (silu(u Wgate^T) * (u Wup^T)) Wdown^T  (gate and up one [2I, C] matrix)
 * Attention is multi-head, grouped-query or multi-query by the q/k/v layout
 * (family.h gx_qkv_layout). Head: logits = N_f(resid[L]) Wout^T (Wout = the
 * input embedding when tied), cross-entropy averaged over B*T; for SFT
 * (gx_step_ex) only over the targets the loss mask keeps, with packed
 * examples isolated by the attention's segment starts (tensor/ops.h seg).
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
 *
 * Precision: every linear layer's and the LM head's product goes through gx__mm
 * (gx_prec.c), float32 sgemm or bf16 operands with float32 accumulation by the
 * model's precision; attention, norms, activations and the loss are float32 in both.
 */
#include <math.h>
#include <string.h>

#include "model/family.h"
#include "model/gptneox.h"
#include "model/gx_prec.h"
#include "model/tp.h"
#include "tensor/ops.h"
#include "tensor/ops_tp.h"

static void fill_rows(float *out, const float *bias, int N, int C)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        memcpy(out + (long)n * C, bias, sizeof(float) * (size_t)C);
}

/* out = x W^T (+ b): [N, rows]. */
static void linear_fwd(gx_model *m, float *out, const float *x, const float *w, const float *b,
                       int N, int rows, int in)
{
    if (b) {
        fill_rows(out, b, N, rows);
        gx__mm(m, 'N', 'T', N, rows, in, x, in, w, in, 1.0f, out, rows);
    } else
        gx__mm(m, 'N', 'T', N, rows, in, x, in, w, in, 0.0f, out, rows);
}

/* out = norm(x) with the block's norm kind; mean is unused by RMSNorm. */
static void norm_fwd(const gx_config *c, float *out, float *mean, float *rstd, const float *x,
                     const float *w, const float *b, int N)
{
    if (c->norm == GX_RMSNORM)
        op_rmsnorm_fwd(out, rstd, x, w, N, c->hidden, (float)c->ln_eps);
    else
        op_layernorm_fwd(out, mean, rstd, x, w, b, N, c->hidden, (float)c->ln_eps);
}

/* A norm's parameters and saved statistics for the fused kernels (tensor/ops.h). */
static op_norm norm_of(const gx_config *c, const float *w, const float *b, float *mean,
                       float *rstd)
{
    return (op_norm){.rms = c->norm == GX_RMSNORM, .eps = (float)c->ln_eps, .w = w, .b = b,
                     .mean = mean, .rstd = rstd};
}

/* Rows of this rank's up (and gate) projection. */
static int fc_width(const gx_model *m)
{
    return m->cfg.mlp == GX_MLP_SWIGLU ? 2 * m->ni : m->ni;
}

/* y += mlp(h) (h: norm2's output, computed by layer_fwd, norm1's when the block has one;
 * gathered under sequence parallelism); y holds this rank's rows. */
static void mlp_fwd(gx_model *m, int l, float *y, const float *h)
{
    const gx_config *c = &m->cfg;
    int N = m->B * m->T, C = c->hidden, H4 = m->ni, F = fc_width(m);
    gx_layer *w = &m->w.layer[l];
    gx_layer_acts *a = &m->acts[l];
    linear_fwd(m, a->fc, h, w->fc_w, w->fc_b, N, F, C);
    if (c->mlp == GX_MLP_SWIGLU)
        op_swiglu_fwd(a->gelu, a->fc, N, H4);
    else
        op_gelu_fwd(a->gelu, a->fc, (long)N * H4, c->act);
    if (m->tp > 1) { /* row parallel: this rank's partial sum, summed over the group, added */
        gx__mm(m, 'N', 'T', N, C, H4, a->gelu, H4, w->proj_w, H4, 0.0f, m->otmp, C);
        const float *o = gx__sp_sum(m, m->otmp, m->o_l);
        long n = (long)m->ns * C;
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++)
            y[i] += o[i];
        return;
    }
    gx__mm(m, 'N', 'T', N, C, H4, a->gelu, H4, w->proj_w, H4, 1.0f, y, C);
}

static void layer_fwd(gx_model *m, int l)
{
    const gx_config *c = &m->cfg;
    int N = m->B * m->T, Ns = m->ns, C = c->hidden, hd = m->hd, Q = m->qkv_dim, A = m->nh * hd;
    gx_layer *w = &m->w.layer[l];
    gx_layer_acts *a = &m->acts[l];
    const float *x = m->resid[l];
    float *y = m->resid[l + 1], *o = m->otmp;
    const float *dense_b = w->dense_b ? w->dense_b : m->zeros;
    const float *proj_b = w->proj_b ? w->proj_b : m->zeros;
    op_qkv_layout lay = m->lay;
    lay.seg = m->seg;

    op_norm n1 = norm_of(c, w->ln1_w, w->ln1_b, a->ln1_mean, a->ln1_rstd);
    op_norm n2 = norm_of(c, w->ln2_w, w->ln2_b, a->ln2_mean, a->ln2_rstd);
    if (c->parallel_residual && !c->shared_norm) /* both norms read x: one pass */
        op_norm2_fwd(&n1, a->ln1, &n2, a->ln2, x, Ns, C);
    else
        norm_fwd(c, a->ln1, a->ln1_mean, a->ln1_rstd, x, w->ln1_w, w->ln1_b, Ns);
    const float *h1 = gx__sp_full(m, a->ln1, m->lnx); /* every row, for the column products */
    linear_fwd(m, a->qkv, h1, w->qkv_w, w->qkv_b, N, Q, C);
    op_rotary_lay(a->qkv, m->rope_cos, m->rope_sin, &lay, N, m->T, m->nh, hd, m->rot, 0);
    op_attn_fwd(a->att, a->lse, a->qkv, &lay, m->B, m->T, m->nh, hd, m->att_scratch);
    gx__mm(m, 'N', 'T', N, C, A, a->att, A, w->dense_w, A, 0.0f, o, C);
    const float *os = gx__sp_sum(m, o, m->o_l); /* row parallel (tp > 1): this rank's rows */
    /* residual: y = x + o + dense_b (+ proj_b), the MLP's product accumulated after;
     * sequential: mid = x + o + dense_b, y = mid + proj_b, norm2(mid) in the same pass */
    if (c->parallel_residual)
        op_resid_fwd(y, NULL, x, os, dense_b, w->proj_b, NULL, NULL, Ns, C);
    else
        op_resid_fwd(y, a->mid, x, os, dense_b, proj_b, c->shared_norm ? NULL : &n2, a->ln2,
                     Ns, C);
    mlp_fwd(m, l, y, c->shared_norm ? h1 : gx__sp_full(m, a->ln2, m->lnx));
}

/* MLP backward from dy (gradient of its output, every row) and h (its input, every row);
 * returns the gradient of norm2's output summed over the TP group (this rank's rows). */
static const float *mlp_bwd(gx_model *m, int l, const float *dy, const float *h)
{
    const gx_config *c = &m->cfg;
    int N = m->B * m->T, C = c->hidden, H4 = m->ni, F = fc_width(m);
    gx_layer *w = &m->w.layer[l], *g = &m->g.layer[l];
    gx_layer_acts *a = &m->acts[l];
    if (g->proj_b)
        op_bias_grad(g->proj_b, dy, N, C, C);
    gx__mm(m, 'T', 'N', C, H4, N, dy, C, a->gelu, H4, 1.0f, g->proj_w, H4);
    if (c->mlp == GX_MLP_SWIGLU) {
        /* a->gelu was last needed for proj_w's gradient above: it holds d(silu*up) now */
        gx__mm_again(m, 'N', 'N', N, H4, C, dy, C, w->proj_w, H4, 0.0f, a->gelu, H4);
        op_swiglu_bwd(m->dfc, a->gelu, a->fc, N, H4);
    } else {
        gx__mm_again(m, 'N', 'N', N, H4, C, dy, C, w->proj_w, H4, 0.0f, m->dfc, H4);
        if (g->fc_b) /* gelu' and the bias gradient in one pass */
            op_gelu_bwd_bias(m->dfc, g->fc_b, m->dfc, a->fc, N, H4, c->act);
        else
            op_gelu_bwd(m->dfc, m->dfc, a->fc, (long)N * H4, c->act);
    }
    if (g->fc_b && c->mlp == GX_MLP_SWIGLU)
        op_bias_grad(g->fc_b, m->dfc, N, F, F);
    gx__mm(m, 'T', 'N', F, C, N, m->dfc, F, h, C, 1.0f, g->fc_w, C);
    gx__mm_again(m, 'N', 'N', N, C, F, m->dfc, F, w->fc_w, C, 0.0f, m->dln, C);
    return gx__sp_sum(m, m->dln, m->dln_l); /* column parallel input (tp > 1) */
}

/* Attention backward from dy (gradient of the dense output) and h (norm1's output), every
 * row; returns the gradient of norm1's output summed over the group (this rank's rows). */
static const float *attn_bwd(gx_model *m, int l, const float *dy, const float *h)
{
    const gx_config *c = &m->cfg;
    int N = m->B * m->T, C = c->hidden, hd = m->hd, Q = m->qkv_dim, A = m->nh * hd;
    gx_layer *w = &m->w.layer[l], *g = &m->g.layer[l];
    gx_layer_acts *a = &m->acts[l];
    op_qkv_layout lay = m->lay;
    lay.seg = m->seg;
    if (g->dense_b)
        op_bias_grad(g->dense_b, dy, N, C, C);
    gx__mm(m, 'T', 'N', C, A, N, dy, C, a->att, A, 1.0f, g->dense_w, A);
    gx__mm_again(m, 'N', 'N', N, A, C, dy, C, w->dense_w, A, 0.0f, m->datt, A);
    op_attn_bwd(m->dqkv, m->datt, a->att, a->lse, a->qkv, &lay, m->B, m->T, m->nh, hd,
                m->att_scratch);
    op_rotary_lay(m->dqkv, m->rope_cos, m->rope_sin, &lay, N, m->T, m->nh, hd, m->rot, 1);
    if (m->kv_rep > 1) /* replicated kv heads: every replica gets the whole k/v gradient */
        gx__tp_kv_sum(m, m->dqkv, N);
    if (g->qkv_b)
        op_bias_grad(g->qkv_b, m->dqkv, N, Q, Q);
    gx__mm(m, 'T', 'N', Q, C, N, m->dqkv, Q, h, C, 1.0f, g->qkv_w, C);
    if (m->kv_rep > 1 && m->tp_rank % m->kv_rep) { /* its input gradient: the first replica's */
        gx__tp_kv_clear(m, m->dqkv, N);
        gx__mm(m, 'N', 'N', N, C, Q, m->dqkv, Q, w->qkv_w, C, 0.0f, m->datt, C);
    } else
        gx__mm_again(m, 'N', 'N', N, C, Q, m->dqkv, Q, w->qkv_w, C, 0.0f, m->datt, C);
    return gx__sp_sum(m, m->datt, m->datt_l); /* column parallel input (tp > 1) */
}

/* dy: gradient w.r.t. resid[l+1] on entry, w.r.t. resid[l] on return (this rank's rows).
 * Sequence parallel: dy and the norms' outputs are gathered for the products' backward (the
 * sequential block gathers dy again after norm2's term), the norms' weight gradients of
 * this rank's rows go to m->nrm_g and are summed over the group at the end. */
static void layer_bwd(gx_model *m, int l, float *dy)
{
    const gx_config *c = &m->cfg;
    int Ns = m->ns, C = c->hidden;
    gx_layer *w = &m->w.layer[l], *g = &m->g.layer[l];
    gx_layer_acts *a = &m->acts[l];
    const float *x = m->resid[l];
    op_norm n1 = norm_of(c, w->ln1_w, w->ln1_b, a->ln1_mean, a->ln1_rstd);
    op_norm n2 = norm_of(c, w->ln2_w, w->ln2_b, a->ln2_mean, a->ln2_rstd);
    op_norm_grad g1 = {.dw = g->ln1_w, .db = g->ln1_b};
    op_norm_grad g2 = {.dw = g->ln2_w, .db = g->ln2_b};
    if (m->sp) {
        gx__sp_norm_begin(m);
        float *ng = m->nrm_g;
        g1 = (op_norm_grad){.dw = ng, .db = g->ln1_b ? ng + C : NULL};
        g2 = (op_norm_grad){.dw = ng + 2 * C, .db = g->ln2_b ? ng + 3 * C : NULL};
    }
    const float *dyf = gx__sp_full(m, dy, m->dyf), *h2 = gx__sp_full(m, a->ln2, m->lnx);
    g2.dout = mlp_bwd(m, l, dyf, h2);
    if (c->parallel_residual && c->shared_norm) {
        g1.dout = attn_bwd(m, l, dyf, h2); /* one norm: its output is gathered already */
        g1.dout_b = g2.dout; /* both branches read the one norm's output */
        op_norm2_bwd(dy, x, Ns, C, &n1, &g1, NULL, NULL);
    } else if (c->parallel_residual) {
        g1.dout = attn_bwd(m, l, dyf, gx__sp_full(m, a->ln1, m->lnx));
        op_norm2_bwd(dy, x, Ns, C, &n2, &g2, &n1, &g1); /* norm2's term first, then norm1's */
    } else {
        op_norm2_bwd(dy, a->mid, Ns, C, &n2, &g2, NULL, NULL);
        g1.dout = attn_bwd(m, l, gx__sp_full(m, dy, m->dyf), gx__sp_full(m, a->ln1, m->lnx));
        op_norm2_bwd(dy, x, Ns, C, &n1, &g1, NULL, NULL);
    }
    if (m->sp)
        gx__sp_norm_end(m, g->ln1_w, g->ln1_b, c->shared_norm ? NULL : g->ln2_w,
                        c->shared_norm ? NULL : g->ln2_b);
}

static float stage_bwd(gx_model *m, float *din, float loss);

/* Vocabulary pieces (gx_model.vpieces): rows [v0, v0 + nv) of the [V, C] tensor at flat
 * offset off, whose whole block (without ZeRO's windows) is whole: its weights (ZeRO-3
 * gathers them into its window), its gradient rows (ZeRO-2/3's window, zeroed), and the
 * gradient's report. */
static const float *piece_w(gx_model *m, size_t off, const float *whole, int v0, int nv)
{
    size_t C = (size_t)m->cfg.hidden;
    if (!m->param_begin)
        return whole + (size_t)v0 * C;
    gx__param_begin(m, off + (size_t)v0 * C, (size_t)nv * C);
    return m->zwin_w;
}

static float *piece_g(gx_model *m, size_t off, float *whole, int v0, int nv)
{
    size_t C = (size_t)m->cfg.hidden;
    if (!m->grad_begin)
        return whole + (size_t)v0 * C;
    m->grad_begin(m->grad_ctx, off + (size_t)v0 * C, (size_t)nv * C);
    return m->zwin_g;
}

static void piece_ready(gx_model *m, size_t off, int v0, int nv)
{
    size_t C = (size_t)m->cfg.hidden;
    if (m->grad_ready)
        m->grad_ready(m->grad_ctx, off + (size_t)v0 * C, (size_t)nv * C);
}

/* The input embedding's lookup, piece by piece (every token's row lies in one piece). */
static void embed_pieces_fwd(gx_model *m)
{
    int N = m->B * m->T, C = m->cfg.hidden, V = m->nv;
    memset(m->resid[0], 0, sizeof(float) * (size_t)N * C);
    for (int v0 = 0; v0 < V; v0 += m->vrows) {
        int nv = V - v0 < m->vrows ? V - v0 : m->vrows;
        const float *w = piece_w(m, 0, m->w.embed_in, v0, nv);
        for (int n = 0; n < N; n++) {
            int t = m->inp[n] - v0;
            if (t >= 0 && t < nv)
                memcpy(m->resid[0] + (size_t)n * C, w + (size_t)t * C, sizeof(float) * (size_t)C);
        }
    }
}

/* The head over vocabulary pieces from the final norm's output hf [N, C]: a pass for the
 * softmax statistics of every row (online: each piece's max and sum of exponentials folded
 * in, tensor/ops_tp.h), the losses, then (backward) a second pass that computes each
 * piece's logits again, turns them into dlogits, adds the piece's weight gradient (its
 * window reported when done) and its part of dres. One piece's weights and gradient at a
 * time: what makes ZeRO-3's windows the size of a layer's bucket, not the vocabulary's. */
static void head_pieces(gx_model *m, const float *hf, float gs, bool backward, size_t off)
{
    int N = m->B * m->T, C = m->cfg.hidden, V = m->nv;
    double *mx = m->vstat, *s = mx + N, *lt = s + N;
    for (int n = 0; n < N; n++)
        mx[n] = -INFINITY, s[n] = 0.0, lt[n] = 0.0;
    for (int pass = 0; pass < (backward ? 2 : 1); pass++) {
        for (int v0 = 0; v0 < V; v0 += m->vrows) {
            int nv = V - v0 < m->vrows ? V - v0 : m->vrows;
            const float *w = piece_w(m, off, m->w.embed_out, v0, nv);
            float *g = pass ? piece_g(m, off, m->g.embed_out, v0, nv) : NULL;
            for (int r0 = 0; r0 < N; r0 += m->chunk) {
                int M = N - r0 < m->chunk ? N - r0 : m->chunk;
                const float *h = hf + (long)r0 * C;
                gx__mm(m, 'N', 'T', M, nv, C, h, C, w, C, 0.0f, m->logits, nv);
                if (!pass) {
                    op_xent_piece_stats(m->logits, m->tgt + r0, M, nv, v0, mx + r0, s + r0,
                                        lt + r0);
                    continue;
                }
                op_xent_piece_grad(m->logits, m->tgt + r0, M, nv, v0, mx + r0, s + r0, gs);
                gx__mm(m, 'T', 'N', nv, C, M, m->logits, nv, h, C, 1.0f, g, C);
                gx__mm_again(m, 'N', 'N', M, C, nv, m->logits, nv, w, C, v0 ? 1.0f : 0.0f,
                       m->dres + (long)r0 * C, C);
            }
            if (pass)
                piece_ready(m, off, v0, nv);
        }
        for (int n = 0; !pass && n < N; n++)
            m->losses[n] = m->tgt[n] < 0 ? 0.0f : (float)(log(s[n]) + mx[n] - lt[n]);
    }
}

size_t gx_layer_end(const gx_model *m, int l)
{
    const gx_tensor *t = m->tensors;
    return l + 1 < m->nl || m->pp_rank == m->pp - 1 ? t[m->lt0 + m->tpl * (l + 1)].offset
                                                     : m->num_params;
}

/* A stage boundary's [N, C] copy (both present: gx_stage_step checked them). */
static void copy_act(float *dst, const float *src, const gx_model *m)
{
    if (dst && src)
        memcpy(dst, src, sizeof(float) * (size_t)m->ns * (size_t)m->cfg.hidden);
}

float gx_step(gx_model *m, const int32_t *tokens, float grad_scale, float *logits_out)
{
    return gx_step_ex(m, tokens, NULL, grad_scale, logits_out);
}

float gx_step_ex(gx_model *m, const int32_t *tokens, const gx_batch *sft, float grad_scale,
                 float *logits_out)
{
    return gx_stage_step(m, tokens, sft, NULL, NULL, grad_scale, NULL, NULL, logits_out);
}

float gx_stage_step(gx_model *m, const int32_t *tokens, const gx_batch *sft, const float *in,
                    const float *dout, float grad_scale, float *out, float *din,
                    float *logits_out)
{
    const gx_config *c = &m->cfg;
    int B = m->B, T = m->T, N = B * T, C = c->hidden, V = m->nv, L = m->nl;
    bool first = m->pp_rank == 0, last = m->pp_rank == m->pp - 1;
    long counted = 0;
    for (int b = 0; b < B; b++) {
        const int32_t *row = tokens + (long)b * (T + 1);
        memcpy(m->inp + (long)b * T, row, sizeof(int32_t) * (size_t)T);
        memcpy(m->tgt + (long)b * T, row + 1, sizeof(int32_t) * (size_t)T);
        if (sft && sft->mask)
            for (int t = 0; t < T; t++)
                if (!sft->mask[(long)b * (T + 1) + t + 1])
                    m->tgt[(long)b * T + t] = -1; /* op_xent_rows: no loss, no gradient */
    }
    for (int n = 0; n < N; n++)
        counted += m->tgt[n] >= 0;
    double denom = sft && sft->denom > 0 ? sft->denom : sft ? (double)counted : (double)N;
    if (denom <= 0)
        denom = 1; /* nothing counts: loss 0, gradient 0 */
    m->seg = sft ? sft->seg : NULL;
    if (m->prec == GX_BF16)
        gx__sync_bf16(m); /* the master weights may have moved since the last step */
    bool backward = last ? grad_scale != 0.0f : dout != NULL;
    if ((!first && !in) || (!last && !dout && !out) || (!first && backward && !din)) {
        m->seg = NULL;
        return NAN; /* a stage's buffers missing: the caller's bug, no step */
    }
    const gx_tensor *t = m->tensors;
    int tpl = m->tpl, lt = m->lt0;
    if (first && m->vpieces <= 1) /* ZeRO-3: the embedding's weights gathered */
        gx__param_begin(m, 0, t[1].offset);
    if (!first) /* the previous stage's output */
        copy_act(m->resid[0], in, m);
    else if (m->vpieces > 1) /* ZeRO's vocabulary pieces: one piece's weights at a time */
        embed_pieces_fwd(m);
    else if (m->tp > 1) { /* vocabulary parallel: each rank looks up the tokens it owns */
        float *e = m->sp ? m->otmp : m->resid[0]; /* sequence parallel: every row, then ours */
        op_embed_fwd_range(e, m->w.embed_in, m->inp, N, C, m->v0, m->nv);
        gx__sp_sum(m, e, m->resid[0]);
    } else
        op_embed_fwd(m->resid[0], m->w.embed_in, m->inp, N, C);
    for (int l = 0; l < L; l++) {
        size_t l0 = t[lt + tpl * l].offset;
        gx__param_begin(m, l0, gx_layer_end(m, l) - l0); /* ZeRO-3: the layer's weights */
        layer_fwd(m, l);
    }
    if (!last) {
        if (!dout) { /* forward only: hand the output to the next stage */
            copy_act(out, m->resid[L], m);
            m->seg = NULL;
            return m->tp_failed ? NAN : 0.0f;
        }
        copy_act(m->dtmp, dout, m);
        return stage_bwd(m, din, 0.0f);
    }
    size_t head0 = t[lt + tpl * L].offset; /* the head bucket: final norm, head (tied copy) */
    /* The head's weights apart from the final norm's bucket: in vocabulary pieces, or with
     * ZeRO-2/3's hooks and tied embeddings (one stage), whose head is the embedding: its
     * gradient's head part is reported here and its lookup part at the end (the reductions
     * add up in the shard). eo: the head's flat offset (untied: the block's last tensor; the
     * block may pad it, so not num_params - V C). */
    bool tsplit = c->tied && (m->grad_begin || m->param_begin) && m->vpieces <= 1 && first;
    bool apart = m->vpieces > 1 || tsplit;
    size_t eo = c->tied ? 0 : t[m->num_tensors - 1].offset, en = t[1].offset;
    size_t hn = apart && !c->tied ? eo - head0 : m->num_params - head0;
    gx__param_begin(m, head0, hn);
    norm_fwd(c, m->lnf, m->lnf_mean, m->lnf_rstd, m->resid[L], m->w.lnf_w, m->w.lnf_b, m->ns);
    const float *hf = gx__sp_full(m, m->lnf, m->lnx); /* the head reads every row */

    if (m->grad_begin && grad_scale != 0.0f && !apart)
        m->grad_begin(m->grad_ctx, head0, hn);
    if (tsplit) { /* the embedding as the head: its weights, a gradient window for it */
        gx__param_begin(m, 0, en);
        if (m->grad_begin && grad_scale != 0.0f)
            m->grad_begin(m->grad_ctx, 0, en);
    }
    /* d(mean loss)/d(row loss) (pre-training keeps its float expression bit for bit) */
    float gs = sft ? (float)(grad_scale / denom) : grad_scale / (float)N;
    if (m->vpieces > 1)
        head_pieces(m, hf, gs, grad_scale != 0.0f, eo);
    for (int r0 = 0; m->vpieces <= 1 && r0 < N; r0 += m->chunk) {
        int M = N - r0 < m->chunk ? N - r0 : m->chunk;
        const float *h = hf + (long)r0 * C;
        gx__mm(m, 'N', 'T', M, V, C, h, C, m->w.embed_out, C, 0.0f, m->logits, V);
        if (logits_out && m->tp == 1)
            memcpy(logits_out + (long)r0 * V, m->logits, sizeof(float) * (size_t)M * V);
        bf16 *gh;
        float *gr;
        if (m->tp > 1)
            gx__tp_xent(m, m->logits, m->losses + r0, m->tgt + r0, M, gs);
        else if (grad_scale != 0.0f && gx__opa_hold(m, m->logits, M, V, &gh, &gr))
            /* bf16: the gradient goes straight to the GEMMs' operand, rounded once */
            op_xent_rows_bf16(m->logits, gh, gr, m->losses + r0, m->tgt + r0, M, V, gs);
        else
            op_xent_rows(m->logits, m->losses + r0, m->tgt + r0, M, V, gs);
        if (grad_scale == 0.0f)
            continue;
        gx__mm_again(m, 'T', 'N', V, C, M, m->logits, V, h, C, 1.0f, m->g.embed_out, C);
        gx__mm_again(m, 'N', 'N', M, C, V, m->logits, V, m->w.embed_out, C, 0.0f,
                     m->dres + (long)r0 * C, C);
        if (!m->sp) /* sequence parallel: reduce-scattered below, once */
            gx__tp_reduce(m, m->dres + (long)r0 * C, (size_t)M * C, 0);
    }
    if (tsplit && m->grad_ready && grad_scale != 0.0f)
        m->grad_ready(m->grad_ctx, 0, en);
    double sum = 0.0;
    for (int n = 0; n < N; n++)
        sum += m->losses[n];
    float loss = m->tp_failed ? NAN : (float)(sum / denom);
    if (grad_scale == 0.0f || m->tp_failed) {
        m->seg = NULL;
        return loss;
    }

    float *dy = m->dtmp;
    memset(dy, 0, sizeof(float) * (size_t)m->ns * C);
    if (apart) { /* the final norm's weights again (the head took the window) */
        gx__param_begin(m, head0, hn);
        if (m->grad_begin)
            m->grad_begin(m->grad_ctx, head0, hn);
    }
    op_norm nf = norm_of(c, m->w.lnf_w, m->w.lnf_b, m->lnf_mean, m->lnf_rstd);
    op_norm_grad gf = {.dout = m->dres, .dw = m->g.lnf_w, .db = m->g.lnf_b};
    if (m->sp) { /* this rank's rows of the head's input gradient; lnf's weights' partials */
        gx__sp_norm_begin(m);
        gf = (op_norm_grad){.dout = gx__sp_sum(m, m->dres, m->dln_l), .dw = m->nrm_g,
                            .db = m->g.lnf_b ? m->nrm_g + C : NULL};
    }
    op_norm2_bwd(dy, m->resid[L], m->ns, C, &nf, &gf, NULL, NULL);
    if (m->sp)
        gx__sp_norm_end(m, m->g.lnf_w, m->g.lnf_b, NULL, NULL);
    /* layer l's tensors are t[lt + tpl l .. lt + tpl (l + 1)); with tied embeddings the
     * head's gradient lands in tensor 0, reported with the embedding at the end */
    if (m->grad_ready)
        m->grad_ready(m->grad_ctx, head0, hn);
    return stage_bwd(m, din, loss);
}

/* The layers' backward from the gradient of the stage output in m->dtmp, then the input
 * embedding's (first stage) or the gradient of the stage input into din; returns loss. */
static float stage_bwd(gx_model *m, float *din, float loss)
{
    int N = m->B * m->T, C = m->cfg.hidden, L = m->nl, tpl = m->tpl, lt = m->lt0;
    const gx_tensor *t = m->tensors;
    float *dy = m->dtmp;
    for (int l = L - 1; l >= 0; l--) {
        /* full recomputation: layer l's activations again from its input resid[l] (the
         * last layer's are still there); resid[l + 1] is rewritten with the same bits */
        size_t end = gx_layer_end(m, l);
        /* ZeRO-3: the layer's weights again (one window) */
        gx__param_begin(m, t[lt + tpl * l].offset, end - t[lt + tpl * l].offset);
        if (m->recompute && l < L - 1)
            layer_fwd(m, l);
        if (m->grad_begin)
            m->grad_begin(m->grad_ctx, t[lt + tpl * l].offset, end - t[lt + tpl * l].offset);
        layer_bwd(m, l, dy);
        if (m->grad_ready)
            m->grad_ready(m->grad_ctx, t[lt + tpl * l].offset, end - t[lt + tpl * l].offset);
    }
    if (m->pp_rank > 0) { /* the previous stage continues from here */
        copy_act(din, dy, m);
        m->seg = NULL;
        return m->tp_failed ? NAN : loss;
    }
    if (m->vpieces > 1) { /* ZeRO's vocabulary pieces: one piece's gradient window at a time */
        for (int v0 = 0; v0 < m->nv; v0 += m->vrows) {
            int nv = m->nv - v0 < m->vrows ? m->nv - v0 : m->vrows;
            op_embed_bwd_range(piece_g(m, 0, m->g.embed_in, v0, nv), dy, m->inp, N, C, v0, nv);
            piece_ready(m, 0, v0, nv);
        }
        m->seg = NULL;
        return m->tp_failed ? NAN : loss;
    }
    if (m->grad_begin)
        m->grad_begin(m->grad_ctx, 0, t[1].offset);
    if (m->tp > 1) /* sequence parallel: every row's gradient */
        op_embed_bwd_range(m->g.embed_in, gx__sp_full(m, dy, m->dyf), m->inp, N, C, m->v0,
                           m->nv);
    else
        op_embed_bwd(m->g.embed_in, dy, m->inp, N, C);
    if (m->grad_ready)
        m->grad_ready(m->grad_ctx, 0, t[1].offset);
    m->seg = NULL;
    return m->tp_failed ? NAN : loss;
}
