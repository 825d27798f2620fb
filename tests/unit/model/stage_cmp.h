/*
 * stage_cmp.h - shared by the pipeline-stage tests (unit test_stage.c, integration
 * pp_check.c) and the tensor-parallel one (test_tp.c): a stage's tensors against the whole
 * model's of the same name, and the SFT micro-batch the model tests use.
 */
#ifndef GRIT_TEST_STAGE_CMP_H
#define GRIT_TEST_STAGE_CMP_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "model/gptneox.h"

/* Every tensor of stage st equals the whole model's tensor of the same name, bit for bit
 * (weights, or gradients with grads); a tied embedding's gradient (two stages' sum) is
 * left to the caller. Prints each difference under `what`; returns how many differ. */
static inline int stage_tensors_differ(const gx_model *st, const gx_model *whole, int grads,
                                       const char *what)
{
    int bad = 0;
    for (int i = 0; i < st->num_tensors; i++) {
        const gx_tensor *t = &st->tensors[i], *u = gx_find(whole, t->name);
        if (!u || u->numel != t->numel) {
            fprintf(stderr, "%s: stage tensor %s has no equal in the whole model\n", what,
                    t->name);
            return 1;
        }
        if (grads && whole->cfg.tied && u == &whole->tensors[0])
            continue;
        const float *a = (grads ? st->grads : st->params) + t->offset;
        const float *b = (grads ? whole->grads : whole->params) + u->offset;
        if (memcmp(a, b, t->numel * sizeof(float)) != 0) {
            size_t j = 0;
            while (a[j] == b[j])
                j++;
            fprintf(stderr, "%s: %s %s differs at %zu: %.9g vs %.9g\n", what, t->name,
                    grads ? "gradient" : "weight", j, a[j], b[j]);
            bad++;
        }
    }
    return bad;
}

/* An SFT micro-batch of B rows of T tokens: two examples per row (prompt 0-3 | answer 4-6
 * | 7-10 | 11-), the loss mask [B][T + 1] and the packed-example starts [B][T]. */
static inline void sft_rows(uint8_t *mask, int32_t *seg, int B, int T)
{
    for (int b = 0; b < B; b++) {
        for (int t = 0; t <= T; t++)
            mask[b * (T + 1) + t] = (uint8_t)(t >= 4 + b && t <= 6) || t >= 11;
        for (int t = 0; t < T; t++)
            seg[b * T + t] = t < 7 ? 0 : 7;
    }
}

/* The model tests' micro-batch: B = 2 rows of T = 16 tokens (fixed ids below vocab) and,
 * with use_sft, sft_rows' loss mask and packed-example starts (the gx_batch returned; NULL
 * without). */
enum { TEST_B = 2, TEST_T = 16 };
typedef struct test_mb {
    int32_t tok[TEST_B * (TEST_T + 1)], seg[TEST_B * TEST_T];
    uint8_t mask[TEST_B * (TEST_T + 1)];
    gx_batch batch;
} test_mb;

static inline const gx_batch *test_mb_make(test_mb *b, int vocab, int use_sft)
{
    for (size_t i = 0; i < (size_t)TEST_B * (TEST_T + 1); i++)
        b->tok[i] = (int32_t)((i * 7919 + 13) % (size_t)vocab);
    sft_rows(b->mask, b->seg, TEST_B, TEST_T);
    b->batch = (gx_batch){.mask = b->mask, .seg = b->seg, .denom = 0};
    return use_sft ? &b->batch : NULL;
}

#endif
