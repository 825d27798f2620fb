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

/* gx__mm where the caller promises that A is the A of the previous gx__mm call (or of
 * gx__opa_hold), unwritten since: in bf16 its rounded form is read from m->opa as that
 * call left it instead of rounded again, when the source and stored shape match (else
 * it is rounded as by gx__mm). The backward's dW and dX products share their A. */
void gx__mm_again(gx_model *m, char ta, char tb, int M, int N, int K, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc);

/* bf16: where the bf16 form of the packed rows x cols activation X is to be written by the
 * caller (*h: bf16 bits in m->opa, or *r: float32 in m->opa_r where m->rounds; the other
 * NULL), recorded as X's for the next gx__mm_again; false (both NULL) in fp32 or when it
 * does not fit. The LM head writes its logits' gradient there directly. */
bool gx__opa_hold(gx_model *m, const float *X, int rows, int cols, bf16 **h, float **r);

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
