/* test_tp.c - the tensor-parallel step without MPI: TP ranks run as threads whose
 * reduction hook sums (or maxes) their buffers in rank order through a barrier, for
 * GPT-NeoX, Llama (GQA, SwiGLU, RMSNorm) and Falcon (grouped q/k/v, tied embeddings)
 * shapes at TP=2, and with replicated kv heads (more ranks than kv heads): Llama GQA at
 * TP=4, Falcon multi-query (one kv head) at TP=2 and 4, grouped Falcon at TP=4, where each
 * replica's k/v weights and gradients must also equal its first replica's bit for bit. One step from
 * the same seed must give the single-rank loss and, gathered back to whole tensors
 * (gx_tp_assemble), the single-rank gradients. Runs under the sanitizers too, so the
 * slicing and the narrower buffers of a TP rank are checked for bounds. Each shape runs
 * twice: plain, and as an SFT micro-batch (loss mask with prompt tokens masked, two packed
 * examples per row), whose masked rows the vocabulary-parallel loss must leave out. */
#include <cblas.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>

#include "../check.h"
#include "model/family.h"
#include "model/tp.h"
#include "stage_cmp.h"

enum { MAXR = 4 };

typedef struct shared {
    pthread_barrier_t bar;
    float *buf[MAXR];
    float *tmp;
    int R;
} shared;

typedef struct worker {
    shared *sh;
    int r;
    gx_model m;
    const int32_t *tok;
    const gx_batch *sft;
    float loss;
} worker;

/* both ranks enter with their buffers; rank 0 combines into tmp; both copy it back */
static int reduce(void *ctx, float *buf, size_t n, int max)
{
    worker *w = ctx;
    shared *sh = w->sh;
    sh->buf[w->r] = buf;
    pthread_barrier_wait(&sh->bar);
    if (w->r == 0)
        for (size_t i = 0; i < n; i++) {
            float a = sh->buf[0][i];
            for (int r = 1; r < sh->R; r++) {
                float b = sh->buf[r][i];
                a = max ? (a > b ? a : b) : a + b;
            }
            sh->tmp[i] = a;
        }
    pthread_barrier_wait(&sh->bar);
    memcpy(buf, sh->tmp, n * sizeof(float));
    pthread_barrier_wait(&sh->bar);
    return 0;
}

static void *run(void *arg)
{
    worker *w = arg;
    omp_set_num_threads(1); /* a new thread starts from the default: the scratch is sized for 1 */
    w->loss = gx_step_ex(&w->m, w->tok, w->sft, 1.0f, NULL);
    return NULL;
}

/* Replicated kv heads: each non-first replica's k/v rows (weights, gradients) are its first
 * replica's, bit for bit. */
static void same_replicas(const gx_model *m, const gx_model *first, const char *what)
{
    size_t bad = 0, rows = 0;
    for (int i = 0; i < m->num_tensors; i++) {
        const gx_tensor *t = &m->tensors[i];
        for (int sg = 0; t->kv_copy && sg < (t->split >= 0 ? t->nseg : 1); sg++) {
            if (!(t->kv_copy >> sg & 1))
                continue;
            size_t cols = t->ndim == 2 ? (size_t)t->shape[1] : 1;
            size_t a = t->offset + (size_t)t->seg[sg][1] * cols, n = (size_t)t->seg[sg][2] * cols;
            bad += memcmp(m->params + a, first->params + a, n * sizeof(float)) != 0;
            bad += memcmp(m->grads + a, first->grads + a, n * sizeof(float)) != 0;
            rows += (size_t)t->seg[sg][2];
        }
    }
    printf("%s: rank %d's %zu replicated k/v rows equal rank %d's bitwise: %s\n", what,
           m->tp_rank, rows, first->tp_rank, bad ? "NO" : "yes");
    CHECK(rows > 0);
    CHECK_INT(bad, 0);
}

