/* gptneox_infer.c - KV-cache inference and sampling (see gptneox_infer.h). */
#include "model/gptneox_infer.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "model/family.h"
#include "tensor/matmul.h"
#include "tensor/ops.h"
#include "tensor/rowgemm.h"

void gxi_free(gxi_state *s)
{
    if (!s)
        return;
    float *bufs[] = {s->k,  s->v,  s->x,    s->ln,  s->qkv,  s->att,    s->o,     s->mid,
                     s->fc, s->gelu, s->lnf, s->mean, s->rstd, s->scores, s->probs};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(s->order);
    free(s->rseq);
    free(s->rpos);
    memset(s, 0, sizeof *s);
}

size_t gxi_cache_bytes(const gx_model *m, int max_t)
{
    const gx_config *c = &m->cfg;
    size_t KV = (size_t)gx_kv_heads(c) * (size_t)(c->hidden / c->heads);
    return 2 * sizeof(float) * (size_t)c->layers * (size_t)max_t * KV;
}

enum { CACHE = 1, SCRATCH = 2 };

/* The parts asked for: a cache of max_t positions, scratch for rows tokens a call. */
static grit_err alloc_state(gxi_state *s, const gx_model *m, int max_t, int rows, int nthreads,
                            int parts)
{
    memset(s, 0, sizeof *s);
    const gx_config *c = &m->cfg;
    if ((parts & CACHE) && (max_t < 1 || max_t > c->max_positions))
        return grit_errf(GRIT_EINVAL, "inference: expected 1 <= context <= max_positions %d, "
                                      "got %d", c->max_positions, max_t);
    if ((parts & SCRATCH) && (rows < 1 || nthreads < 1))
        return grit_errf(GRIT_EINVAL, "inference: expected at least one row and one thread, "
                                      "got %d and %d", rows, nthreads);
    max_t = parts & CACHE ? max_t : 0;
    rows = parts & SCRATCH ? rows : 0;
    size_t C = (size_t)c->hidden, V = (size_t)c->vocab;
    size_t FF = (size_t)c->intermediate * (c->mlp == GX_MLP_SWIGLU ? 2 : 1);
    size_t KV = (size_t)gx_kv_heads(c) * (C / (size_t)c->heads), Q = (size_t)m->qkv_dim;
    size_t L = (size_t)c->layers, R = (size_t)rows, T = (size_t)c->max_positions;
    s->m = m;
    s->max_t = max_t;
    s->rows = rows;
    s->nthreads = nthreads;
#define ALLOC(p, n) ((p) = malloc(sizeof *(p) * (n)))
    int ok = !max_t || (ALLOC(s->k, L * (size_t)max_t * KV) && ALLOC(s->v, L * (size_t)max_t * KV));
    ok = ok && (!rows ||
                (ALLOC(s->x, R * C) && ALLOC(s->ln, R * C) && ALLOC(s->qkv, R * Q) &&
                 ALLOC(s->att, R * C) && ALLOC(s->o, R * C) && ALLOC(s->mid, R * C) &&
                 ALLOC(s->fc, R * FF) && ALLOC(s->gelu, R * FF) && ALLOC(s->lnf, R * C) &&
                 ALLOC(s->mean, R) && ALLOC(s->rstd, R) &&
                 ALLOC(s->scores, (size_t)nthreads * T) && ALLOC(s->probs, V) &&
                 ALLOC(s->order, V) && ALLOC(s->rseq, R) && ALLOC(s->rpos, R)));
#undef ALLOC
    if (!ok) {
        gxi_free(s);
        return grit_errf(GRIT_ENOMEM, "inference: out of memory for a %d-position cache", max_t);
    }
    return GRIT_OK;
}

grit_err gxi_init(gxi_state *s, const gx_model *m, int max_t, int rows, int nthreads)
{
    return alloc_state(s, m, max_t, rows, nthreads, CACHE | SCRATCH);
}

grit_err gxi_init_cache(gxi_state *s, const gx_model *m, int max_t)
{
    return alloc_state(s, m, max_t, 0, 1, CACHE);
}

grit_err gxi_init_work(gxi_state *s, const gx_model *m, int rows, int nthreads)
{
    return alloc_state(s, m, 0, rows, nthreads, SCRATCH);
}

void gxi_reset(gxi_state *s) { s->pos = 0; }

static void fill_rows(float *out, const float *bias, int n, int cols)
{
    for (int i = 0; i < n; i++)
        memcpy(out + (size_t)i * (size_t)cols, bias, sizeof(float) * (size_t)cols);
}

