/*
 * tasks.h - zero-shot tasks the community scores models on, read from JSONL.
 *
 * Multiple choice (HellaSwag, ARC, PIQA and the like, one object per line):
 *     {"context": "A man is sitting on a roof. He", "choices": [" starts pulling up
 *      roofing.", " is ridding ..."], "gold": 0}
 * Each choice is scored by the summed log-likelihood of its tokens after the
 * context: the context is tokenized alone, the choice (with `delim` put in
 * front, default " ") alone, and the two id lists are joined (as
 * lm-evaluation-harness does, so a word boundary is never merged across).
 * `acc` picks the highest sum, `acc_norm` the highest sum divided by the
 * choice's length in characters (Unicode code points); ties go to the first.
 * An empty context starts from the end-of-document token.
 *
 * Cloze (LAMBADA): {"text": "... the last word"}: the text is split before its
 * last word; the item is right when every token of " word" is the model's most
 * likely token given what precedes it (greedy). Also reported: the perplexity
 * exp(-mean log-likelihood of the target) over items.
 *
 * Other fields on a line are ignored (ids, sources); a missing or mistyped
 * field, a gold index outside the choices, a line that is not JSON, or a
 * file without items is an error naming the file, the line and the field.
 * A sequence longer than the model's context keeps its last tokens.
 *
 * Standard error of an accuracy p over n items: sqrt(p (1 - p) / (n - 1)),
 * the sample standard deviation of the 0/1 outcomes over sqrt(n).
 */
#ifndef GRIT_EVAL_TASKS_H
#define GRIT_EVAL_TASKS_H

#include <stdio.h>

#include "data/bpe.h"
#include "eval/eval.h"

typedef enum task_kind { TASK_MC, TASK_CLOZE } task_kind;

typedef struct task_result {
    task_kind kind;
    long n;                /* items */
    long correct;          /* acc (mc) or greedy-correct (cloze) */
    long correct_norm;     /* acc_norm (mc) */
    double sum_ll;         /* cloze: summed target log-likelihood over items */
    long target_tokens;    /* cloze: target tokens over items */
} task_result;

typedef struct task_opts {
    task_kind kind;
    const char *delim; /* between context and choice; NULL: " " */
    uint32_t start;    /* token an empty context starts from (end of document) */
    long limit;        /* items to score, 0: all */
    FILE *details;     /* NULL, or one JSON line per item: ids, scores, prediction */
    void (*on_item)(void *ctx, long done); /* progress, may be NULL */
    void *ctx;
} task_opts;

/* Scores every item of the JSONL file at path. */
grit_err task_run(eval_model *e, bpe_ctx *tok, const char *path, const task_opts *o,
                  task_result *out);

/* Accuracy and its standard error (see above). */
double task_acc(long correct, long n);
double task_stderr(long correct, long n);

#endif
