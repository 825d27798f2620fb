/* hf_family.c - Hugging Face config.json for Llama and Falcon (see hf_family.h). */
#include "ckpt/hf_family.h"

#include <jansson.h>
#include <string.h>

#include "ckpt/hf.h"
#include "model/family.h"

/* Fields of PretrainedConfig and generation defaults that do not change the
 * model's numbers. */
static const char *const common_ok[] = {
    "architectures", "model_type", "torch_dtype", "transformers_version", "use_cache",
    "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
    "initializer_range", "_name_or_path", "tokenizer_class", "return_dict",
    "output_attentions", "output_hidden_states", "torchscript", "is_decoder",
    "is_encoder_decoder", "tie_encoder_decoder", "pruned_heads", "chunk_size_feed_forward",
    "add_cross_attention", "id2label", "label2id", "problem_type", "prefix", "finetuning_task",
    "task_specific_params", "tf_legacy_loss", "use_bfloat16", "cross_attention_hidden_size",
    "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
    "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
    "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
    "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
    "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
    "suppress_tokens", "begin_suppress_tokens", "_attn_implementation_autoset", NULL};

static const char *const llama_keys[] = {
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "hidden_act", "max_position_embeddings",
    "rms_norm_eps", "pretraining_tp", "tie_word_embeddings", "rope_theta", "rope_scaling",
    "attention_bias", "attention_dropout", "mlp_bias", "head_dim", NULL};

static const char *const falcon_keys[] = {
    "vocab_size", "hidden_size", "num_hidden_layers", "n_layer", "num_attention_heads",
    "n_head", "num_kv_heads", "n_head_kv", "layer_norm_epsilon", "hidden_dropout",
    "attention_dropout", "alibi", "new_decoder_architecture", "multi_query", "parallel_attn",
    "bias", "max_position_embeddings", "rope_theta", "rope_scaling", "ffn_hidden_size",
    "activation", "num_ln_in_parallel_attn", "tie_word_embeddings", NULL};

static int in_list(const char *k, const char *const *list)
{
    for (; *list; list++)
        if (!strcmp(k, *list))
            return 1;
    return 0;
}

static grit_err only_known(const char *what, json_t *o, const char *const *family)
{
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        if (!in_list(k, common_ok) && !in_list(k, family))
            return grit_errf(GRIT_EFORMAT, "%s: field '%s': not a field grit knows for this "
                                           "model_type (it would change the model; refusing "
                                           "rather than ignoring it)", what, k);
    }
    return GRIT_OK;
}

/* Integer field; absent or null -> dflt. */
static grit_err get_int(const char *what, json_t *o, const char *k, long dflt, long lo, long hi,
                        int *out)
{
    json_t *v = json_object_get(o, k);
    long x = dflt;
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v))
            return grit_errf(GRIT_EFORMAT, "%s: field '%s': expected an integer", what, k);
        x = (long)json_integer_value(v);
    }
    if (x < lo || x > hi)
        return grit_errf(GRIT_EFORMAT, "%s: field '%s': expected an integer in [%ld, %ld], got "
                                       "%ld", what, k, lo, hi, x);
    *out = (int)x;
    return GRIT_OK;
}

static grit_err get_num(const char *what, json_t *o, const char *k, double dflt, double *out)
{
    json_t *v = json_object_get(o, k);
    *out = dflt;
    if (!v || json_is_null(v))
        return GRIT_OK;
    if (!json_is_number(v))
        return grit_errf(GRIT_EFORMAT, "%s: field '%s': expected a number", what, k);
    *out = json_number_value(v);
    return GRIT_OK;
}

static grit_err get_bool(const char *what, json_t *o, const char *k, bool dflt, bool *out)
{
    json_t *v = json_object_get(o, k);
    *out = dflt;
    if (!v || json_is_null(v))
        return GRIT_OK;
    if (!json_is_boolean(v))
        return grit_errf(GRIT_EFORMAT, "%s: field '%s': expected true or false", what, k);
    *out = json_is_true(v);
    return GRIT_OK;
}

static grit_err zero_dropout(const char *what, json_t *o, const char *k)
{
    double d;
    grit_err rc = get_num(what, o, k, 0.0, &d);
    if (rc == GRIT_OK && d != 0.0)
        return grit_errf(GRIT_EFORMAT, "%s: field '%s': grit trains without dropout, expected 0, "
                                       "got %g", what, k, d);
    return rc;
}

