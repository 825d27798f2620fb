/*
 * hf_family.h - Hugging Face config.json for every family, both directions.
 *
 * gpt_neox goes through ckpt/hf.h; llama (LlamaForCausalLM) and falcon
 * (FalconForCausalLM) are here, with their fields and defaults as
 * transformers' LlamaConfig and FalconConfig read them: a missing field gets
 * Hugging Face's default; a field grit cannot honour (hidden_act other than
 * silu for Llama, alibi, a rope_scaling kind other than linear/dynamic/llama3,
 * head_dim != hidden_size / num_attention_heads, dropout, quantization, an
 * unknown field) is an error naming the file and the field, never ignored.
 * Bookkeeping fields every PretrainedConfig carries (torch_dtype,
 * transformers_version, token ids, generation defaults...) are accepted.
 *
 * The written form is what save_pretrained writes for the same model, so
 * from_pretrained loads an exported folder as is.
 */
#ifndef GRIT_CKPT_HF_FAMILY_H
#define GRIT_CKPT_HF_FAMILY_H

#include "core/error.h"
#include "model/gptneox.h"

/* malloc'd JSON text (caller frees), or NULL with the error recorded (a
 * combination of options Hugging Face's config cannot express, or no memory). */
char *hf_family_config_json(const gx_config *c);

/* Any family's config.json; `what` names the file in messages. */
grit_err hf_family_config_parse(const char *what, const char *text, gx_config *out);

#endif
