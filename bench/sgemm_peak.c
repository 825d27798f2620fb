/*
 * sgemm_peak.c - measures OpenBLAS sgemm GFLOP/s on this machine: the
 * ceiling grit's achieved rate is reported against (bench/).
 * usage: grit-bench-sgemm [SIZE] [THREADS]   (prints one JSON line)
 */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/progress.h"

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2048, th = argc > 2 ? atoi(argv[2]) : 2;
    openblas_set_num_threads(th);
    omp_set_num_threads(th);
    float *a = malloc(sizeof(float) * (size_t)n * n), *b = malloc(sizeof(float) * (size_t)n * n),
          *c = malloc(sizeof(float) * (size_t)n * n);
    for (long i = 0; i < (long)n * n; i++) {
        a[i] = (float)(i % 7) * 0.1f;
        b[i] = (float)(i % 5) * 0.1f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1, a, n, b, n, 0, c, n);
    double best = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = now_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1, a, n, b, n, 0, c, n);
        double g = 2.0 * n * n * (double)n / (now_seconds() - t0) / 1e9;
        best = g > best ? g : best;
    }
    printf("{\"sgemm_n\": %d, \"threads\": %d, \"gflops\": %.1f}\n", n, th, best);
    free(a);
    free(b);
    free(c);
    return 0;
}
