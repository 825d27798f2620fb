/* gptneox_infer.c - KV-cache inference and sampling (see gptneox_infer.h). */
#include "model/gptneox_infer.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "model/family.h"
#include "tensor/matmul.h"
#include "tensor/ops.h"

void gxi_free(gxi_state *s)
{
    if (!s)
        return;
    float *bufs[] = {s->k,  s->v,  s->x,    s->ln,  s->qkv,  s->att,    s->o,     s->mid,
                     s->fc, s->gelu, s->lnf, s->mean, s->rstd, s->scores, s->probs};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(s->order);
    memset(s, 0, sizeof *s);
}

grit_err gxi_init(gxi_state *s, const gx_model *m, int max_t, int rows, int nthreads)
{
    memset(s, 0, sizeof *s);
    const gx_config *c = &m->cfg;
    if (max_t < 1 || max_t > c->max_positions || rows < 1 || nthreads < 1)
        return grit_errf(GRIT_EINVAL, "inference: expected 1 <= context <= max_positions %d, "
                                      "got %d", c->max_positions, max_t);
    size_t C = (size_t)c->hidden, V = (size_t)c->vocab;
    size_t FF = (size_t)c->intermediate * (c->mlp == GX_MLP_SWIGLU ? 2 : 1);
    size_t KV = (size_t)gx_kv_heads(c) * (C / (size_t)c->heads), Q = (size_t)m->qkv_dim;
    size_t L = (size_t)c->layers, R = (size_t)rows;
    s->m = m;
    s->max_t = max_t;
    s->rows = rows;
    s->nthreads = nthreads;
#define ALLOC(p, n) ((p) = malloc(sizeof *(p) * (n)))
    int ok = ALLOC(s->k, L * (size_t)max_t * KV) && ALLOC(s->v, L * (size_t)max_t * KV) &&
             ALLOC(s->x, R * C) && ALLOC(s->ln, R * C) && ALLOC(s->qkv, R * Q) &&
             ALLOC(s->att, R * C) && ALLOC(s->o, R * C) && ALLOC(s->mid, R * C) &&
             ALLOC(s->fc, R * FF) && ALLOC(s->gelu, R * FF) && ALLOC(s->lnf, R * C) &&
             ALLOC(s->mean, R) && ALLOC(s->rstd, R) &&
             ALLOC(s->scores, (size_t)nthreads * (size_t)max_t) && ALLOC(s->probs, V) &&
             ALLOC(s->order, V);
#undef ALLOC
    if (!ok) {
        gxi_free(s);
        return grit_errf(GRIT_ENOMEM, "inference: out of memory for a %d-position cache", max_t);
    }
    return GRIT_OK;
}

void gxi_reset(gxi_state *s) { s->pos = 0; }

static void fill_rows(float *out, const float *bias, int n, int cols)
{
    for (int i = 0; i < n; i++)
        memcpy(out + (size_t)i * (size_t)cols, bias, sizeof(float) * (size_t)cols);
}

/* Causal attention of n new queries (positions p0..p0+n-1) over the cache. */
static void attend(gxi_state *s, int l, int p0, int n)
{
    const gx_config *c = &s->m->cfg;
    int C = c->hidden, H = c->heads, hd = C / H, KV = gx_kv_heads(c) * hd;
    op_qkv_layout lay = gx_qkv_layout(c);
    const float *K = s->k + (size_t)l * (size_t)s->max_t * (size_t)KV;
    const float *Vc = s->v + (size_t)l * (size_t)s->max_t * (size_t)KV;
    float scale = 1.0f / sqrtf((float)hd);
#pragma omp parallel for schedule(static) num_threads(s->cur_threads)
    for (int w = 0; w < n * H; w++) {
        int i = w / H, h = w % H, p = p0 + i, g = h / lay.group;
        float *sc = s->scores + (size_t)omp_get_thread_num() * (size_t)s->max_t;
        const float *q = s->qkv + (size_t)i * (size_t)lay.ld +
                         (size_t)(h / lay.group) * (size_t)lay.q_gstride +
                         (size_t)(h % lay.group) * (size_t)hd;
        float mx = -INFINITY;
        for (int j = 0; j <= p; j++) {
            const float *kj = K + (size_t)j * (size_t)KV + (size_t)g * (size_t)hd;
            float d = 0.0f;
            for (int e = 0; e < hd; e++)
                d += q[e] * kj[e];
            sc[j] = d * scale;
            mx = sc[j] > mx ? sc[j] : mx;
        }
        float sum = 0.0f;
        for (int j = 0; j <= p; j++) {
            sc[j] = expf(sc[j] - mx);
            sum += sc[j];
        }
        float *out = s->att + (size_t)i * (size_t)C + (size_t)h * (size_t)hd;
        for (int e = 0; e < hd; e++)
            out[e] = 0.0f;
        for (int j = 0; j <= p; j++) {
            const float *vj = Vc + (size_t)j * (size_t)KV + (size_t)g * (size_t)hd;
            float pj = sc[j] / sum;
            for (int e = 0; e < hd; e++)
                out[e] += pj * vj[e];
        }
    }
}

