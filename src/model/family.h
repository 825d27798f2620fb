/*
 * family.h - GPT-NeoX, Llama and Falcon as tables over one decoder core.
 *
 * The block (model/gptneox_step.c) is assembled from gx_config's options;
 * a family only decides the Hugging Face tensor names, the order of the
 * parameter block, and which options its config.json can express
 * (ckpt/hf_family.c reads and writes those). Presets give the real shapes
 * of published models and small shapes for tests.
 *
 * Parameter block order, per family (HF names; [] = only with that option):
 *   gpt_neox: gpt_neox.embed_in, per layer input_layernorm.{w,b},
 *     post_attention_layernorm.{w,b}, attention.query_key_value.{w,b},
 *     attention.dense.{w,b}, mlp.dense_h_to_4h.{w,b}, mlp.dense_4h_to_h.{w,b};
 *     gpt_neox.final_layer_norm.{w,b}, embed_out
 *   llama: model.embed_tokens, per layer input_layernorm.w, post_attention_layernorm.w,
 *     self_attn.{q,k,v}_proj.w (back to back: one [(heads+2kv)hd, C] matrix),
 *     [self_attn.{q,k,v}_proj.b], self_attn.o_proj.w, [o_proj.b],
 *     mlp.{gate,up}_proj.w (back to back: one [2I, C] matrix), [biases],
 *     mlp.down_proj.w, [b]; model.norm.w, [lm_head.w unless tied]
 *   falcon: transformer.word_embeddings, per layer input_layernorm.{w,b} (one
 *     norm: 7B) | ln_attn.{w,b}, ln_mlp.{w,b} (new_decoder_architecture) |
 *     input_layernorm, post_attention_layernorm (sequential),
 *     self_attention.query_key_value.w, [b], self_attention.dense.w, [b],
 *     mlp.dense_h_to_4h.w, [b], mlp.dense_4h_to_h.w, [b];
 *     transformer.ln_f.{w,b}, [lm_head.w unless tied]
 */
#ifndef GRIT_MODEL_FAMILY_H
#define GRIT_MODEL_FAMILY_H

#include <stddef.h>

#include "model/gptneox.h"

/* "gpt_neox", "llama", "falcon" (Hugging Face model_type). */
const char *gx_family_name(gx_family f);
/* GRIT_EINVAL for a name that is not one of the three. */
grit_err gx_family_parse(const char *name, gx_family *out);

/* Where heads sit in a row of the fused q/k/v output. */
op_qkv_layout gx_qkv_layout(const gx_config *c);

/* Parameters of the model (unpadded sum of tensor sizes). */
size_t gx_param_count(const gx_config *c);
/* Bytes a training process needs for micro-batches of B x T: parameters,
 * gradients, AdamW moments and the trainer's checkpoint snapshot (20 bytes a
 * parameter) plus activations. */
size_t gx_memory_estimate(const gx_config *c, int B, int T);

/* --- internal to model/ --------------------------------------------------------- */
/* q/k/v layout of H query and kv key/value heads of hd (gx_qkv_layout for any share). */
op_qkv_layout gx__qkv_layout(gx_qkv qkv, int H, int kv, int hd);
/* Fills m->tensors (names, shapes, slots, TP slices) and m->num_params from m->cfg
 * and this rank's share (m->nh, nkv, ni, nv, v0, tp, tp_rank). */
void gx__build_layout(gx_model *m);
/* m->l0 and m->nl from m->pp and m->pp_rank (pp 0: set to 1, the whole decoder). */
void gx__stage_span(gx_model *m);
/* Tensors of one decoder layer. */
int gx__tensors_per_layer(const gx_config *c);
/* Number of tensors gx__build_layout produces for the whole decoder (a stage has fewer). */
int gx__num_tensors(const gx_config *c);
/* Llama and Falcon presets; GRIT_ENOTFOUND when name is none of them. */
grit_err gx__family_preset(const char *name, gx_config *cfg);

#endif
