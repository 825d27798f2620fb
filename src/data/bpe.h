/*
 * bpe.h - byte-level BPE tokenizer (GPT-2 and GPT-NeoX-20B).
 *
 * Loads either OpenAI's GPT-2 files (vocab.json + merges.txt) or a Hugging
 * Face tokenizer.json whose model is byte-level BPE (GPT-NeoX-20B, Pythia).
 * Encoding follows the references exactly:
 *
 *   text -> [split out added tokens that are not normalized; special ones
 *            only with BPE_ALLOW_SPECIAL]
 *        -> [NFC, when the file declares it]
 *        -> [split out normalized added tokens, e.g. NeoX's 23 space runs]
 *        -> GPT-2 pre-tokenisation (pretok.h)
 *        -> per piece: bytes -> byte tokens -> merges applied lowest rank
 *           first (leftmost on ties) -> ids
 *
 * GPT-2 files (tiktoken's semantics): a piece that is itself in the
 * vocabulary is emitted as that token without running merges. Hugging Face
 * files: merges always run (unless the model sets ignore_merges).
 *
 * Text that is not valid UTF-8: by default it is first decoded the way the
 * references receive it (Hugging Face tokenizers and tiktoken take Unicode
 * strings, i.e. bytes decoded with replacement): each maximal subpart of an
 * ill-formed sequence becomes U+FFFD (pretok_utf8_lossy), and the ctx counts
 * the replaced bytes (bpe_ctx_replaced). With BPE_BYTE_EXACT the bytes are
 * encoded as they are, and decode(encode(x)) == x byte for byte when the
 * vocabulary has a token for every byte of x (GPT-2 has all 256); a byte
 * with no token (GPT-NeoX-20B lacks 0xC0, 0xC1, 0xF5-0xFF, which never occur
 * in UTF-8) is an error naming it, never silently dropped. A tokenizer that
 * normalizes returns the NFC text (NFC is skipped for text that is not valid
 * UTF-8, which only byte-exact mode lets through).
 *
 * Threads: a `bpe` is immutable once opened and may be shared by any number
 * of threads. Each encoding thread owns a `bpe_ctx` (its word cache and
 * scratch buffers): no locks, no shared writes. A ctx must not be used by two
 * threads at once.
 *
 * Ownership: bpe_open_* allocate the tokenizer, bpe_close frees it (NULL is a
 * no-op); the same for bpe_ctx_open/bpe_ctx_close. A ctx must be closed
 * before its tokenizer. bpe_ids is caller-owned; bpe_ids_free releases it.
 */
#ifndef GRIT_DATA_BPE_H
#define GRIT_DATA_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct bpe bpe;
typedef struct bpe_ctx bpe_ctx;

/* A growable array of token ids; zero-initialise, then append with encode. */
typedef struct bpe_ids {
    uint32_t *v;
    size_t n, cap;
} bpe_ids;

void bpe_ids_free(bpe_ids *ids);

enum {
    BPE_ALLOW_SPECIAL = 1, /* recognise special tokens (<|endoftext|>) in the text */
    BPE_BYTE_EXACT = 2,    /* encode invalid UTF-8 as bytes instead of as U+FFFD (fast path) */
    BPE_ADD_SPECIAL = 4    /* add the post-processor's BOS/EOS (template; generic path only:
                              the fast path's files have none) */
};

enum { BPE_OPEN_GENERIC = 1 /* bpe_open_file: skip the fast path (tests, benchmarks) */ };

/* GPT-2: vocab.json maps byte-mapped strings to ids; merges.txt lists one
 * "a b" pair per line by rank (a leading "#version" line is skipped).
 * "<|endoftext|>", when in the vocabulary, is the special token. */
grit_err bpe_open_gpt2(bpe **out, const char *vocab_json, const char *merges_txt);

/* Any Hugging Face tokenizer.json with model.type "BPE", or a SentencePiece
 * .model file. A tokenizer.json that the byte-level fast path reproduces
 * exactly (ByteLevel pre-tokenizer with the GPT-2 regex, normalizer null or
 * NFC, no template: GPT-2, GPT-NeoX-20B, Pythia) loads into it; any other
 * (Llama 2/3, Falcon, Mistral, ...) and .model files load into the generic
 * tokenizer (hftok.h), behind the same bpe_* calls. */
grit_err bpe_open_hf(bpe **out, const char *tokenizer_json);

/* bpe_open_hf with flags (BPE_OPEN_GENERIC). */
grit_err bpe_open_file(bpe **out, const char *path, int flags);

/* 1 when t runs on the generic path (hftok.h), 0 on the fast path. */
int bpe_is_generic(const bpe *t);

/* Bytes of invalid UTF-8 that the generic path replaced with U+FFFD in the
 * text c has encoded so far (0 on the fast path). */
uint64_t bpe_ctx_replaced(const bpe_ctx *c);

void bpe_close(bpe *t);

/* One past the largest token id. */
size_t bpe_vocab_size(const bpe *t);

/* The id of a token given by its raw bytes (e.g. "<|endoftext|>"), or
 * GRIT_ENOTFOUND. */
grit_err bpe_token_id(const bpe *t, const char *bytes, size_t len, uint32_t *id);

/* Raw bytes of one token (not NUL-terminated), or NULL for an unused id. */
const char *bpe_token_bytes(const bpe *t, uint32_t id, size_t *len);

grit_err bpe_ctx_open(bpe_ctx **out, const bpe *t);
void bpe_ctx_close(bpe_ctx *c);

/* Appends the ids of text[0..len) to ids. flags: BPE_ALLOW_SPECIAL,
 * BPE_BYTE_EXACT. Errors: GRIT_ENOMEM; GRIT_EINVAL for a byte the vocabulary
 * has no token for (byte-exact mode only; the message names byte and offset).
 * On error ids may hold part of the text's ids. */
grit_err bpe_encode(bpe_ctx *c, const char *text, size_t len, int flags, bpe_ids *ids);

/* Input bytes this ctx has replaced with U+FFFD since it was opened (invalid
 * UTF-8 outside byte-exact mode). */
uint64_t bpe_ctx_replaced(const bpe_ctx *c);

/* Writes the bytes of ids into out (at most cap bytes) and the full length to
 * *outlen (call with cap 0 to size the buffer). GRIT_EINVAL names an unknown
 * id. */
grit_err bpe_decode(const bpe *t, const uint32_t *ids, size_t n, char *out, size_t cap,
                    size_t *outlen);

#endif