/* out = norm(x) with the model's norm kind (LayerNorm or RMSNorm). */
static void norm(const gxi_state *s, float *out, const float *x, const float *w, const float *b,
                 int n)
{
    const gx_config *c = &s->m->cfg;
    if (c->norm == GX_RMSNORM)
        op_rmsnorm_fwd(out, s->rstd, x, w, n, c->hidden, (float)c->ln_eps);
    else
        op_layernorm_fwd(out, s->mean, s->rstd, x, w, b, n, c->hidden, (float)c->ln_eps);
}

/* out = x W^T (+ b) over n rows, as the trainer's linear_fwd. */
static void linear(float *out, const float *x, const float *w, const float *b, int n, int rows,
                   int in)
{
    if (b) {
        fill_rows(out, b, n, rows);
        mm_nt(n, rows, in, 1.0f, x, in, w, in, 1.0f, out, rows);
    } else
        mm_nt(n, rows, in, 1.0f, x, in, w, in, 0.0f, out, rows);
}

/* One layer over n new tokens at positions p0..: the trainer's layer_fwd
 * (gptneox_step.c) with the keys and values of earlier positions from the cache. */
static void layer(gxi_state *s, int l, int p0, int n)
{
    const gx_model *m = s->m;
    const gx_config *c = &m->cfg;
    const gx_layer *w = &m->w.layer[l];
    int C = c->hidden, H = c->heads, hd = C / H, FI = c->intermediate, r2 = m->rot / 2;
    int Q = m->qkv_dim, kvh = gx_kv_heads(c), KV = kvh * hd;
    int F = c->mlp == GX_MLP_SWIGLU ? 2 * FI : FI;
    const float *dense_b = w->dense_b ? w->dense_b : m->zeros;
    const float *proj_b = w->proj_b ? w->proj_b : m->zeros;
    op_qkv_layout lay = gx_qkv_layout(c);
    norm(s, s->ln, s->x, w->ln1_w, w->ln1_b, n);
    linear(s->qkv, s->ln, w->qkv_w, w->qkv_b, n, Q, C);
    op_rotary_lay(s->qkv, m->rope_cos + (size_t)p0 * (size_t)r2,
                  m->rope_sin + (size_t)p0 * (size_t)r2, &lay, n, n, H, hd, m->rot, 0);
    size_t base = (size_t)l * (size_t)s->max_t * (size_t)KV;
    for (int i = 0; i < n; i++)
        for (int g = 0; g < kvh; g++) {
            const float *row = s->qkv + (size_t)i * (size_t)Q;
            size_t at = base + (size_t)(p0 + i) * (size_t)KV + (size_t)g * (size_t)hd;
            memcpy(s->k + at, row + lay.k_base + (size_t)g * (size_t)lay.kv_stride,
                   sizeof(float) * (size_t)hd);
            memcpy(s->v + at, row + lay.v_base + (size_t)g * (size_t)lay.kv_stride,
                   sizeof(float) * (size_t)hd);
        }
    attend(s, l, p0, n);
    mm_nt(n, C, C, 1.0f, s->att, C, w->dense_w, C, 0.0f, s->o, C);
    /* the same operation order as the trainer's layer_fwd */
    float *y, *u;
    if (c->parallel_residual) {
        op_add3_bias(s->mid, s->x, s->o, dense_b, n, C);
        if (w->proj_b)
            op_add_bias(s->mid, s->mid, proj_b, n, C);
        y = s->mid;
        u = s->x;
    } else {
        op_add3_bias(s->mid, s->x, s->o, dense_b, n, C);
        op_add_bias(s->o, s->mid, proj_b, n, C);
        y = s->o;
        u = s->mid;
    }
    if (!(c->parallel_residual && c->shared_norm)) /* one norm: s->ln is norm1(x) already */
        norm(s, s->ln, u, w->ln2_w, w->ln2_b, n);
    linear(s->fc, s->ln, w->fc_w, w->fc_b, n, F, C);
    if (c->mlp == GX_MLP_SWIGLU)
        op_swiglu_fwd(s->gelu, s->fc, n, FI);
    else
        op_gelu_fwd(s->gelu, s->fc, (long)n * FI, c->act);
    mm_nt(n, C, FI, 1.0f, s->gelu, FI, w->proj_w, FI, 1.0f, y, C);
    memcpy(s->x, y, sizeof(float) * (size_t)n * (size_t)C);
}

