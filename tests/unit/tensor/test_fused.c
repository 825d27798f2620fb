/*
 * test_fused.c - the fused kernels (ops.h: op_norm2_fwd, op_resid_fwd, op_norm2_bwd,
 * op_gelu_bwd_bias) against the unfused kernels and their composition the trainer ran before them:
 * bitwise equal outputs, statistics and gradients, for LayerNorm and RMSNorm, a width
 * that is not a multiple of the column block or the vector length, and 1 and 3 threads.
 */
#include <omp.h>
#include <stdlib.h>

#include "../check.h"
#include "core/rng.h"
#include "tensor/ops.h"

enum { N = 37, C = 200 };

static float *vec(rng_t *r, long n, double scale)
{
    float *v = malloc(sizeof(float) * (size_t)n);
    for (long i = 0; i < n; i++)
        v[i] = r ? (float)(scale * rng_normal(r)) : 0.0f;
    return v;
}

static float *copy(const float *v, long n)
{
    float *c = malloc(sizeof(float) * (size_t)n);
    memcpy(c, v, sizeof(float) * (size_t)n);
    return c;
}

#define SAME(a, b, n) CHECK(memcmp((a), (b), sizeof(float) * (size_t)(n)) == 0)

static void norm_fwd(int rms, float *out, float *mean, float *rstd, const float *x,
                     const float *w, const float *b)
{
    if (rms)
        op_rmsnorm_fwd(out, rstd, x, w, N, C, 1e-5f);
    else
        op_layernorm_fwd(out, mean, rstd, x, w, b, N, C, 1e-5f);
}

static void norm_bwd(int rms, float *dx, float *dw, float *db, const float *dout,
                     const float *x, const float *mean, const float *rstd, const float *w)
{
    if (rms)
        op_rmsnorm_bwd(dx, dw, dout, x, rstd, w, N, C);
    else
        op_layernorm_bwd(dx, dw, db, dout, x, mean, rstd, w, N, C);
}

