/*
 * filter.h - document quality filters (Gopher / RefinedWeb thresholds) and
 * RefinedWeb's line-wise corrections.
 *
 * Words are white-space separated; lines split on '\n'; paragraphs on
 * blank lines. Each filter has a name (the drop reason in the report) and a
 * bit in `enabled`; its threshold is a field of filter_cfg. Defaults
 * (filter_cfg_default) are the published values:
 *
 *   word_count          min_words 50 <= words <= max_words 100000
 *   mean_word_length    3 <= mean characters per word <= 10
 *   symbol_ratio        ('#' + "..." + "…") per word <= 0.1
 *   bullet_lines        lines starting with a bullet <= 0.9
 *   ellipsis_lines      lines ending in an ellipsis <= 0.3
 *   alpha_words         words with an alphabetic character >= 0.8
 *   stop_words          >= 2 of the, be, to, of, and, that, have, with
 *                       (English documents only: the list is English)
 *   dup_lines           duplicate lines <= 0.30 of lines
 *   dup_paragraphs      duplicate paragraphs <= 0.30 of paragraphs
 *   dup_line_chars      characters in duplicate lines <= 0.20
 *   dup_paragraph_chars characters in duplicate paragraphs <= 0.20
 *   top_ngram           characters of the most frequent 2/3/4-gram
 *                       <= 0.20 / 0.18 / 0.16
 *   dup_ngram           characters in repeated 5..10-grams
 *                       <= 0.15 0.14 0.13 0.12 0.11 0.10
 *   line_corrections    lines removed (counters like "3 likes", numeric-only
 *                       lines, mostly-uppercase lines, navigation words such
 *                       as "Home" or "Read more") must hold <= 0.05 of the
 *                       words, else the document is dropped
 *
 * Order (RefinedWeb): repetition filters, then document-wise filters, then
 * line-wise corrections, which rewrite the text in place.
 *
 * Memory: filter_scratch holds growable arrays reused across documents;
 * one per thread. filter_scratch_free frees it.
 */
#ifndef GRIT_PREP_FILTER_H
#define GRIT_PREP_FILTER_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"

enum {
    FILT_WORD_COUNT = 0,
    FILT_MEAN_WORD_LENGTH,
    FILT_SYMBOL_RATIO,
    FILT_BULLET_LINES,
    FILT_ELLIPSIS_LINES,
    FILT_ALPHA_WORDS,
    FILT_STOP_WORDS,
    FILT_DUP_LINES,
    FILT_DUP_PARAGRAPHS,
    FILT_DUP_LINE_CHARS,
    FILT_DUP_PARAGRAPH_CHARS,
    FILT_TOP_NGRAM,
    FILT_DUP_NGRAM,
    FILT_LINE_CORRECTIONS,
    FILT_COUNT
};

typedef struct filter_cfg {
    uint32_t enabled; /* bit i = filter i on */
    long min_words, max_words;
    double min_mean_word_len, max_mean_word_len;
    double max_symbol_ratio, max_bullet_lines, max_ellipsis_lines, min_alpha_words;
    long min_stop_words;
    double max_dup_lines, max_dup_paragraphs, max_dup_line_chars, max_dup_paragraph_chars;
    double max_top_ngram[3]; /* n = 2, 3, 4 */
    double max_dup_ngram[6]; /* n = 5 .. 10 */
    double max_line_corrections;
} filter_cfg;

typedef struct filter_scratch {
    uint64_t *h;     /* hashes of words / lines */
    uint32_t *wl;    /* word lengths */
    uint8_t *mark;
    uint64_t *tab;   /* open-addressing table: key, count */
    size_t cap_words, cap_tab;
} filter_scratch;

void filter_cfg_default(filter_cfg *c);
const char *filter_name(int f);
int filter_by_name(const char *name); /* -1 if unknown */
/* Runs the enabled filters on text[0..*len) of a document in language lang.
 * Returns FILTER_KEEP when kept (text possibly shortened by line
 * corrections, *len updated, still NUL-terminated), the FILT_* index (>= 0)
 * that dropped it, or FILTER_ENOMEM. */
#define FILTER_KEEP (-1)
#define FILTER_ENOMEM (-2)
int filter_doc(const filter_cfg *c, const char *lang, char *text, size_t *len,
               filter_scratch *s);
void filter_scratch_free(filter_scratch *s);

#endif