grit_err gxi_forward(gxi_state *s, const int32_t *tok, int n, float *logits_last,
                     float *logits_all)
{
    const gx_model *m = s->m;
    const gx_config *c = &m->cfg;
    int C = c->hidden, V = c->vocab;
    if (n < 0 || s->pos + n > s->max_t)
        return grit_errf(GRIT_EINVAL, "inference: %d more tokens overflow the %d-position "
                                      "context (%d used)", n, s->max_t, s->pos);
    for (int i = 0; i < n; i++)
        if (tok[i] < 0 || tok[i] >= V)
            return grit_errf(GRIT_EINVAL, "inference: token id %d is outside the vocabulary "
                                          "of %d", tok[i], V);
    /* A decode step of a small model is too little work to share: waking the
     * other threads costs more than it saves (far more on a busy machine, where
     * a descheduled thread stalls every barrier). Below ~8M multiply-adds per
     * call, run on this thread only; omp_set_num_threads affects only the
     * calling thread's later parallel regions, and is restored on return. */
    double madds = (double)n * ((double)c->layers * (4.0 * C * C + 2.0 * C * c->intermediate) +
                                (double)C * V);
    int saved = omp_get_max_threads();
    s->cur_threads = madds < 8e6 ? 1 : s->nthreads;
    omp_set_num_threads(s->cur_threads);
    for (int done = 0; done < n;) {
        int k = n - done < s->rows ? n - done : s->rows, p0 = s->pos;
        op_embed_fwd(s->x, m->w.embed_in, tok + done, k, C);
        for (int l = 0; l < c->layers; l++)
            layer(s, l, p0, k);
        s->pos += k;
        int last = done + k == n;
        if (logits_all || (last && logits_last)) {
            norm(s, s->lnf, s->x, m->w.lnf_w, m->w.lnf_b, k);
            if (logits_all)
                mm_nt(k, V, C, 1.0f, s->lnf, C, m->w.embed_out, C, 0.0f,
                      logits_all + (size_t)done * (size_t)V, V);
            if (last && logits_last)
                mm_nt(1, V, C, 1.0f, s->lnf + (size_t)(k - 1) * (size_t)C, C, m->w.embed_out,
                      C, 0.0f, logits_last, V);
        }
        done += k;
    }
    omp_set_num_threads(saved);
    return GRIT_OK;
}

static _Thread_local const float *sort_keys;

static int by_logit_desc(const void *a, const void *b)
{
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    float x = sort_keys[i], y = sort_keys[j];
    if (x != y)
        return x > y ? -1 : 1;
    return i < j ? -1 : i > j;
}

int32_t gxi_sample(gxi_state *s, float *logits, double temperature, int top_k, double top_p,
                   rng_t *rng)
{
    int V = s->m->cfg.vocab;
    if (temperature <= 0.0) {
        int32_t best = 0;
        for (int32_t i = 1; i < V; i++)
            if (logits[i] > logits[best])
                best = i;
        return best;
    }
    int k = top_k > 0 && top_k < V ? top_k : V;
    for (int32_t i = 0; i < V; i++)
        s->order[i] = i;
    if (k < V || top_p < 1.0) {
        sort_keys = logits;
        qsort(s->order, (size_t)V, sizeof *s->order, by_logit_desc);
    }
    float mx = -INFINITY;
    for (int i = 0; i < k; i++)
        mx = logits[s->order[i]] > mx ? logits[s->order[i]] : mx;
    double total = 0.0;
    for (int i = 0; i < k; i++) {
        s->probs[i] = (float)exp(((double)logits[s->order[i]] - mx) / temperature);
        total += s->probs[i];
    }
    int keep = k;
    if (top_p < 1.0) {
        double cum = 0.0;
        for (int i = 0; i < k; i++) {
            cum += s->probs[i];
            if (cum >= top_p * total) {
                keep = i + 1;
                total = cum;
                break;
            }
        }
    }
    double u = rng_uniform(rng) * total, cum = 0.0;
    for (int i = 0; i < keep; i++) {
        cum += s->probs[i];
        if (u < cum)
            return s->order[i];
    }
    return s->order[keep - 1];
}
