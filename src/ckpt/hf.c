/* hf.c - Hugging Face GPTNeoX config.json (see hf.h). */
#include "ckpt/hf.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
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

/* Missing fields take transformers' GPTNeoXConfig defaults (the sizes are GPT-NeoX-20B's),
 * so a config.json means here what it means to GPTNeoXForCausalLM.from_pretrained. */
#define HF_VOCAB 50432
#define HF_HIDDEN 6144
#define HF_LAYERS 44
#define HF_HEADS 64
#define HF_INTERMEDIATE 24576
#define HF_MAX_POSITIONS 2048
#define HF_ROTARY_PCT 0.25
#define HF_ROTARY_BASE 10000.0
#define HF_LN_EPS 1e-5

static grit_err get_int(const char *what, json_t *o, const char *k, int dflt, int *out)
{
    json_t *v = json_object_get(o, k);
    if (!v) {
        *out = dflt;
        return GRIT_OK;
    }
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

static grit_err get_bool(const char *what, json_t *o, const char *k, bool dflt, bool *out)
{
    json_t *v = json_object_get(o, k);
    if (!v) {
        *out = dflt;
        return GRIT_OK;
    }
    if (!json_is_boolean(v))
        return grit_errf(GRIT_EFORMAT, "%s: field '%s': expected true or false", what, k);
    *out = json_is_true(v);
    return GRIT_OK;
}

/* A value transformers stores under two names (the old GPT-NeoX name and the newer generic
 * one, e.g. rotary_pct / partial_rotary_factor); both present must agree. */
static grit_err get_num2(const char *what, json_t *o, const char *k, const char *alias,
                         double dflt, double *out)
{
    double a = dflt, b = dflt;
    grit_err rc;
    if ((rc = get_num(what, o, k, dflt, &a)) || (rc = get_num(what, o, alias, a, &b)))
        return rc;
    if (json_object_get(o, k) && json_object_get(o, alias) && a != b)
        return grit_errf(GRIT_EFORMAT, "%s: fields '%s' (%g) and '%s' (%g) disagree", what, k,
                         a, alias, b);
    *out = json_object_get(o, k) ? a : b;
    return GRIT_OK;
}

/* RoPE scaling (linear, dynamic NTK, YaRN, ...) changes the rotary angles; grit's GPT-NeoX
 * has plain rotary only, so a scaled config is refused rather than silently run unscaled. */
static grit_err check_rope(const char *what, json_t *o, double *pct, double *base)
{
    json_t *rs = json_object_get(o, "rope_scaling");
    if (rs && !json_is_null(rs)) {
        json_t *t = json_is_object(rs) ? json_object_get(rs, "rope_type") : NULL;
        if (!t && json_is_object(rs))
            t = json_object_get(rs, "type");
        return grit_errf(GRIT_EFORMAT, "%s: field 'rope_scaling': expected null (grit's GPT-NeoX "
                         "has plain rotary embeddings; RoPE scaling%s%s%s is not supported)",
                         what, json_is_string(t) ? " \"" : "",
                         json_is_string(t) ? json_string_value(t) : "",
                         json_is_string(t) ? "\"" : "");
    }
    json_t *rp = json_object_get(o, "rope_parameters"); /* transformers 5's form */
    if (!rp || json_is_null(rp))
        return GRIT_OK;
    if (!json_is_object(rp))
        return grit_errf(GRIT_EFORMAT, "%s: field 'rope_parameters': expected an object", what);
    json_t *t = json_object_get(rp, "rope_type");
    if (t && !(json_is_string(t) && !strcmp(json_string_value(t), "default")))
        return grit_errf(GRIT_EFORMAT, "%s: field 'rope_parameters.rope_type': expected "
                         "\"default\" (RoPE scaling is not supported)", what);
    char sub[1100];
    snprintf(sub, sizeof sub, "%s (rope_parameters)", what);
    json_t *v;
    if ((v = json_object_get(rp, "rope_theta")) && json_object_get(o, "rope_theta") == NULL &&
        json_object_get(o, "rotary_emb_base") == NULL) {
        grit_err rc = get_num(sub, rp, "rope_theta", *base, base);
        if (rc)
            return rc;
    }
    if ((v = json_object_get(rp, "partial_rotary_factor")) &&
        json_object_get(o, "partial_rotary_factor") == NULL &&
        json_object_get(o, "rotary_pct") == NULL)
        return get_num(sub, rp, "partial_rotary_factor", *pct, pct);
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
    bool tie, attn_bias;
    if ((rc = get_int(what, o, "hidden_size", HF_HIDDEN, &c->hidden)) ||
        (rc = get_int(what, o, "num_hidden_layers", HF_LAYERS, &c->layers)) ||
        (rc = get_int(what, o, "num_attention_heads", HF_HEADS, &c->heads)) ||
        (rc = get_int(what, o, "intermediate_size", HF_INTERMEDIATE, &c->intermediate)) ||
        (rc = get_int(what, o, "vocab_size", HF_VOCAB, &c->vocab)) ||
        (rc = get_int(what, o, "max_position_embeddings", HF_MAX_POSITIONS, &c->max_positions)) ||
        (rc = get_num2(what, o, "rotary_pct", "partial_rotary_factor", HF_ROTARY_PCT,
                       &c->rotary_pct)) ||
        (rc = get_num2(what, o, "rotary_emb_base", "rope_theta", HF_ROTARY_BASE,
                       &c->rotary_base)) ||
        (rc = get_num(what, o, "layer_norm_eps", HF_LN_EPS, &c->ln_eps)) ||
        (rc = get_bool(what, o, "use_parallel_residual", true, &c->parallel_residual)) ||
        (rc = get_bool(what, o, "tie_word_embeddings", false, &tie)) ||
        (rc = get_bool(what, o, "attention_bias", true, &attn_bias)) ||
        (rc = check_rope(what, o, &c->rotary_pct, &c->rotary_base)))
        goto out;
    if (c->rotary_pct < 0.0 || c->rotary_pct > 1.0) {
        rc = grit_errf(GRIT_EFORMAT, "%s: field 'rotary_pct': expected a fraction in [0, 1], got "
                                     "%g", what, c->rotary_pct);
        goto out;
    }
    json_t *act = json_object_get(o, "hidden_act");
    if (act && !json_is_string(act)) {
        rc = grit_errf(GRIT_EFORMAT, "%s: field 'hidden_act': expected a string", what);
        goto out;
    }
    const char *a = act ? json_string_value(act) : "gelu";
    if (!strcmp(a, "gelu"))
        c->act = OP_GELU;
    else if (!strcmp(a, "gelu_new") || !strcmp(a, "gelu_pytorch_tanh") || !strcmp(a, "gelu_fast"))
        c->act = OP_GELU_TANH;
    else {
        rc = grit_errf(GRIT_EFORMAT, "%s: field 'hidden_act': expected \"gelu\" or a tanh GELU "
                                     "(\"gelu_new\"), got \"%s\"", what, a);
        goto out;
    }
    if (tie) {
        rc = grit_errf(GRIT_EFORMAT, "%s: field 'tie_word_embeddings': tied embeddings are not "
                                     "supported (GPT-NeoX unties them)", what);
        goto out;
    }
    if (!attn_bias) {
        rc = grit_errf(GRIT_EFORMAT, "%s: field 'attention_bias': expected true (grit's GPT-NeoX "
                                     "attention has biases)", what);
        goto out;
    }
out:
    json_decref(o);
    return rc;
}
