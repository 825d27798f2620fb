/* rowgemm.c - batch-invariant x . W^T (see rowgemm.h). */
#include "tensor/rowgemm.h"

#include <string.h>

typedef float v8 __attribute__((vector_size(32)));

static inline v8 load8(const float *p)
{
    v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The fixed reduction of one accumulator's 8 lanes. */
static inline float hsum(v8 a)
{
    float l[8];
    memcpy(l, &a, sizeof l);
    return ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
}

/* C[r][c] for r < mr (<= 4) rows and c < nr (<= 2) columns. Every element goes through the
 * same expressions whatever mr and nr are (the full tile is this function inlined with
 * constants), so a row's sums never depend on its neighbours. */
static inline __attribute__((always_inline)) void tile(int mr, int nr, int K, const float *A,
                                                        int lda, const float *B, int ldb,
                                                        float beta, float *C, int ldc)
{
    v8 acc[4][2], w[2], x[4];
    for (int r = 0; r < 4; r++) {
        x[r] = (v8){0};
        for (int c = 0; c < 2; c++)
            acc[r][c] = w[c] = (v8){0};
    }
    int k = 0;
    for (; k + 8 <= K; k += 8) {
        for (int c = 0; c < nr; c++)
            w[c] = load8(B + (size_t)c * (size_t)ldb + k);
        for (int r = 0; r < mr; r++)
            x[r] = load8(A + (size_t)r * (size_t)lda + k);
        for (int r = 0; r < mr; r++)
            for (int c = 0; c < nr; c++)
                acc[r][c] += x[r] * w[c];
    }
    for (int r = 0; r < mr; r++)
        for (int c = 0; c < nr; c++) {
            const float *a = A + (size_t)r * (size_t)lda, *b = B + (size_t)c * (size_t)ldb;
            float s = hsum(acc[r][c]);
            for (int t = k; t < K; t++)
                s += a[t] * b[t];
            float *o = C + (size_t)r * (size_t)ldc + c;
            *o = beta != 0.0f ? *o + s : s;
        }
}

void mm_nt_rows(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                float beta, float *C, int ldc)
{
    int ntile = (N + 1) / 2;
#pragma omp parallel for schedule(static)
    for (int jt = 0; jt < ntile; jt++) {
        int j = 2 * jt, nr = N - j < 2 ? N - j : 2;
        const float *b = B + (size_t)j * (size_t)ldb;
        for (int i = 0; i < M; i += 4) {
            const float *a = A + (size_t)i * (size_t)lda;
            float *c = C + (size_t)i * (size_t)ldc + j;
            int mr = M - i < 4 ? M - i : 4;
            if (nr == 2 && mr == 4) /* constant shapes: the accumulators stay in registers */
                tile(4, 2, K, a, lda, b, ldb, beta, c, ldc);
            else if (nr == 2 && mr == 1) /* grit generate's steps, a batch of one */
                tile(1, 2, K, a, lda, b, ldb, beta, c, ldc);
            else if (nr == 2 && mr == 2)
                tile(2, 2, K, a, lda, b, ldb, beta, c, ldc);
            else if (nr == 2)
                tile(3, 2, K, a, lda, b, ldb, beta, c, ldc);
            else
                tile(mr, nr, K, a, lda, b, ldb, beta, c, ldc);
        }
    }
}
