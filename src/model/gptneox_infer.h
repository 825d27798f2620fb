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
 * (2 * layers * max_t * kv_heads * head_dim floats, gxi_cache_bytes) and scratch for
 * `rows` tokens per call (a prompt longer than that is fed in pieces). gxi_forward and
 * gxi_sample never allocate. Threads: a call with little work (a small
 * model's decode step) runs on the calling thread alone.
 *
 * Batches (grit serve's continuous batching): a state may hold only a cache
 * (gxi_init_cache: one sequence) or only scratch (gxi_init_work: the rows of a call).
 * gxi_forward_in feeds one sequence through a work state's scratch; gxi_decode
 * appends one token to each of B sequences in one pass: the row-wise parts
 * (embedding, norms, q/k/v, output and MLP projections, logits) are one GEMM over
 * the B rows, attention is per row against its own sequence's cache at its own
 * position. gxi_forward is gxi_forward_in with the state as its own work: every
 * path (a prompt's rows, one token, B sequences' tokens) is the same code over a
 * list of (sequence, position) rows. A decode step (a single-token forward, or
 * gxi_decode's B rows) runs its GEMMs with the batch-invariant kernel of
 * tensor/rowgemm.h (OpenBLAS's result for a row changes with the number of rows in
 * the call); attention and the norms are per row and threads split rows and heads,
 * never a sum, so a sequence decoded in a batch gets bitwise the logits it gets alone
 * (tests/unit/model/test_infer_batch.c for every family, serve_batch.py end to end).
 * A prompt's rows (two or more in a call) use OpenBLAS: grit generate and grit serve
 * feed a prompt through the same call shapes (pieces of 256 rows).
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

#include <stddef.h>
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
    struct gxi_state **rseq; /* [rows] the sequence of each row of the call in progress */
    int *rpos;         /* [rows] its position */
    int nthreads;      /* threads for calls with enough work */
    int cur_threads;   /* threads of the call in progress */
    int invariant;     /* the call in progress is a decode step (tensor/rowgemm.h) */
} gxi_state;

grit_err gxi_init(gxi_state *s, const gx_model *m, int max_t, int rows, int nthreads);
/* Only a cache of max_t positions (no scratch: fed through a work state). */
grit_err gxi_init_cache(gxi_state *s, const gx_model *m, int max_t);
/* Only scratch for rows tokens a call and nthreads threads (no cache). */
grit_err gxi_init_work(gxi_state *s, const gx_model *m, int rows, int nthreads);
void gxi_free(gxi_state *s);

/* Bytes of the cache of a max_t-position sequence (keys and values, every layer). */
size_t gxi_cache_bytes(const gx_model *m, int max_t);

/* Forgets the cached positions. */
void gxi_reset(gxi_state *s);

/* Appends tokens tok[0..n) at positions pos..pos+n-1. logits_last ([V],
 * may be NULL) receives the logits after the last token; logits_all
 * ([n][V], may be NULL) those after every token. GRIT_EINVAL when the cache
 * would overflow or an id is outside the vocabulary. */
grit_err gxi_forward(gxi_state *s, const int32_t *tok, int n, float *logits_last,
                     float *logits_all);

/* gxi_forward for sequence s (a cache) through work w's scratch (w's pieces of at
 * most w->rows tokens). w may be s. */
grit_err gxi_forward_in(gxi_state *w, gxi_state *s, const int32_t *tok, int n,
                        float *logits_last, float *logits_all);

/* One decode step of B sequences (1 <= B <= w->rows): appends tok[i] to seq[i] at its
 * position; logits [B][V] receives each one's next-token logits. GRIT_EINVAL when a
 * sequence is full or an id is outside the vocabulary (nothing is appended then). */
grit_err gxi_decode(gxi_state *w, gxi_state *const *seq, const int32_t *tok, int B,
                    float *logits);

/* Draws the next token from logits [V] (modified in place). */
int32_t gxi_sample(gxi_state *s, float *logits, double temperature, int top_k, double top_p,
                   rng_t *rng);

#endif
