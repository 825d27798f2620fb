/* test_plan.c - the memory plan per rank (train/parallel.h) against what gx_init_tp
 * really allocates on each tensor-parallel rank, ZeRO-1's share, and the refusal that
 * names the numbers. */
#include <stdlib.h>

#include "../check.h"
#include "model/family.h"
#include "model/tp.h"
#include "train/parallel.h"

static void plan_matches_model(const char *text, int world)
{
    train_cfg c;
    train_cfg_defaults(&c);
    c.optim.seq_len = 64;
    c.synthetic_vocab = 100;
    CHECK(train_cfg_load_string(&c, "t.json", text) == GRIT_OK);
    CHECK(train_cfg_resolve_world(&c, world) == GRIT_OK);
    train_plan p;
    CHECK(train_plan_make(&c, world, 1, &p) == GRIT_OK);
    size_t sum = 0;
    for (int r = 0; r < p.tp; r++) {
        gx_model m;
        CHECK(gx_init_tp(&m, &c.model, 1, 8, 1, p.tp, r) == GRIT_OK);
        /* the block pads each tensor to 16 floats: at most 15 per tensor more */
        CHECK(m.num_params >= p.params && m.num_params <= p.params + 15 * (size_t)m.num_tensors);
        /* the slices of every rank tile each whole tensor, or repeat it when replicated */
        for (int i = 0; i < m.num_tensors; i++) {
            const gx_tensor *t = &m.tensors[i];
            if (t->split >= 0 || r == 0)
                sum += t->numel;
        }
        gx_free(&m);
    }
    CHECK_INT(sum, gx_param_count(&c.model));
    CHECK_NEAR(p.param_b, 4.0 * (double)p.params, 0);
    CHECK_NEAR(p.grad_b, 4.0 * (double)p.params, 0);
}

int main(void)
{
    const char *neox = "{\"model\": {\"hidden_size\": 64, \"num_layers\": 2, \"num_heads\": 4, "
                       "\"intermediate_size\": 256, \"vocab_size\": 512, \"max_positions\": 256},"
                       " \"parallel\": {\"tensor\": 2}}";
    const char *llama = "{\"model\": \"llama-tiny\", \"parallel\": {\"tensor\": 2, \"data\": 2}}";
    const char *falcon = "{\"model\": \"falcon-tiny-new\", \"parallel\": {\"tensor\": 2}}";
    plan_matches_model(neox, 2);
    plan_matches_model(llama, 4);
    plan_matches_model(falcon, 2);

    /* TP = 1: the plan is the single-rank model */
    train_cfg c;
    train_cfg_defaults(&c);
    c.optim.seq_len = 64;
    CHECK(train_cfg_load_string(&c, "t.json", "{\"model\": \"llama-tiny\"}") == GRIT_OK);
    CHECK(train_cfg_resolve_world(&c, 1) == GRIT_OK);
    train_plan p1, p2;
    CHECK(train_plan_make(&c, 1, 1, &p1) == GRIT_OK);
    CHECK_INT(p1.params, gx_param_count(&c.model));
    /* ZeRO-1 at DP = 4 divides the AdamW state by 4 and adds the reduced gradients' shard */
    c.optim.zero1 = true;
    CHECK(train_cfg_resolve_world(&c, 4) == GRIT_OK);
    CHECK(train_plan_make(&c, 4, 4, &p2) == GRIT_OK);
    CHECK_NEAR(p2.optim_b, p1.optim_b / 4, 1e-6);
    CHECK_NEAR(p2.param_b, p1.param_b, 0);
    CHECK_NEAR(p2.grad_b, p1.grad_b * 1.25, 1e-6);

    /* refusal, naming the numbers */
    p2.avail_b = p2.total_b * 3.5; /* 4 ranks here need 4 x total */
    CHECK(train_plan_fits(&p2) == GRIT_ENOMEM);
    CHECK(strstr(grit_errmsg(), "tensor 1 x pipeline 1 x data 4 needs"));
    CHECK(strstr(grit_errmsg(), "x 4 ranks on this machine"));
    p2.avail_b = p2.total_b * 4.5;
    CHECK(train_plan_fits(&p2) == GRIT_OK);
    CHECK_DONE();
}
