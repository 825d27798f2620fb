/*
 * gptneox_infer.h - decoder inference with a KV cache (GPT-NeoX, Llama and
 * Falcon: the trainer's block options, norms, GQA/MQA layouts, SwiGLU, rope
 * scaling), and token sampling.
 *
 * The trainer's forward (gptneox_step.c) recomputes every position; text
 * generation instead keeps each layer's keys (after rotary) and values for
 * the positions seen so far, so appending one token costs one position:
 * its layer norms, projections and MLP, and attention of one query over the
 * cached keys. The weights are a gx_model's (borrowed, read-only); the same
 * kernels (layernorm/RMSNorm, rotary tables, gelu/SwiGLU, OpenBLAS sgemm) are
 * used, so the logits equal the full recomputation's to float rounding. The
 * cache holds one key and value per kv head (grouped-query and multi-query
 * attention cache kv_heads * head_dim floats a position, not hidden).
 *
 * Memory: gxi_init allocates everything once: the cache
 * (2 * layers * max_t * kv_heads * head_dim floats) and scratch for `rows` tokens per
 * call (a prompt longer than that is fed in pieces). gxi_forward and
 * gxi_sample never allocate. Threads: a call with little work (a small
 * model's decode step) runs on the calling thread alone.
 *
 * Sampling (gxi_sample): temperature 0 is greedy (argmax, lowest id on
 * ties); otherwise logits / temperature, keep the top_k largest (0: all),
 * then the smallest set of most likely tokens whose probability reaches
 * top_p (1: all), renormalise and draw with the caller's rng (core/rng.h):
 * the same seed gives the same text.
 *
 * Ownership: gxi_init / gxi_free (a zeroed or freed state frees as a no-op).
 */
#ifndef GRIT_MODEL_GPTNEOX_INFER_H
#define GRIT_MODEL_GPTNEOX_INFER_H

#include <stdint.h>

#include "core/error.h"
#include "core/rng.h"
#include "model/gptneox.h"

typedef struct gxi_state {
    const gx_model *m; /* borrowed weights */
    int max_t;         /* cache capacity in positions (<= max_positions) */
    int rows;          /* scratch capacity in tokens per forward piece */
    int pos;           /* positions in the cache */
    float *k, *v;      /* [L][max_t][kv_heads * hd]: keys after rotary, values */
    float *x, *ln, *qkv, *att, *o, *mid, *fc, *gelu, *lnf; /* [rows][...] */
    float *mean, *rstd;                                    /* [rows] */
    float *scores;     /* [max_t] per thread */
    float *probs;      /* [V] sampling scratch */
    int32_t *order;    /* [V] sampling scratch */
    int nthreads;      /* threads for calls with enough work */
    int cur_threads;   /* threads of the call in progress */
} gxi_state;

grit_err gxi_init(gxi_state *s, const gx_model *m, int max_t, int rows, int nthreads);
void gxi_free(gxi_state *s);

/* Forgets the cached positions. */
void gxi_reset(gxi_state *s);

/* Appends tokens tok[0..n) at positions pos..pos+n-1. logits_last ([V],
 * may be NULL) receives the logits after the last token; logits_all
 * ([n][V], may be NULL) those after every token. GRIT_EINVAL when the cache
 * would overflow or an id is outside the vocabulary. */
grit_err gxi_forward(gxi_state *s, const int32_t *tok, int n, float *logits_last,
                     float *logits_all);

/* Draws the next token from logits [V] (modified in place). */
int32_t gxi_sample(gxi_state *s, float *logits, double temperature, int top_k, double top_p,
                   rng_t *rng);

#endif