/* rope_scaling: null, or {"rope_type"|"type": "linear"|"dynamic"|"llama3"|"default", ...}. */
static grit_err get_rope(const char *what, json_t *o, gx_config *c)
{
    json_t *r = json_object_get(o, "rope_scaling");
    c->rope = GX_ROPE_NONE;
    if (!r || json_is_null(r))
        return GRIT_OK;
    if (!json_is_object(r))
        return grit_errf(GRIT_EFORMAT, "%s: field 'rope_scaling': expected null or an object",
                         what);
    json_t *t = json_object_get(r, "rope_type");
    if (!t)
        t = json_object_get(r, "type");
    const char *type = json_is_string(t) ? json_string_value(t) : NULL;
    if (!type)
        return grit_errf(GRIT_EFORMAT, "%s: field 'rope_scaling.rope_type': expected a string",
                         what);
    if (!strcmp(type, "default"))
        return GRIT_OK;
    if (!strcmp(type, "linear"))
        c->rope = GX_ROPE_LINEAR;
    else if (!strcmp(type, "dynamic"))
        c->rope = GX_ROPE_DYNAMIC;
    else if (!strcmp(type, "llama3"))
        c->rope = GX_ROPE_LLAMA3;
    else
        return grit_errf(GRIT_EFORMAT, "%s: field 'rope_scaling.rope_type': \"%s\" is not "
                                       "supported (linear, dynamic or llama3)", what, type);
    static const char *const known[] = {"rope_type", "type", "factor", "low_freq_factor",
                                        "high_freq_factor", "original_max_position_embeddings",
                                        NULL};
    const char *k;
    json_t *v;
    json_object_foreach(r, k, v)
    {
        if (!in_list(k, known))
            return grit_errf(GRIT_EFORMAT, "%s: field 'rope_scaling.%s': not supported", what, k);
    }
    grit_err rc;
    json_t *f = json_object_get(r, "factor");
    if (!json_is_number(f) || json_number_value(f) < 1.0)
        return grit_errf(GRIT_EFORMAT, "%s: field 'rope_scaling.factor': expected a number >= 1",
                         what);
    c->rope_factor = json_number_value(f);
    if (c->rope == GX_ROPE_LLAMA3) {
        if ((rc = get_num(what, r, "low_freq_factor", 1.0, &c->rope_low)) ||
            (rc = get_num(what, r, "high_freq_factor", 4.0, &c->rope_high)) ||
            (rc = get_int(what, r, "original_max_position_embeddings", 8192, 1, 1L << 24,
                          &c->rope_orig_max)))
            return rc;
        if (!(c->rope_high > c->rope_low) || !(c->rope_low > 0))
            return grit_errf(GRIT_EFORMAT, "%s: field 'rope_scaling': expected high_freq_factor "
                                           "> low_freq_factor > 0", what);
    }
    return GRIT_OK;
}

static grit_err parse_llama(const char *what, json_t *o, gx_config *c)
{
    grit_err rc;
    const long big = 1L << 30;
    if ((rc = only_known(what, o, llama_keys)) || (rc = zero_dropout(what, o, "attention_dropout")))
        return rc;
    gx__family_preset("llama-tiny", c); /* the family's options; every shape field below */
    int kv = 0, tp = 1;
    bool ab = false, mb = false;
    if ((rc = get_int(what, o, "vocab_size", 32000, 1, big, &c->vocab)) ||
        (rc = get_int(what, o, "hidden_size", 4096, 1, big, &c->hidden)) ||
        (rc = get_int(what, o, "intermediate_size", 11008, 1, big, &c->intermediate)) ||
        (rc = get_int(what, o, "num_hidden_layers", 32, 1, big, &c->layers)) ||
        (rc = get_int(what, o, "num_attention_heads", 32, 1, big, &c->heads)) ||
        (rc = get_int(what, o, "num_key_value_heads", c->heads, 1, big, &kv)) ||
        (rc = get_int(what, o, "max_position_embeddings", 2048, 1, big, &c->max_positions)) ||
        (rc = get_int(what, o, "pretraining_tp", 1, 1, big, &tp)) ||
        (rc = get_num(what, o, "rms_norm_eps", 1e-6, &c->ln_eps)) ||
        (rc = get_num(what, o, "rope_theta", 10000.0, &c->rotary_base)) ||
        (rc = get_num(what, o, "initializer_range", 0.02, &c->init_std)) ||
        (rc = get_bool(what, o, "tie_word_embeddings", false, &c->tied)) ||
        (rc = get_bool(what, o, "attention_bias", false, &ab)) ||
        (rc = get_bool(what, o, "mlp_bias", false, &mb)) || (rc = get_rope(what, o, c)))
        return rc;
    c->kv_heads = kv;
    c->no_bias = (ab ? 0 : GX_NOBIAS_QKV | GX_NOBIAS_DENSE) | (mb ? 0 : GX_NOBIAS_MLP);
    json_t *act = json_object_get(o, "hidden_act");
    if (act && !(json_is_string(act) && !strcmp(json_string_value(act), "silu")))
        return grit_errf(GRIT_EFORMAT, "%s: field 'hidden_act': expected \"silu\" (SwiGLU)", what);
    json_t *hd = json_object_get(o, "head_dim");
    if (hd && !json_is_null(hd) &&
        !(json_is_integer(hd) && c->hidden % c->heads == 0 &&
          json_integer_value(hd) == c->hidden / c->heads))
        return grit_errf(GRIT_EFORMAT, "%s: field 'head_dim': grit needs hidden_size / "
                                       "num_attention_heads", what);
    return GRIT_OK;
}

