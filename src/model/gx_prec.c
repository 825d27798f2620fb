/*
 * gx_prec.c - precision of the decoder's GEMMs (gx_set_precision, gx__mm).
 *
 * bf16 keeps three things beside the float32 model: a bf16 copy of the parameter
 * block (only the matrices GEMMs read are filled: every 2-D tensor but an untied
 * input embedding, which is only looked up), refreshed from the master weights at the
 * start of each gx_step so it always matches what the optimiser, a checkpoint load or
 * an init wrote; and two operand buffers, sized once for the largest activation
 * operand (a [N, max(C, qkv, 2I)] layer input or gradient, or a [chunk, V] block of
 * LM-head logits), into which float32 activations are rounded right before a GEMM.
 * Products accumulate and land in float32 (tensor/gemm_bf16.h).
 *
 * Where the GEMMs cannot run in bf16 (no AVX512-BF16 or no oneDNN: gx_bf16_rounds), the
 * copies and buffers hold the same bf16 values as float32 instead and OpenBLAS sgemm
 * multiplies them directly: one rounding pass per activation operand, where rounding to
 * bf16 and widening back took two and widened every weight again at every GEMM. The
 * numbers are those of the widening path (gemm_bf16's fallback, which the planted
 * accumulation fault still uses) bit for bit.
 */
#include "model/gx_prec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/tp.h"
#include "tensor/matmul.h"

const char *gx_precision_name(gx_precision p) { return p == GX_BF16 ? "bf16" : "fp32"; }

grit_err gx_precision_parse(const char *name, gx_precision *out)
{
    if (!strcmp(name, "fp32"))
        *out = GX_FP32;
    else if (!strcmp(name, "bf16"))
        *out = GX_BF16;
    else
        return grit_errf(GRIT_EINVAL, "precision: expected \"fp32\" or \"bf16\", got \"%s\"",
                         name);
    return GRIT_OK;
}

static void drop_bf16(gx_model *m)
{
    if (m->gemm) {
        gemm_bf16_free(m->gemm);
        free(m->gemm);
    }
    free(m->params_h);
    free(m->win_h);
    free(m->opa);
    free(m->opb);
    free(m->params_r);
    free(m->win_r);
    free(m->opa_r);
    free(m->opb_r);
    m->gemm = NULL;
    m->params_h = m->win_h = m->opa = m->opb = NULL;
    m->params_r = m->win_r = m->opa_r = m->opb_r = NULL;
    m->rounds = false;
    m->opa_n = m->opb_n = m->win_cap = m->win_fn = 0;
    m->opa_src = NULL;
    m->win_f = NULL;
    m->prec = GX_FP32;
}

/* n zeroed elements of size es, 64-byte aligned */
static void *alloc_z(size_t n, size_t es)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, (n ? n : 1) * es) != 0)
        return NULL;
    memset(p, 0, (n ? n : 1) * es);
    return p;
}

bool gx_bf16_rounds(void) { return gemm_bf16_widens() && !gemm_bf16_fault_planted(); }

/* Bytes an element of the weight copy and operand buffers takes (m->rounds: a float). */
static size_t copy_es(const gx_model *m) { return m->rounds ? sizeof(float) : sizeof(bf16); }

/* Sets the window's weight copy, in the copy's element type. */
static void set_win(gx_model *m, void *h, size_t cap)
{
    if (m->rounds)
        m->win_r = h;
    else
        m->win_h = h;
    m->win_cap = cap;
}

grit_err gx__bf16_window(gx_model *m)
{
    if (!m->params_h && !m->params_r) /* fp32, or set up without the block already */
        return GRIT_OK;
    free(m->params_h);
    free(m->params_r);
    m->params_h = NULL;
    m->params_r = NULL;
    size_t n = gx_bucket_max(m);
    void *h = alloc_z(n, copy_es(m));
    if (!h)
        return grit_errf(GRIT_ENOMEM, "out of memory for the bf16 weight window");
    set_win(m, h, n);
    return GRIT_OK;
}

/* Elements of the bf16 operand buffers (na: an [N, wide] layer operand or a [chunk, V]
 * block of logits; nb: a layer operand) and of the largest weight operand nw ([V, C],
 * [wide, C] or [C, I], for the widening fallback's scratch) of a rank whose qkv width,
 * MLP width and vocabulary are qkv, ni, V (tensor parallelism's shares). */
static void bf16_sizes(const gx_config *c, size_t N, size_t qkv, size_t ni, size_t V,
                       size_t chunk, size_t *na, size_t *nb, size_t *nw)
{
    size_t C = (size_t)c->hidden, F = c->mlp == GX_MLP_SWIGLU ? 2 * ni : ni;
    size_t wide = C > qkv ? C : qkv;
    wide = F > wide ? F : wide;
    *na = *nb = N * wide;
    if (chunk * V > *na)
        *na = chunk * V;
    *nw = V * C > wide * C ? V * C : wide * C;
}

