/*
 * parity_dump.c - runs grit's trainer on a config and dumps everything the
 * PyTorch reference needs to check it (docs/parity.md): initial weights,
 * the batches, step-0 logits/loss/gradients, per-step loss/grad-norm/lr
 * for STEPS optimiser steps, and the final weights; and, for the optimiser
 * check, every step's gradients at a fixed sample of elements (adam.safetensors).
 *
 * usage: grit-parity-dump CONFIG.json OUTDIR STEPS [--plant adam-ulp]
 *
 * --plant adam-ulp plants a deliberate defect for the checker's negative test
 * (reference.parity.planted_adam_ulp): after every AdamW step each parameter
 * that moved is pushed one more float32 ulp in the direction it moved, the
 * smallest systematic error an optimiser bug can make. compare.py must reject
 * the dump. The trainer itself has no such switch: the defect lives here.
 */
#include <cblas.h>
#include <math.h>
#include <stdbool.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "ckpt/safetensors.h"
#include "core/fsutil.h"
#include "data/synthetic.h"
#include "train/config.h"
#include "train/optim.h"
#include "train/train.h"

/* Elements of one tensor whose per-step gradients go to adam.safetensors: all of
 * a tensor up to SAMPLE_ALL elements; of a larger one the first and last
 * SAMPLE_EDGE (loop heads and SIMD tails) and an odd stride through the middle
 * (an odd stride visits every residue modulo the vector width). */
#define SAMPLE_ALL (1L << 18)
#define SAMPLE_EDGE (1L << 15)
#define SAMPLE_MID (1L << 17)

static void put(int64_t *out, long *k, long i)
{
    if (out)
        out[*k] = i;
    (*k)++;
}

/* Fills out (when not NULL) and returns the count. */
static long sample_indices(long n, int64_t *out)
{
    long k = 0;
    if (n <= SAMPLE_ALL) {
        for (long i = 0; i < n; i++)
            put(out, &k, i);
        return k;
    }
    long stride = ((n - 2 * SAMPLE_EDGE) / SAMPLE_MID) | 1;
    for (long i = 0; i < SAMPLE_EDGE; i++)
        put(out, &k, i);
    for (long i = SAMPLE_EDGE; i < n - SAMPLE_EDGE; i += stride)
        put(out, &k, i);
    for (long i = n - SAMPLE_EDGE; i < n; i++)
        put(out, &k, i);
    return k;
}

static int fail(const char *what)
{
    fprintf(stderr, "grit-parity-dump: %s: %s\n", what, grit_errmsg());
    return 1;
}

