/*
 * hf.h - Hugging Face GPTNeoX config.json, both directions.
 *
 * hf_config_json() writes the transformers form (model_type "gpt_neox",
 * architectures ["GPTNeoXForCausalLM"], num_hidden_layers, rotary_emb_base,
 * use_parallel_residual, hidden_act "gelu" or "gelu_new", ...), so a
 * checkpoint's step directory loads with GPTNeoXForCausalLM.from_pretrained.
 * hf_config_parse() reads one back (the fields grit's model needs; others
 * are ignored) and names the file and field on errors. A missing field takes
 * transformers' GPTNeoXConfig default (rotary_pct 0.25, rotary_emb_base 10000,
 * use_parallel_residual true, layer_norm_eps 1e-5, hidden_act "gelu", ...);
 * the newer names partial_rotary_factor / rope_theta are read too. A config
 * grit cannot run as written is refused: non-null rope_scaling (or a
 * rope_parameters.rope_type other than "default"), tied embeddings, no
 * attention bias.
 */
#ifndef GRIT_CKPT_HF_H
#define GRIT_CKPT_HF_H

#include "core/error.h"
#include "model/gptneox.h"

/* malloc'd JSON text (caller frees), or NULL when out of memory. */
char *hf_config_json(const gx_config *c);

grit_err hf_config_parse(const char *what, const char *text, gx_config *out);

#endif