/* Causal attention of the n rows over their sequences' caches: row i is at position
 * w->rpos[i] of w->rseq[i] and sees that cache's positions 0..rpos[i]. */
static void attend(gxi_state *w, int l, int n)
{
    const gx_config *c = &w->m->cfg;
    int C = c->hidden, H = c->heads, hd = C / H, KV = gx_kv_heads(c) * hd;
    op_qkv_layout lay = gx_qkv_layout(c);
    float scale = 1.0f / sqrtf((float)hd);
#pragma omp parallel for schedule(static) num_threads(w->cur_threads)
    for (int t = 0; t < n * H; t++) {
        int i = t / H, h = t % H, p = w->rpos[i], g = h / lay.group;
        const gxi_state *sq = w->rseq[i];
        const float *K = sq->k + (size_t)l * (size_t)sq->max_t * (size_t)KV;
        const float *Vc = sq->v + (size_t)l * (size_t)sq->max_t * (size_t)KV;
        float *sc = w->scores + (size_t)omp_get_thread_num() * (size_t)c->max_positions;
        const float *q = w->qkv + (size_t)i * (size_t)lay.ld +
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
        float *out = w->att + (size_t)i * (size_t)C + (size_t)h * (size_t)hd;
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

/* C = A B^T + beta C over M rows: OpenBLAS for a prompt's rows; for a decode step (one
 * row, or gxi_decode's B rows) the batch-invariant kernel (tensor/rowgemm.h), so a row's
 * result never depends on how many rows share the step. */
static void gemm(const gxi_state *s, int M, int N, int K, const float *A, const float *B,
                 float beta, float *C)
{
    if (s->invariant)
        mm_nt_rows(M, N, K, A, K, B, K, beta, C, N);
    else
        mm_nt(M, N, K, 1.0f, A, K, B, K, beta, C, N);
}

/* out = x W^T (+ b) over n rows, as the trainer's linear_fwd. */
static void linear(const gxi_state *s, float *out, const float *x, const float *w,
                   const float *b, int n, int rows, int in)
{
    if (b) {
        fill_rows(out, b, n, rows);
        gemm(s, n, rows, in, x, w, 1.0f, out);
    } else
        gemm(s, n, rows, in, x, w, 0.0f, out);
}

/* One layer over the n rows (row i: position rpos[i] of sequence rseq[i]): the
 * trainer's layer_fwd (gptneox_step.c) with the keys and values of earlier positions
 * from each sequence's cache. The row-wise parts are one GEMM over all n rows. */
static void layer(gxi_state *s, int l, int n)
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
    linear(s, s->qkv, s->ln, w->qkv_w, w->qkv_b, n, Q, C);
    for (int i = 0; i < n; i++) { /* rotary at each row's own position (elementwise) */
        size_t p = (size_t)s->rpos[i];
        op_rotary_lay(s->qkv + (size_t)i * (size_t)Q, m->rope_cos + p * (size_t)r2,
                      m->rope_sin + p * (size_t)r2, &lay, 1, 1, H, hd, m->rot, 0);
    }
    for (int i = 0; i < n; i++) {
        gxi_state *sq = s->rseq[i];
        size_t base = (size_t)l * (size_t)sq->max_t * (size_t)KV;
        for (int g = 0; g < kvh; g++) {
            const float *row = s->qkv + (size_t)i * (size_t)Q;
            size_t at = base + (size_t)s->rpos[i] * (size_t)KV + (size_t)g * (size_t)hd;
            memcpy(sq->k + at, row + lay.k_base + (size_t)g * (size_t)lay.kv_stride,
                   sizeof(float) * (size_t)hd);
            memcpy(sq->v + at, row + lay.v_base + (size_t)g * (size_t)lay.kv_stride,
                   sizeof(float) * (size_t)hd);
        }
    }
    attend(s, l, n);
    gemm(s, n, C, C, s->att, w->dense_w, 0.0f, s->o);
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
    linear(s, s->fc, s->ln, w->fc_w, w->fc_b, n, F, C);
    if (c->mlp == GX_MLP_SWIGLU)
        op_swiglu_fwd(s->gelu, s->fc, n, FI);
    else
        op_gelu_fwd(s->gelu, s->fc, (long)n * FI, c->act);
    gemm(s, n, C, FI, s->gelu, w->proj_w, 1.0f, y);
    memcpy(s->x, y, sizeof(float) * (size_t)n * (size_t)C);
}

/* Sets the call's thread count from its work (saved: the caller's, restored by
 * threads_end). A decode step of a small model is too little work to share: waking the
 * other threads costs more than it saves (far more on a busy machine, where a
 * descheduled thread stalls every barrier). Below ~8M multiply-adds per call, run on
 * this thread only; omp_set_num_threads affects only the calling thread's later
 * parallel regions. The results do not depend on it: threads split rows and heads,
 * never a sum. */
static int threads_begin(gxi_state *w, int n)
{
    const gx_config *c = &w->m->cfg;
    double C = c->hidden;
    double madds = (double)n * ((double)c->layers * (4.0 * C * C + 2.0 * C * c->intermediate) +
                                C * c->vocab);
    int saved = omp_get_max_threads();
    w->cur_threads = madds < 8e6 ? 1 : w->nthreads;
    omp_set_num_threads(w->cur_threads);
    return saved;
}

/* The n rows set in w->rseq/rpos with tokens tok: embeddings, layers (appending each
 * row's key and value to its cache), and logits_all [n][V] of every row and/or
 * logits_last [V] of the last (either may be NULL). Positions are not advanced here. */
static void rows_fwd(gxi_state *w, const int32_t *tok, int n, float *logits_last,
                     float *logits_all)
{
    const gx_model *m = w->m;
    const gx_config *c = &m->cfg;
    int C = c->hidden, V = c->vocab;
    op_embed_fwd(w->x, m->w.embed_in, tok, n, C);
    for (int l = 0; l < c->layers; l++)
        layer(w, l, n);
    if (!logits_all && !logits_last)
        return;
    norm(w, w->lnf, w->x, m->w.lnf_w, m->w.lnf_b, n);
    if (logits_all)
        gemm(w, n, V, C, w->lnf, m->w.embed_out, 0.0f, logits_all);
    if (logits_last)
        gemm(w, 1, V, C, w->lnf + (size_t)(n - 1) * (size_t)C, m->w.embed_out, 0.0f,
             logits_last);
}

static grit_err check_ids(const gx_config *c, const int32_t *tok, int n)
{
    for (int i = 0; i < n; i++)
        if (tok[i] < 0 || tok[i] >= c->vocab)
            return grit_errf(GRIT_EINVAL, "inference: token id %d is outside the vocabulary "
                                          "of %d", tok[i], c->vocab);
    return GRIT_OK;
}

grit_err gxi_forward_in(gxi_state *w, gxi_state *s, const int32_t *tok, int n,
                        float *logits_last, float *logits_all)
{
    const gx_config *c = &s->m->cfg;
    int V = c->vocab;
    if (n < 0 || s->pos + n > s->max_t)
        return grit_errf(GRIT_EINVAL, "inference: %d more tokens overflow the %d-position "
                                      "context (%d used)", n, s->max_t, s->pos);
    if (check_ids(c, tok, n) != GRIT_OK)
        return GRIT_EINVAL;
    int saved = threads_begin(w, n);
    for (int done = 0; done < n;) {
        int k = n - done < w->rows ? n - done : w->rows, last = done + k == n;
        for (int i = 0; i < k; i++) {
            w->rseq[i] = s;
            w->rpos[i] = s->pos + i;
        }
        w->invariant = k == 1; /* one token: a decode step of one sequence */
        rows_fwd(w, tok + done, k, last ? logits_last : NULL,
                 logits_all ? logits_all + (size_t)done * (size_t)V : NULL);
        s->pos += k;
        done += k;
    }
    omp_set_num_threads(saved);
    return GRIT_OK;
}

grit_err gxi_forward(gxi_state *s, const int32_t *tok, int n, float *logits_last,
                     float *logits_all)
{
    return gxi_forward_in(s, s, tok, n, logits_last, logits_all);
}

grit_err gxi_decode(gxi_state *w, gxi_state *const *seq, const int32_t *tok, int B,
                    float *logits)
{
    if (B < 1 || B > w->rows)
        return grit_errf(GRIT_EINVAL, "inference: a decode step of %d sequences; this state "
                                      "has rows for 1 to %d", B, w->rows);
    for (int i = 0; i < B; i++)
        if (seq[i]->pos + 1 > seq[i]->max_t)
            return grit_errf(GRIT_EINVAL, "inference: sequence %d of the step is full (%d "
                                          "positions)", i, seq[i]->max_t);
    if (check_ids(&w->m->cfg, tok, B) != GRIT_OK)
        return GRIT_EINVAL;
    int saved = threads_begin(w, B);
    w->invariant = 1;
    for (int i = 0; i < B; i++) {
        w->rseq[i] = seq[i];
        w->rpos[i] = seq[i]->pos;
    }
    rows_fwd(w, tok, B, NULL, logits);
    for (int i = 0; i < B; i++)
        seq[i]->pos++;
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
