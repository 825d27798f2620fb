/*
 * filter.c - see filter.h. One scan splits the text into words (hash and
 * length per word); the n-gram statistics run over those arrays with an
 * open-addressing count table (keys are 64-bit hashes; a collision can only
 * over-count a repeat, which is the conservative side for these ratios).
 */
#include "prep/filter.h"

#define XXH_INLINE_ALL
#include <xxhash.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const names[FILT_COUNT] = {
    "word_count", "mean_word_length", "symbol_ratio", "bullet_lines", "ellipsis_lines",
    "alpha_words", "stop_words", "dup_lines", "dup_paragraphs", "dup_line_chars",
    "dup_paragraph_chars", "top_ngram", "dup_ngram", "line_corrections"};

const char *filter_name(int f)
{
    return f >= 0 && f < FILT_COUNT ? names[f] : "?";
}

int filter_by_name(const char *name)
{
    for (int i = 0; i < FILT_COUNT; i++)
        if (!strcmp(names[i], name))
            return i;
    return -1;
}

void filter_cfg_default(filter_cfg *c)
{
    *c = (filter_cfg){
        .enabled = (1u << FILT_COUNT) - 1,
        .min_words = 50, .max_words = 100000,
        .min_mean_word_len = 3, .max_mean_word_len = 10,
        .max_symbol_ratio = 0.1, .max_bullet_lines = 0.9, .max_ellipsis_lines = 0.3,
        .min_alpha_words = 0.8, .min_stop_words = 2,
        .max_dup_lines = 0.30, .max_dup_paragraphs = 0.30,
        .max_dup_line_chars = 0.20, .max_dup_paragraph_chars = 0.20,
        .max_top_ngram = {0.20, 0.18, 0.16},
        .max_dup_ngram = {0.15, 0.14, 0.13, 0.12, 0.11, 0.10},
        .max_line_corrections = 0.05,
    };
}

void filter_scratch_free(filter_scratch *s)
{
    free(s->h);
    free(s->wl);
    free(s->mark);
    free(s->tab);
    memset(s, 0, sizeof *s);
}

static int grow(filter_scratch *s, size_t words)
{
    if (words <= s->cap_words)
        return 0;
    size_t cap = s->cap_words ? s->cap_words : 1024;
    while (cap < words)
        cap *= 2;
    uint64_t *h = realloc(s->h, cap * sizeof *h);
    if (h)
        s->h = h;
    uint32_t *wl = realloc(s->wl, cap * sizeof *wl);
    if (wl)
        s->wl = wl;
    uint8_t *m = realloc(s->mark, cap);
    if (m)
        s->mark = m;
    if (!h || !wl || !m)
        return -1;
    s->cap_words = cap;
    return 0;
}

/* Clears the table for n keys; returns its mask, or 0 on ENOMEM. */
static size_t tab_reset(filter_scratch *s, size_t n)
{
    size_t cap = 64;
    while (cap < 2 * n + 2)
        cap *= 2;
    if (cap > s->cap_tab) {
        uint64_t *t = realloc(s->tab, cap * 2 * sizeof *t);
        if (!t)
            return 0;
        s->tab = t;
        s->cap_tab = cap;
    }
    memset(s->tab, 0, cap * 2 * sizeof *s->tab);
    return cap - 1;
}

/* Adds key; returns its count after adding. Key 0 is stored as 1. */
static uint64_t tab_add(uint64_t *tab, size_t mask, uint64_t key)
{
    key |= key == 0;
    size_t i = (size_t)(key * 0x9E3779B97F4A7C15ull >> 17) & mask;
    for (;;) {
        if (tab[2 * i] == key)
            return ++tab[2 * i + 1];
        if (tab[2 * i] == 0) {
            tab[2 * i] = key;
            tab[2 * i + 1] = 1;
            return 1;
        }
        i = (i + 1) & mask;
    }
}

static int is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static int is_alpha_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

static uint64_t hash_lower(const char *p, size_t n)
{
    char tmp[64];
    if (n > sizeof tmp)
        return XXH3_64bits(p, n);
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        tmp[i] = c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
    }
    return XXH3_64bits(tmp, n);
}

static int is_stop_word(const char *p, size_t n)
{
    static const char *const sw[] = {"the", "be", "to", "of", "and", "that", "have", "with",
                                     NULL};
    /* strip trailing punctuation like "the," */
    while (n > 0 && !is_alpha_byte((unsigned char)p[n - 1]))
        n--;
    for (int i = 0; sw[i]; i++)
        if (strlen(sw[i]) == n && !strncasecmp(sw[i], p, n))
            return 1;
    return 0;
}