static void one(const char *what, const gx_config *cfg, int use_sft, int R)
{
    int B = 2, T = 16;
    size_t ntok = (size_t)B * (T + 1);
    int32_t *tok = malloc(ntok * sizeof *tok), seg[2 * 16];
    uint8_t mask[2 * 17];
    for (size_t i = 0; i < ntok; i++)
        tok[i] = (int32_t)((i * 7919 + 13) % (size_t)cfg->vocab);
    sft_rows(mask, seg, B, T);
    gx_batch batch = {.mask = mask, .seg = seg, .denom = 0}, *sft = use_sft ? &batch : NULL;
    gx_model one;
    CHECK_INT(gx_init(&one, cfg, B, T, 1), GRIT_OK);
    gx_init_weights(&one, 5);
    gx_zero_grad(&one);
    float loss1 = gx_step_ex(&one, tok, sft, 1.0f, NULL);

    shared sh;
    sh.tmp = malloc(sizeof(float) * (size_t)B * T * (size_t)(cfg->hidden + cfg->vocab));
    sh.R = R;
    pthread_barrier_init(&sh.bar, NULL, (unsigned)R);
    worker w[MAXR];
    pthread_t th[MAXR];
    for (int r = 0; r < R; r++) {
        w[r] = (worker){.sh = &sh, .r = r, .tok = tok, .sft = sft};
        CHECK_INT(gx_init_tp(&w[r].m, cfg, B, T, 1, R, r), GRIT_OK);
        gx_init_weights(&w[r].m, 5);
        gx_zero_grad(&w[r].m);
        w[r].m.tp_reduce = reduce;
        w[r].m.tp_ctx = &w[r];
    }
    for (int r = 0; r < R; r++)
        pthread_create(&th[r], NULL, run, &w[r]);
    for (int r = 0; r < R; r++)
        pthread_join(th[r], NULL);
    for (int r = 1; r < R; r++)
        CHECK(w[0].loss == w[r].loss); /* every TP rank reports the same loss */
    CHECK_NEAR(w[0].loss, loss1, 1e-6 * loss1);
    for (int r = 0; r < R; r++)
        if (w[r].m.kv_rep > 1 && r % w[r].m.kv_rep)
            same_replicas(&w[r].m, &w[r - r % w[r].m.kv_rep].m, what);

    size_t np = w[0].m.num_params;
    for (int r = 1; r < R; r++)
        CHECK_INT(w[r].m.num_params, np);
    CHECK_INT(gx_tp_param_count(cfg, R), np);
    float *parts = malloc((size_t)R * np * sizeof(float)), *full = calloc(one.num_params, sizeof(float));
    for (int k = 0; k < 2; k++) { /* weights first: the slices must rebuild the model exactly */
        for (int r = 0; r < R; r++)
            memcpy(parts + r * np, k ? w[r].m.grads : w[r].m.params, np * sizeof(float));
        CHECK_INT(gx_tp_assemble(cfg, R, parts, np, full), GRIT_OK);
        double worst = 0;
        const char *at = "";
        for (int i = 0; i < one.num_tensors; i++) {
            const gx_tensor *t = &one.tensors[i];
            const float *ref = (k ? one.grads : one.params) + t->offset;
            double d = 0, s = 0;
            for (size_t j = 0; j < t->numel; j++) {
                double e = (double)full[t->offset + j] - ref[j];
                d += e * e;
                s += (double)ref[j] * ref[j];
            }
            double rel = s > 0 ? sqrt(d / s) : sqrt(d);
            if (rel > worst)
                worst = rel, at = t->name;
        }
        printf("%s%s: TP=%d %s vs one rank: worst relative L2 %.2e (%s); loss %.7f vs %.7f\n", what,
               sft ? " (SFT: masked, packed)" : "", R, k ? "gradients" : "weights", worst, at,
               w[0].loss, loss1);
        CHECK(k ? worst < 2e-6 : worst == 0);
    }
    free(parts);
    free(full);
    for (int r = 0; r < R; r++)
        gx_free(&w[r].m);
    gx_free(&one);
    free(sh.tmp);
    pthread_barrier_destroy(&sh.bar);
    free(tok);
}

int main(void)
{
    omp_set_num_threads(1); /* the models' scratch is sized for one thread */
    openblas_set_num_threads(1);
    gx_config c;
    for (int sft = 0; sft < 2; sft++) {
        CHECK_INT(gx_preset("pythia-14m", &c), GRIT_OK);
        c.vocab = 256;
        c.layers = 2;
        one("gpt_neox", &c, sft, 2);
        CHECK_INT(gx_preset("llama-tiny", &c), GRIT_OK);
        one("llama (GQA)", &c, sft, 2);
        one("llama (GQA, 2 kv heads replicated over 4 ranks)", &c, sft, 4);
        CHECK_INT(gx_preset("falcon-tiny-new", &c), GRIT_OK);
        one("falcon (grouped, tied)", &c, sft, 2);
        one("falcon (grouped, tied, 2 kv groups over 4 ranks)", &c, sft, 4);
        CHECK_INT(gx_preset("falcon-tiny", &c), GRIT_OK);
        one("falcon (multi-query, one kv head)", &c, sft, 2);
        one("falcon (multi-query over 4 ranks)", &c, sft, 4);
    }
    CHECK_DONE();
}
