/*
 * hftok.h - the generic tokenizer: any Hugging Face tokenizer.json whose
 * model is BPE (byte-level: GPT-2, NeoX, Llama 3, Falcon; SentencePiece-style
 * with byte_fallback: Llama 2, TinyLlama, Mistral), and SentencePiece
 * .model files (through libsentencepiece, spm.h).
 *
 * Users reach it through bpe.h: bpe_open_hf() sends a file here when the
 * byte-level fast path cannot reproduce it exactly (or when asked to with
 * BPE_OPEN_GENERIC), and the bpe_* calls forward. This header is for bpe.c.
 *
 * Encoding follows Hugging Face tokenizers' pipeline step by step:
 *
 *   text -> invalid UTF-8 replaced by U+FFFD (maximal subparts, as the
 *           WHATWG decoder and Python's errors="replace" do; counted)
 *        -> added tokens that are not normalized split out (leftmost-longest;
 *           lstrip/rstrip take the neighbouring whitespace, single_word
 *           needs word boundaries; special ones only with BPE_ALLOW_SPECIAL)
 *        -> normalizer on each remaining piece (NFC/NFD/NFKC/NFKD,
 *           Lowercase, Prepend, Replace, Strip, Sequence)
 *        -> normalized added tokens split out
 *        -> pre-tokenizer (ByteLevel, Split with an Oniguruma regex or a
 *           string, Metaspace, Digits, Punctuation, Whitespace,
 *           WhitespaceSplit, Sequence)
 *        -> BPE per piece (merges lowest rank first, leftmost on ties;
 *           ignore_merges; byte_fallback to <0xXX>; unk and fuse_unk)
 *        -> with BPE_ADD_SPECIAL, the post-processor's single template
 *           (TemplateProcessing: BOS/EOS around the sequence)
 *
 * Decoding maps each token to its bytes (ByteLevel undone; SentencePiece's
 * U+2581 back to a space, <0xXX> to its byte) and strips the leading space
 * that Metaspace / Strip decoders remove. Bytes are returned as they are
 * (no U+FFFD for a cut-off sequence, unlike HF's lossy string).
 *
 * Threads: an hftok is immutable once open; each thread encodes with its own
 * hftok_ctx. Ownership: hftok_open allocates, hftok_close frees (NULL ok);
 * same for the ctx, which must be closed before its tokenizer.
 */
#ifndef GRIT_DATA_HFTOK_H
#define GRIT_DATA_HFTOK_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/bpe.h"

typedef struct hftok hftok;
typedef struct hftok_ctx hftok_ctx;

/* Opens a tokenizer.json (parsed already: root, borrowed) or, with root NULL,
 * a SentencePiece .model at path. Errors name path and the JSON field. */
grit_err hftok_open(hftok **out, const char *path, void *json_root);
void hftok_close(hftok *t);

/* 1 when the byte-level fast path (bpe.c) encodes this tokenizer.json
 * exactly as Hugging Face does, else 0. */
int hftok_fast_path_ok(void *json_root);

size_t hftok_vocab_size(const hftok *t);
grit_err hftok_token_id(const hftok *t, const char *bytes, size_t len, uint32_t *id);
const char *hftok_token_bytes(const hftok *t, uint32_t id, size_t *len);

grit_err hftok_ctx_open(hftok_ctx **out, const hftok *t);
void hftok_ctx_close(hftok_ctx *c);

/* Appends the ids of text[0..len); flags BPE_ALLOW_SPECIAL, BPE_ADD_SPECIAL. */
grit_err hftok_encode(hftok_ctx *c, const char *text, size_t len, int flags, bpe_ids *ids);

/* Bytes replaced by U+FFFD in the text this ctx has encoded so far. */
uint64_t hftok_ctx_replaced(const hftok_ctx *c);

grit_err hftok_decode(const hftok *t, const uint32_t *ids, size_t n, char *out, size_t cap, size_t *outlen);

/* Rewrites s[0..n) with each invalid UTF-8 sequence (maximal subpart) as
 * U+FFFD into out (capacity 3n) and returns the number of bytes replaced;
 * *outlen gets the new length. */
size_t hftok_utf8_repair(const uint8_t *s, size_t n, uint8_t *out, size_t *outlen);

/* 1 if s[0..n) is valid UTF-8. */
int hftok_utf8_valid(const uint8_t *s, size_t n);

#endif
