/* tp.c - tensor-parallel shapes, slices and the step's reductions (see tp.h). */
#include "model/tp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/family.h"
#include "tensor/ops_tp.h"

grit_err gx_tp_check(const gx_config *c, int tp)
{
    if (tp < 1)
        return grit_errf(GRIT_EINVAL, "tensor parallel size %d must be at least 1", tp);
    if (c->heads % tp)
        return grit_errf(GRIT_EINVAL, "tensor parallel %d does not divide num_heads %d", tp,
                         c->heads);
    if (gx_kv_heads(c) % tp && tp % gx_kv_heads(c))
        return grit_errf(GRIT_EINVAL, "tensor parallel %d and the %d kv heads: one must divide "
                         "the other (split, or replicated)", tp, gx_kv_heads(c));
    if (c->intermediate % tp)
        return grit_errf(GRIT_EINVAL, "tensor parallel %d does not divide intermediate_size %d",
                         tp, c->intermediate);
    if (c->vocab % tp)
        return grit_errf(GRIT_EINVAL, "tensor parallel %d does not divide vocab_size %d", tp,
                         c->vocab);
    return GRIT_OK;
}

int gx_tp_kv_local(const gx_config *c, int tp)
{
    int kv = gx_kv_heads(c);
    return kv >= tp ? kv / tp : 1;
}

int gx_tp_kv_head0(const gx_config *c, int tp, int r)
{
    int kv = gx_kv_heads(c);
    return kv >= tp ? r * (kv / tp) : r / (tp / kv);
}

int gx_tp_kv_rep(const gx_config *c, int tp)
{
    int kv = gx_kv_heads(c);
    return kv >= tp ? 1 : tp / kv;
}

void gx__tp_kv_sum(gx_model *m, float *dqkv, int N)
{
    int kv = gx_kv_heads(&m->cfg), hd = m->hd, Q = m->qkv_dim, k0 = m->nh * hd;
    size_t slot = (size_t)N * 2 * hd;
    float *buf = m->kv_buf;
    memset(buf, 0, sizeof(float) * slot * (size_t)kv);
    float *mine = buf + slot * (size_t)m->kv_head;
    for (int i = 0; i < N; i++)
        memcpy(mine + (size_t)i * 2 * hd, dqkv + (size_t)i * Q + k0, sizeof(float) * 2 * hd);
    gx__tp_reduce(m, buf, slot * (size_t)kv, 0);
    for (int i = 0; i < N; i++)
        memcpy(dqkv + (size_t)i * Q + k0, mine + (size_t)i * 2 * hd, sizeof(float) * 2 * hd);
}

bool gx_tp_is_kv_copy(const gx_tensor *t, size_t k)
{
    if (!t->kv_copy)
        return false;
    if (t->split < 0) /* whole: one segment */
        return true;
    size_t cols = t->ndim == 2 ? (size_t)t->shape[1] : 1;
    size_t row = k / cols; /* kv copies are rows (split 0) */
    for (int s = 0; s < t->nseg; s++)
        if ((t->kv_copy >> s & 1) && row >= (size_t)t->seg[s][1] &&
            row < (size_t)t->seg[s][1] + (size_t)t->seg[s][2])
            return true;
    return false;
}

void gx__tp_kv_clear(gx_model *m, float *dqkv, int N)
{
    int hd = m->hd, Q = m->qkv_dim, k0 = m->nh * hd;
    for (int i = 0; i < N; i++)
        memset(dqkv + (size_t)i * Q + k0, 0, sizeof(float) * 2 * hd);
}

size_t gx_tp_param_count(const gx_config *c, int tp)
{
    size_t C = (size_t)c->hidden, I = (size_t)c->intermediate / (size_t)tp;
    size_t V = (size_t)c->vocab / (size_t)tp, hd = C / (size_t)c->heads;
    size_t nh = (size_t)c->heads / (size_t)tp, kv = (size_t)gx_tp_kv_local(c, tp);
    size_t q = (nh + 2 * kv) * hd, F = c->mlp == GX_MLP_SWIGLU ? 2 * I : I;
    size_t nb = c->norm == GX_LAYERNORM ? 2 : 1;
    bool two = !(c->family == GX_FALCON && c->shared_norm);
    size_t per = nb * C * (two ? 2 : 1) + q * C + C * nh * hd + F * C + I * C;
    if (!(c->no_bias & GX_NOBIAS_QKV))
        per += q;
    if (!(c->no_bias & GX_NOBIAS_DENSE))
        per += C;
    if (!(c->no_bias & GX_NOBIAS_MLP))
        per += F + C;
    return V * C * (c->tied ? 1 : 2) + (size_t)c->layers * per + nb * C;
}

size_t gx_tp_act_bytes_per_token(const gx_config *c, int tp)
{
    return gx_act_bytes_layout(c, tp, false);
}

