/* model_cfg.c - decoder options of the training config (see model_cfg.h). */
#include "train/model_cfg.h"

#include <stdlib.h>
#include <string.h>

#include "ckpt/hf_family.h"
#include "model/family.h"

const char *const train__model_option_keys[] = {
    "family", "num_kv_heads", "norm", "mlp", "qkv_layout", "qkv_bias", "dense_bias",
    "mlp_bias", "tie_embeddings", "norms_per_block", "rope_scaling", "init_std", NULL};

static const char *const families[] = {"gpt_neox", "llama", "falcon", NULL};
static const char *const norms[] = {"layernorm", "rmsnorm", NULL};
static const char *const mlps[] = {"gelu", "swiglu", NULL};
static const char *const layouts[] = {"neox", "split", "grouped", NULL};
static const char *const ropes[] = {"none", "linear", "dynamic", "llama3", NULL};
static const char *const rope_keys[] = {"type", "factor", "low_freq_factor", "high_freq_factor",
                                        "original_max_position_embeddings", NULL};

#define TRY(expr)                                                                        \
    do {                                                                                 \
        grit_err rc_ = (expr);                                                           \
        if (rc_ != GRIT_OK)                                                              \
            return rc_;                                                                  \
    } while (0)

static grit_err pick(const char *v, const char *const *list, int *out)
{
    for (int i = 0; v && list[i]; i++)
        if (!strcmp(v, list[i]))
            *out = i;
    return GRIT_OK;
}

static grit_err bias_flag(const jcfg *j, json_t *o, const char *key, int bit, int *no_bias)
{
    bool on = !(*no_bias & bit);
    TRY(jcfg_bool(j, o, "model", key, &on));
    *no_bias = on ? *no_bias & ~bit : *no_bias | bit;
    return GRIT_OK;
}