double gx_bf16_buffer_bytes(const gx_config *c, int tp, size_t N, bool rounds)
{
    size_t hd = (size_t)(c->hidden / c->heads), nh = (size_t)(c->heads / tp);
    size_t qkv = (nh + 2 * (size_t)gx_tp_kv_local(c, tp)) * hd, na, nb, nw;
    size_t chunk = N < 512 ? N : 512;
    bf16_sizes(c, N, qkv, (size_t)(c->intermediate / tp), (size_t)(c->vocab / tp), chunk, &na,
               &nb, &nw);
    (void)nw; /* only the planted fault's widening scratch is sized by it */
    return (rounds ? 4.0 : 2.0) * (double)(na + nb);
}

grit_err gx_set_precision(gx_model *m, gx_precision p, const char **note)
{
    if (note)
        *note = NULL;
    drop_bf16(m);
    if (p == GX_FP32)
        return GRIT_OK;
    size_t na, nb, nw;
    bf16_sizes(&m->cfg, (size_t)m->B * (size_t)m->T, (size_t)m->qkv_dim, (size_t)m->ni,
               (size_t)m->nv, (size_t)m->chunk, &na, &nb, &nw);
    /* ZeRO-3 (no parameter block): a copy of the window, not of the block. Without
     * AVX512-BF16 the copies are bf16-rounded floats that sgemm reads as they are. */
    size_t nh = m->params ? m->num_params : gx_bucket_max(m);
    bool r = m->rounds = gx_bf16_rounds();
    size_t es = copy_es(m);
    void *h = alloc_z(nh, es), *a = alloc_z(na, es), *b = alloc_z(nb, es);
    if (r) {
        m->opa_r = a;
        m->opb_r = b;
    } else {
        m->opa = a;
        m->opb = b;
    }
    if (!m->params)
        set_win(m, h, nh);
    else if (r)
        m->params_r = h;
    else
        m->params_h = h;
    m->gemm = calloc(1, sizeof *m->gemm);
    if (!h || !a || !b || !m->gemm) {
        drop_bf16(m);
        return grit_errf(GRIT_ENOMEM, "out of memory for the bf16 copies");
    }
    m->opa_n = na;
    m->opb_n = nb;
    /* the fp32 backend's widening scratch serves only the planted fault here */
    size_t sa = r ? 0 : na > nw ? na : nw, sb = r ? 0 : nb > nw ? nb : nw;
    grit_err rc = gemm_bf16_init(m->gemm, sa, sb);
    if (rc == GRIT_OK && r != (m->gemm->backend == GEMM_BF16_FP32 && !m->gemm->fault_accum))
        rc = grit_errf(GRIT_EINVAL, "bf16: GEMM backend disagrees with gx_bf16_rounds");
    if (rc != GRIT_OK) {
        drop_bf16(m); /* gemm_bf16_free is safe on a context whose init failed */
        return rc;
    }
    m->prec = GX_BF16;
    m->gemm_err = GRIT_OK;
    if (note)
        *note = m->gemm->why;
    gx__sync_bf16(m);
    return GRIT_OK;
}

/* Whether tensor t is read by GEMMs (so has a bf16 copy): every matrix but an untied input
 * embedding, which is only looked up. */
static bool gemm_weight(const gx_model *m, const gx_tensor *t)
{
    return t->ndim == 2 && (t->slot != GX_SLOT_EMBED || m->cfg.tied);
}

void gx__sync_bf16(gx_model *m)
{
    if (!m->params_h && !m->params_r) /* ZeRO-3: each gather rounds its window */
        return;
    for (int i = 0; i < m->num_tensors; i++) {
        const gx_tensor *t = &m->tensors[i];
        if (!gemm_weight(m, t))
            continue;
        if (m->rounds)
            bf16_round(m->params_r + t->offset, m->params + t->offset, t->numel);
        else
            bf16_convert(m->params_h + t->offset, m->params + t->offset, t->numel);
    }
}

void gx__param_begin(gx_model *m, size_t off, size_t n)
{
    if (!m->param_begin)
        return;
    m->param_begin(m->grad_ctx, off, n);
    if (m->prec != GX_BF16 || !(m->win_h || m->win_r))
        return;
    const float *w = m->zwin_w; /* [n] floats: the range from off */
    m->win_f = w;
    m->win_fn = n <= m->win_cap ? n : 0; /* larger than the window: no bf16 form (an error) */
    for (int i = 0; i < m->num_tensors && m->win_fn; i++) {
        const gx_tensor *t = &m->tensors[i];
        size_t a = t->offset > off ? t->offset : off;
        size_t b = t->offset + t->numel < off + n ? t->offset + t->numel : off + n;
        if (!(a < b && gemm_weight(m, t)))
            continue;
        if (m->rounds)
            bf16_round(m->win_r + (a - off), w + (a - off), b - a);
        else
            bf16_convert(m->win_h + (a - off), w + (a - off), b - a);
    }
}

/* Where operand X sits in the weights' copy: its offset in the block's copy (*win false)
 * or in the window's (*win true); -1 for an activation. */
static long copy_off(const gx_model *m, const float *X, bool *win)
{
    *win = false;
    if ((m->params_h || m->params_r) && X >= m->params && X < m->params + m->num_params)
        return X - m->params;
    *win = true;
    if (m->win_fn && X >= m->win_f && X < m->win_f + m->win_fn)
        return X - m->win_f;
    return -1;
}

