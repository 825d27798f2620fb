/* test_hf_config.c - reading a Hugging Face GPTNeoX config.json: every missing field takes
 * transformers' GPTNeoXConfig default (rotary_pct 0.25, not 1.0), the newer names
 * (partial_rotary_factor, rope_theta, rope_parameters) are read, disagreeing aliases and
 * configs grit cannot run as written (rope_scaling, tied embeddings, no attention bias,
 * wrong types) are refused with the file and the field named; and hf_config_json's output
 * reads back to the same config. */
#include <stdlib.h>

#include "../check.h"
#include "ckpt/hf.h"
#include "core/error.h"

static grit_err parse(const char *text, gx_config *c) { return hf_config_parse("x/config.json", text, c); }

/* Expects a refusal whose message names the file and holds `field`. */
static void refused(const char *text, const char *field)
{
    gx_config c;
    CHECK_INT(parse(text, &c), GRIT_EFORMAT);
    CHECK_STR_HAS(grit_errmsg(), "x/config.json");
    CHECK_STR_HAS(grit_errmsg(), field);
}

int main(void)
{
    gx_config c;
    /* the smallest config.json: only model_type; all the rest is transformers' defaults */
    CHECK_INT(parse("{\"model_type\": \"gpt_neox\"}", &c), GRIT_OK);
    CHECK_NEAR(c.rotary_pct, 0.25, 0);
    CHECK_NEAR(c.rotary_base, 10000.0, 0);
    CHECK_NEAR(c.ln_eps, 1e-5, 0);
    CHECK(c.parallel_residual);
    CHECK_INT(c.act, OP_GELU);
    CHECK_INT(c.hidden, 6144);
    CHECK_INT(c.layers, 44);
    CHECK_INT(c.heads, 64);
    CHECK_INT(c.intermediate, 24576);
    CHECK_INT(c.vocab, 50432);
    CHECK_INT(c.max_positions, 2048);

    /* a Pythia-style config without rotary_pct */
    const char *pythia = "{\"model_type\": \"gpt_neox\", \"hidden_size\": 128, "
                         "\"num_hidden_layers\": 6, \"num_attention_heads\": 4, "
                         "\"intermediate_size\": 512, \"vocab_size\": 50304, "
                         "\"max_position_embeddings\": 2048, \"rope_scaling\": null, "
                         "\"use_parallel_residual\": false, \"hidden_act\": \"gelu_new\"}";
    CHECK_INT(parse(pythia, &c), GRIT_OK);
    CHECK_NEAR(c.rotary_pct, 0.25, 0);
    CHECK(!c.parallel_residual);
    CHECK_INT(c.act, OP_GELU_TANH);
    CHECK_INT(c.hidden, 128);

    /* the newer names, alone, together and in transformers 5's rope_parameters */
    CHECK_INT(parse("{\"model_type\": \"gpt_neox\", \"partial_rotary_factor\": 0.5, "
                    "\"rope_theta\": 500000}", &c), GRIT_OK);
    CHECK_NEAR(c.rotary_pct, 0.5, 0);
    CHECK_NEAR(c.rotary_base, 500000.0, 0);
    CHECK_INT(parse("{\"model_type\": \"gpt_neox\", \"rotary_pct\": 1.0, "
                    "\"partial_rotary_factor\": 1.0}", &c), GRIT_OK);
    CHECK_NEAR(c.rotary_pct, 1.0, 0);
    CHECK_INT(parse("{\"model_type\": \"gpt_neox\", \"rope_parameters\": {\"rope_type\": "
                    "\"default\", \"rope_theta\": 20000, \"partial_rotary_factor\": 0.5}}", &c),
              GRIT_OK);
    CHECK_NEAR(c.rotary_pct, 0.5, 0);
    CHECK_NEAR(c.rotary_base, 20000.0, 0);

    /* refused, naming the field */
    refused("{\"model_type\": \"gpt_neox\", \"rope_scaling\": {\"type\": \"linear\", "
            "\"factor\": 2.0}}", "'rope_scaling'");
    refused("{\"model_type\": \"gpt_neox\", \"rope_scaling\": {\"rope_type\": \"yarn\", "
            "\"factor\": 4.0}}", "\"yarn\"");
    refused("{\"model_type\": \"gpt_neox\", \"rope_parameters\": {\"rope_type\": \"linear\", "
            "\"factor\": 2.0}}", "rope_parameters.rope_type");
    refused("{\"model_type\": \"gpt_neox\", \"rotary_pct\": 0.25, "
            "\"partial_rotary_factor\": 0.5}", "'partial_rotary_factor'");
    refused("{\"model_type\": \"gpt_neox\", \"rotary_pct\": 1.5}", "'rotary_pct'");
    refused("{\"model_type\": \"gpt_neox\", \"tie_word_embeddings\": true}",
            "'tie_word_embeddings'");
    refused("{\"model_type\": \"gpt_neox\", \"attention_bias\": false}", "'attention_bias'");
    refused("{\"model_type\": \"gpt_neox\", \"use_parallel_residual\": \"yes\"}",
            "'use_parallel_residual'");
    refused("{\"model_type\": \"gpt_neox\", \"hidden_act\": 3}", "'hidden_act'");
    refused("{\"model_type\": \"gpt_neox\", \"hidden_size\": -4}", "'hidden_size'");
    refused("{\"model_type\": \"llama\"}", "'model_type'");

    /* what grit writes reads back as written */
    gx_config w = {.hidden = 64, .layers = 2, .heads = 4, .intermediate = 256, .vocab = 512,
                   .max_positions = 128, .rotary_pct = 1.0, .rotary_base = 20000.0,
                   .ln_eps = 1e-6, .act = OP_GELU_TANH, .parallel_residual = false};
    char *text = hf_config_json(&w);
    CHECK(text != NULL);
    CHECK_INT(parse(text, &c), GRIT_OK);
    free(text);
    CHECK_INT(c.hidden, 64);
    CHECK_INT(c.vocab, 512);
    CHECK_NEAR(c.rotary_pct, 1.0, 0);
    CHECK_NEAR(c.rotary_base, 20000.0, 0);
    CHECK_NEAR(c.ln_eps, 1e-6, 0);
    CHECK_INT(c.act, OP_GELU_TANH);
    CHECK(!c.parallel_residual);
    CHECK_DONE();
}
