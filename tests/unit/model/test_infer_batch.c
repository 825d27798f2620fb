/* test_infer_batch.c - continuous batching (gxi_decode) against one sequence at a time,
 * for every family the inference code supports: GPT-NeoX (parallel and sequential
 * residual), Llama (RMSNorm, SwiGLU, grouped-query attention, llama3 rope scaling),
 * Falcon 7B (multi-query, one shared norm) and Falcon new_decoder_architecture (grouped).
 *
 * Six sequences with different prompt lengths join a running batch at different steps
 * (each prompt fed alone through the batch's work state, as grit serve admits a
 * request) and leave after different numbers of tokens, so the decode steps hold 1 to 6
 * rows at unrelated positions. Every logit of every step must equal bitwise the logit
 * the same sequence gets alone through gxi_forward (grit generate's path): a batched
 * answer is the solo answer, not a close one. Also: a full sequence or too many rows is
 * refused without touching the caches. */
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "core/rng.h"
#include "model/gptneox.h"
#include "model/gptneox_infer.h"

enum { S = 6, MAXG = 12 };

static void run(const char *preset, int variant)
{
    gx_config cfg;
    CHECK_INT(gx_preset(preset, &cfg), GRIT_OK);
    cfg.max_positions = 64;
    if (variant == 1)
        cfg.parallel_residual = false;
    if (variant == 2) { /* llama3 rope scaling */
        cfg.rope = GX_ROPE_LLAMA3;
        cfg.rope_factor = 8;
        cfg.rope_low = 1;
        cfg.rope_high = 4;
        cfg.rope_orig_max = 32;
    }
    gx_model m;
    CHECK_INT(gx_init(&m, &cfg, 1, 8, 2), GRIT_OK);
    gx_init_weights(&m, 5);
    const int V = cfg.vocab;
    int plen[S], gen[S], join[S];
    int32_t prompt[S][40], toks[S][MAXG];
    float *solo = malloc(sizeof(float) * S * MAXG * (size_t)V);
    rng_t r;
    rng_seed(&r, 17, 0);
    gxi_state one;
    CHECK_INT(gxi_init(&one, &m, 64, 256, 2), GRIT_OK);
    for (int i = 0; i < S; i++) { /* each alone, as grit generate */
        plen[i] = 1 + 7 * i;
        gen[i] = 3 + (i * 5) % (MAXG - 2);
        join[i] = (i * 2) % 5;
        for (int k = 0; k < plen[i]; k++)
            prompt[i][k] = (int32_t)rng_below(&r, (uint64_t)V);
        gxi_reset(&one);
        float *lg = solo + (size_t)i * MAXG * V;
        CHECK_INT(gxi_forward(&one, prompt[i], plen[i], lg, NULL), GRIT_OK);
        for (int g = 1; g < gen[i]; g++) {
            toks[i][g - 1] = check_argmax(lg + (size_t)(g - 1) * V, V);
            CHECK_INT(gxi_forward(&one, &toks[i][g - 1], 1, lg + (size_t)g * V, NULL), GRIT_OK);
        }
    }
    gxi_state work, cache[S], *act[S];
    int32_t feed[S];
    int idx[S], made[S] = {0}, steps = 0, widest = 0, mismatches = 0;
    float *lb = malloc(sizeof(float) * S * (size_t)V);
    CHECK_INT(gxi_init_work(&work, &m, 256, 2), GRIT_OK); /* grit serve's and generate's pieces */
    for (int t = 0, done = 0; done < S; t++) {
        for (int i = 0; i < S; i++)
            if (join[i] == t) { /* admitted: its prompt alone through the work state */
                CHECK_INT(gxi_init_cache(&cache[i], &m, plen[i] + gen[i] - 1), GRIT_OK);
                CHECK_INT(gxi_forward_in(&work, &cache[i], prompt[i], plen[i], lb, NULL), GRIT_OK);
                mismatches += memcmp(lb, solo + (size_t)i * MAXG * V, sizeof(float) * V) != 0;
                made[i] = 1;
            }
        int B = 0;
        for (int i = 0; i < S; i++)
            if (join[i] <= t && made[i] && made[i] < gen[i]) {
                act[B] = &cache[i];
                idx[B] = i;
                feed[B++] = toks[i][made[i] - 1];
            }
        if (!B) {
            done = 0;
            for (int i = 0; i < S; i++)
                done += made[i] == gen[i];
            continue;
        }
        CHECK_INT(gxi_decode(&work, act, feed, B, lb), GRIT_OK);
        steps++;
        widest = B > widest ? B : widest;
        for (int b = 0; b < B; b++) {
            int i = idx[b];
            mismatches += memcmp(lb + (size_t)b * V, solo + ((size_t)i * MAXG + made[i]) * V,
                                 sizeof(float) * V) != 0;
            made[i]++;
        }
        done = 0;
        for (int i = 0; i < S; i++)
            done += made[i] == gen[i];
    }
    printf("%s%s: %d decode steps of up to %d sequences, %d logit rows differ from solo\n",
           preset, variant == 1 ? " sequential" : variant == 2 ? " llama3-rope" : "", steps,
           widest, mismatches);
    CHECK_INT(mismatches, 0);
    CHECK(widest >= 4);
    /* refusals: a full sequence, more rows than the work state has, a bad id */
    int pos = cache[0].pos;
    act[0] = &cache[0];
    feed[0] = 1;
    CHECK_INT(gxi_decode(&work, act, feed, 1, lb), GRIT_EINVAL);
    CHECK_INT(cache[0].pos, pos);
    gxi_state *many[257];
    int32_t ids[257] = {0};
    for (int k = 0; k < 257; k++)
        many[k] = &cache[5];
    CHECK_INT(gxi_decode(&work, many, ids, 257, lb), GRIT_EINVAL);
    ids[0] = V;
    CHECK_INT(gxi_decode(&work, many, ids, 1, lb), GRIT_EINVAL);
    CHECK(gxi_cache_bytes(&m, 10) ==
          2 * sizeof(float) * (size_t)cfg.layers * 10 * (size_t)gx_kv_heads(&cfg) *
              (size_t)(cfg.hidden / cfg.heads));
    for (int i = 0; i < S; i++)
        gxi_free(&cache[i]);
    gxi_free(&work);
    gxi_free(&one);
    free(lb);
    free(solo);
    gx_free(&m);
}

int main(void)
{
    run("pythia-14m", 0);
    run("pythia-14m", 1);
    run("llama-tiny", 0);
    run("llama-tiny", 2);
    run("falcon-tiny", 0);
    run("falcon-tiny-new", 0);
    CHECK_DONE();
}