/* The bf16 form of operand X (stored rows x cols with ld): the weight copy when X is a
 * parameter, else X rounded into buf (packed, *ld_out = cols). */
static const bf16 *operand(gx_model *m, const float *X, int rows, int cols, int ld, bf16 *buf,
                           size_t cap, int *ld_out)
{
    bool win;
    long o = copy_off(m, X, &win);
    *ld_out = o >= 0 ? ld : cols;
    if (o >= 0)
        return (win ? m->win_h : m->params_h) + o;
    if ((size_t)rows * (size_t)cols > cap)
        return NULL;
    bf16_convert_rows(buf, X, rows, cols, ld);
    return buf;
}

/* The same as bf16-rounded float32 (m->rounds): what sgemm multiplies. */
static const float *operand_r(gx_model *m, const float *X, int rows, int cols, int ld,
                              float *buf, size_t cap, int *ld_out)
{
    bool win;
    long o = copy_off(m, X, &win);
    *ld_out = o >= 0 ? ld : cols;
    if (o >= 0)
        return (win ? m->win_r : m->params_r) + o;
    if ((size_t)rows * (size_t)cols > cap)
        return NULL;
    bf16_round_rows(buf, X, rows, cols, ld);
    return buf;
}

static void sgemm(char ta, char tb, int M, int N, int K, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc)
{
    cblas_sgemm(CblasRowMajor, ta == 'N' ? CblasNoTrans : CblasTrans,
                tb == 'N' ? CblasNoTrans : CblasTrans, M, N, K, 1.0f, A, lda, B, ldb, beta, C,
                ldc);
}

/* Whether the held A (m->opa_src) is X stored rows x cols with leading dimension ld. */
static bool held(const gx_model *m, const float *X, int rows, int cols, int ld)
{
    return m->opa_src == X && m->opa_rows == rows && m->opa_cols == cols && m->opa_ld == ld;
}

static void mm(gx_model *m, bool again, char ta, char tb, int M, int N, int K, const float *A,
               int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (m->prec == GX_FP32) {
        sgemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    /* op(A) is stored [ar, ac], op(B) [br, bc] */
    int ar = ta == 'N' ? M : K, ac = ta == 'N' ? K : M;
    int br = tb == 'N' ? K : N, bc = tb == 'N' ? N : K;
    int la = ac, lb = 0; /* la: packed when A is (re)used from opa */
    bool fits, in_opa, reuse = again && held(m, A, ar, ac, lda);
    m->opa_src = NULL;
    grit_err rc = GRIT_OK;
    if (m->rounds) {
        const float *Ar = reuse ? m->opa_r
                                : operand_r(m, A, ar, ac, lda, m->opa_r, m->opa_n, &la);
        const float *Br = operand_r(m, B, br, bc, ldb, m->opb_r, m->opb_n, &lb);
        in_opa = Ar == m->opa_r;
        if ((fits = Ar && Br))
            sgemm(ta, tb, M, N, K, Ar, la, Br, lb, beta, C, ldc);
    } else {
        const bf16 *Ah = reuse ? m->opa : operand(m, A, ar, ac, lda, m->opa, m->opa_n, &la);
        const bf16 *Bh = operand(m, B, br, bc, ldb, m->opb, m->opb_n, &lb);
        in_opa = Ah == m->opa;
        if ((fits = Ah && Bh))
            rc = gemm_bf16(m->gemm, ta, tb, M, N, K, 1.0f, Ah, la, Bh, lb, beta, C, ldc);
    }
    if (fits && in_opa) { /* opa holds A's rounded form: the next gx__mm_again may read it */
        m->opa_src = A;
        m->opa_rows = ar;
        m->opa_cols = ac;
        m->opa_ld = lda;
    }
    if (!fits)
        rc = grit_errf(GRIT_EINVAL, "bf16 operand of %c%c M=%d N=%d K=%d is larger than its "
                                    "buffer", ta, tb, M, N, K);
    if (rc == GRIT_OK)
        return;
    if (m->gemm_err == GRIT_OK)
        m->gemm_err = rc;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            C[(long)i * ldc + j] = NAN;
}

void gx__mm(gx_model *m, char ta, char tb, int M, int N, int K, const float *A, int lda,
            const float *B, int ldb, float beta, float *C, int ldc)
{
    mm(m, false, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

void gx__mm_again(gx_model *m, char ta, char tb, int M, int N, int K, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc)
{
    mm(m, true, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

bool gx__opa_hold(gx_model *m, const float *X, int rows, int cols, bf16 **h, float **r)
{
    *h = NULL;
    *r = NULL;
    m->opa_src = NULL;
    if (m->prec != GX_BF16 || (size_t)rows * (size_t)cols > m->opa_n)
        return false;
    if (m->rounds)
        *r = m->opa_r;
    else
        *h = m->opa;
    m->opa_src = X;
    m->opa_rows = rows;
    m->opa_cols = cols;
    m->opa_ld = cols;
    return true;
}