static grit_err parse_falcon(const char *what, json_t *o, gx_config *c)
{
    grit_err rc;
    const long big = 1L << 30;
    if ((rc = only_known(what, o, falcon_keys)) ||
        (rc = zero_dropout(what, o, "attention_dropout")) ||
        (rc = zero_dropout(what, o, "hidden_dropout")))
        return rc;
    gx__family_preset("falcon-tiny", c);
    bool alibi, newarch, mq, par, bias;
    int layers_alias = 32, heads_alias = 71, kv = 0, nln = 0, ffn = 0;
    /* attribute_map: n_layer -> num_hidden_layers, n_head -> num_attention_heads */
    if ((rc = get_int(what, o, "n_layer", 32, 1, big, &layers_alias)) ||
        (rc = get_int(what, o, "n_head", 71, 1, big, &heads_alias)) ||
        (rc = get_int(what, o, "vocab_size", 65024, 1, big, &c->vocab)) ||
        (rc = get_int(what, o, "hidden_size", 4544, 1, big, &c->hidden)) ||
        (rc = get_int(what, o, "num_hidden_layers", layers_alias, 1, big, &c->layers)) ||
        (rc = get_int(what, o, "num_attention_heads", heads_alias, 1, big, &c->heads)) ||
        (rc = get_int(what, o, "max_position_embeddings", 2048, 1, big, &c->max_positions)) ||
        (rc = get_num(what, o, "layer_norm_epsilon", 1e-5, &c->ln_eps)) ||
        (rc = get_num(what, o, "rope_theta", 10000.0, &c->rotary_base)) ||
        (rc = get_num(what, o, "initializer_range", 0.02, &c->init_std)) ||
        (rc = get_bool(what, o, "alibi", false, &alibi)) ||
        (rc = get_bool(what, o, "new_decoder_architecture", false, &newarch)) ||
        (rc = get_bool(what, o, "multi_query", true, &mq)) ||
        (rc = get_bool(what, o, "parallel_attn", true, &par)) ||
        (rc = get_bool(what, o, "bias", false, &bias)) ||
        (rc = get_bool(what, o, "tie_word_embeddings", true, &c->tied)) ||
        (rc = get_rope(what, o, c)))
        return rc;
    if (json_object_get(o, "n_head_kv"))
        return grit_errf(GRIT_EFORMAT, "%s: field 'n_head_kv': this is the pre-transformers "
                                       "RefinedWeb config; FalconConfig names it num_kv_heads",
                         what);
    if ((rc = get_int(what, o, "num_kv_heads", c->heads, 1, big, &kv)) ||
        (rc = get_int(what, o, "num_ln_in_parallel_attn", newarch ? 2 : 1, 1, 2, &nln)) ||
        (rc = get_int(what, o, "ffn_hidden_size", 4L * c->hidden, 1, big, &ffn)))
        return rc;
    if (alibi)
        return grit_errf(GRIT_EFORMAT, "%s: field 'alibi': ALiBi is not supported (rotary only)",
                         what);
    c->intermediate = ffn;
    c->no_bias = bias ? 0 : GX_NOBIAS_QKV | GX_NOBIAS_DENSE | GX_NOBIAS_MLP;
    json_t *act = json_object_get(o, "activation");
    const char *a = json_is_string(act) ? json_string_value(act) : "gelu";
    if (!strcmp(a, "gelu"))
        c->act = OP_GELU;
    else if (!strcmp(a, "gelu_new") || !strcmp(a, "gelu_pytorch_tanh") || !strcmp(a, "gelu_fast"))
        c->act = OP_GELU_TANH;
    else
        return grit_errf(GRIT_EFORMAT, "%s: field 'activation': expected \"gelu\" or a tanh "
                                       "GELU, got \"%s\"", what, a);
    if (newarch) { /* grouped qkv; the residual is parallel whatever parallel_attn says */
        if (nln == 1 && !par)
            return grit_errf(GRIT_EFORMAT, "%s: field 'num_ln_in_parallel_attn': 1 needs "
                                           "parallel_attn true", what);
        c->qkv = GX_QKV_GROUPED;
        c->kv_heads = kv;
        c->parallel_residual = true;
        c->shared_norm = nln == 1;
    } else {
        c->qkv = mq ? GX_QKV_SPLIT : GX_QKV_NEOX;
        if (!mq && kv != c->heads)
            return grit_errf(GRIT_EFORMAT, "%s: field 'num_kv_heads': without multi_query or "
                                           "new_decoder_architecture it must equal "
                                           "num_attention_heads %d", what, c->heads);
        c->kv_heads = mq ? 1 : c->heads;
        c->parallel_residual = par;
        c->shared_norm = par;
    }
    return GRIT_OK;
}

