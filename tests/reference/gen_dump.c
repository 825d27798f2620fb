/*
 * gen_dump.c - greedy generation through grit's KV-cache inference (model/
 * gptneox_infer.h) for any family, dumped for the PyTorch check (gen_ref.py).
 *
 * usage: grit-gen-dump MODEL OUT.safetensors NEW ID...
 *
 * MODEL is what grit generate takes (a run directory or a step folder). The
 * prompt ids are fed in one call (the prefill), then NEW tokens are chosen
 * greedily (gxi_sample at temperature 0) and fed back one at a time. The dump
 * holds "ids" (prompt then generated, I32) and "logits" [NEW, V] (F32), the
 * logits each choice was made from.
 */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "ckpt/pretrained.h"
#include "ckpt/safetensors.h"
#include "model/gptneox_infer.h"

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL OUT.safetensors NEW ID...\n", argv[0]);
        return 2;
    }
    int P = argc - 4, NEW = atoi(argv[3]);
    omp_set_num_threads(2);
    openblas_set_num_threads(2);
    gx_model m;
    gxi_state s;
    char where[4400];
    if (NEW < 1 || pretrained_load(argv[1], &m, 2, where, sizeof where) != GRIT_OK) {
        fprintf(stderr, "grit-gen-dump: %s\n", NEW < 1 ? "NEW must be >= 1" : grit_errmsg());
        return 1;
    }
    int V = m.cfg.vocab;
    int32_t *ids = malloc(sizeof *ids * (size_t)(P + NEW));
    float *lg = malloc(sizeof *lg * (size_t)NEW * (size_t)V);
    for (int i = 0; i < P; i++)
        ids[i] = atoi(argv[4 + i]);
    grit_err rc = gxi_init(&s, &m, P + NEW, 4, 2);
    if (rc == GRIT_OK)
        rc = gxi_forward(&s, ids, P, lg, NULL);
    for (int k = 0; rc == GRIT_OK && k < NEW; k++) {
        float *row = lg + (size_t)k * (size_t)V;
        ids[P + k] = gxi_sample(&s, row, 0.0, 0, 1.0, NULL);
        if (k + 1 < NEW)
            rc = gxi_forward(&s, ids + P + k, 1, row + V, NULL);
    }
    if (rc != GRIT_OK) {
        fprintf(stderr, "grit-gen-dump: %s\n", grit_errmsg());
        return 1;
    }
    st_entry e[2] = {
        {.name = "ids", .dtype = "I32", .ndim = 1, .shape = {P + NEW}, .data = ids},
        {.name = "logits", .dtype = "F32", .ndim = 2, .shape = {NEW, V}, .data = lg}};
    if (st_write(argv[2], e, 2) != GRIT_OK) {
        fprintf(stderr, "grit-gen-dump: %s\n", grit_errmsg());
        return 1;
    }
    printf("grit-gen-dump: %s (%s): %d prompt + %d greedy tokens\n", where,
           m.cfg.family == GX_LLAMA ? "llama" : m.cfg.family == GX_FALCON ? "falcon" : "gpt_neox",
           P, NEW);
    gxi_free(&s);
    gx_free(&m);
    free(ids);
    free(lg);
    return 0;
}
