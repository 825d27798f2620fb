/*
 * pretok.c - GPT-2 pre-tokeniser without a regex engine (see pretok.h).
 *
 * ASCII goes through a 128-entry class table; other code points are decoded
 * strictly and classified by utf8proc's general category. The piece rules are
 * written out in pretok_next() in the pattern's alternation order.
 */
#include "data/pretok.h"

#include <string.h>

#include <utf8proc.h>

/* Class of each ASCII byte: letters, digits, the six ASCII White_Space
 * characters (\t \n \v \f \r and space); all else is "other". */
static const uint8_t ascii_class[128] = {
#define O PRETOK_OTHER
#define L PRETOK_LETTER
#define N PRETOK_NUMBER
#define S PRETOK_SPACE
    O, O, O, O, O, O, O, O, O, S, S, S, S, S, O, O, /* 00-0f */
    O, O, O, O, O, O, O, O, O, O, O, O, O, O, O, O, /* 10-1f */
    S, O, O, O, O, O, O, O, O, O, O, O, O, O, O, O, /* 20-2f */
    N, N, N, N, N, N, N, N, N, N, O, O, O, O, O, O, /* 30-3f */
    O, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, /* 40-4f */
    L, L, L, L, L, L, L, L, L, L, L, O, O, O, O, O, /* 50-5f */
    O, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L, /* 60-6f */
    L, L, L, L, L, L, L, L, L, L, L, O, O, O, O, O, /* 70-7f */
#undef O
#undef L
#undef N
#undef S
};

size_t pretok_utf8(const uint8_t *s, size_t n, size_t i, uint32_t *cp)
{
    uint8_t b0 = s[i];
    if (b0 < 0x80) {
        *cp = b0;
        return 1;
    }
    size_t len;
    uint32_t c, min;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        len = 2; c = b0 & 0x1F; min = 0x80;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        len = 3; c = b0 & 0x0F; min = 0x800;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        len = 4; c = b0 & 0x07; min = 0x10000;
    } else {
        return 0;
    }
    if (n - i < len)
        return 0;
    for (size_t k = 1; k < len; k++) {
        uint8_t b = s[i + k];
        if ((b & 0xC0) != 0x80)
            return 0;
        c = (c << 6) | (b & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return 0;
    *cp = c;
    return len;
}

/* Length of the maximal subpart at s[i] (the WHATWG / Unicode "best practice" unit of
 * replacement): the longest prefix of a well-formed sequence, at least 1 byte. Returns it
 * with *ok = 1 when it is a whole well-formed sequence. */
static size_t utf8_unit(const uint8_t *s, size_t n, size_t i, int *ok)
{
    uint8_t b0 = s[i], lo = 0x80, hi = 0xBF;
    size_t need;
    *ok = 1;
    if (b0 < 0x80)
        return 1;
    if (b0 >= 0xC2 && b0 <= 0xDF)
        need = 1;
    else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 2;
        lo = b0 == 0xE0 ? 0xA0 : 0x80; /* no overlong forms */
        hi = b0 == 0xED ? 0x9F : 0xBF; /* no surrogates */
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 3;
        lo = b0 == 0xF0 ? 0x90 : 0x80; /* no overlong forms */
        hi = b0 == 0xF4 ? 0x8F : 0xBF; /* nothing past U+10FFFF */
    } else {
        *ok = 0;
        return 1;
    }
    size_t k = 1;
    for (; k <= need && i + k < n; k++) {
        if (s[i + k] < lo || s[i + k] > hi)
            break;
        lo = 0x80;
        hi = 0xBF;
    }
    *ok = k == need + 1;
    return k;
}

size_t pretok_utf8_valid_len(const uint8_t *s, size_t n)
{
    size_t i = 0;
    int ok;
    while (i < n) {
        while (i < n && s[i] < 0x80)
            i++;
        if (i == n)
            break;
        size_t k = utf8_unit(s, n, i, &ok);
        if (!ok)
            return i;
        i += k;
    }
    return n;
}

size_t pretok_utf8_lossy(const uint8_t *s, size_t n, uint8_t *out, size_t *replaced)
{
    size_t i = 0, o = 0;
    int ok;
    *replaced = 0;
    while (i < n) {
        size_t k = utf8_unit(s, n, i, &ok);
        if (ok) {
            memcpy(out + o, s + i, k);
            o += k;
        } else {
            out[o++] = 0xEF; /* U+FFFD */
            out[o++] = 0xBF;
            out[o++] = 0xBD;
            *replaced += k;
        }
        i += k;
    }
    return o;
}

static int unicode_class(uint32_t cp)
{
    if (cp == 0x85)
        return PRETOK_SPACE;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
        return PRETOK_LETTER;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return PRETOK_NUMBER;
    case UTF8PROC_CATEGORY_ZS: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP:
        return PRETOK_SPACE;
    default:
        return PRETOK_OTHER;
    }
}

size_t pretok_char(const uint8_t *s, size_t n, size_t i, int *cls)
{
    if (s[i] < 0x80) {
        *cls = ascii_class[s[i]];
        return 1;
    }
    uint32_t cp;
    size_t len = pretok_utf8(s, n, i, &cp);
    if (len == 0) {
        *cls = PRETOK_OTHER;
        return 1;
    }
    *cls = unicode_class(cp);
    return len;
}

/* End of the maximal run of class cls starting at i. */
static size_t run_end(const uint8_t *s, size_t n, size_t i, int cls)
{
    while (i < n) {
        if (s[i] < 0x80) {              /* fast path: ASCII */
            if (ascii_class[s[i]] != cls)
                break;
            i++;
            continue;
        }
        int c;
        size_t len = pretok_char(s, n, i, &c);
        if (c != cls)
            break;
        i += len;
    }
    return i;
}

size_t pretok_next(const uint8_t *s, size_t n, size_t i)
{
    /* 's 't 're 've 'm 'll 'd */
    if (s[i] == '\'' && i + 1 < n) {
        uint8_t a = s[i + 1];
        if (a == 's' || a == 't' || a == 'm' || a == 'd')
            return i + 2;
        if (i + 2 < n) {
            uint8_t b = s[i + 2];
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
                return i + 3;
        }
    }
    int c0;
    size_t len0 = pretok_char(s, n, i, &c0);
    /* ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+' with the space prefix */
    if (s[i] == ' ' && i + 1 < n) {
        int c1;
        size_t len1 = pretok_char(s, n, i + 1, &c1);
        if (c1 != PRETOK_SPACE)
            return run_end(s, n, i + 1 + len1, c1);
    }
    if (c0 != PRETOK_SPACE)
        return run_end(s, n, i + len0, c0);
    /* '\s+(?!\S)' then '\s+' */
    size_t j = i, last = i, k = 0;
    while (j < n) {
        int c;
        size_t len = pretok_char(s, n, j, &c);
        if (c != PRETOK_SPACE)
            break;
        last = j;
        j += len;
        k++;
    }
    if (j == n || k == 1)
        return j;
    return last;
}
