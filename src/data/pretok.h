/*
 * pretok.h - GPT-2 pre-tokenisation: splits text into the pieces that BPE
 * then encodes one by one.
 *
 * It implements, without a regex engine, exactly what OpenAI's pattern
 *
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *
 * matches, leftmost-first as in tiktoken (Rust regex) and Hugging Face
 * tokenizers (Oniguruma):
 *   - contractions are case-sensitive and use ASCII ' only;
 *   - the optional prefix is U+0020 only;
 *   - \s is Unicode White_Space (U+0009-000D, U+0020, U+0085 and the
 *     categories Zs, Zl, Zp); U+FEFF is *not* a space (it is Cf), unlike
 *     JavaScript's \s;
 *   - a whitespace run of k > 1 characters followed by a non-space leaves its
 *     last character for the next piece (the \s+(?!\S) rule);
 *   - \p{L} and \p{N} are the general categories L* and N* from utf8proc.
 * Invalid UTF-8 is not an error: each byte that does not start a valid
 * sequence is a one-byte character of the "other" class (so it joins a
 * punctuation run), which makes every byte string splittable and the pieces
 * concatenate back to the input.
 *
 * Pure functions over caller memory, no state: thread-safe.
 */
#ifndef GRIT_DATA_PRETOK_H
#define GRIT_DATA_PRETOK_H

#include <stddef.h>
#include <stdint.h>

enum { PRETOK_OTHER = 0, PRETOK_LETTER = 1, PRETOK_NUMBER = 2, PRETOK_SPACE = 3 };

/* Decodes one character at s[i] (i < n): returns its length in bytes (1 for
 * an invalid byte) and stores its class (PRETOK_*) in *cls. */
size_t pretok_char(const uint8_t *s, size_t n, size_t i, int *cls);

/* Returns the end (exclusive) of the piece that starts at i (i < n). The
 * result is always > i, so a loop `for (i = 0; i < n; i = end)` terminates. */
size_t pretok_next(const uint8_t *s, size_t n, size_t i);

/* Strict UTF-8 decode of one scalar at s[i]: returns its length (1-4) and
 * stores the code point, or returns 0 for an invalid or truncated sequence
 * (overlong forms, surrogates and values past U+10FFFF are invalid). */
size_t pretok_utf8(const uint8_t *s, size_t n, size_t i, uint32_t *cp);

/* Length of the longest prefix of s[0..n) that is valid UTF-8 (n when all of it is). */
size_t pretok_utf8_valid_len(const uint8_t *s, size_t n);

/* Lossy UTF-8 decoding as WHATWG's TextDecoder, Rust's from_utf8_lossy and Python's
 * errors="replace" do it: each maximal subpart of an ill-formed sequence (the longest
 * prefix of a well-formed sequence, else one byte) becomes U+FFFD (EF BF BD); valid
 * sequences are copied. out must hold 3 * n bytes. Returns the bytes written and stores
 * the number of input bytes replaced in *replaced. */
size_t pretok_utf8_lossy(const uint8_t *s, size_t n, uint8_t *out, size_t *replaced);

#endif
