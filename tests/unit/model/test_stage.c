/* test_stage.c - pipeline stages of the decoder (gx_init_stage, gx_stage_step) without MPI:
 * the stages of one model run in one process, their boundary activations and gradients
 * handed over in memory. For GPT-NeoX, Llama (GQA, SwiGLU, RMSNorm) and an untied Falcon
 * (grouped q/k/v), split into 2 and 4 stages, with and without full recomputation and as
 * an SFT micro-batch (loss mask, packed examples), three micro-batches in 1F1B order on
 * every stage must give bitwise the single model's weights (each stage draws its tensors
 * from the whole decoder's streams), losses and accumulated gradients, tensor by tensor
 * by name; with tied embeddings (Falcon) the last stage's copy of the embedding has its
 * weights bitwise and the two stages' gradients add up to the single model's within
 * rounding. Also: each stage holds only its tensors, and bad layouts are refused. */
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>

#include "../check.h"
#include "model/family.h"
#include "stage_cmp.h"

enum { B = 2, T = 16, M = 3 };

static int32_t *tokens(const gx_config *cfg, int mb)
{
    size_t n = (size_t)B * (T + 1);
    int32_t *tok = malloc(n * sizeof *tok);
    for (size_t i = 0; i < n; i++)
        tok[i] = (int32_t)((i * 7919 + 13 + 101 * (size_t)mb) % (size_t)cfg->vocab);
    return tok;
}


static void one(const char *what, const gx_config *cfg, int P, int rc, int use_sft)
{
    int32_t *tok[M];
    for (int i = 0; i < M; i++)
        tok[i] = tokens(cfg, i);
    int32_t seg[B * T];
    uint8_t mask[B * (T + 1)];
    sft_rows(mask, seg, B, T);
    gx_batch batch = {.mask = mask, .seg = seg, .denom = 0}, *sft = use_sft ? &batch : NULL;
    float gs = 1.0f / M;

    gx_model whole;
    CHECK_INT(gx_init(&whole, cfg, B, T, 1), GRIT_OK);
    gx_init_weights(&whole, 11);
    gx_zero_grad(&whole);
    float ref[M];
    for (int i = 0; i < M; i++)
        ref[i] = gx_step_ex(&whole, tok[i], sft, gs, NULL);

    gx_model *st = calloc((size_t)P, sizeof *st);
    size_t NC = (size_t)B * T * (size_t)cfg->hidden, held = 0;
    for (int s = 0; s < P; s++) {
        CHECK_INT(gx_init_stage(&st[s], cfg, B, T, 1, 1, 0, rc, P, s), GRIT_OK);
        gx_init_weights(&st[s], 11);
        gx_zero_grad(&st[s]);
        for (int i = 0; i < st[s].num_tensors; i++)
            held += st[s].tensors[i].tied_copy ? 0 : st[s].tensors[i].numel;
        CHECK_INT(st[s].nl, cfg->layers / P);
        CHECK_INT(st[s].l0, s * cfg->layers / P);
        CHECK((s == 0 || (cfg->tied && s == P - 1)) ==
              (gx_find(&st[s], whole.tensors[0].name) != NULL)); /* the tied head: a copy */
        CHECK((s == P - 1) ==
              (gx_find(&st[s], whole.tensors[whole.num_tensors - 1].name) != NULL));
    }
    size_t all = 0;
    for (int i = 0; i < whole.num_tensors; i++)
        all += whole.tensors[i].numel;
    CHECK_INT(held, all); /* every tensor on exactly one stage (a tied copy aside) */

    /* the stage inputs of every micro-batch kept, as the schedule keeps them */
    float *in = malloc(NC * sizeof(float) * (size_t)M * (size_t)P), *dout = malloc(NC * sizeof(float));
    float *din = malloc(NC * sizeof(float)), loss[M];
#define IN(s, i) (in + NC * ((size_t)(s) * M + (size_t)(i)))
    for (int i = 0; i < M; i++) /* forwards of every micro-batch, stage by stage */
        for (int s = 0; s < P - 1; s++)
            CHECK(gx_stage_step(&st[s], tok[i], sft, s ? IN(s, i) : NULL, NULL, gs, IN(s + 1, i),
                                NULL, NULL) == 0.0f);
    for (int i = 0; i < M; i++) { /* then each one's backward, last stage first */
        loss[i] = gx_stage_step(&st[P - 1], tok[i], sft, IN(P - 1, i), NULL, gs, NULL, din, NULL);
        for (int s = P - 2; s >= 0; s--) {
            memcpy(dout, din, NC * sizeof(float));
            CHECK(gx_stage_step(&st[s], tok[i], sft, s ? IN(s, i) : NULL, dout, gs, NULL, din,
                                NULL) == 0.0f);
        }
        CHECK(loss[i] == ref[i]);
    }
#undef IN
    int bad = 0;
    char label[128];
    for (int s = 0; s < P; s++) {
        snprintf(label, sizeof label, "%s P=%d%s%s stage %d", what, P, rc ? " recompute" : "",
                 sft ? " SFT" : "", s);
        bad += stage_tensors_differ(&st[s], &whole, 0, label) +
               stage_tensors_differ(&st[s], &whole, 1, label);
    }
    CHECK_INT(bad, 0);
    double tied_rel = -1;
    if (cfg->tied) { /* first stage's embedding gradient + the last stage's copy's (train/dp.c) */
        const gx_tensor *e = &st[0].tensors[0], *c = gx_find(&st[P - 1], e->name);
        CHECK(c != NULL && c->tied_copy && c->numel == e->numel);
        double d = 0, s2 = 0;
        for (size_t j = 0; c && j < e->numel; j++) {
            double sum = (double)(st[0].grads[e->offset + j] + st[P - 1].grads[c->offset + j]);
            double want = whole.grads[whole.tensors[0].offset + j];
            d += (sum - want) * (sum - want);
            s2 += want * want;
        }
        tied_rel = sqrt(d / s2);
        CHECK(tied_rel < 1e-6); /* the same terms, added in another order */
    }
    printf("%s, %d stages%s%s: %d micro-batches, losses %.7f %.7f %.7f and every weight and "
           "gradient bitwise the single model's",
           what, P, rc ? ", full recomputation" : "", sft ? ", SFT (masked, packed)" : "", M,
           loss[0], loss[1], loss[2]);
    if (tied_rel >= 0)
        printf(" (the tied embedding's: the two stages' sum, relative L2 %.1e)", tied_rel);
    printf("\n");
    for (int s = 0; s < P; s++)
        gx_free(&st[s]);
    free(st);
    gx_free(&whole);
    free(in);
    free(dout);
    free(din);
    for (int i = 0; i < M; i++)
        free(tok[i]);
}

