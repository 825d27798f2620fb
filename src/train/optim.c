/* optim.c - LR schedule, grad norm, clipping, and AdamW over the model's tensors
 * (the update itself: tensor/adamw.c) (see optim.h). */
#include "train/optim.h"

#include "tensor/adamw.h"

#include <math.h>

double optim_lr(const optim_cfg *o, long s)
{
    if (s < o->warmup_steps)
        return o->lr * (double)(s + 1) / (double)o->warmup_steps;
    long span = o->total_steps - o->warmup_steps;
    double p = (double)(s - o->warmup_steps) / (double)(span > 1 ? span : 1);
    p = p < 0 ? 0 : p > 1 ? 1 : p;
    return o->min_lr + 0.5 * (o->lr - o->min_lr) * (1.0 + cos(M_PI * p));
}

#define NORM_CHUNKS 256 /* fixed, so the summation order ignores the thread count */

double optim_grad_norm(const gx_model *m)
{
    size_t n = m->num_params;
    for (int i = 0; i < m->num_tensors; i++) /* a tied copy (the block's last) counts once */
        if (m->tensors[i].tied_copy)
            n = m->tensors[i].offset;
    return optim_grad_norm_n(m->grads, n);
}

double optim_grad_norm_n(const float *g, size_t n)
{
    double part[NORM_CHUNKS];
    size_t per = (n + NORM_CHUNKS - 1) / NORM_CHUNKS;
#pragma omp parallel for schedule(static)
    for (int k = 0; k < NORM_CHUNKS; k++) {
        size_t a = (size_t)k * per, b = a + per < n ? a + per : n;
        double s = 0.0;
        for (size_t i = a; i < b; i++)
            s += (double)g[i] * g[i];
        part[k] = s;
    }
    double s = 0.0;
    for (int k = 0; k < NORM_CHUNKS; k++)
        s += part[k];
    return sqrt(s);
}

float optim_clip_coef(const optim_cfg *o, double norm)
{
    if (o->grad_clip <= 0.0)
        return 1.0f;
    double c = o->grad_clip / (norm + 1e-6);
    return c < 1.0 ? (float)c : 1.0f;
}

void optim_adamw_range(gx_model *m, const optim_cfg *o, long t, double lr, float clip_coef,
                       size_t lo, size_t hi, float *w, const float *g, float *mm, float *vv)
{
    adamw_cfg c = {.beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps,
                   .weight_decay = o->weight_decay};
    for (int ti = 0; ti < m->num_tensors; ti++) {
        const gx_tensor *tn = &m->tensors[ti];
        size_t a = tn->offset > lo ? tn->offset : lo;
        size_t b = tn->offset + tn->numel < hi ? tn->offset + tn->numel : hi;
        if (a >= b)
            continue;
        adamw_update(&c, t, lr, clip_coef, tn->decay, (long)(b - a), w + (a - lo),
                     g + (a - lo), mm + (a - lo), vv + (a - lo));
    }
}

void optim_adamw(gx_model *m, const optim_cfg *o, long t, double lr, float clip_coef)
{
    optim_adamw_range(m, o, t, lr, clip_coef, 0, m->num_params, m->params, m->grads, m->adam_m,
                      m->adam_v);
}
