/*
 * gx_prec.h - internal to model/: the decoder's matrix products in the model's
 * precision (gx_prec.c). gptneox_step.c calls gx__mm for every linear layer and the
 * LM head; attention keeps its own float32 products (tensor/attention.c).
 */
#ifndef GRIT_MODEL_GX_PREC_H
#define GRIT_MODEL_GX_PREC_H

#include "model/gptneox.h"

/* C[M,N] = op(A) op(B) + beta C (ta, tb 'N' or 'T', row-major as cblas). fp32: OpenBLAS
 * sgemm on the operands as given. bf16: an operand inside m->params is read from the
 * bf16 weight copy, any other is rounded to bf16 into m->opa (A) or m->opb (B) first
 * (m->rounds: the float32 copies params_r / win_r, opa_r, opb_r, and sgemm); a GEMM
 * failure is kept in m->gemm_err (the first one) and C is set to NaN. */
void gx__mm(gx_model *m, char ta, char tb, int M, int N, int K, const float *A, int lda,
            const float *B, int ldb, float beta, float *C, int ldc);

/* ZeRO-3: the param_begin hook gathers the flat range [off, off + n) into its window
 * (m->zwin_w, the tensors bound to it); in bf16 the GEMM weights among them are then
 * rounded into m->win_h (m->win_r), where gx__mm reads them. Without the hook, nothing. */
void gx__param_begin(gx_model *m, size_t off, size_t n);

/* bf16, when ZeRO-3 drops the parameter block (gx_drop_params): the block's weight copy
 * (params_h or params_r) gives way to one of the largest bucket (win_h or win_r), which
 * gx__param_begin fills. Nothing in fp32 or when the window copy exists already. */
grit_err gx__bf16_window(gx_model *m);

/* bf16: refreshes m->params_h (params_r) from the master weights (the tensors GEMMs read). */
void gx__sync_bf16(gx_model *m);

#endif
