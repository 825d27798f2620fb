/*
 * eval.h - scoring text with a trained model: log-likelihoods, perplexity.
 *
 * The building block of `grit eval`: given token ids, the log-probability
 * the model gives each next token, computed in double from the logits of
 * the inference path (model/gptneox_infer.h, a KV cache; the same kernels as
 * training, so the logits equal the trainer's to float rounding). On top of
 * it: perplexity over a token stream cut into windows (eval_stream), and the
 * zero-shot tasks in tasks.h.
 *
 * Windows: a stream of N tokens is scored in non-overlapping windows of
 * seq_len + 1 tokens that share their boundary token (window w holds tokens
 * [w*seq_len, (w+1)*seq_len], as Megatron's samples do), so every token after
 * the first is predicted exactly once, from at most seq_len tokens of context.
 * A last, shorter window scores what is left.
 *
 * Not here: batching across sequences (the inference state holds one
 * sequence), data-parallel evaluation (the trainer's validation runs on its
 * own ranks).
 *
 * Ownership: eval_open / eval_close; a zeroed or closed eval_model closes as
 * a no-op. Nothing is allocated after eval_open.
 */
#ifndef GRIT_EVAL_EVAL_H
#define GRIT_EVAL_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/bpe.h"
#include "model/gptneox_infer.h"

typedef struct eval_model {
    gx_model m;
    gxi_state s;
    int vocab;      /* logits per position */
    int ctx;        /* the model's context: the longest sequence eval_score takes */
    int rows;       /* positions per forward piece */
    float *logits;  /* [rows][vocab] scratch */
    int32_t *prefix; /* [ctx] the prefix whose keys and values are in the cache */
    int nprefix;     /* its length (0: none cached) */
    float *plast;    /* [vocab] the logits after its last token */
    char where[4400]; /* the checkpoint folder actually loaded */
} eval_model;

/* Loads a checkpoint (a run directory, a step folder or a Hugging Face folder:
 * ckpt/pretrained.h) for scoring with nthreads threads. */
grit_err eval_open(eval_model *e, const char *path, int nthreads);
void eval_close(eval_model *e);

/* Scores one sequence tok[0..n), 2 <= n <= ctx: lp[i] = log p(tok[i+1] | tok[0..i])
 * and, when greedy is not NULL, greedy[i] = 1 when tok[i+1] is the most likely
 * token there (the lowest id wins a tie), for i in [0, n-1). logits ([n][vocab],
 * may be NULL) receives the raw logits after every token. GRIT_EINVAL names a
 * bad length or an id outside the vocabulary. */
grit_err eval_score(eval_model *e, const int32_t *tok, int n, double *lp, unsigned char *greedy,
                    float *logits);

/* Scores cont[0..m) after prefix[0..n): lp[j] = log p(cont[j] | prefix, cont[0..j)),
 * greedy[j] (may be NULL) as in eval_score. 1 <= n, 1 <= m, n + m <= ctx. When
 * the prefix equals the previous call's, its cached keys and values are reused
 * (multiple choice scores every choice after one context). */
grit_err eval_score_after(eval_model *e, const int32_t *prefix, int n, const int32_t *cont, int m,
                          double *lp, unsigned char *greedy);

/* The running totals of a perplexity measurement. */
typedef struct eval_total {
    double nll;    /* sum of -log p over predicted tokens */
    long tokens;   /* predicted tokens */
    long windows;
} eval_total;

/* Scores tok[0..n) of a stream in windows of seq_len + 1 tokens (see above),
 * adding to *t. lp_scratch holds seq_len doubles. */
grit_err eval_stream(eval_model *e, const int32_t *tok, size_t n, int seq_len, double *lp_scratch,
                     eval_total *t);

/* Reads the documents of a JSONL file (the string field `field` of each line's
 * object), tokenizes each and appends it and the end-of-document token eod to
 * *stream (*n tokens, realloc'd), up to max_tokens in all (0: no limit). *bytes
 * counts the documents' UTF-8 bytes (for bits per byte). Errors name the file,
 * the line and the field. */
grit_err eval_jsonl_tokens(const char *path, const char *field, bpe_ctx *tok, uint32_t eod,
                           long max_tokens, int32_t **stream, size_t *n, long *bytes);

#endif