/* One unit of text: a line (sep 1) or a blank-line separated paragraph (sep 2).
 * [start, end) is the unit as written, [a, b) the same trimmed of white space. */
typedef struct {
    size_t start, end, a, b;
} text_unit;

/* The unit at *i (returns 0 at the end of the text); *i moves past it. */
static int next_unit(const char *t, size_t len, int sep, size_t *i, text_unit *u)
{
    if (*i >= len)
        return 0;
    size_t j = *i;
    if (sep == 1) {
        while (j < len && t[j] != '\n')
            j++;
    } else {
        while (j < len && !(t[j] == '\n' && j + 1 < len && t[j + 1] == '\n'))
            j++;
    }
    size_t a = *i, b = j;
    while (a < b && is_ws((unsigned char)t[a]))
        a++;
    while (b > a && is_ws((unsigned char)t[b - 1]))
        b--;
    *u = (text_unit){*i, j, a, b};
    *i = j + (size_t)sep;
    return 1;
}

/* Fraction of units (lines or paragraphs) that repeat an earlier one, and of
 * their characters. sep: 1 = lines, 2 = paragraphs (blank-line separated). */
static int dup_units(const char *t, size_t len, int sep, filter_scratch *s, double *frac,
                     double *cfrac)
{
    size_t units = 1;
    for (size_t i = 0; i < len; i++)
        units += t[i] == '\n';
    size_t mask = tab_reset(s, units);
    if (!mask)
        return -1;
    size_t n = 0, dup = 0, chars = 0, dchars = 0, i = 0;
    text_unit u;
    while (next_unit(t, len, sep, &i, &u)) {
        size_t a = u.a, b = u.b;
        if (b > a) {
            n++;
            chars += b - a;
            if (tab_add(s->tab, mask, XXH3_64bits(t + a, b - a)) > 1) {
                dup++;
                dchars += b - a;
            }
        }
    }
    *frac = n ? (double)dup / (double)n : 0;
    *cfrac = chars ? (double)dchars / (double)chars : 0;
    return 0;
}

static uint64_t ngram_hash(const uint64_t *h, size_t n)
{
    uint64_t x = 0x51ED270B27AF1F3Dull;
    for (size_t k = 0; k < n; k++)
        x = (x ^ h[k]) * 0x9E3779B97F4A7C15ull + (x >> 29);
    return x;
}

/* Line-wise corrections: 1 if the trimmed line [p, p+n) is to be removed. */
static int bad_line(const char *p, size_t n)
{
    size_t letters = 0, upper = 0, digits = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c >= '0' && c <= '9')
            digits++;
        else if (is_alpha_byte(c)) {
            letters++;
            upper += c >= 'A' && c <= 'Z';
        }
    }
    if (digits > 0 && letters == 0)
        return 1; /* numeric only: page numbers, dates, counters */
    if (letters >= 5 && upper * 2 > letters)
        return 1; /* mostly uppercase */
    /* counters: "3 likes", "1.2k shares", "12 Comments" */
    size_t i = 0;
    while (i < n && ((p[i] >= '0' && p[i] <= '9') || p[i] == '.' || p[i] == ','))
        i++;
    if (i > 0 && i < n) {
        if (p[i] == 'k' || p[i] == 'K' || p[i] == 'm' || p[i] == 'M')
            i++;
        if (i < n && p[i] == ' ') {
            static const char *const cw[] = {"like", "likes", "share", "shares", "comment",
                                             "comments", "view", "views", "follower",
                                             "followers", "retweet", "retweets", "reply",
                                             "replies", "vote", "votes", NULL};
            const char *w = p + i + 1;
            size_t wn = n - i - 1;
            for (int k = 0; cw[k]; k++)
                if (strlen(cw[k]) == wn && !strncasecmp(cw[k], w, wn))
                    return 1;
        }
    }
    /* navigation fragments, the whole line */
    static const char *const nav[] = {
        "home", "next", "prev", "previous", "back", "menu", "login", "log in", "sign in",
        "sign up", "register", "share", "tweet", "read more", "skip to content",
        "skip to main content", "back to top", "top", "more", "search", "subscribe",
        "print", "email", "reply", "related posts", NULL};
    size_t a = 0, b = n;
    while (a < b && !is_alpha_byte((unsigned char)p[a]))
        a++;
    while (b > a && !is_alpha_byte((unsigned char)p[b - 1]))
        b--;
    for (int k = 0; nav[k]; k++)
        if (strlen(nav[k]) == b - a && !strncasecmp(nav[k], p + a, b - a))
            return 1;
    return 0;
}