grit_err hf_family_config_parse(const char *what, const char *text, gx_config *c)
{
    json_error_t je;
    json_t *o = json_loads(text, 0, &je);
    if (!o)
        return grit_errf(GRIT_EFORMAT, "%s:%d:%d: invalid JSON: %s", what, je.line, je.column,
                         je.text);
    grit_err rc;
    json_t *mt = json_object_get(o, "model_type");
    const char *t = json_is_string(mt) ? json_string_value(mt) : "";
    memset(c, 0, sizeof *c);
    if (!strcmp(t, "gpt_neox"))
        rc = hf_config_parse(what, text, c);
    else if (!strcmp(t, "llama"))
        rc = parse_llama(what, o, c);
    else if (!strcmp(t, "falcon"))
        rc = parse_falcon(what, o, c);
    else
        rc = grit_errf(GRIT_EFORMAT, "%s: field 'model_type': expected \"gpt_neox\", \"llama\" "
                                     "or \"falcon\", got \"%s\"", what, t);
    if (rc == GRIT_OK && (rc = gx_config_check(c)) != GRIT_OK)
        rc = grit_errf(GRIT_EFORMAT, "%s: %s", what, grit_errmsg());
    json_decref(o);
    return rc;
}

/* --- writing ------------------------------------------------------------------------ */

static json_t *rope_json(const gx_config *c)
{
    static const char *const kinds[] = {NULL, "linear", "dynamic", "llama3"};
    if (c->rope == GX_ROPE_NONE)
        return json_null();
    json_t *r = json_pack("{s:s,s:s,s:f}", "rope_type", kinds[c->rope], "type", kinds[c->rope],
                          "factor", c->rope_factor);
    if (c->rope == GX_ROPE_LLAMA3) {
        json_object_set_new(r, "low_freq_factor", json_real(c->rope_low));
        json_object_set_new(r, "high_freq_factor", json_real(c->rope_high));
        json_object_set_new(r, "original_max_position_embeddings",
                            json_integer(c->rope_orig_max));
    }
    return r;
}

static double init_std(const gx_config *c) { return c->init_std > 0 ? c->init_std : 0.02; }

