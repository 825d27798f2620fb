/*
 * bf16_curve.c - the bf16 accuracy guard (docs/precision.md): trains one small model
 * STEPS optimiser steps twice from the same initial weights on the same batches, in
 * fp32 and in bf16, and requires the bf16 loss curve to stay inside a band around the
 * fp32 one.
 *
 *   usage: grit-bf16-curve STEPS [--expect-outside] [--family neox|llama]
 *
 * The band: both curves are smoothed by a trailing mean over WINDOW steps (single-step
 * losses carry batch noise that has nothing to do with precision); from step WINDOW on,
 * the smoothed bf16 loss minus the smoothed fp32 loss must stay in [-BAND_LOW, BAND_HIGH]
 * nats. Worse than fp32 is what a precision bug does, so that side is tight; better than
 * fp32 is only the two trajectories drifting apart, so that side is loose. The numbers,
 * and what they were measured against, are in docs/precision.md.
 *
 * --expect-outside is the negative test: run with GRIT_FAULT_BF16_ACCUM=1 (bf16 GEMMs
 * that accumulate in bf16, core/fault.h), the bf16 curve must leave the band; the run
 * stops at the first step outside it. Each mode checks the fault is (not) planted, so
 * neither can pass by running the other. Exit 0 on the expected outcome, 1 otherwise.
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/synthetic.h"
#include "model/gptneox.h"
#include "train/optim.h"

#define WINDOW 20
#define BAND_HIGH 0.004
#define BAND_LOW 0.02

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static gx_config model_cfg(const char *family)
{
    gx_config c = {.hidden = 64, .layers = 2, .heads = 4, .intermediate = 256, .vocab = 512,
                   .max_positions = 128, .rotary_pct = 0.25, .rotary_base = 10000.0,
                   .ln_eps = 1e-5, .act = OP_GELU, .parallel_residual = true};
    if (!strcmp(family, "llama")) {
        c.family = GX_LLAMA;
        c.norm = GX_RMSNORM;
        c.mlp = GX_MLP_SWIGLU;
        c.qkv = GX_QKV_SPLIT;
        c.kv_heads = 2;
        c.intermediate = 128;
        c.rotary_pct = 1.0;
        c.parallel_residual = false;
        c.no_bias = GX_NOBIAS_QKV | GX_NOBIAS_DENSE | GX_NOBIAS_MLP;
        c.init_std = 0.02;
    }
    return c;
}

/* Smoothed loss at step s (trailing mean over WINDOW steps ending at s). */
static double smooth(const double *loss, int s)
{
    double sum = 0.0;
    for (int i = s - WINDOW + 1; i <= s; i++)
        sum += loss[i];
    return sum / WINDOW;
}

