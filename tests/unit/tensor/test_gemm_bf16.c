/* test_gemm_bf16.c - tensor/gemm_bf16.h: float32 -> bf16 rounds to nearest even (ties,
 * carries into the exponent, NaN, infinities), also when kept in float32 (bf16_round);
 * gemm_bf16 for all three transposes used by the model, with leading dimensions wider
 * than the matrix, alpha and beta, matches a
 * double-precision product of the bf16 operands within float32 accumulation error, on
 * every backend this machine can run (oneDNN where the CPU has AVX512-BF16; the fp32
 * widening path always); results are bitwise reproducible; the planted
 * GRIT_FAULT_BF16_ACCUM=1 is measurably wrong (so the curve test's fault is real); a bad
 * GRIT_BF16_GEMM is an error naming the variable. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "../check.h"
#include "tensor/gemm_bf16.h"

static float f_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static void rounding(void)
{
    CHECK_INT(bf16_from_f32(1.0f), 0x3f80);
    CHECK_INT(bf16_from_f32(f_of(0x3f808000u)), 0x3f80); /* tie, even below: stays */
    CHECK_INT(bf16_from_f32(f_of(0x3f818000u)), 0x3f82); /* tie, odd below: rounds up */
    CHECK_INT(bf16_from_f32(f_of(0x3f808001u)), 0x3f81); /* above the tie: up */
    CHECK_INT(bf16_from_f32(f_of(0x3f807fffu)), 0x3f80); /* below the tie: down */
    CHECK_INT(bf16_from_f32(f_of(0x3fffffffu)), 0x4000); /* carry into the exponent */
    CHECK_INT(bf16_from_f32(-2.5f), 0xc020);
    CHECK_INT(bf16_from_f32(INFINITY), 0x7f80);
    CHECK(isnan(bf16_to_f32(bf16_from_f32(NAN))));
    CHECK(isnan(bf16_to_f32(bf16_from_f32(f_of(0x7f800001u))))); /* signalling NaN stays NaN */
    CHECK_INT(bf16_from_f32(f_of(0x7f7fffffu)), 0x7f80); /* FLT_MAX rounds to infinity */
    float xs[5] = {0.1f, -3.3f, 1e-20f, 65504.0f, 0.0f};
    bf16 h[5];
    bf16_convert(h, xs, 5);
    for (int i = 0; i < 5; i++) {
        CHECK_INT(h[i], bf16_from_f32(xs[i]));
        CHECK(fabsf(bf16_to_f32(h[i]) - xs[i]) <= fabsf(xs[i]) * (1.0f / 256.0f));
    }
}

/* bf16_round / bf16_round_rows (the decoder's operands where the GEMMs run as sgemm):
 * bitwise bf16_to_f32(bf16_from_f32(x)) for every class of input, packed and strided. */
static void rounding_in_float(void)
{
    enum { R = 5, C = 37, LD = 41 };
    float src[R * LD], dst[R * C], flat[R * LD];
    uint32_t u = 12345u;
    for (int i = 0; i < R * LD; i++) { /* random bit patterns: normals, denormals, NaNs */
        u = u * 1664525u + 1013904223u;
        src[i] = f_of(u);
    }
    uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x3fffffffu, 0x7f7fffffu, 0x7f800001u,
                          0xff800000u, 0x80000000u, 0x00000001u};
    for (int i = 0; i < (int)(sizeof special / sizeof special[0]); i++)
        src[i * 3] = f_of(special[i]);
    bf16_round(flat, src, R * LD);
    bf16_round_rows(dst, src, R, C, LD);
    int same = 1;
    for (int r = 0; r < R; r++)
        for (int c = 0; c < LD; c++) {
            float want = bf16_to_f32(bf16_from_f32(src[r * LD + c]));
            same &= !memcmp(&flat[r * LD + c], &want, sizeof want);
            if (c < C)
                same &= !memcmp(&dst[r * C + c], &want, sizeof want);
        }
    CHECK(same);
}

static bf16 *rand_bf16(int n, unsigned seed)
{
    bf16 *p = malloc(sizeof(bf16) * (size_t)n);
    srand(seed);
    for (int i = 0; i < n; i++)
        p[i] = bf16_from_f32((float)rand() / (float)RAND_MAX * 2.0f - 1.0f);
    return p;
}

