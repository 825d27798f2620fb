/* test_family.c - the family tables and the decoder options' kernels:
 *  - presets resolve to the published parameter counts (Llama 2 7B/13B/70B, TinyLlama,
 *    Llama 3 8B, Falcon 7B/40B), and a model that cannot fit fails before allocating,
 *    naming its parameter count;
 *  - every small preset's tensor table sums to gx_param_count, a tied model has no head
 *    tensor, and Llama's q/k/v (and gate/up) tensors are back to back;
 *  - grouped-query attention over the Llama (q|k|v) and Falcon grouped layouts equals
 *    multi-head attention over GPT-NeoX's layout with the kv heads copied to every query
 *    head, forward and backward (dK/dV summed over the heads that share them). */
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "core/rng.h"
#include "model/family.h"
#include "model/gptneox.h"
#include "tensor/ops.h"

static void presets(void)
{
    static const struct {
        const char *name;
        size_t params;
    } known[] = {{"llama-2-7b", 6738415616ULL},     {"llama-2-13b", 13015864320ULL},
                 {"llama-2-70b", 68976648192ULL},   {"tinyllama-1.1b", 1100048384ULL},
                 {"llama-3-8b", 8030261248ULL},     {"falcon-7b", 6921720704ULL},
                 {"falcon-40b", 41303293952ULL}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        gx_config c;
        CHECK_INT(gx_preset(known[i].name, &c), GRIT_OK);
        CHECK_INT(gx_config_check(&c), GRIT_OK);
        CHECK_INT(gx_param_count(&c), known[i].params);
    }
    gx_config c;
    CHECK_INT(gx_preset("llama-2-70b", &c), GRIT_OK);
    gx_model m;
    CHECK_INT(gx_init(&m, &c, 1, 128, 1), GRIT_ENOMEM);
    CHECK(strstr(grit_errmsg(), "68.98B parameters") != NULL);
    CHECK(m.params == NULL);
    CHECK_INT(gx_preset("no-such-model", &c), GRIT_ENOTFOUND);
}

static void tables(void)
{
    const char *small[] = {"llama-tiny", "falcon-tiny", "falcon-tiny-new", "pythia-14m"};
    for (int i = 0; i < 4; i++) {
        gx_config c;
        CHECK_INT(gx_preset(small[i], &c), GRIT_OK);
        if (i == 0)
            c.tied = true;
        gx_model m;
        CHECK_INT(gx_init(&m, &c, 1, 8, 1), GRIT_OK);
        size_t sum = 0;
        for (int t = 0; t < m.num_tensors; t++)
            sum += m.tensors[t].numel;
        CHECK_INT(sum, gx_param_count(&c));
        CHECK_INT(m.num_tensors, gx__num_tensors(&c));
        const gx_tensor *head = gx_find(&m, c.family == GX_NEOX ? "embed_out.weight" : "lm_head.weight");
        CHECK((head == NULL) == c.tied);
        if (c.family == GX_LLAMA) {
            const gx_tensor *q = gx_find(&m, "model.layers.1.self_attn.q_proj.weight");
            const gx_tensor *k = gx_find(&m, "model.layers.1.self_attn.k_proj.weight");
            const gx_tensor *v = gx_find(&m, "model.layers.1.self_attn.v_proj.weight");
            const gx_tensor *g = gx_find(&m, "model.layers.1.mlp.gate_proj.weight");
            const gx_tensor *u = gx_find(&m, "model.layers.1.mlp.up_proj.weight");
            CHECK(q && k && v && g && u);
            if (q && k && v && g && u) {
                CHECK_INT(k->offset, q->offset + q->numel);
                CHECK_INT(v->offset, k->offset + k->numel);
                CHECK_INT(u->offset, g->offset + g->numel);
                CHECK(m.w.layer[1].qkv_w == m.params + q->offset);
            }
            CHECK(m.w.embed_out == m.w.embed_in);
        }
        gx_free(&m);
    }
}