static void run(rng_t *r, int rms)
{
    long NC = (long)N * C;
    float *x = vec(r, NC, 2.0), *o = vec(r, NC, 1.0), *db = vec(r, C, 0.1), *pb = vec(r, C, 0.1);
    float *w1 = vec(r, C, 1.0), *b1 = vec(r, C, 0.5), *w2 = vec(r, C, 1.0), *b2 = vec(r, C, 0.5);
    float *m1 = vec(NULL, N, 0), *r1 = vec(NULL, N, 0), *m2 = vec(NULL, N, 0), *r2 = vec(NULL, N, 0);
    float *e1 = vec(NULL, NC, 0), *e2 = vec(NULL, NC, 0), *em1 = vec(NULL, N, 0);
    float *er1 = vec(NULL, N, 0), *em2 = vec(NULL, N, 0), *er2 = vec(NULL, N, 0);
    float *f1 = vec(NULL, NC, 0), *f2 = vec(NULL, NC, 0);
    op_norm p1 = {rms, 1e-5f, w1, b1, m1, r1}, p2 = {rms, 1e-5f, w2, b2, m2, r2};

    /* two norms of one x */
    norm_fwd(rms, e1, em1, er1, x, w1, b1);
    norm_fwd(rms, e2, em2, er2, x, w2, b2);
    op_norm2_fwd(&p1, f1, &p2, f2, x, N, C);
    SAME(f1, e1, NC);
    SAME(f2, e2, NC);
    SAME(r1, er1, N);
    SAME(r2, er2, N);
    if (!rms) {
        SAME(m1, em1, N);
        SAME(m2, em2, N);
    }

    /* residual epilogue: parallel (y = x + o + db + pb), sequential (mid, y, norm(mid)) */
    float *ey = vec(NULL, NC, 0), *emid = vec(NULL, NC, 0), *fy = vec(NULL, NC, 0);
    float *fmid = vec(NULL, NC, 0);
    op_add3_bias(ey, x, o, db, N, C);
    op_add_bias(ey, ey, pb, N, C);
    op_resid_fwd(fy, NULL, x, o, db, pb, NULL, NULL, N, C);
    SAME(fy, ey, NC);
    op_add3_bias(ey, x, o, db, N, C);
    op_resid_fwd(fy, NULL, x, o, db, NULL, NULL, NULL, N, C);
    SAME(fy, ey, NC);
    op_add3_bias(emid, x, o, db, N, C);
    op_add_bias(ey, emid, pb, N, C);
    norm_fwd(rms, e2, em2, er2, emid, w2, b2);
    op_resid_fwd(fy, fmid, x, o, db, pb, &p2, f2, N, C);
    SAME(fmid, emid, NC);
    SAME(fy, ey, NC);
    SAME(f2, e2, NC);
    SAME(r2, er2, N);
    if (!rms)
        SAME(m2, em2, N);

    /* backward of two norms of one x (norm2's term first), and of one norm read twice */
    float *g1 = vec(r, NC, 1.0), *g2 = vec(r, NC, 1.0), *dx0 = vec(r, NC, 1.0);
    float *edx = copy(dx0, NC), *fdx = copy(dx0, NC), *sum = vec(NULL, NC, 0);
    float *dw0 = vec(r, C, 1.0), *dbb = vec(r, C, 1.0);
    float *edw1 = copy(dw0, C), *edb1 = copy(dbb, C), *edw2 = copy(dw0, C), *edb2 = copy(dbb, C);
    float *fdw1 = copy(dw0, C), *fdb1 = copy(dbb, C), *fdw2 = copy(dw0, C), *fdb2 = copy(dbb, C);
    norm_fwd(rms, e1, m1, r1, x, w1, b1);
    memcpy(m2, m1, sizeof(float) * N);
    memcpy(r2, r1, sizeof(float) * N);
    norm_bwd(rms, edx, edw2, edb2, g2, x, m2, r2, w2);
    norm_bwd(rms, edx, edw1, edb1, g1, x, m1, r1, w1);
    op_norm_grad q1 = {g1, NULL, fdw1, fdb1}, q2 = {g2, NULL, fdw2, fdb2};
    op_norm2_bwd(fdx, x, N, C, &p2, &q2, &p1, &q1);
    SAME(fdx, edx, NC);
    SAME(fdw1, edw1, C);
    SAME(fdw2, edw2, C);
    if (!rms) {
        SAME(fdb1, edb1, C);
        SAME(fdb2, edb2, C);
    }
    norm_bwd(rms, edx, edw1, edb1, g1, x, m1, r1, w1); /* one norm alone */
    op_norm2_bwd(fdx, x, N, C, &p1, &q1, NULL, NULL);
    SAME(fdx, edx, NC);
    SAME(fdw1, edw1, C);
    if (!rms)
        SAME(fdb1, edb1, C);
    for (long i = 0; i < NC; i++)
        sum[i] = g1[i] + g2[i];
    norm_bwd(rms, edx, edw1, edb1, sum, x, m1, r1, w1);
    q1.dout_b = g2;
    op_norm2_bwd(fdx, x, N, C, &p1, &q1, NULL, NULL);
    SAME(fdx, edx, NC);
    SAME(fdw1, edw1, C);
    if (!rms)
        SAME(fdb1, edb1, C);

    float *all[] = {x, o, db, pb, w1, b1, w2, b2, m1, r1, m2, r2, e1, e2, em1, er1, em2, er2,
                    f1, f2, ey, emid, fy, fmid, g1, g2, dx0, edx, fdx, sum, dw0, dbb, edw1,
                    edb1, edw2, edb2, fdw1, fdb1, fdw2, fdb2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
}

static void run_gelu(rng_t *r, op_act act)
{
    long NC = (long)N * C;
    float *x = vec(r, NC, 3.0), *d = vec(r, NC, 1.0), *db0 = vec(r, C, 1.0);
    float *edx = vec(NULL, NC, 0), *edb = copy(db0, C), *fdb = copy(db0, C), *fdx = copy(d, NC);
    op_gelu_bwd(edx, d, x, NC, act);
    op_bias_grad(edb, edx, N, C, C);
    op_gelu_bwd_bias(fdx, fdb, fdx, x, N, C, act); /* in place, as the trainer calls it */
    SAME(fdx, edx, NC);
    SAME(fdb, edb, C);
    free(x), free(d), free(db0), free(edx), free(edb), free(fdb), free(fdx);
}

int main(void)
{
    rng_t r;
    rng_seed(&r, 7, 3);
    int threads[] = {1, 3};
    for (int t = 0; t < 2; t++) {
        omp_set_num_threads(threads[t]);
        run(&r, 0);
        run(&r, 1);
        run_gelu(&r, OP_GELU);
        run_gelu(&r, OP_GELU_TANH);
    }
    if (check_failures)
        fprintf(stderr, "test_fused: %d failures\n", check_failures);
    return check_failures != 0;
}