int main(int argc, char **argv)
{
    int steps = argc >= 2 ? atoi(argv[1]) : 0;
    int expect_outside = 0;
    const char *family = "neox";
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--expect-outside"))
            expect_outside = 1;
        else if (!strcmp(argv[i], "--family") && i + 1 < argc)
            family = argv[++i];
        else
            steps = 0;
    }
    if (steps < 2 * WINDOW || (strcmp(family, "neox") && strcmp(family, "llama"))) {
        fprintf(stderr, "usage: %s STEPS (>= %d) [--expect-outside] [--family neox|llama]\n",
                argv[0], 2 * WINDOW);
        return 2;
    }
    const char *fault = getenv("GRIT_FAULT_BF16_ACCUM");
    int planted = fault && !strcmp(fault, "1");
    if (planted != expect_outside) {
        fprintf(stderr, "bf16_curve: %s\n",
                expect_outside ? "--expect-outside needs GRIT_FAULT_BF16_ACCUM=1"
                               : "GRIT_FAULT_BF16_ACCUM is set: this run would not test bf16");
        return 2;
    }
    const int threads = 1, B = 4, T = 64, K = 512;
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    optim_cfg o = {.micro_batch = B, .grad_accum = 1, .seq_len = T, .lr = 3e-3, .min_lr = 3e-4,
                   .warmup_steps = 10, .total_steps = steps, .beta1 = 0.9, .beta2 = 0.95,
                   .eps = 1e-8, .weight_decay = 0.1, .grad_clip = 1.0};
    gx_config cfg = model_cfg(family);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)B * (T + 1));
    double *loss[2] = {calloc((size_t)steps, sizeof(double)), calloc((size_t)steps, sizeof(double))};
    int rc = 1, ran[2] = {0, 0}, left_at = -1;
    double hi = -INFINITY, lo = INFINITY;
    gx_model m[2];
    memset(m, 0, sizeof m);
    for (int p = 0; p < 2; p++) {
        const char *note = NULL;
        if (gx_init(&m[p], &cfg, B, T, threads) != GRIT_OK ||
            gx_set_precision(&m[p], p ? GX_BF16 : GX_FP32, &note) != GRIT_OK) {
            fprintf(stderr, "bf16_curve: %s\n", grit_errmsg());
            goto out;
        }
        gx_init_weights(&m[p], 7);
        if (note)
            printf("%s\n", note);
    }
    /* both runs in lockstep, so the planted run can stop as soon as it leaves the band */
    double t0 = now(), secs[2] = {0, 0};
    for (int s = 0; s < steps; s++) {
        syn_fill(11, K, (long)s * B, B, T + 1, tok);
        for (int p = 0; p < 2; p++) {
            double t1 = now();
            gx_zero_grad(&m[p]);
            loss[p][s] = gx_step(&m[p], tok, 1.0f, NULL);
            if (m[p].gemm_err != GRIT_OK) {
                fprintf(stderr, "bf16_curve: %s\n", grit_errmsg());
                goto out;
            }
            double norm = optim_grad_norm(&m[p]);
            optim_adamw(&m[p], &o, s + 1, optim_lr(&o, s), optim_clip_coef(&o, norm));
            ran[p] = s + 1;
            secs[p] += now() - t1;
        }
        if (s + 1 < WINDOW)
            continue;
        double f = smooth(loss[0], s), b = smooth(loss[1], s), d = b - f;
        int out = d > BAND_HIGH || d < -BAND_LOW;
        hi = d > hi ? d : hi;
        lo = d < lo ? d : lo;
        if ((s + 1) % 25 == 0 || s + 1 == steps || out)
            printf("step %4d  loss fp32 %.4f  bf16 %.4f  smoothed %.4f %.4f  bf16 - fp32 %+.4f\n",
                   s + 1, loss[0][s], loss[1][s], f, b, d);
        if (out && left_at < 0) {
            left_at = s + 1;
            if (expect_outside)
                break;
        }
    }
    printf("bf16_curve: %s, %d steps in %.1f s (fp32 %.1f s, bf16 %.1f s); smoothed bf16 - fp32 "
           "in [%+.4f, %+.4f], band [%+.4f, %+.4f] (window %d)\n",
           family, ran[1], now() - t0, secs[0], secs[1], lo, hi, -BAND_LOW, BAND_HIGH, WINDOW);
    double f0 = loss[0][0], fl = smooth(loss[0], ran[0] - 1);
    if (!expect_outside && !(fl < f0 - 1.0)) {
        printf("FAIL: fp32 loss fell only from %.3f to %.3f: the model learns too little for "
               "the comparison to mean anything\n", f0, fl);
        goto out;
    }
    if (expect_outside)
        rc = left_at > 0 ? 0 : 1;
    else
        rc = left_at < 0 ? 0 : 1;
    if (rc)
        printf("FAIL: %s\n", expect_outside
                                 ? "the planted bf16-accumulation bug stayed inside the band"
                                 : "the bf16 curve left the band around fp32");
    else if (expect_outside)
        printf("ok: the planted bug left the band at step %d\n", left_at);
    else
        printf("ok: bf16 within the band of fp32 for all %d steps\n", steps);
out:
    gx_free(&m[0]);
    gx_free(&m[1]);
    free(tok);
    free(loss[0]);
    free(loss[1]);
    return rc;
}
