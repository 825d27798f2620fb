/* test_infer.c - KV-cache inference against the trainer's full forward:
 * logits at every position (prompt fed in pieces, then one token at a time)
 * equal gx_step's logits to float rounding; greedy generation with the cache
 * gives exactly the argmax tokens of a full recomputation over the generated
 * text; seeded sampling is reproducible. Parallel and sequential residual. */
#include <stdlib.h>

#include "../check.h"
#include "core/rng.h"
#include "model/gptneox.h"
#include "model/gptneox_infer.h"

static void run(bool parallel)
{
    gx_config cfg = {.hidden = 32, .layers = 2, .heads = 4, .intermediate = 64, .vocab = 256,
                     .max_positions = 64, .rotary_pct = 0.5, .rotary_base = 10000,
                     .ln_eps = 1e-5, .act = OP_GELU, .parallel_residual = parallel};
    const int T = 24, V = cfg.vocab;
    gx_model full;
    CHECK_INT(gx_init(&full, &cfg, 1, T, 2), GRIT_OK);
    gx_init_weights(&full, 99);
    /* spread the logits so argmax is far from ties */
    const gx_tensor *eo = gx_find(&full, "embed_out.weight");
    for (size_t i = 0; i < eo->numel; i++)
        full.params[eo->offset + i] *= 30.0f;
    int32_t tok[64];
    rng_t r;
    rng_seed(&r, 7, 0);
    for (int i = 0; i <= T; i++)
        tok[i] = (int32_t)rng_below(&r, (uint64_t)V);
    float *ref = malloc(sizeof(float) * (size_t)T * V), *got = malloc(sizeof(float) * (size_t)T * V);
    gx_step(&full, tok, 0.0f, ref);

    gxi_state s;
    CHECK_INT(gxi_init(&s, &full, 64, 5, 2), GRIT_OK);
    CHECK_INT(gxi_forward(&s, tok, 7, NULL, got), GRIT_OK); /* pieces of 5 + 2 */
    for (int p = 7; p < T; p++)
        CHECK_INT(gxi_forward(&s, tok + p, 1, got + (size_t)p * V, NULL), GRIT_OK);
    double maxdiff = 0, maxabs = 0;
    int argmax_same = 1;
    for (int p = 0; p < T; p++) {
        for (int v = 0; v < V; v++) {
            double d = fabs((double)got[(size_t)p * V + v] - ref[(size_t)p * V + v]);
            maxdiff = d > maxdiff ? d : maxdiff;
            maxabs = fabs(ref[(size_t)p * V + v]) > maxabs ? fabs(ref[(size_t)p * V + v]) : maxabs;
        }
        argmax_same &= check_argmax(got + (size_t)p * V, V) == check_argmax(ref + (size_t)p * V, V);
    }
    printf("%s residual: max |logit diff| %.3g (logits up to %.3g)\n",
           parallel ? "parallel" : "sequential", maxdiff, maxabs);
    CHECK(maxdiff <= 1e-4 * (maxabs > 1 ? maxabs : 1));
    CHECK(argmax_same);

    /* greedy generation with the cache vs argmax of a full recomputation */
    const int P = 4, G = 16, N = P + G;
    int32_t seq[64];
    float *lg = malloc(sizeof(float) * (size_t)V);
    gxi_reset(&s);
    memcpy(seq, tok, sizeof(int32_t) * P);
    CHECK_INT(gxi_forward(&s, seq, P, lg, NULL), GRIT_OK);
    for (int i = P; i < N; i++) {
        seq[i] = gxi_sample(&s, lg, 0.0, 0, 1.0, &r);
        if (i + 1 < N)
            CHECK_INT(gxi_forward(&s, seq + i, 1, lg, NULL), GRIT_OK);
    }
    gx_model m2;
    CHECK_INT(gx_init(&m2, &cfg, 1, N - 1, 2), GRIT_OK);
    memcpy(m2.params, full.params, sizeof(float) * full.num_params);
    float *lf = malloc(sizeof(float) * (size_t)(N - 1) * V);
    gx_step(&m2, seq, 0.0f, lf);
    for (int i = P; i < N; i++)
        CHECK_INT(seq[i], check_argmax(lf + (size_t)(i - 1) * V, V));

    /* seeded sampling: same seed, same tokens */
    int32_t a[20], b[20];
    for (int rep = 0; rep < 3; rep++) {
        rng_t sr;
        rng_seed(&sr, rep < 2 ? 5 : 6, 0);
        gxi_reset(&s);
        CHECK_INT(gxi_forward(&s, tok, P, lg, NULL), GRIT_OK);
        int32_t *o = rep == 0 ? a : b;
        for (int i = 0; i < 20; i++) {
            o[i] = gxi_sample(&s, lg, 1.5, 50, 0.95, &sr);
            CHECK(o[i] >= 0 && o[i] < V);
            CHECK_INT(gxi_forward(&s, o + i, 1, lg, NULL), GRIT_OK);
        }
        if (rep == 1)
            CHECK(memcmp(a, b, sizeof a) == 0);
        if (rep == 2)
            CHECK(memcmp(a, b, sizeof a) != 0);
    }
    /* the cache refuses to overflow; ids are checked */
    gxi_reset(&s);
    CHECK_INT(gxi_forward(&s, tok, 65, NULL, NULL), GRIT_EINVAL);
    int32_t bad = V;
    CHECK_INT(gxi_forward(&s, &bad, 1, NULL, NULL), GRIT_EINVAL);
    free(lf);
    free(lg);
    free(ref);
    free(got);
    gxi_free(&s);
    gxi_free(&s);
    gx_free(&m2);
    gx_free(&full);
}

int main(void)
{
    run(true);
    run(false);
    CHECK_DONE();
}
