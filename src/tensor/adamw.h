/*
 * adamw.h - the AdamW update over plain float arrays.
 *
 * Semantics of torch.optim.AdamW (decoupled weight decay, bias correction folded
 * into the step size and the denominator; docs/parity.md states them exactly):
 *   g  = grad * clip_coef
 *   m  = beta1 m + (1 - beta1) g          v = beta2 v + (1 - beta2) g^2
 *   p  = p (1 - lr wd) - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 * in fp32, element by element (no reduction), so the result does not depend on the
 * thread count. Knows nothing of models: the caller walks its tensors (train/optim.c
 * per parameter tensor, with or without decay; health/compute.c's known-answer test
 * on one array).
 */
#ifndef GRIT_TENSOR_ADAMW_H
#define GRIT_TENSOR_ADAMW_H

#include <stdbool.h>

typedef struct adamw_cfg {
    double beta1, beta2, eps, weight_decay;
} adamw_cfg;

/* One update at 1-based step t with learning rate lr of n elements: parameters p,
 * gradients g (read only; multiplied by clip_coef first), moments m and v (updated
 * in place). Weight decay only when decay. */
void adamw_update(const adamw_cfg *c, long t, double lr, float clip_coef, bool decay, long n,
                  float *p, const float *g, float *m, float *v);

#endif
