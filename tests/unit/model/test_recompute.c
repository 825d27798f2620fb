/* test_recompute.c - full activation recomputation (gx_set_recompute) gives bitwise the
 * loss and gradients of the step that keeps every layer's activations, for every block
 * shape (GPT-NeoX parallel and sequential, Llama, Falcon 7B's shared norm, Falcon 40B's two
 * norms), in fp32 and bf16, over two accumulated micro-batches; and it keeps fewer floats:
 * one layer's activations instead of L (each layer's input and one forward scratch stay). */
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "core/rng.h"
#include "model/gptneox.h"
#include "model/tp.h"

static void tokens_fill(int32_t *t, int n, int vocab, uint64_t seed)
{
    uint64_t s = seed;
    for (int i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        t[i] = (int32_t)((s >> 33) % (uint64_t)vocab);
    }
}

static void one(const char *preset, int sequential, gx_precision prec)
{
    gx_config c;
    CHECK_INT(gx_preset(preset, &c), GRIT_OK);
    if (sequential)
        c.parallel_residual = false;
    if (c.vocab > 1024)
        c.vocab = 1024; /* the head is not what is recomputed: keep the test quick */
    const int B = 2, T = 16, L = c.layers;
    gx_model a, b;
    CHECK_INT(gx_init(&a, &c, B, T, 2), GRIT_OK);
    CHECK_INT(gx_init(&b, &c, B, T, 2), GRIT_OK);
    CHECK_INT(gx_set_recompute(&b, true), GRIT_OK);
    CHECK(b.recompute && !a.recompute);
    gx_init_weights(&a, 11);
    gx_init_weights(&b, 11);
    const char *note;
    if (prec != GX_FP32) {
        CHECK_INT(gx_set_precision(&a, prec, &note), GRIT_OK);
        CHECK_INT(gx_set_precision(&b, prec, &note), GRIT_OK);
        CHECK_INT(gx_set_recompute(&b, false), GRIT_EINVAL); /* after the precision: refused */
    }
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)B * (T + 1));
    float la = 0, lb = 0;
    for (int mb = 0; mb < 2; mb++) { /* two micro-batches: gradients accumulate */
        tokens_fill(tok, B * (T + 1), c.vocab, 100 + (uint64_t)mb);
        la += gx_step(&a, tok, 0.5f, NULL);
        lb += gx_step(&b, tok, 0.5f, NULL);
    }
    CHECK(memcmp(&la, &lb, sizeof la) == 0);
    CHECK(memcmp(a.grads, b.grads, a.num_params * sizeof(float)) == 0);
    if (memcmp(a.grads, b.grads, a.num_params * sizeof(float)) != 0)
        fprintf(stderr, "  %s%s %s: gradients differ\n", preset, sequential ? " sequential" : "",
                prec == GX_FP32 ? "fp32" : "bf16");
    /* one layer's activations instead of L */
    CHECK(L < 2 || b.act_floats < a.act_floats);
    CHECK(gx_act_bytes_layout(&c, 1, true) < gx_act_bytes_layout(&c, 1, false));
    printf("%-16s%s %s: loss %.6f bitwise equal; activation block %.1f -> %.1f KiB (%d layers)\n",
           preset, sequential ? " seq" : "    ", prec == GX_FP32 ? "fp32" : "bf16", la,
           (double)a.act_floats * 4 / 1024, (double)b.act_floats * 4 / 1024, L);
    free(tok);
    gx_free(&a);
    gx_free(&b);
}

int main(void)
{
    const char *presets[] = {"pythia-14m", "llama-tiny", "falcon-tiny", "falcon-tiny-new"};
    for (int p = 0; p < 2; p++) {
        gx_precision prec = p ? GX_BF16 : GX_FP32;
        for (int i = 0; i < 4; i++)
            one(presets[i], 0, prec);
        one("pythia-14m", 1, prec);
    }
    CHECK_DONE();
}
