/* test_adamw.c - tensor/adamw.h against a double-precision evaluation of
 * torch.optim.AdamW's formula over a few steps (with and without weight decay, with a
 * clip coefficient), element by element within a few fp32 roundings; and the update
 * does not depend on the thread count. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "../check.h"
#include "tensor/adamw.h"

#define N 1000

static void run(int decay, int threads, float *p, float *m, float *v, double *pd, double *md,
                double *vd)
{
    adamw_cfg c = {.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
    float g[N];
    omp_set_num_threads(threads);
    for (int i = 0; i < N; i++) {
        p[i] = (float)pd[i];
        m[i] = v[i] = 0;
        md[i] = vd[i] = 0;
    }
    for (long t = 1; t <= 5; t++) {
        double lr = 1e-3 * (double)t, clip = 0.5;
        for (int i = 0; i < N; i++)
            g[i] = (float)sin(0.37 * i + t) * (i % 7 == 0 ? 1e-6f : 1.0f);
        adamw_update(&c, t, lr, (float)clip, decay, N, p, g, m, v);
        for (int i = 0; i < N; i++) { /* the reference, from g as float */
            double gi = (double)g[i] * clip;
            md[i] = 0.9 * md[i] + 0.1 * gi;
            vd[i] = 0.95 * vd[i] + 0.05 * gi * gi;
            double den = sqrt(vd[i]) / sqrt(1 - pow(0.95, (double)t)) + 1e-8;
            pd[i] = pd[i] * (decay ? 1 - lr * 0.1 : 1) - lr / (1 - pow(0.9, (double)t)) * md[i] / den;
        }
    }
}

int main(void)
{
    static float p[N], m[N], v[N], p1[N];
    static double pd[N], md[N], vd[N];
    for (int decay = 0; decay <= 1; decay++) {
        for (int i = 0; i < N; i++)
            pd[i] = cos(0.11 * i);
        run(decay, 1, p1, m, v, pd, md, vd);
        double worst = 0;
        for (int i = 0; i < N; i++) {
            /* 5 steps of a few fp32 roundings each, relative to the update's size */
            double err = fabs(p1[i] - pd[i]) / (1e-7 * (fabs(pd[i]) + 5 * 5e-3));
            worst = err > worst ? err : worst;
        }
        CHECK(worst < 20);
        if (worst >= 20)
            fprintf(stderr, "decay %d: worst error %.3g units\n", decay, worst);
        for (int i = 0; i < N; i++)
            pd[i] = cos(0.11 * i);
        run(decay, 2, p, m, v, pd, md, vd);
        CHECK(memcmp(p, p1, sizeof p) == 0); /* element-wise: bitwise across thread counts */
    }
    /* weight decay changes the result (the flag is honoured) */
    for (int i = 0; i < N; i++)
        pd[i] = cos(0.11 * i);
    run(0, 1, p, m, v, pd, md, vd);
    CHECK(memcmp(p, p1, sizeof p) != 0);
    return check_failures != 0;
}
