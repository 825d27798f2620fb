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
 * examples per row), whose masked rows the vocabulary-parallel loss must leave out.
 * Each shape runs again with sequence parallelism (the hooks all-gather and reduce-scatter
 * in the same rank order): the loss must equal plain TP's bit for bit (the forward's sums are
 * the same additions), the gradients the single rank's within the same bound, each rank's
 * activation block must be smaller, and the norms' weight gradients (summed over the group
 * from each rank's rows) identical on every rank. */
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

/* in place: block q of buf [R n] comes from rank q */
static int gather(void *ctx, float *buf, size_t n)
{
    worker *w = ctx;
    shared *sh = w->sh;
    sh->buf[w->r] = buf;
    pthread_barrier_wait(&sh->bar);
    for (int q = 0; q < sh->R; q++)
        if (q != w->r)
            memcpy(buf + (size_t)q * n, sh->buf[q] + (size_t)q * n, n * sizeof(float));
    pthread_barrier_wait(&sh->bar);
    return 0;
}

/* rank r's out [n] = block r of every rank's buf, summed in rank order (as reduce does) */
static int scatter(void *ctx, const float *buf, float *out, size_t n)
{
    worker *w = ctx;
    shared *sh = w->sh;
    sh->buf[w->r] = (float *)buf;
    pthread_barrier_wait(&sh->bar);
    size_t o = (size_t)w->r * n;
    for (size_t i = 0; i < n; i++) {
        float a = sh->buf[0][o + i];
        for (int q = 1; q < sh->R; q++)
            a += sh->buf[q][o + i];
        out[i] = a;
    }
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

static void one(const char *what, const gx_config *cfg, int use_sft, int R, int sp,
                float *tp_loss, size_t *tp_act)
{
    int B = TEST_B, T = TEST_T;
    test_mb mb;
    const gx_batch *sft = test_mb_make(&mb, cfg->vocab, use_sft);
    const int32_t *tok = mb.tok;
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
        CHECK_INT(gx_init_stage_f(&w[r].m, cfg, B, T, 1, R, r, false, 1, 0, sp ? GX_SEQ_PAR : 0),
                  GRIT_OK);
        gx_init_weights(&w[r].m, 5);
        gx_zero_grad(&w[r].m);
        w[r].m.tp_reduce = reduce;
        w[r].m.tp_gather = gather;
        w[r].m.tp_scatter = scatter;
        w[r].m.tp_ctx = &w[r];
    }
    for (int r = 0; r < R; r++)
        pthread_create(&th[r], NULL, run, &w[r]);
    for (int r = 0; r < R; r++)
        pthread_join(th[r], NULL);
    for (int r = 1; r < R; r++)
        CHECK(w[0].loss == w[r].loss); /* every TP rank reports the same loss */
    CHECK_NEAR(w[0].loss, loss1, 1e-6 * loss1);
    if (!sp) {
        *tp_loss = w[0].loss;
        *tp_act = w[0].m.act_floats;
    } else { /* the same forward sums as plain TP; the norm and residual rows split */
        printf("%s: TP=%d sequence parallel: loss %.9g vs plain TP %.9g; activation block %zu "
               "vs %zu floats\n", what, R, w[0].loss, *tp_loss, w[0].m.act_floats, *tp_act);
        CHECK(w[0].loss == *tp_loss);
        CHECK(w[0].m.act_floats < *tp_act);
        CHECK(w[0].m.ns * R == B * T);
        const gx_tensor *ln = gx_find(&w[0].m, "gpt_neox.final_layer_norm.weight");
        if (!ln)
            ln = gx_find(&w[0].m, "model.norm.weight");
        if (!ln)
            ln = gx_find(&w[0].m, "transformer.ln_f.weight");
        CHECK(ln != NULL);
        for (int r = 1; ln && r < R; r++) /* summed over the group: every rank's is the same */
            CHECK(!memcmp(w[r].m.grads + ln->offset, w[0].m.grads + ln->offset,
                          ln->numel * sizeof(float)));
    }
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
        printf("%s%s%s: TP=%d %s vs one rank: worst relative L2 %.2e (%s); loss %.7f vs %.7f\n", what,
               sft ? " (SFT: masked, packed)" : "", sp ? " (sequence parallel)" : "", R, k ? "gradients" : "weights", worst, at,
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
}

int main(void)
{
    omp_set_num_threads(1); /* the models' scratch is sized for one thread */
    openblas_set_num_threads(1);
    gx_config c;
    float l;
    size_t act;
#define BOTH(what, R)                                                                              \
    do {                                                                                           \
        one(what, &c, sft, R, 0, &l, &act);                                                        \
        one(what, &c, sft, R, 1, &l, &act);                                                        \
    } while (0)
    for (int sft = 0; sft < 2; sft++) {
        CHECK_INT(gx_preset("pythia-14m", &c), GRIT_OK);
        c.vocab = 256;
        c.layers = 2;
        BOTH("gpt_neox", 2);
        CHECK_INT(gx_preset("llama-tiny", &c), GRIT_OK);
        BOTH("llama (GQA)", 2);
        BOTH("llama (GQA, 2 kv heads replicated over 4 ranks)", 4);
        CHECK_INT(gx_preset("falcon-tiny-new", &c), GRIT_OK);
        BOTH("falcon (grouped, tied)", 2);
        BOTH("falcon (grouped, tied, 2 kv groups over 4 ranks)", 4);
        CHECK_INT(gx_preset("falcon-tiny", &c), GRIT_OK);
        BOTH("falcon (multi-query, one kv head)", 2);
        BOTH("falcon (multi-query over 4 ranks)", 4);
    }
    /* sequence parallel needs the token rows to divide: 2 x 16 over 3 ranks would not */
    CHECK_INT(gx_preset("pythia-14m", &c), GRIT_OK);
    c.heads = 3; /* 128 / 3 is no head size: use a shape tp 3 divides */
    c.hidden = 96;
    c.intermediate = 384;
    c.vocab = 258;
    gx_model bad;
    CHECK(gx_init_stage_f(&bad, &c, 1, 16, 1, 3, 0, false, 1, 0, GX_SEQ_PAR) == GRIT_EINVAL);
    printf("refused: %s\n", grit_errmsg());
    CHECK(strstr(grit_errmsg(), "not divisible by tensor parallel 3") != NULL);
    CHECK_DONE();
}
