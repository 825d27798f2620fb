/*
 * tokenize.h - corpus -> Megatron .bin/.idx: many threads encode, one
 * writer keeps input order, memory bounded by a round of text.
 *
 * Inputs are files or directories (walked recursively, entries in byte
 * order of their names, hidden ones skipped). A file is read as
 *   jsonl  one JSON object per line; the document is its string field
 *          (`field`, default "text"); blank lines are skipped; anything else
 *          is an error naming file:line and what was wrong;
 *   text   the whole file is one document;
 * by extension (.jsonl / .json -> jsonl, else text) unless a format is
 * forced. Each non-empty document becomes one sequence and one document of
 * the dataset: its ids followed by the end-of-document token (empty
 * documents are skipped and counted). Special tokens in the text are
 * recognised for Hugging Face tokenizers (as their library does) and not for
 * GPT-2 files (as OpenAI's encoder does): the caller passes the flags.
 *
 * Pipeline: the calling thread reads documents until a round holds
 * `round_bytes` of text (at least one document), `threads` threads encode
 * the round's documents in parallel (each with its own bpe_ctx), then the
 * calling thread appends them in input order through idx_writer (durable at
 * the end; nothing is left behind on error). Memory: one round of text and
 * ids, plus the writer's 12 bytes per document; independent of corpus size
 * except for a single document larger than a round.
 *
 * Text that is not valid UTF-8 (possible in text files; JSON strings are
 * UTF-8) is encoded as the references see it, invalid sequences as U+FFFD,
 * and the replaced bytes are counted in the stats; with BPE_BYTE_EXACT the
 * bytes are encoded as they are, and a byte the vocabulary has no token for
 * is an error naming the file (nothing is dropped silently).
 *
 * Ownership: everything tokenize_run allocates it frees before returning.
 */
#ifndef GRIT_DATA_TOKENIZE_H
#define GRIT_DATA_TOKENIZE_H

#include <stdint.h>

#include "core/error.h"
#include "data/bpe.h"

enum { TOKENIZE_AUTO = 0, TOKENIZE_TEXT, TOKENIZE_JSONL };

typedef struct tokenize_stats {
    uint64_t files, docs, empty_docs, tokens; /* tokens include the eod tokens */
    uint64_t bytes_total;                     /* input file bytes */
    uint64_t bytes_done;                      /* input bytes consumed so far */
    uint64_t replaced_bytes; /* invalid UTF-8 bytes encoded as U+FFFD (not in byte-exact mode) */
    double seconds;
} tokenize_stats;

typedef struct tokenize_opts {
    const bpe *tok;                 /* borrowed, shared by the threads */
    int encode_flags;               /* bpe_encode flags: BPE_ALLOW_SPECIAL, BPE_BYTE_EXACT */
    uint32_t eod;                   /* end-of-document id */
    const char *const *inputs;      /* files or directories */
    int n_inputs;
    const char *output_prefix;      /* writes PREFIX.bin and PREFIX.idx */
    int format;                     /* TOKENIZE_AUTO / _TEXT / _JSONL */
    const char *field;              /* JSONL field, NULL = "text" */
    int threads;                    /* >= 1 */
    size_t round_bytes;             /* 0 = 4 MiB per thread */
    /* called by the calling thread after each round (may be NULL) */
    void (*on_progress)(void *arg, const tokenize_stats *st);
    void *arg;
} tokenize_opts;

/* Runs the whole conversion. On error nothing is written and the message
 * names the file (and line for JSONL). */
grit_err tokenize_run(const tokenize_opts *o, tokenize_stats *st);

#endif