int main(int argc, char **argv)
{
    bool plant = argc == 6 && !strcmp(argv[4], "--plant") && !strcmp(argv[5], "adam-ulp");
    if (argc != 4 && !plant) {
        fprintf(stderr, "usage: %s CONFIG.json OUTDIR STEPS [--plant adam-ulp]\n", argv[0]);
        return 2;
    }
    const char *out = argv[2];
    int steps = atoi(argv[3]);
    if (steps < 1) {
        fprintf(stderr, "grit-parity-dump: STEPS '%s' is not a positive integer\n", argv[3]);
        return 2;
    }
    train_cfg cfg;
    train_cfg_defaults(&cfg);
    if (train_cfg_load(&cfg, argv[1]) != GRIT_OK)
        return fail("config");
    if (fs_mkdirs(out) != GRIT_OK)
        return fail("outdir");
    omp_set_num_threads(cfg.threads);
    openblas_set_num_threads(cfg.threads);
    const optim_cfg *o = &cfg.optim;
    int B = o->micro_batch, T = o->seq_len, A = o->grad_accum, V = cfg.model.vocab;
    char path[2048];

    /* config with the step count the dump covers */
    char *text = train_cfg_dump(&cfg);
    size_t n = strlen(text);
    char *text2 = malloc(n + 64);
    snprintf(text2, n + 64, "%.*s,\n  \"parity_steps\": %d\n}\n", (int)(strrchr(text, '}') - text - 1),
             text, steps);
    snprintf(path, sizeof path, "%s/config.json", out);
    if (fs_write_durable(path, text2, strlen(text2)) != GRIT_OK)
        return fail("config.json");
    free(text);
    free(text2);

    gx_model m;
    if (gx_init(&m, &cfg.model, B, T, cfg.threads) != GRIT_OK)
        return fail("model");
    const char *note;
    if (gx_set_precision(&m, cfg.precision, &note) != GRIT_OK)
        return fail("precision");
    if (note)
        fprintf(stderr, "grit-parity-dump: %s\n", note);
    gx_init_weights(&m, cfg.seed);
    if (cfg.init_from[0]) { /* start from a checkpoint's (or HF folder's) weights */
        store *src;
        if (store_open_posix(cfg.init_from, &src) != GRIT_OK ||
            ckpt_load(src, ".", &m, NULL, true) != GRIT_OK)
            return fail("init_from");
        store_close(src);
    }
    snprintf(path, sizeof path, "%s/weights.safetensors", out);
    if (train_save_weights(&m, path) != GRIT_OK)
        return fail("weights");

    long rows = (long)steps * A * B;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)rows * (T + 1));
    syn_fill(cfg.seed, cfg.synthetic_vocab, 0, (int)rows, T + 1, tok);
    st_entry be = {.name = "tokens", .dtype = "I32", .ndim = 2, .shape = {rows, T + 1},
                   .data = tok};
    snprintf(path, sizeof path, "%s/batches.safetensors", out);
    if (st_write(path, &be, 1) != GRIT_OK)
        return fail("batches");

    /* the optimiser check's sample: indices per tensor, gradients [steps, k] */
    int nt = m.num_tensors;
    long *nsamp = calloc((size_t)nt, sizeof *nsamp);
    int64_t **sidx = calloc((size_t)nt, sizeof *sidx);
    float **sgrad = calloc((size_t)nt, sizeof *sgrad);
    for (int i = 0; i < nt; i++) {
        nsamp[i] = sample_indices((long)m.tensors[i].numel, NULL);
        sidx[i] = malloc(sizeof(int64_t) * (size_t)nsamp[i]);
        sample_indices((long)m.tensors[i].numel, sidx[i]);
        sgrad[i] = malloc(sizeof(float) * (size_t)nsamp[i] * (size_t)steps);
    }
    float *before = plant ? malloc(sizeof(float) * m.num_params) : NULL;

    float *logits = malloc(sizeof(float) * (size_t)B * T * V);
    double *loss = calloc((size_t)steps, sizeof(double));
    double *norm = calloc((size_t)steps, sizeof(double));
    double *lrs = calloc((size_t)steps, sizeof(double));
    for (int s = 0; s < steps; s++) {
        gx_zero_grad(&m);
        for (int a = 0; a < A; a++)
            loss[s] += gx_step(&m, tok + ((long)s * A + a) * B * (T + 1), 1.0f / (float)A,
                               s == 0 && a == 0 ? logits : NULL);
        loss[s] /= A;
        norm[s] = optim_grad_norm(&m);
        for (int i = 0; i < nt; i++) {
            const float *g = m.grads + m.tensors[i].offset;
            float *dst = sgrad[i] + (size_t)s * nsamp[i];
            for (long k = 0; k < nsamp[i]; k++)
                dst[k] = g[sidx[i][k]];
        }
        if (s == 0) {
            st_entry *e = calloc((size_t)nt + 2, sizeof *e);
            char (*names)[128] = calloc((size_t)nt, sizeof *names);
            float l0 = (float)loss[0];
            e[0] = (st_entry){.name = "logits", .dtype = "F32", .ndim = 3, .shape = {B, T, V},
                              .data = logits};
            e[1] = (st_entry){.name = "loss", .dtype = "F32", .ndim = 1, .shape = {1},
                              .data = &l0};
            for (int i = 0; i < nt; i++) {
                const gx_tensor *t = &m.tensors[i];
                snprintf(names[i], sizeof names[i], "grad.%s", t->name);
                e[i + 2] = (st_entry){.name = names[i], .dtype = "F32", .ndim = t->ndim,
                                      .shape = {t->shape[0], t->shape[1]},
                                      .data = m.grads + t->offset};
            }
            snprintf(path, sizeof path, "%s/step0.safetensors", out);
            if (st_write(path, e, nt + 2) != GRIT_OK)
                return fail("step0");
            free(e);
            free(names);
        }
        lrs[s] = optim_lr(o, s);
        if (plant)
            memcpy(before, m.params, sizeof(float) * m.num_params);
        optim_adamw(&m, o, s + 1, lrs[s], optim_clip_coef(o, norm[s]));
        if (plant) /* the planted defect: one ulp further along every update */
            for (size_t i = 0; i < m.num_params; i++)
                if (m.params[i] != before[i])
                    m.params[i] = nextafterf(m.params[i],
                                             m.params[i] > before[i] ? INFINITY : -INFINITY);
    }

    st_entry *se = calloc(2 * (size_t)nt, sizeof *se);
    char (*snames)[160] = calloc(2 * (size_t)nt, sizeof *snames);
    for (int i = 0; i < nt; i++) {
        snprintf(snames[2 * i], sizeof snames[0], "index.%s", m.tensors[i].name);
        snprintf(snames[2 * i + 1], sizeof snames[0], "grad.%s", m.tensors[i].name);
        se[2 * i] = (st_entry){.name = snames[2 * i], .dtype = "I64", .ndim = 1,
                               .shape = {nsamp[i]}, .data = sidx[i]};
        se[2 * i + 1] = (st_entry){.name = snames[2 * i + 1], .dtype = "F32", .ndim = 2,
                                   .shape = {steps, nsamp[i]}, .data = sgrad[i]};
    }
    snprintf(path, sizeof path, "%s/adam.safetensors", out);
    if (st_write(path, se, 2 * nt) != GRIT_OK)
        return fail("adam");
    for (int i = 0; i < nt; i++) {
        free(sidx[i]);
        free(sgrad[i]);
    }
    free(se);
    free(snames);
    free(sidx);
    free(sgrad);
    free(nsamp);
    free(before);
    snprintf(path, sizeof path, "%s/final.safetensors", out);
    if (train_save_weights(&m, path) != GRIT_OK)
        return fail("final");

    FILE *f;
    snprintf(path, sizeof path, "%s/train.json", out);
    if (!(f = fopen(path, "w")))
        return fail("train.json");
    const char *keys[3] = {"loss", "grad_norm", "lr"};
    const double *vals[3] = {loss, norm, lrs};
    fputc('{', f);
    for (int k = 0; k < 3; k++) {
        fprintf(f, "%s\"%s\": [", k ? ", " : "", keys[k]);
        for (int s = 0; s < steps; s++)
            fprintf(f, "%s%.17g", s ? ", " : "", vals[k][s]);
        fputc(']', f);
    }
    fputs("}\n", f);
    fclose(f);
    printf("grit-parity-dump: %d steps, losses %.6f -> %.6f, wrote %s (OpenBLAS core %s%s)\n",
           steps, loss[0], loss[steps - 1], out, openblas_get_corename(),
           plant ? ", PLANTED adam-ulp defect" : "");
    free(tok);
    free(logits);
    free(loss);
    free(norm);
    free(lrs);
    gx_free(&m);
    return 0;
}
