/* test_mp.c - model-parallel checkpoint shards (ckpt_put_mp, ckpt_put_meta, ckpt_commit):
 * a whole model cut into the slices of a TP x PP layout (gx_stage_layout), each written
 * as its own file, committed with the manifest's slice table, verifies and loads back as
 * the whole model bitwise (weights, both AdamW moments, any moment range), for Llama with
 * grouped-query attention and Falcon with tied embeddings (the last stage's copy is not
 * written), and with kv heads replicated over more TP ranks than there are (multi-query
 * Falcon, grouped Falcon and Llama at TP=4: each copy written once); a manifest missing a shard and a checkpoint of another model are refused with
 * messages that name the problem. */
#include <stdlib.h>
#include <unistd.h>

#include "../check.h"
#include "ckpt/ckpt.h"
#include "core/error.h"
#include "model/gptneox.h"
#include "model/tp.h"

/* Distinct, exactly representable values per block and element. */
static float val(int b, size_t i) { return (float)b * 4096.0f + (float)(i % 8191) * 0.125f + 1.0f; }

/* Writes whole's blocks as the T x P shards of step; keep: bit p * T + t lists that
 * coordinate's file in the manifest. */
static grit_err save_mp(store *s, long step, const gx_model *whole, int T, int P, unsigned keep)
{
    ckpt_file files[24];
    int n = 0;
    ckpt_state st = {.step = step, .world_size = T * P, .threads = 1};
    snprintf(st.fingerprint, sizeof st.fingerprint, "0123456789abcdef");
    const float *w[3] = {whole->params, whole->adam_m, whole->adam_v};
    grit_err rc = ckpt_begin(s, step);
    for (int p = 0; p < P && rc == GRIT_OK; p++)
        for (int t = 0; t < T && rc == GRIT_OK; t++) {
            gx_tensor *lay = NULL;
            int nt = 0;
            size_t np = 0;
            if ((rc = gx_stage_layout(&whole->cfg, T, t, P, p, &lay, &nt, &np)) != GRIT_OK)
                break;
            float *loc = malloc(sizeof(float) * 3 * np);
            for (int i = 0; i < nt; i++) {
                const gx_tensor *g = gx_find(whole, lay[i].name);
                for (int b = 0; b < 3; b++)
                    gx_tp_slice_copy(&lay[i], w[b] + g->offset, loc + (size_t)b * np + lay[i].offset, 0);
            }
            gx_model lm;
            memset(&lm, 0, sizeof lm);
            lm.cfg = whole->cfg;
            lm.tensors = lay;
            lm.num_tensors = nt;
            lm.num_params = np;
            lm.tp = T;
            lm.tp_rank = t;
            lm.pp = P;
            lm.pp_rank = p;
            ckpt_file f;
            rc = ckpt_put_mp(s, step, &lm, loc, loc + np, loc + 2 * np, &f);
            if (keep >> (p * T + t) & 1)
                files[n++] = f;
            free(loc);
            free(lay);
        }
    if (rc == GRIT_OK && (rc = ckpt_put_meta(s, &whole->cfg, &st, &files[n])) == GRIT_OK)
        n += 2;
    return rc == GRIT_OK ? ckpt_commit(s, step, files, n, &whole->cfg, NULL) : rc;
}