size_t gx_act_bytes_layout(const gx_config *c, int tp, bool recompute)
{
    return gx_act_bytes_sp(c, tp, recompute, false);
}

size_t gx_act_bytes_sp(const gx_config *c, int tp, bool recompute, bool sp)
{
    size_t C = (size_t)c->hidden, H4 = (size_t)c->intermediate / (size_t)tp;
    size_t hd = C / (size_t)c->heads, nh = (size_t)c->heads / (size_t)tp;
    size_t Q = (nh + 2 * (size_t)gx_tp_kv_local(c, tp)) * hd;
    size_t F = c->mlp == GX_MLP_SWIGLU ? 2 * H4 : H4, t = sp && tp > 1 ? (size_t)tp : 1;
    /* per token of the rows a rank holds: the norm and residual regions (seq: divided by
     * tp under sequence parallelism) and the head-, column-split rest (whole: every row) */
    size_t ln2 = c->shared_norm ? 0 : C + 2;
    size_t seq = C + 2 + ln2 + C /* resid */ + (c->parallel_residual ? 0 : C /* mid */);
    size_t whole = Q + nh * hd + nh + F + H4;
    size_t kvb = gx_tp_kv_rep(c, tp) > 1 ? 2 * hd * (size_t)gx_kv_heads(c) : 0;
    /* scratch: dres dln datt [N C], dtmp, dqkv, dfc, token ids; sequence parallel: the
     * gathered norm output [N C], two reduce-scattered [ns C] (gptneox.c act_alloc) */
    size_t scratch = 3 * C + Q + F + 2 + kvb + (t > 1 ? C : 0);
    size_t scratch_s = C + (t > 1 ? 2 * C : 0);
    size_t L = (size_t)c->layers, lnf = C + 2;
    if (recompute) /* one layer's activations, every layer's input, the forward's scratch */
        return 4 * (whole + scratch + (t > 1 ? 0 : C) +
                    ((seq - C) + (L + 1) * C + lnf + scratch_s + t - 1) / t);
    return 4 * (L * whole + scratch + (L * seq + C + lnf + scratch_s + t - 1) / t);
}

size_t gx_tp_memory_estimate(const gx_config *c, int B, int T, int tp)
{
    return gx_tp_memory_estimate_rc(c, B, T, tp, false);
}

size_t gx_tp_memory_estimate_rc(const gx_config *c, int B, int T, int tp, bool recompute)
{
    return gx_tp_memory_estimate_sp(c, B, T, tp, recompute, false);
}

size_t gx_tp_memory_estimate_sp(const gx_config *c, int B, int T, int tp, bool recompute,
                                bool sp)
{
    size_t N = (size_t)B * (size_t)T, V = (size_t)c->vocab / (size_t)tp;
    size_t chunk = N < 512 ? N : 512;
    return 20 * gx_tp_param_count(c, tp) + gx_act_bytes_sp(c, tp, recompute, sp) * N +
           4 * chunk * (V + 3);
}

void gx_tp_slice_copy(const gx_tensor *t, const float *full, float *local, int to_full)
{
    float *fw = (float *)full; /* written only when to_full */
    if (t->split < 0) {
        if (to_full)
            memcpy(fw, local, t->numel * sizeof(float));
        else
            memcpy(local, full, t->numel * sizeof(float));
        return;
    }
    size_t cols = t->ndim == 2 ? (size_t)t->shape[1] : 1;
    if (t->split == 0) {
        for (int s = 0; s < t->nseg; s++) {
            size_t g = (size_t)t->seg[s][0] * cols, l = (size_t)t->seg[s][1] * cols;
            size_t n = (size_t)t->seg[s][2] * cols;
            if (to_full)
                memcpy(fw + g, local + l, n * sizeof(float));
            else
                memcpy(local + l, full + g, n * sizeof(float));
        }
        return;
    }
    size_t gcols = (size_t)t->gshape[1];
    for (size_t r = 0; r < (size_t)t->shape[0]; r++)
        for (int s = 0; s < t->nseg; s++) {
            size_t g = r * gcols + (size_t)t->seg[s][0], l = r * cols + (size_t)t->seg[s][1];
            size_t n = (size_t)t->seg[s][2];
            if (to_full)
                memcpy(fw + g, local + l, n * sizeof(float));
            else
                memcpy(local + l, full + g, n * sizeof(float));
        }
}

grit_err gx_tp_layout(const gx_config *c, int tp, int r, gx_tensor **out, int *n, size_t *np)
{
    return gx_stage_layout(c, tp, r, 1, 0, out, n, np);
}