int main(void)
{
    omp_set_num_threads(1); /* the models' scratch is sized for one thread */
    openblas_set_num_threads(1);
    gx_config c[4];
    CHECK_INT(gx_preset("pythia-14m", &c[0]), GRIT_OK);
    c[0].vocab = 256;
    c[0].layers = 4;
    CHECK_INT(gx_preset("llama-tiny", &c[1]), GRIT_OK);
    c[1].layers = 4;
    CHECK_INT(gx_preset("falcon-tiny-new", &c[2]), GRIT_OK);
    c[2].layers = 4;
    c[2].tied = false;
    CHECK_INT(gx_preset("falcon-tiny-new", &c[3]), GRIT_OK);
    c[3].layers = 4; /* tied: the last stage holds a copy of the embedding as its head */
    const char *names[4] = {"gpt_neox", "llama (GQA)", "falcon (grouped, untied)",
                            "falcon (grouped, tied)"};
    for (int f = 0; f < 4; f++) {
        one(names[f], &c[f], 2, 0, 0);
        one(names[f], &c[f], 4, 0, f == 1);
        one(names[f], &c[f], 2, 1, f != 1);
    }

    gx_model m;
    gx_config bad = c[0];
    bad.layers = 6;
    CHECK_INT(gx_init_stage(&m, &bad, B, T, 1, 1, 0, false, 4, 0), GRIT_EINVAL);
    printf("refused: %s\n", grit_errmsg());
    CHECK(strstr(grit_errmsg(), "num_layers 6 is not divisible by 4") != NULL);
    CHECK_INT(gx_init_stage(&m, &c[0], B, T, 1, 1, 0, false, 2, 2), GRIT_EINVAL);
    CHECK_DONE();
}