grit_err train__model_options(const jcfg *j, json_t *o, bool has_preset, gx_config *m)
{
    const char *fam = NULL, *norm = NULL, *mlp = NULL, *lay = NULL;
    TRY(jcfg_str(j, o, "model", "family", families, &fam));
    if (fam) {
        gx_family f = GX_NEOX;
        gx_family_parse(fam, &f);
        if (has_preset && f != m->family)
            return jcfg_fail(j, "model.family", "the preset is a %s model, got \"%s\"",
                             gx_family_name(m->family), fam);
        if (!has_preset && f != GX_NEOX) { /* the family's options; shapes come from the fields */
            gx_config base;
            gx__family_preset(f == GX_LLAMA ? "llama-tiny" : "falcon-tiny", &base);
            m->family = f;
            m->norm = base.norm;
            m->mlp = base.mlp;
            m->qkv = base.qkv;
            m->no_bias = base.no_bias;
            m->tied = base.tied;
            m->shared_norm = base.shared_norm;
            m->parallel_residual = base.parallel_residual;
            m->rotary_pct = base.rotary_pct;
            m->init_std = base.init_std;
            m->kv_heads = 0;
            /* fields config.c read before the family was known */
            TRY(jcfg_bool(j, o, "model", "parallel_residual", &m->parallel_residual));
            TRY(jcfg_num(j, o, "model", "rotary_pct", 0.0, 1.0, &m->rotary_pct));
        }
    }
    long kv = m->kv_heads, npb = m->shared_norm ? 1 : 2;
    TRY(jcfg_int(j, o, "model", "num_kv_heads", 1, 1024, &kv));
    m->kv_heads = (int)kv;
    TRY(jcfg_str(j, o, "model", "norm", norms, &norm));
    TRY(jcfg_str(j, o, "model", "mlp", mlps, &mlp));
    TRY(jcfg_str(j, o, "model", "qkv_layout", layouts, &lay));
    int v = (int)m->norm;
    pick(norm, norms, &v);
    m->norm = (gx_norm)v;
    v = (int)m->mlp;
    pick(mlp, mlps, &v);
    m->mlp = (gx_mlp)v;
    v = (int)m->qkv;
    pick(lay, layouts, &v);
    m->qkv = (gx_qkv)v;
    TRY(bias_flag(j, o, "qkv_bias", GX_NOBIAS_QKV, &m->no_bias));
    TRY(bias_flag(j, o, "dense_bias", GX_NOBIAS_DENSE, &m->no_bias));
    TRY(bias_flag(j, o, "mlp_bias", GX_NOBIAS_MLP, &m->no_bias));
    TRY(jcfg_bool(j, o, "model", "tie_embeddings", &m->tied));
    TRY(jcfg_int(j, o, "model", "norms_per_block", 1, 2, &npb));
    m->shared_norm = npb == 1;
    TRY(jcfg_num(j, o, "model", "init_std", 0.0, 10.0, &m->init_std));
    json_t *rs = NULL;
    TRY(jcfg_obj(j, o, "model", "rope_scaling", &rs));
    if (rs) {
        const char *type = NULL;
        TRY(jcfg_only(j, rs, "model.rope_scaling", rope_keys));
        TRY(jcfg_str(j, rs, "model.rope_scaling", "type", ropes, &type));
        if (!type)
            return jcfg_fail(j, "model.rope_scaling", "missing field 'type' (linear, dynamic "
                                                       "or llama3)");
        v = 0;
        pick(type, ropes, &v);
        m->rope = (gx_rope)v;
        long om = m->rope_orig_max;
        m->rope_factor = m->rope_factor > 0 ? m->rope_factor : 1.0;
        TRY(jcfg_num(j, rs, "model.rope_scaling", "factor", 1.0, 1e6, &m->rope_factor));
        TRY(jcfg_num(j, rs, "model.rope_scaling", "low_freq_factor", 1e-6, 1e6, &m->rope_low));
        TRY(jcfg_num(j, rs, "model.rope_scaling", "high_freq_factor", 1e-6, 1e6, &m->rope_high));
        TRY(jcfg_int(j, rs, "model.rope_scaling", "original_max_position_embeddings", 1, 1 << 24,
                     &om));
        m->rope_orig_max = (int)om;
        if (m->rope == GX_ROPE_LLAMA3 &&
            (m->rope_orig_max <= 0 || !(m->rope_high > m->rope_low) || m->rope_low <= 0))
            return jcfg_fail(j, "model.rope_scaling", "llama3 needs low_freq_factor < "
                             "high_freq_factor and original_max_position_embeddings");
    }
    if (m->family == GX_NEOX && (m->norm || m->mlp || m->qkv || m->no_bias || m->tied ||
                                 m->shared_norm || m->kv_heads))
        return jcfg_fail(j, "model", "gpt_neox has fixed options (LayerNorm, GELU MLP, fused "
                                     "[heads][3][head_dim] q/k/v with biases, two norms, untied "
                                     "embeddings); set \"family\" to use others");
    if (m->heads % gx_kv_heads(m) != 0)
        return jcfg_fail(j, "model.num_kv_heads", "expected a divisor of num_heads %d, got %d",
                         m->heads, gx_kv_heads(m));
    grit_err rc = gx_config_check(m);
    if (rc != GRIT_OK)
        return jcfg_fail(j, "model", "%s", grit_errmsg());
    char *hf = hf_family_config_json(m); /* checkpoints carry it: it must exist */
    if (!hf)
        return jcfg_fail(j, "model", "%s", grit_errmsg());
    free(hf);
    return GRIT_OK;
}

void train__model_options_dump(json_t *model, const gx_config *m)
{
    if (m->family == GX_NEOX && m->rope == GX_ROPE_NONE)
        return;
    json_object_set_new(model, "family", json_string(gx_family_name(m->family)));
    json_object_set_new(model, "num_kv_heads", json_integer(gx_kv_heads(m)));
    json_object_set_new(model, "norm", json_string(norms[m->norm]));
    json_object_set_new(model, "mlp", json_string(mlps[m->mlp]));
    json_object_set_new(model, "qkv_layout", json_string(layouts[m->qkv]));
    json_object_set_new(model, "qkv_bias", json_boolean(!(m->no_bias & GX_NOBIAS_QKV)));
    json_object_set_new(model, "dense_bias", json_boolean(!(m->no_bias & GX_NOBIAS_DENSE)));
    json_object_set_new(model, "mlp_bias", json_boolean(!(m->no_bias & GX_NOBIAS_MLP)));
    json_object_set_new(model, "tie_embeddings", json_boolean(m->tied));
    json_object_set_new(model, "norms_per_block", json_integer(m->shared_norm ? 1 : 2));
    json_object_set_new(model, "init_std", json_real(m->init_std));
    if (m->rope != GX_ROPE_NONE) {
        json_t *r = json_pack("{s:s,s:f}", "type", ropes[m->rope], "factor", m->rope_factor);
        if (m->rope == GX_ROPE_LLAMA3) {
            json_object_set_new(r, "low_freq_factor", json_real(m->rope_low));
            json_object_set_new(r, "high_freq_factor", json_real(m->rope_high));
            json_object_set_new(r, "original_max_position_embeddings",
                                json_integer(m->rope_orig_max));
        }
        json_object_set_new(model, "rope_scaling", r);
    }
}