grit_err gx_stage_layout(const gx_config *c, int tp, int r, int pp, int s, gx_tensor **out,
                         int *n, size_t *np)
{
    grit_err rc = gx_tp_check(c, tp);
    if (rc != GRIT_OK)
        return rc;
    if (pp < 1 || s < 0 || s >= pp || c->layers % pp != 0)
        return grit_errf(GRIT_EINVAL, "pipeline stage %d of %d for %d layers", s, pp, c->layers);
    gx_model m;
    memset(&m, 0, sizeof m);
    m.cfg = *c;
    m.pp = pp;
    m.pp_rank = s;
    m.tp = tp;
    m.tp_rank = r;
    m.nh = c->heads / tp;
    m.nkv = gx_tp_kv_local(c, tp);
    m.kv_head = gx_tp_kv_head0(c, tp, r);
    m.kv_rep = gx_tp_kv_rep(c, tp);
    m.ni = c->intermediate / tp;
    m.nv = c->vocab / tp;
    m.v0 = r * m.nv;
    m.tensors = calloc((size_t)gx__num_tensors(c), sizeof *m.tensors);
    if (!m.tensors)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    gx__build_layout(&m);
    *out = m.tensors;
    *n = m.num_tensors;
    *np = m.num_params;
    return GRIT_OK;
}

grit_err gx_tp_assemble(const gx_config *c, int tp, const float *parts, size_t part_n,
                        float *full)
{
    gx_tensor *g = NULL, *t = NULL;
    int ng, nt;
    size_t npg, npt;
    grit_err rc = gx_tp_layout(c, 1, 0, &g, &ng, &npg);
    for (int r = 0; rc == GRIT_OK && r < tp; r++) {
        if ((rc = gx_tp_layout(c, tp, r, &t, &nt, &npt)) != GRIT_OK)
            break;
        if (npt != part_n || nt != ng)
            rc = grit_errf(GRIT_EINVAL, "TP rank %d holds %zu floats, expected %zu", r, npt,
                           part_n);
        for (int i = 0; rc == GRIT_OK && i < nt; i++)
            gx_tp_slice_copy(&t[i], full + g[i].offset, (float *)parts + r * part_n + t[i].offset,
                             1);
        free(t);
        t = NULL;
    }
    free(g);
    return rc;
}

void gx__tp_reduce(gx_model *m, float *buf, size_t n, int max)
{
    if (m->tp <= 1 || m->tp_failed)
        return;
    if (!m->tp_reduce || m->tp_reduce(m->tp_ctx, buf, n, max) != 0)
        m->tp_failed = 1;
}

const float *gx__sp_full(gx_model *m, const float *local, float *full)
{
    if (!m->sp)
        return local;
    size_t n = (size_t)m->ns * (size_t)m->cfg.hidden;
    memcpy(full + (size_t)m->s0 * (size_t)m->cfg.hidden, local, n * sizeof(float));
    if (!m->tp_failed && (!m->tp_gather || m->tp_gather(m->tp_ctx, full, n) != 0))
        m->tp_failed = 1;
    return full;
}

const float *gx__sp_sum(gx_model *m, float *part, float *out)
{
    if (!m->sp) {
        gx__tp_reduce(m, part, (size_t)m->B * (size_t)m->T * (size_t)m->cfg.hidden, 0);
        return part;
    }
    size_t n = (size_t)m->ns * (size_t)m->cfg.hidden;
    if (!m->tp_failed && (!m->tp_scatter || m->tp_scatter(m->tp_ctx, part, out, n) != 0))
        m->tp_failed = 1;
    return out;
}

void gx__sp_norm_begin(gx_model *m)
{
    memset(m->nrm_g, 0, 4 * sizeof(float) * (size_t)m->cfg.hidden);
}

void gx__sp_norm_end(gx_model *m, float *d0, float *d1, float *d2, float *d3)
{
    size_t C = (size_t)m->cfg.hidden;
    gx__tp_reduce(m, m->nrm_g, 4 * C, 0);
    float *d[4] = {d0, d1, d2, d3};
    for (int i = 0; i < 4; i++)
        for (size_t c = 0; d[i] && c < C; c++)
            d[i][c] += m->nrm_g[(size_t)i * C + c];
}

void gx__tp_xent(gx_model *m, float *logits, float *losses, const int32_t *tgt, int M,
                 float grad_scale)
{
    float *mx = m->tp_tmp, *s = mx + m->chunk, *lt = s + m->chunk; /* [s | lt] reduce as one */
    op_xent_tp_local(logits, tgt, M, m->nv, m->v0, mx, lt);
    gx__tp_reduce(m, mx, (size_t)M, 1);
    op_xent_tp_exp(logits, mx, M, m->nv, grad_scale != 0.0f, s);
    if (M < m->chunk) /* make [s | lt] contiguous for one reduction */
        memmove(s + M, lt, sizeof(float) * (size_t)M);
    gx__tp_reduce(m, s, 2 * (size_t)M, 0);
    op_xent_tp_finish(logits, losses, tgt, M, m->nv, m->v0, mx, s, s + M, grad_scale);
}