/* max |C - exact| over the matrix, relative to sum |a||b| of the worst element's terms */
static double check_product(gemm_bf16_ctx *g, char ta, char tb, int M, int N, int K, float alpha,
                            float beta, int *bitwise)
{
    int lda = (ta == 'N' ? K : M) + 3, ldb = (tb == 'N' ? N : K) + 5, ldc = N + 2;
    int ar = ta == 'N' ? M : K, br = tb == 'N' ? K : N;
    bf16 *A = rand_bf16(ar * lda, 1), *B = rand_bf16(br * ldb, 2);
    float *C = malloc(sizeof(float) * (size_t)M * ldc), *C2 = malloc(sizeof(float) * (size_t)M * ldc);
    for (int i = 0; i < M * ldc; i++)
        C[i] = C2[i] = (float)(i % 13) * 0.25f - 1.0f;
    double worst = 0.0;
    CHECK_INT(gemm_bf16(g, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc), GRIT_OK);
    CHECK_INT(gemm_bf16(g, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C2, ldc), GRIT_OK);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0.0, mag = 0.0;
            for (int k = 0; k < K; k++) {
                double a = bf16_to_f32(ta == 'N' ? A[i * lda + k] : A[k * lda + i]);
                double b = bf16_to_f32(tb == 'N' ? B[k * ldb + j] : B[j * ldb + k]);
                s += a * b;
                mag += fabs(a * b);
            }
            double c0 = (double)((i * ldc + j) % 13) * 0.25 - 1.0;
            double want = alpha * s + beta * c0;
            double err = fabs(C[i * ldc + j] - want) / (fabs(alpha) * mag + fabs(beta * c0) + 1e-30);
            worst = err > worst ? err : worst;
        }
    *bitwise = !memcmp(C, C2, sizeof(float) * (size_t)M * ldc);
    /* the padding past N in each row of C is never written */
    for (int i = 0; i < M; i++)
        for (int j = N; j < ldc; j++)
            CHECK(C[i * ldc + j] == (float)((i * ldc + j) % 13) * 0.25f - 1.0f);
    free(A);
    free(B);
    free(C);
    free(C2);
    return worst;
}

static void products(const char *backend, double tol, int expect_bad)
{
    setenv("GRIT_BF16_GEMM", backend, 1);
    gemm_bf16_ctx g;
    CHECK_INT(gemm_bf16_init(&g, 1 << 16, 1 << 16), GRIT_OK);
    struct { char ta, tb; int M, N, K; float alpha, beta; } cases[] = {
        {'N', 'T', 37, 29, 300, 1.0f, 0.0f}, /* x W^T */
        {'N', 'N', 33, 41, 257, 1.0f, 0.0f}, /* dy W */
        {'T', 'N', 24, 40, 512, 1.0f, 1.0f}, /* dy^T x, accumulated into a gradient */
        {'N', 'T', 16, 16, 64, 0.5f, -2.0f},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int bitwise = 0;
        double err = check_product(&g, cases[c].ta, cases[c].tb, cases[c].M, cases[c].N,
                                   cases[c].K, cases[c].alpha, cases[c].beta, &bitwise);
        printf("%-6s %s %c%c M=%d N=%d K=%d: worst relative error %.2e\n", backend,
               g.fault_accum ? "(planted bf16 accumulation)" : "", cases[c].ta, cases[c].tb,
               cases[c].M, cases[c].N, cases[c].K, err);
        if (expect_bad && cases[c].K >= 256)
            CHECK(err > 1e-3); /* bf16 accumulation: errors of bf16 rounding, not float32 */
        else if (!expect_bad)
            CHECK(err <= tol);
        CHECK(bitwise);
    }
    gemm_bf16_free(&g);
}

int main(void)
{
    rounding();
    rounding_in_float();
    unsetenv("GRIT_FAULT_BF16_ACCUM");
    /* float32 accumulation of K exact products: a few K ulps of float32 at most */
    products("fp32", 5e-6, 0);
    if (gemm_bf16_cpu_has_avx512bf16() && gemm_bf16_have_onednn())
        products("onednn", 5e-6, 0);
    else
        printf("onednn: skipped (%s)\n", gemm_bf16_have_onednn() ? "no AVX512-BF16 on this CPU"
                                                                   : "built without oneDNN");
    setenv("GRIT_FAULT_BF16_ACCUM", "1", 1);
    products("auto", 0, 1);
    unsetenv("GRIT_FAULT_BF16_ACCUM");
    gemm_bf16_ctx g;
    setenv("GRIT_BF16_GEMM", "fast", 1);
    CHECK_INT(gemm_bf16_init(&g, 16, 16), GRIT_EINVAL);
    CHECK_ERRMSG("GRIT_BF16_GEMM");
    setenv("GRIT_BF16_GEMM", "fp32", 1);
    CHECK_INT(gemm_bf16_init(&g, 16, 16), GRIT_OK);
    CHECK_INT(gemm_bf16(&g, 'N', 'N', 8, 8, 8, 1.0f, NULL, 8, NULL, 8, 0.0f, NULL, 8), GRIT_EINVAL);
    CHECK_ERRMSG("exceeds the scratch");
    gemm_bf16_free(&g);
    gemm_bf16_free(NULL);
    CHECK_DONE();
}