/* GQA through `lay` vs MHA through the NeoX layout with kv heads replicated. */
static void gqa(gx_qkv kind, int heads, int kv)
{
    const int B = 2, T = 37, hd = 8, C = heads * hd, G = heads / kv;
    gx_config c = {.hidden = C, .heads = heads, .kv_heads = kv, .qkv = kind};
    op_qkv_layout lay = gx_qkv_layout(&c), neox = op_qkv_neox(heads, hd);
    int N = B * T, ld = lay.ld;
    float *x = malloc(sizeof(float) * N * ld), *xm = calloc((size_t)N * 3 * C, sizeof(float));
    float *out = malloc(sizeof(float) * N * C), *outm = malloc(sizeof(float) * N * C);
    float *lse = malloc(sizeof(float) * B * heads * T), *lsem = malloc(sizeof(float) * B * heads * T);
    float *dout = malloc(sizeof(float) * N * C);
    float *dx = malloc(sizeof(float) * N * ld), *dxm = malloc(sizeof(float) * N * 3 * C);
    float *scr = malloc(sizeof(float) * op_attention_scratch_floats(T, 4));
    rng_t r;
    rng_seed(&r, 7, (uint64_t)kind);
    for (int i = 0; i < N * ld; i += 2) {
        double a, b;
        rng_normal2(&r, &a, &b);
        x[i] = (float)a;
        if (i + 1 < N * ld)
            x[i + 1] = (float)b;
    }
    for (int i = 0; i < N * C; i += 2) {
        double a, b;
        rng_normal2(&r, &a, &b);
        dout[i] = (float)a;
        dout[i + 1] = (float)b;
    }
    for (int n = 0; n < N; n++)
        for (int h = 0; h < heads; h++) {
            int g = h / G;
            const float *row = x + (long)n * ld;
            float *dst = xm + (long)n * 3 * C + (long)h * 3 * hd;
            memcpy(dst, row + (long)(h / G) * lay.q_gstride + (long)(h % G) * hd, sizeof(float) * hd);
            memcpy(dst + hd, row + lay.k_base + (long)g * lay.kv_stride, sizeof(float) * hd);
            memcpy(dst + 2 * hd, row + lay.v_base + (long)g * lay.kv_stride, sizeof(float) * hd);
        }
    op_attn_fwd(out, lse, x, &lay, B, T, heads, hd, scr);
    op_attn_fwd(outm, lsem, xm, &neox, B, T, heads, hd, scr);
    double worst = 0;
    for (int i = 0; i < N * C; i++)
        worst = fmax(worst, fabs(out[i] - outm[i]));
    CHECK_NEAR(worst, 0.0, 1e-6);
    op_attn_bwd(dx, dout, out, lse, x, &lay, B, T, heads, hd, scr);
    op_attn_bwd(dxm, dout, outm, lsem, xm, &neox, B, T, heads, hd, scr);
    worst = 0;
    for (int n = 0; n < N; n++) {
        const float *row = dx + (long)n * ld;
        for (int h = 0; h < heads; h++) {
            const float *m3 = dxm + (long)n * 3 * C + (long)h * 3 * hd;
            const float *q = row + (long)(h / G) * lay.q_gstride + (long)(h % G) * hd;
            for (int d = 0; d < hd; d++)
                worst = fmax(worst, fabs(q[d] - m3[d]));
        }
        for (int g = 0; g < kv; g++)
            for (int d = 0; d < hd; d++) {
                double sk = 0, sv = 0;
                for (int j = 0; j < G; j++) {
                    const float *m3 = dxm + (long)n * 3 * C + (long)(g * G + j) * 3 * hd;
                    sk += m3[hd + d];
                    sv += m3[2 * hd + d];
                }
                worst = fmax(worst, fabs(row[lay.k_base + g * lay.kv_stride + d] - sk));
                worst = fmax(worst, fabs(row[lay.v_base + g * lay.kv_stride + d] - sv));
            }
    }
    CHECK_NEAR(worst, 0.0, 1e-5);
    free(x), free(xm), free(out), free(outm), free(lse), free(lsem), free(dout), free(dx),
        free(dxm), free(scr);
}

int main(void)
{
    presets();
    tables();
    gqa(GX_QKV_SPLIT, 8, 2);   /* Llama GQA */
    gqa(GX_QKV_SPLIT, 6, 1);   /* Falcon 7B multi-query */
    gqa(GX_QKV_GROUPED, 8, 4); /* Falcon 40B grouped */
    gqa(GX_QKV_GROUPED, 4, 4); /* grouped with one query per group */
    if (check_failures)
        fprintf(stderr, "test_family: %d failure(s)\n", check_failures);
    return check_failures ? 1 : 0;
}