static json_t *llama_json(const gx_config *c)
{
    bool ab = !(c->no_bias & GX_NOBIAS_QKV), db = !(c->no_bias & GX_NOBIAS_DENSE);
    if (ab != db || c->norm != GX_RMSNORM || c->mlp != GX_MLP_SWIGLU || c->parallel_residual ||
        c->rotary_pct != 1.0) {
        grit_errf(GRIT_EINVAL, "this llama model has options LlamaConfig cannot express "
                               "(attention_bias covers q, k, v and o_proj; RMSNorm, SwiGLU, "
                               "sequential residual and full rotary are fixed)");
        return NULL;
    }
    json_t *j = json_pack(
        "{s:[s],s:s,s:i,s:i,s:i,s:i,s:i,s:s,s:i,s:f,s:f,s:o,s:b,s:b,s:b,s:i,s:f,s:s,s:f,s:b,s:i,s:i}",
        "architectures", "LlamaForCausalLM", "model_type", "llama", "hidden_size", c->hidden,
        "intermediate_size", c->intermediate, "num_hidden_layers", c->layers,
        "num_attention_heads", c->heads, "num_key_value_heads", gx_kv_heads(c), "hidden_act",
        "silu", "max_position_embeddings", c->max_positions, "rms_norm_eps", c->ln_eps,
        "rope_theta", c->rotary_base, "rope_scaling", rope_json(c), "attention_bias", ab,
        "mlp_bias", !(c->no_bias & GX_NOBIAS_MLP), "tie_word_embeddings", c->tied, "vocab_size",
        c->vocab, "initializer_range", init_std(c), "torch_dtype", "float32",
        "attention_dropout", 0.0, "use_cache", 1, "bos_token_id", 1, "eos_token_id", 2);
    if (j)
        json_object_set_new(j, "pretraining_tp", json_integer(1));
    return j;
}

static json_t *falcon_json(const gx_config *c)
{
    int b = c->no_bias & (GX_NOBIAS_QKV | GX_NOBIAS_DENSE | GX_NOBIAS_MLP);
    bool newarch = c->qkv == GX_QKV_GROUPED, mq = c->qkv == GX_QKV_SPLIT;
    bool ok = (b == 0 || b == (GX_NOBIAS_QKV | GX_NOBIAS_DENSE | GX_NOBIAS_MLP)) &&
              c->norm == GX_LAYERNORM && c->mlp == GX_MLP_GELU && c->rotary_pct == 1.0 &&
              (!mq || gx_kv_heads(c) == 1) &&
              (newarch ? c->parallel_residual : c->shared_norm == c->parallel_residual);
    if (!ok) {
        grit_errf(GRIT_EINVAL, "this falcon model has options FalconConfig cannot express "
                               "(one 'bias' for every projection; multi_query means one kv "
                               "head; without new_decoder_architecture a parallel block has "
                               "one norm; LayerNorm, GELU and full rotary are fixed)");
        return NULL;
    }
    json_t *j = json_pack(
        "{s:[s],s:s,s:i,s:i,s:i,s:i,s:b,s:b,s:b,s:b,s:b,s:f,s:i,s:i,s:f,s:o,s:i,s:s,s:b,s:f,s:s}",
        "architectures", "FalconForCausalLM", "model_type", "falcon", "hidden_size", c->hidden,
        "num_hidden_layers", c->layers, "num_attention_heads", c->heads, "num_kv_heads",
        gx_kv_heads(c), "new_decoder_architecture", newarch, "multi_query", mq, "parallel_attn",
        c->parallel_residual, "bias", b == 0, "alibi", 0, "layer_norm_epsilon", c->ln_eps,
        "vocab_size", c->vocab, "max_position_embeddings", c->max_positions, "rope_theta",
        c->rotary_base, "rope_scaling", rope_json(c), "ffn_hidden_size", c->intermediate,
        "activation", c->act == OP_GELU ? "gelu" : "gelu_pytorch_tanh", "tie_word_embeddings",
        c->tied, "initializer_range", init_std(c), "torch_dtype", "float32");
    if (j) {
        if (newarch)
            json_object_set_new(j, "num_ln_in_parallel_attn", json_integer(c->shared_norm ? 1 : 2));
        json_object_set_new(j, "hidden_dropout", json_real(0.0));
        json_object_set_new(j, "attention_dropout", json_real(0.0));
        json_object_set_new(j, "bos_token_id", json_integer(11));
        json_object_set_new(j, "eos_token_id", json_integer(11));
        json_object_set_new(j, "use_cache", json_true());
    }
    return j;
}

char *hf_family_config_json(const gx_config *c)
{
    if (c->family == GX_NEOX) {
        char *s = hf_config_json(c);
        if (!s)
            grit_errf(GRIT_ENOMEM, "out of memory");
        return s;
    }
    json_t *j = c->family == GX_LLAMA ? llama_json(c) : falcon_json(c);
    if (!j)
        return NULL;
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(j);
    if (!s)
        grit_errf(GRIT_ENOMEM, "out of memory");
    return s;
}