static size_t count_words(const char *p, size_t n)
{
    size_t w = 0;
    int in = 0;
    for (size_t i = 0; i < n; i++) {
        int ws = is_ws((unsigned char)p[i]);
        w += !ws && !in;
        in = !ws;
    }
    return w;
}

/* Removes bad lines in place. Returns 1 if the removed words exceed the
 * limit (document dropped), 0 otherwise. */
static int line_corrections(const filter_cfg *c, char *t, size_t *len, size_t words)
{
    size_t removed = 0, i = 0, o = 0, L = *len;
    text_unit u;
    /* first pass: count */
    while (next_unit(t, L, 1, &i, &u))
        if (u.b > u.a && bad_line(t + u.a, u.b - u.a))
            removed += count_words(t + u.a, u.b - u.a);
    if (removed == 0)
        return 0;
    if ((double)removed > c->max_line_corrections * (double)words)
        return 1;
    /* second pass: rewrite, at most two consecutive newlines */
    i = 0;
    int nl = 0;
    while (next_unit(t, L, 1, &i, &u)) {
        if (u.b == u.a) {
            nl++;
        } else if (!bad_line(t + u.a, u.b - u.a)) {
            if (o > 0) {
                int k = nl + 1 > 2 ? 2 : nl + 1;
                while (k--)
                    t[o++] = '\n';
            }
            memmove(t + o, t + u.start, u.end - u.start);
            o += u.end - u.start;
            nl = 0;
        }
    }
    t[o] = 0;
    *len = o;
    return 0;
}

#define ON(f) (c->enabled & (1u << (f)))