static void one(store *s, const char *name, const gx_config *c, int T, int P, long step)
{
    gx_model whole, back;
    CHECK_INT(gx_init(&whole, c, 1, 1, 1), GRIT_OK);
    CHECK_INT(gx_init(&back, c, 1, 1, 1), GRIT_OK);
    float *w[3] = {whole.params, whole.adam_m, whole.adam_v};
    for (int b = 0; b < 3; b++)
        for (size_t i = 0; i < whole.num_params; i++)
            w[b][i] = val(b, i);
    CHECK_INT(save_mp(s, step, &whole, T, P, ~0u), GRIT_OK);
    char dir[64], why[512];
    ckpt_dirname(dir, sizeof dir, step);
    if (ckpt_verify(s, dir, why, sizeof why) != GRIT_OK)
        fprintf(stderr, "%s: verify: %s\n", name, why);
    CHECK_INT(ckpt_verify(s, dir, why, sizeof why), GRIT_OK);
    char path[1200];
    snprintf(path, sizeof path, "%s/%s/model.safetensors", s->root, dir);
    CHECK(access(path, F_OK) != 0); /* nothing gathered */
    ckpt_state st;
    CHECK_INT(ckpt_load(s, dir, &back, &st, false), GRIT_OK);
    CHECK_INT(st.step, step);
    size_t bad = 0;
    float *r[3] = {back.params, back.adam_m, back.adam_v};
    for (int b = 0; b < 3; b++)
        for (size_t i = 0; i < whole.num_params; i++)
            bad += r[b][i] != w[b][i];
    CHECK_INT(bad, 0);
    size_t lo = whole.num_params / 3, hi = whole.num_params / 3 * 2 + 7;
    float *mm = calloc(hi - lo, sizeof(float)), *vv = calloc(hi - lo, sizeof(float));
    CHECK_INT(ckpt_load_moments_range(s, dir, &whole, lo, hi, mm, vv), GRIT_OK);
    for (size_t i = lo; i < hi; i++)
        bad += mm[i - lo] != val(1, i) || vv[i - lo] != val(2, i);
    CHECK_INT(bad, 0);
    printf("ok   %s at TP=%d x PP=%d: %zu parameters and both moments back bitwise\n", name, T,
           P, whole.num_params);
    free(mm);
    free(vv);

    /* a manifest without the last coordinate's file: refused, saying how many */
    CHECK_INT(save_mp(s, step + 1, &whole, T, P, (1u << (T * P - 1)) - 1), GRIT_OK);
    ckpt_dirname(dir, sizeof dir, step + 1);
    CHECK_INT(ckpt_verify(s, dir, why, sizeof why), GRIT_EFORMAT);
    char want[96];
    snprintf(want, sizeof want, "%d of the %d model-parallel shards", T * P - 1, T * P);
    CHECK_STR_HAS(why, want);
    CHECK_INT(ckpt_load(s, dir, &back, &st, true), GRIT_EFORMAT);
    CHECK_STR_HAS(grit_errmsg(), want);
    gx_free(&whole);
    gx_free(&back);
}

int main(void)
{
    char root[] = "/tmp/grit-mp-XXXXXX";
    CHECK(mkdtemp(root) != NULL);
    store *s = NULL;
    CHECK_INT(store_open_posix(root, &s), GRIT_OK);
    gx_config llama, falcon;
    CHECK_INT(gx_preset("llama-tiny", &llama), GRIT_OK);
    llama.layers = 4;
    CHECK_INT(gx_preset("falcon-tiny-new", &falcon), GRIT_OK);
    falcon.layers = 4; /* tied: the last stage's copy of the embedding is not written */
    one(s, "llama (GQA)", &llama, 2, 2, 10);
    one(s, "llama (GQA)", &llama, 2, 1, 20);
    one(s, "falcon (tied)", &falcon, 2, 2, 30);
    one(s, "falcon (tied)", &falcon, 1, 4, 40);
    /* replicated kv heads: each is written once (by its first replica) */
    gx_config mq;
    CHECK_INT(gx_preset("falcon-tiny", &mq), GRIT_OK);
    mq.layers = 4;
    one(s, "falcon (multi-query)", &mq, 2, 2, 50);
    one(s, "falcon (grouped, kv replicated)", &falcon, 4, 1, 60);
    one(s, "llama (GQA, kv replicated)", &llama, 4, 2, 70);

    /* the checkpoint of a 4-layer model loaded into a 6-layer one: the missing tensor named */
    gx_config big = llama;
    big.layers = 6;
    gx_model m;
    CHECK_INT(gx_init(&m, &big, 1, 1, 1), GRIT_OK);
    CHECK_INT(ckpt_load(s, "step_00000010", &m, NULL, true), GRIT_EFORMAT);
    CHECK_STR_HAS(grit_errmsg(), "model.layers.4.");
    CHECK_STR_HAS(grit_errmsg(), "in no model-parallel shard");
    printf("refused: %s\n", grit_errmsg());
    gx_free(&m);

    long steps[] = {10, 11, 20, 21, 30, 31, 40, 41, 50, 51, 60, 61, 70, 71};
    for (int i = 0; i < 14; i++) {
        char d[64];
        ckpt_dirname(d, sizeof d, steps[i]);
        CHECK_INT(s->ops->remove(s, d), GRIT_OK);
    }
    CHECK_INT(s->ops->remove(s, "LATEST"), GRIT_OK);
    store_close(s);
    CHECK(rmdir(root) == 0);
    CHECK_DONE();
}
