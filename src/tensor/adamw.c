/* adamw.c - the AdamW update (see adamw.h). */
#include "tensor/adamw.h"

#include <math.h>

void adamw_update(const adamw_cfg *c, long t, double lr, float clip_coef, bool decay, long n,
                  float *p, const float *g, float *m1, float *v1)
{
    float b1 = (float)c->beta1, b2 = (float)c->beta2, eps = (float)c->eps;
    float bc1 = (float)(1.0 - pow(c->beta1, (double)t));
    float bc2s = (float)sqrt(1.0 - pow(c->beta2, (double)t));
    float step = (float)lr / bc1;
    float dec = decay ? (float)(1.0 - lr * c->weight_decay) : 1.0f;
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++) {
        float gi = g[i] * clip_coef;
        float mi = b1 * m1[i] + (1.0f - b1) * gi;
        float vi = b2 * v1[i] + (1.0f - b2) * gi * gi;
        m1[i] = mi;
        v1[i] = vi;
        float denom = sqrtf(vi) / bc2s + eps;
        p[i] = p[i] * dec - step * mi / denom;
    }
}