int filter_doc(const filter_cfg *c, const char *lang, char *text, size_t *len,
               filter_scratch *s)
{
    size_t L = *len;
    /* words */
    size_t nw = 0, wchars = 0, alpha = 0, stop = 0, symbols = 0;
    size_t i = 0;
    while (i < L) {
        while (i < L && is_ws((unsigned char)text[i]))
            i++;
        if (i >= L)
            break;
        size_t j = i, cp = 0;
        int has_alpha = 0;
        while (j < L && !is_ws((unsigned char)text[j])) {
            unsigned char ch = (unsigned char)text[j];
            cp += (ch & 0xC0) != 0x80;
            has_alpha |= is_alpha_byte(ch);
            symbols += ch == '#';
            if (ch == '.' && j + 2 < L && text[j + 1] == '.' && text[j + 2] == '.') {
                symbols++;
                j += 2;
            } else if (ch == 0xE2 && j + 2 < L && (unsigned char)text[j + 1] == 0x80 &&
                       (unsigned char)text[j + 2] == 0xA6) {
                symbols++; /* U+2026 … */
            }
            j++;
        }
        if (grow(s, nw + 1))
            return FILTER_ENOMEM;
        s->h[nw] = hash_lower(text + i, j - i);
        s->wl[nw] = (uint32_t)cp;
        nw++;
        wchars += cp;
        alpha += has_alpha;
        stop += is_stop_word(text + i, j - i);
        i = j;
    }
    /* repetition (Gopher), first as RefinedWeb does */
    if (ON(FILT_DUP_LINES) || ON(FILT_DUP_LINE_CHARS)) {
        double f, cf;
        if (dup_units(text, L, 1, s, &f, &cf))
            return FILTER_ENOMEM;
        if (ON(FILT_DUP_LINES) && f > c->max_dup_lines)
            return FILT_DUP_LINES;
        if (ON(FILT_DUP_LINE_CHARS) && cf > c->max_dup_line_chars)
            return FILT_DUP_LINE_CHARS;
    }
    if (ON(FILT_DUP_PARAGRAPHS) || ON(FILT_DUP_PARAGRAPH_CHARS)) {
        double f, cf;
        if (dup_units(text, L, 2, s, &f, &cf))
            return FILTER_ENOMEM;
        if (ON(FILT_DUP_PARAGRAPHS) && f > c->max_dup_paragraphs)
            return FILT_DUP_PARAGRAPHS;
        if (ON(FILT_DUP_PARAGRAPH_CHARS) && cf > c->max_dup_paragraph_chars)
            return FILT_DUP_PARAGRAPH_CHARS;
    }
    if (ON(FILT_TOP_NGRAM) && wchars > 0) {
        for (int n = 2; n <= 4; n++) {
            if (nw < (size_t)n)
                break;
            size_t mask = tab_reset(s, nw);
            if (!mask)
                return FILTER_ENOMEM;
            uint64_t best = 0;
            size_t best_at = 0;
            for (size_t k = 0; k + (size_t)n <= nw; k++) {
                uint64_t cnt = tab_add(s->tab, mask, ngram_hash(s->h + k, (size_t)n));
                if (cnt > best) {
                    best = cnt;
                    best_at = k;
                }
            }
            if (best > 1) {
                size_t gl = 0;
                for (int q = 0; q < n; q++)
                    gl += s->wl[best_at + (size_t)q];
                if ((double)(gl * best) / (double)wchars > c->max_top_ngram[n - 2])
                    return FILT_TOP_NGRAM;
            }
        }
    }
    if (ON(FILT_DUP_NGRAM) && wchars > 0) {
        for (int n = 5; n <= 10; n++) {
            if (nw < (size_t)n)
                break;
            size_t mask = tab_reset(s, nw);
            if (!mask)
                return FILTER_ENOMEM;
            memset(s->mark, 0, nw);
            for (size_t k = 0; k + (size_t)n <= nw; k++)
                if (tab_add(s->tab, mask, ngram_hash(s->h + k, (size_t)n)) > 1)
                    memset(s->mark + k, 1, (size_t)n);
            size_t dc = 0;
            for (size_t k = 0; k < nw; k++)
                dc += s->mark[k] ? s->wl[k] : 0;
            if ((double)dc / (double)wchars > c->max_dup_ngram[n - 5])
                return FILT_DUP_NGRAM;
        }
    }
    /* document-wise (Gopher quality) */
    if (ON(FILT_WORD_COUNT) && ((long)nw < c->min_words || (long)nw > c->max_words))
        return FILT_WORD_COUNT;
    if (ON(FILT_MEAN_WORD_LENGTH) && nw > 0) {
        double m = (double)wchars / (double)nw;
        if (m < c->min_mean_word_len || m > c->max_mean_word_len)
            return FILT_MEAN_WORD_LENGTH;
    }
    if (ON(FILT_SYMBOL_RATIO) && nw > 0 && (double)symbols / (double)nw > c->max_symbol_ratio)
        return FILT_SYMBOL_RATIO;
    if (ON(FILT_BULLET_LINES) || ON(FILT_ELLIPSIS_LINES)) {
        size_t lines = 0, bullets = 0, ell = 0;
        i = 0;
        text_unit u;
        while (next_unit(text, L, 1, &i, &u)) {
            size_t a = u.a, b = u.b;
            if (b > a) {
                lines++;
                const unsigned char *q = (const unsigned char *)text + a;
                size_t ln = b - a;
                bullets += q[0] == '-' || q[0] == '*' ||
                           (ln >= 3 && q[0] == 0xE2 && q[1] == 0x80 && q[2] == 0xA2) || /* • */
                           (ln >= 3 && q[0] == 0xE2 && q[1] == 0x80 && q[2] == 0xA3) || /* ‣ */
                           (ln >= 3 && q[0] == 0xE2 && q[1] == 0x97 && q[2] == 0x8F);   /* ● */
                ell += (ln >= 3 && !memcmp(q + ln - 3, "...", 3)) ||
                       (ln >= 3 && !memcmp(q + ln - 3, "\xE2\x80\xA6", 3));
            }
        }
        if (lines > 0 && ON(FILT_BULLET_LINES) &&
            (double)bullets / (double)lines > c->max_bullet_lines)
            return FILT_BULLET_LINES;
        if (lines > 0 && ON(FILT_ELLIPSIS_LINES) &&
            (double)ell / (double)lines > c->max_ellipsis_lines)
            return FILT_ELLIPSIS_LINES;
    }
    if (ON(FILT_ALPHA_WORDS) && nw > 0 && (double)alpha / (double)nw < c->min_alpha_words)
        return FILT_ALPHA_WORDS;
    if (ON(FILT_STOP_WORDS) && lang && !strcmp(lang, "en") && (long)stop < c->min_stop_words)
        return FILT_STOP_WORDS;
    if (ON(FILT_LINE_CORRECTIONS) && line_corrections(c, text, len, nw))
        return FILT_LINE_CORRECTIONS;
    return FILTER_KEEP;
}
