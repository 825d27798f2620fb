/* test_xent_bf16.c - tensor/ops.h op_xent_rows_bf16, the bf16 LM head's cross-entropy: its
 * losses are op_xent_rows's bit for bit, and its gradient is op_xent_rows's gradient
 * rounded to bf16, bit for bit, in both output forms (bf16 bits, and bf16 values kept as
 * float32), including masked rows (target -1: loss 0, zero gradient), the target's own
 * entry (softmax - 1, rounded after the subtraction), rows of large and tiny logits, and
 * on 1 and 2 threads. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "core/rng.h"
#include "tensor/gemm_bf16.h"
#include "tensor/ops.h"

enum { M = 37, V = 1003 };

static void run(int threads, float gs)
{
    omp_set_num_threads(threads);
    rng_t r;
    rng_seed(&r, 7, (uint64_t)threads);
    float *lg = malloc(sizeof(float) * M * V), *ref = malloc(sizeof(float) * M * V);
    float *a = malloc(sizeof(float) * M * V), *out_r = malloc(sizeof(float) * M * V);
    bf16 *out_h = malloc(sizeof(bf16) * M * V);
    float lref[M], lh[M], lr[M];
    int32_t tgt[M];
    for (int m = 0; m < M; m++) {
        float scale = m % 5 == 0 ? 40.0f : m % 5 == 1 ? 1e-3f : 3.0f; /* peaked, flat, usual */
        for (int j = 0; j < V; j++)
            lg[(long)m * V + j] = scale * (float)rng_normal(&r);
        tgt[m] = m % 7 == 3 ? -1 : (int32_t)(rng_next(&r) % V);
    }
    tgt[0] = 0;
    tgt[1] = V - 1;
    memcpy(ref, lg, sizeof(float) * M * V);
    op_xent_rows(ref, lref, tgt, M, V, gs);
    memcpy(a, lg, sizeof(float) * M * V);
    memset(out_h, 0xab, sizeof(bf16) * M * V);
    op_xent_rows_bf16(a, out_h, NULL, lh, tgt, M, V, gs);
    memcpy(a, lg, sizeof(float) * M * V);
    memset(out_r, 0xab, sizeof(float) * M * V);
    op_xent_rows_bf16(a, NULL, out_r, lr, tgt, M, V, gs);
    CHECK(memcmp(lh, lref, sizeof lref) == 0);
    CHECK(memcmp(lr, lref, sizeof lref) == 0);
    long bad_h = 0, bad_r = 0, nonzero_masked = 0;
    for (int m = 0; m < M; m++)
        for (int j = 0; j < V; j++) {
            long i = (long)m * V + j;
            bf16 want = bf16_from_f32(ref[i]);
            float wf = bf16_to_f32(want);
            bad_h += out_h[i] != want;
            bad_r += memcmp(&out_r[i], &wf, sizeof wf) != 0;
            nonzero_masked += tgt[m] < 0 && (out_h[i] != 0 || out_r[i] != 0.0f);
        }
    CHECK_INT(bad_h, 0);
    CHECK_INT(bad_r, 0);
    CHECK_INT(nonzero_masked, 0);
    for (int m = 0; m < M; m++)
        if (tgt[m] < 0)
            CHECK(lh[m] == 0.0f);
        else /* the target's entry is negative (softmax - 1, scaled) */
            CHECK(bf16_to_f32(out_h[(long)m * V + tgt[m]]) < 0.0f);
    free(lg);
    free(ref);
    free(a);
    free(out_r);
    free(out_h);
}

int main(void)
{
    for (int th = 1; th <= 2; th++) {
        run(th, 1.0f / 4096.0f);
        run(th, 0.37f);
    }
    CHECK_DONE();
}
