/* hf.c - Hugging Face GPTNeoX config.json (see hf.h). */
#include "ckpt/hf.h"

#include <jansson.h>
#include <string.h>

char *hf_config_json(const gx_config *c)
{
    json_t *j = json_pack(
        "{s:[s],s:s,s:i,s:i,s:i,s:i,s:i,s:f,s:f,s:i,s:f,s:s,s:b,s:b,s:i,s:i,s:s,s:f,s:b}",
        "architectures", "GPTNeoXForCausalLM", "model_type", "gpt_neox", "hidden_size", c->hidden,
        "num_hidden_layers", c->layers, "num_attention_heads", c->heads, "intermediate_size",
        c->intermediate, "vocab_size", c->vocab, "rotary_pct", c->rotary_pct, "rotary_emb_base",
        c->rotary_base, "max_position_embeddings", c->max_positions, "layer_norm_eps",
        c->ln_eps, "hidden_act", c->act == OP_GELU ? "gelu" : "gelu_new",
        "use_parallel_residual", c->parallel_residual, "tie_word_embeddings", 0,
        "bos_token_id", 0, "eos_token_id", 0, "torch_dtype", "float32", "initializer_range",
        0.02, "use_cache", 1);
    if (!j)
        return NULL;
    json_object_set_new(j, "attention_bias", json_true());
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(j);
    return s;
}

static grit_err get_int(const char *what, json_t *o, const char *k, int *out)
{
    json_t *v = json_object_get(o, k);
    if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > (1 << 30))
        return grit_errf(GRIT_EFORMAT, "%s: field '%s': expected a positive integer", what, k);
    *out = (int)json_integer_value(v);
    return GRIT_OK;
}

static grit_err get_num(const char *what, json_t *o, const char *k, double dflt, double *out)
{
    json_t *v = json_object_get(o, k);
    if (!v) {
        *out = dflt;
        return GRIT_OK;
    }
    if (!json_is_number(v))
        return grit_errf(GRIT_EFORMAT, "%s: field '%s': expected a number", what, k);
    *out = json_number_value(v);
    return GRIT_OK;
}

grit_err hf_config_parse(const char *what, const char *text, gx_config *c)
{
    json_error_t je;
    json_t *o = json_loads(text, 0, &je);
    if (!o)
        return grit_errf(GRIT_EFORMAT, "%s:%d:%d: invalid JSON: %s", what, je.line, je.column,
                         je.text);
    grit_err rc = GRIT_OK;
    json_t *mt = json_object_get(o, "model_type");
    if (!json_is_string(mt) || strcmp(json_string_value(mt), "gpt_neox") != 0) {
        rc = grit_errf(GRIT_EFORMAT, "%s: field 'model_type': expected \"gpt_neox\"", what);
        goto out;
    }
    memset(c, 0, sizeof *c);
    if ((rc = get_int(what, o, "hidden_size", &c->hidden)) ||
        (rc = get_int(what, o, "num_hidden_layers", &c->layers)) ||
        (rc = get_int(what, o, "num_attention_heads", &c->heads)) ||
        (rc = get_int(what, o, "intermediate_size", &c->intermediate)) ||
        (rc = get_int(what, o, "vocab_size", &c->vocab)) ||
        (rc = get_int(what, o, "max_position_embeddings", &c->max_positions)) ||
        (rc = get_num(what, o, "rotary_pct", 1.0, &c->rotary_pct)) ||
        (rc = get_num(what, o, "rotary_emb_base", 10000.0, &c->rotary_base)) ||
        (rc = get_num(what, o, "layer_norm_eps", 1e-5, &c->ln_eps)))
        goto out;
    json_t *act = json_object_get(o, "hidden_act");
    const char *a = json_is_string(act) ? json_string_value(act) : "gelu";
    if (!strcmp(a, "gelu"))
        c->act = OP_GELU;
    else if (!strcmp(a, "gelu_new") || !strcmp(a, "gelu_pytorch_tanh") || !strcmp(a, "gelu_fast"))
        c->act = OP_GELU_TANH;
    else {
        rc = grit_errf(GRIT_EFORMAT, "%s: field 'hidden_act': expected \"gelu\" or a tanh GELU "
                                     "(\"gelu_new\"), got \"%s\"", what, a);
        goto out;
    }
    json_t *pr = json_object_get(o, "use_parallel_residual");
    c->parallel_residual = pr ? json_is_true(pr) : true;
    json_t *tie = json_object_get(o, "tie_word_embeddings");
    if (tie && json_is_true(tie)) {
        rc = grit_errf(GRIT_EFORMAT, "%s: field 'tie_word_embeddings': tied embeddings are not "
                                     "supported (GPT-NeoX unties them)", what);
        goto out;
    }
out:
    json_decref(o);
    return rc;
}
