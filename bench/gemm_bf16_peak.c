/*
 * gemm_bf16_peak.c - bf16 GEMM (tensor/gemm_bf16.h: oneDNN on AVX512-BF16, else the
 * fp32-widening path) against OpenBLAS sgemm on this machine: the square ceiling
 * (SIZE^3) and the GEMMs of one pythia-70m training step at micro batch 8 x seq 512
 * (4,096 tokens: q/k/v, dense, MLP up/down and a 512-row LM-head chunk, forward,
 * input gradient and weight gradient). Best of REPS runs each.
 *
 * usage: grit-bench-gemm [SIZE] [THREADS] [REPS]
 * Prints a table, then one JSON line {"threads", "backend", "sgemm_gflops",
 * "bf16_gflops", "shapes_sgemm_gflops", "shapes_bf16_gflops"} (shapes_*: total FLOPs of the
 * 70M shapes over their total best time), which bench/train_vs_pytorch.sh reads.
 */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/progress.h"
#include "tensor/gemm_bf16.h"

typedef struct shape {
    const char *what;
    char ta, tb;
    int M, N, K;
} shape;

static const shape shapes70m[] = {
    {"qkv fwd", 'N', 'T', 4096, 1536, 512},   {"qkv dX", 'N', 'N', 4096, 512, 1536},
    {"qkv dW", 'T', 'N', 1536, 512, 4096},    {"dense fwd", 'N', 'T', 4096, 512, 512},
    {"dense dW", 'T', 'N', 512, 512, 4096},   {"mlp up fwd", 'N', 'T', 4096, 2048, 512},
    {"mlp up dX", 'N', 'N', 4096, 512, 2048}, {"mlp up dW", 'T', 'N', 2048, 512, 4096},
    {"mlp down fwd", 'N', 'T', 4096, 512, 2048}, {"mlp down dW", 'T', 'N', 512, 2048, 4096},
    {"head fwd", 'N', 'T', 512, 50304, 512},  {"head dX", 'N', 'N', 512, 512, 50304},
    {"head dW", 'T', 'N', 50304, 512, 512},
};

static double best_of(int reps, gemm_bf16_ctx *g, const shape *s, const float *fa,
                      const float *fb, const bf16 *ha, const bf16 *hb, float *c, int use_bf16)
{
    int lda = s->ta == 'N' ? s->K : s->M, ldb = s->tb == 'N' ? s->N : s->K;
    double best = 1e30;
    for (int r = 0; r <= reps; r++) { /* run 0 warms up (and creates the primitive) */
        double t0 = now_seconds();
        if (use_bf16)
            gemm_bf16(g, s->ta, s->tb, s->M, s->N, s->K, 1.0f, ha, lda, hb, ldb, 0.0f, c, s->N);
        else
            cblas_sgemm(CblasRowMajor, s->ta == 'N' ? CblasNoTrans : CblasTrans,
                        s->tb == 'N' ? CblasNoTrans : CblasTrans, s->M, s->N, s->K, 1.0f, fa,
                        lda, fb, ldb, 0.0f, c, s->N);
        double dt = now_seconds() - t0;
        if (r > 0 && dt < best)
            best = dt;
    }
    return best;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 4096, th = argc > 2 ? atoi(argv[2]) : 2;
    int reps = argc > 3 ? atoi(argv[3]) : 3;
    if (n < 64 || th < 1 || reps < 1) {
        fprintf(stderr, "usage: %s [SIZE >= 64] [THREADS] [REPS]\n", argv[0]);
        return 2;
    }
    openblas_set_num_threads(th);
    omp_set_num_threads(th);
    size_t cap = (size_t)50304 * 512 > (size_t)n * n ? (size_t)50304 * 512 : (size_t)n * n;
    float *fa = malloc(sizeof(float) * cap), *fb = malloc(sizeof(float) * cap);
    float *c = malloc(sizeof(float) * cap); /* every output here fits in cap too */
    bf16 *ha = malloc(sizeof(bf16) * cap), *hb = malloc(sizeof(bf16) * cap);
    if (!fa || !fb || !c || !ha || !hb) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < cap; i++) {
        fa[i] = (float)(i % 7) * 0.1f - 0.3f;
        fb[i] = (float)(i % 5) * 0.1f - 0.2f;
    }
    bf16_convert(ha, fa, cap);
    bf16_convert(hb, fb, cap);
    gemm_bf16_ctx g;
    if (gemm_bf16_init(&g, cap, cap) != GRIT_OK) {
        fprintf(stderr, "gemm_bf16_init: %s\n", grit_errmsg());
        return 1;
    }
    shape sq = {"square", 'N', 'T', n, n, n};
    double fl = 2.0 * n * (double)n * n;
    double sg = fl / best_of(reps, &g, &sq, fa, fb, ha, hb, c, 0) / 1e9;
    double bg = fl / best_of(reps, &g, &sq, fa, fb, ha, hb, c, 1) / 1e9;
    printf("%-14s %-3s %6s %6s %6s %10s %10s %6s\n", "gemm", "op", "M", "N", "K", "sgemm GF/s",
           "bf16 GF/s", "ratio");
    printf("%-14s %c%c  %6d %6d %6d %10.1f %10.1f %5.2fx\n", "square", 'N', 'T', n, n, n, sg, bg,
           bg / sg);
    double tot = 0, ts = 0, tb = 0;
    for (size_t i = 0; i < sizeof shapes70m / sizeof shapes70m[0]; i++) {
        const shape *s = &shapes70m[i];
        double f = 2.0 * s->M * (double)s->N * s->K;
        double a = best_of(reps, &g, s, fa, fb, ha, hb, c, 0);
        double b = best_of(reps, &g, s, fa, fb, ha, hb, c, 1);
        tot += f;
        ts += a;
        tb += b;
        printf("%-14s %c%c  %6d %6d %6d %10.1f %10.1f %5.2fx\n", s->what, s->ta, s->tb, s->M,
               s->N, s->K, f / a / 1e9, f / b / 1e9, a / b);
    }
    printf("%-14s %-3s %6s %6s %6s %10.1f %10.1f %5.2fx\n", "70M total", "", "", "", "",
           tot / ts / 1e9, tot / tb / 1e9, ts / tb);
    printf("{\"threads\": %d, \"backend\": \"%s\", \"sgemm_n\": %d, \"sgemm_gflops\": %.1f, "
           "\"bf16_gflops\": %.1f, \"shapes_sgemm_gflops\": %.1f, \"shapes_bf16_gflops\": %.1f}\n",
           th, g.backend == GEMM_BF16_ONEDNN ? "onednn" : "fp32-widening", n, sg, bg,
           tot / ts / 1e9, tot / tb / 1e9);
    gemm_bf16_free(&g);
    free(fa);
    free(fb);
    free(c);
    free(ha);
    free(hb);
    return 0;
}
