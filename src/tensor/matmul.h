/*
 * matmul.h - the three sgemm shapes the model uses, over OpenBLAS (row-major).
 *
 *   mm_nt: C[M,N] = alpha * A[M,K] . B[N,K]^T + beta * C   (x . W^T: linear forward)
 *   mm_nn: C[M,N] = alpha * A[M,K] . B[K,N]   + beta * C   (dy . W: input gradient)
 *   mm_tn: C[M,N] = alpha * A[K,M]^T . B[K,N] + beta * C   (dy^T . x: weight gradient)
 *
 * Leading dimensions are explicit so strided views (a head inside a fused
 * qkv row) need no copies. Inside an OpenMP parallel region OpenBLAS's
 * OpenMP build runs single-threaded, which the attention kernels rely on.
 */
#ifndef GRIT_TENSOR_MATMUL_H
#define GRIT_TENSOR_MATMUL_H

#include <cblas.h>

static inline void mm_nt(int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, alpha, A, lda, B, ldb, beta,
                C, ldc);
}

static inline void mm_nn(int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, alpha, A, lda, B, ldb,
                beta, C, ldc);
}

static inline void mm_tn(int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc)
{
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta,
                C, ldc);
}

#endif
