/*
 * ops_fused.c - the block's residual and norm passes fused (contracts in ops.h):
 * two norms of one input in one read of it, the attention branch's residual add
 * with the next norm while the row is in cache, and the two norms' backward in
 * one pass. The per-row arithmetic is norm_row.h's, shared with op_layernorm_*
 * and op_rmsnorm_*, so the results are bitwise those of the unfused kernels.
 * Rows are split over threads; weight gradients are reduced over column blocks
 * with rows in order, as in ops.c, so nothing depends on the thread count.
 */
#include <string.h>

#include "tensor/norm_row.h"
#include "tensor/ops.h"

/* out = norm(xr) of one row, saving its statistics in p (row n). */
static inline void norm_row(const op_norm *p, float *o, const float *xr, int n, int C)
{
    if (p->rms)
        p->rstd[n] = rms_row_fwd(o, xr, p->w, C, p->eps);
    else
        ln_row_fwd(o, p->mean + n, p->rstd + n, xr, p->w, p->b, C, p->eps);
}

void op_norm2_fwd(const op_norm *p1, float *out1, const op_norm *p2, float *out2,
                  const float *x, int N, int C)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *xr = x + (long)n * C;
        norm_row(p1, out1 + (long)n * C, xr, n, C);
        float r = p1->rstd[n];
        p2->rstd[n] = r;
        if (p1->rms)
            rms_row_apply(out2 + (long)n * C, xr, r, p2->w, C);
        else {
            p2->mean[n] = p1->mean[n];
            ln_row_apply(out2 + (long)n * C, xr, p1->mean[n], r, p2->w, p2->b, C);
        }
    }
}

void op_resid_fwd(float *y, float *mid, const float *x, const float *o, const float *db,
                  const float *pb, const op_norm *p, float *nout, int N, int C)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        long r0 = (long)n * C;
        float *t = mid ? mid + r0 : y + r0;
        for (int c = 0; c < C; c++)
            t[c] = x[r0 + c] + o[r0 + c] + db[c];
        if (pb)
            for (int c = 0; c < C; c++)
                y[r0 + c] = t[c] + pb[c];
        else if (mid)
            memcpy(y + r0, t, sizeof(float) * (size_t)C);
        if (p)
            norm_row(p, nout + r0, t, n, C);
    }
}

/* d += norm'(g) of one row. */
static inline void norm_row_bwd(const op_norm *p, const op_norm_grad *g, float *d,
                                const float *xr, int n, int C)
{
    long r0 = (long)n * C;
    const float *g0 = g->dout + r0;
    float r = p->rstd[n];
    if (p->rms) {
        if (g->dout_b)
            rms_row_bwd(d, g0, g->dout_b + r0, xr, r, p->w, C);
        else
            rms_row_bwd(d, g0, NULL, xr, r, p->w, C);
    } else {
        if (g->dout_b)
            ln_row_bwd(d, g0, g->dout_b + r0, xr, p->mean[n], r, p->w, C);
        else
            ln_row_bwd(d, g0, NULL, xr, p->mean[n], r, p->w, C);
    }
}

static inline void norm_cols(const op_norm *p, const op_norm_grad *g, const float *x, int N,
                             int C, int c0, int c1)
{
    const float *mean = p->rms ? NULL : p->mean;
    float *db = p->rms ? NULL : g->db;
    if (g->dout_b)
        norm_cols_wgrad(g->dw, db, g->dout, g->dout_b, x, mean, p->rstd, N, C, c0, c1);
    else
        norm_cols_wgrad(g->dw, db, g->dout, NULL, x, mean, p->rstd, N, C, c0, c1);
}

void op_norm2_bwd(float *dx, const float *x, int N, int C, const op_norm *p1,
                  const op_norm_grad *g1, const op_norm *p2, const op_norm_grad *g2)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *xr = x + (long)n * C;
        float *d = dx + (long)n * C;
        norm_row_bwd(p1, g1, d, xr, n, C);
        if (p2)
            norm_row_bwd(p2, g2, d, xr, n, C);
    }
    int nblk = (C + NORM_COLBLK - 1) / NORM_COLBLK;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        int c0 = blk * NORM_COLBLK, c1 = c0 + NORM_COLBLK < C ? c0 + NORM_COLBLK : C;
        norm_cols(p1, g1, x, N, C, c0, c1);
        if (p2)
            norm_cols(p2, g2, x, N, C, c0, c1);
    }
}
