/*
 * rowgemm.h - a batch-invariant x . W^T for decode steps: each output row depends on
 * its own input row only, computed by the same arithmetic whatever the number of rows.
 *
 *   mm_nt_rows(M, N, K, A, lda, B, ldb, beta, C, ldc):
 *     C[M,N] = A[M,K] . B[N,K]^T + beta * C,   beta 0 or 1 (as mm_nt with alpha 1)
 *
 * Why not OpenBLAS: its sgemm picks micro-kernels by M, and the edge kernels sum in
 * another order, so a row's result depends on how many rows share the call (on a Zen
 * core it changes with M mod 24; tests/unit/model/test_infer_batch.c shows it). A
 * sequence decoded in a batch of B must get bitwise the logits it gets alone, so
 * grit's decode steps (model/gptneox_infer.c: every single-token forward and every
 * gxi_decode step) use this kernel for any B. Each C[i][j] is one fixed sequence of
 * operations: 8 partial sums over k = 0, 8, 16, ... (lane l takes k = l mod 8, in
 * order), added pairwise in a fixed tree, then the K % 8 tail in order, then beta * C.
 * Register tiles of 4 rows x 2 columns share each load of W; a step streams the
 * weights once for all its rows. OpenMP threads split the columns (never a sum), so
 * the result does not depend on the thread count either.
 */
#ifndef GRIT_TENSOR_ROWGEMM_H
#define GRIT_TENSOR_ROWGEMM_H

void mm_nt_rows(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                float beta, float *C, int ldc);

#endif
