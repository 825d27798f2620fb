/* test_vpieces.c - the step with the vocabulary tensors in pieces (gx_set_vocab_pieces: what
 * ZeRO-2/3 switch on when the embedding and head outgrow a layer's bucket), without ZeRO's
 * hooks, so the pieces are read from and written to the whole blocks: against the same model
 * stepped whole, for GPT-NeoX and Llama shapes (and a head the block pads), 2, 3 and 7 pieces (7 leaves a short last
 * piece), plain and SFT (masked targets, packed examples). The head's softmax statistics are
 * folded in online over the pieces (max, rescaled sum of exponentials in double): the loss
 * within 2e-7 relative, every gradient (the embedding's too, piece by piece) within 1e-6
 * relative L2 of the whole step's. A forward alone
 * (grad_scale 0) gives the same loss. Tied embeddings too (the head's pieces are the
 * embedding's rows); tied embeddings over pipeline stages and TP > 1 are refused. Runs under the
 * sanitizers too (the pieces' offsets into the blocks). */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "../check.h"
#include "model/family.h"
#include "stage_cmp.h"

static double rel_l2(const float *a, const float *b, size_t n)
{
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)a[i] - b[i];
        d += e * e;
        s += (double)b[i] * b[i];
    }
    return s > 0 ? sqrt(d / s) : sqrt(d);
}

static void one(const char *what, const gx_config *cfg, int pieces, int use_sft)
{
    int B = TEST_B, T = TEST_T;
    test_mb mb;
    const gx_batch *sft = test_mb_make(&mb, cfg->vocab, use_sft);
    const int32_t *tok = mb.tok;
    gx_model whole, cut;
    CHECK_INT(gx_init(&whole, cfg, B, T, 1), GRIT_OK);
    CHECK_INT(gx_init(&cut, cfg, B, T, 1), GRIT_OK);
    gx_init_weights(&whole, 7);
    gx_init_weights(&cut, 7);
    CHECK_INT(gx_set_vocab_pieces(&cut, pieces), GRIT_OK);
    gx_zero_grad(&whole);
    gx_zero_grad(&cut);
    float lw = gx_step_ex(&whole, tok, sft, 1.0f, NULL);
    float lc = gx_step_ex(&cut, tok, sft, 1.0f, NULL);
    float lf = gx_step_ex(&cut, tok, sft, 0.0f, NULL); /* forward only: nothing accumulated */
    double worst = 0;
    const char *at = "";
    for (int i = 0; i < whole.num_tensors; i++) {
        const gx_tensor *t = &whole.tensors[i];
        double r = rel_l2(cut.grads + t->offset, whole.grads + t->offset, t->numel);
        if (r > worst)
            worst = r, at = t->name;
    }
    printf("%s, %d pieces of %d rows%s: loss %.9g vs %.9g whole (forward alone %.9g); "
           "gradients worst relative L2 %.2e (%s)\n",
           what, pieces, cut.vrows, sft ? " (SFT)" : "", lc, lw, lf, worst, at);
    CHECK(fabs((double)lc - lw) <= 2e-7 * fabs((double)lw));
    CHECK(lf == lc);
    CHECK(worst < 1e-6);
    gx_free(&whole);
    gx_free(&cut);
}

int main(void)
{
    omp_set_num_threads(1);
    openblas_set_num_threads(1);
    gx_config c;
    for (int sft = 0; sft < 2; sft++)
        for (int k = 0; k < 3; k++) {
            int pieces = k == 0 ? 2 : k == 1 ? 3 : 7;
            CHECK_INT(gx_preset("pythia-14m", &c), GRIT_OK);
            c.vocab = 512;
            c.layers = 2;
            one("gpt_neox", &c, pieces, sft);
            CHECK_INT(gx_preset("llama-tiny", &c), GRIT_OK);
            one("llama (GQA)", &c, pieces, sft);
            /* a head of 509 x 72 floats, not a multiple of 16: the block pads after it (the
             * pieces must take their offsets from the tensor, not from the block size) */
            CHECK_INT(gx_preset("pythia-14m", &c), GRIT_OK);
            c.vocab = 509;
            c.hidden = 72;
            c.intermediate = 288;
            c.layers = 2;
            one("gpt_neox (padded head)", &c, pieces, sft);
            /* tied embeddings: the head's pieces are the embedding's rows (their gradients
             * the head's part added to the lookup's) */
            CHECK_INT(gx_preset("falcon-tiny-new", &c), GRIT_OK);
            one("falcon (tied)", &c, pieces, sft);
        }
    gx_model m;
    CHECK_INT(gx_preset("falcon-tiny-new", &c), GRIT_OK); /* tied, over two stages */
    CHECK_INT(gx_init_stage(&m, &c, 1, 8, 1, 1, 0, false, 2, 1), GRIT_OK);
    CHECK_INT(gx_set_vocab_pieces(&m, 2), GRIT_EINVAL);
    gx_free(&m);
    CHECK_INT(gx_preset("llama-tiny", &c), GRIT_OK);
    CHECK_INT(gx_init_tp(&m, &c, 1, 8, 1, 2, 0), GRIT_OK);
    CHECK_INT(gx_set_vocab_pieces(&m, 2), GRIT_EINVAL);
    gx_free(&m);
    CHECK_INT(gx_vocab_pieces(50304, 768, 7087872), 6); /* pythia-160m: a layer's bucket */
    CHECK_INT(gx_vocab_pieces(500, 64, 49856), 1);
    CHECK_DONE();
}
