/*
 * parity_dump.c - runs grit's trainer on a config and dumps everything the
 * PyTorch reference needs to check it (docs/parity.md): initial weights,
 * the batches, step-0 logits/loss/gradients, per-step loss/grad-norm/lr
 * for STEPS optimiser steps, and the final weights.
 *
 * usage: grit-parity-dump CONFIG.json OUTDIR STEPS
 */
#include <cblas.h>
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

static int fail(const char *what)
{
    fprintf(stderr, "grit-parity-dump: %s: %s\n", what, grit_errmsg());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s CONFIG.json OUTDIR STEPS\n", argv[0]);
        return 2;
    }
    const char *out = argv[2];
    int steps = atoi(argv[3]);
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
        if (s == 0) {
            int nt = m.num_tensors;
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
        optim_adamw(&m, o, s + 1, lrs[s], optim_clip_coef(o, norm[s]));
    }
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
    printf("grit-parity-dump: %d steps, losses %.6f -> %.6f, wrote %s\n", steps, loss[0],
           loss[steps - 1], out);
    free(tok);
    free(logits);
    free(loss);
    free(norm);
    free(lrs);
    gx_free(&m);
    return 0;
}
