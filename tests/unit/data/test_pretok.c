/* test_pretok.c - the GPT-2 pre-tokeniser's splits on hand-checked cases. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../check.h"
#include "core/error.h"
#include "data/pretok.h"

/* Splits text and joins the pieces with '|'; compares with want. */
static void expect(const char *text, size_t n, const char *want)
{
    char got[1024];
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t e = pretok_next((const uint8_t *)text, n, i);
        if (e <= i || e > n) {
            fprintf(stderr, "pretok_next(%zu) = %zu: no progress\n", i, e);
            check_failures++;
            return;
        }
        if (i > 0)
            got[o++] = '|';
        memcpy(got + o, text + i, e - i);
        o += e - i;
        i = e;
    }
    got[o] = 0;
    if (strcmp(got, want) != 0) {
        fprintf(stderr, "split mismatch\n  got:  [%s]\n  want: [%s]\n", got, want);
        check_failures++;
    }
}

#define EXPECT(text, want) expect(text, sizeof(text) - 1, want)

int main(void)
{
    EXPECT("Hello world", "Hello| world");
    EXPECT("it's we've I'm you'll he'd they're don't", "it|'s| we|'ve| I|'m| you|'ll| he|'d| they|'re| don|'t");
    EXPECT("IT'S", "IT|'|S");                       /* contractions are case-sensitive */
    EXPECT("a  b", "a| | b");                       /* \s+(?!\S) leaves one space */
    EXPECT("a   b", "a|  | b");
    EXPECT("a \n b", "a| \n| b");
    EXPECT("a\nb", "a|\n|b");                       /* a lone non-space whitespace */
    EXPECT("end   ", "end|   ");                    /* a run at the end is taken whole */
    EXPECT("x 123 4567", "x| 123| 4567");
    EXPECT("hi!!! ok?", "hi|!!!| ok|?");
    EXPECT(" 's", " '|s");
    EXPECT("\xef\xbb\xbfword", "\xef\xbb\xbf|word");          /* U+FEFF is not a space */
    EXPECT("a\xc2\x85 b", "a|\xc2\x85| b");                   /* U+0085 is a space */
    EXPECT("a\xc2\xa0\xc2\xa0 b", "a|\xc2\xa0\xc2\xa0| b");   /* NBSP run */
    EXPECT("\xe6\x9d\xb1\xe4\xba\xac is", "\xe6\x9d\xb1\xe4\xba\xac| is");
    EXPECT("e\xcc\x81t\xc3\xa9", "e|\xcc\x81|t\xc3\xa9");    /* combining mark is Mn: other */
    EXPECT("ab\xff\xfe!c", "ab|\xff\xfe!|c");                 /* invalid bytes join punctuation */
    EXPECT(" \xff", " \xff");
    EXPECT("\xe2\x82", "\xe2\x82");                           /* truncated sequence */

    uint32_t cp;
    CHECK_EQ_LL(pretok_utf8((const uint8_t *)"\xc0\xaf", 2, 0, &cp), 0);         /* overlong */
    CHECK_EQ_LL(pretok_utf8((const uint8_t *)"\xed\xa0\x80", 3, 0, &cp), 0);     /* surrogate */
    CHECK_EQ_LL(pretok_utf8((const uint8_t *)"\xf4\x90\x80\x80", 4, 0, &cp), 0); /* > U+10FFFF */
    CHECK_EQ_LL(pretok_utf8((const uint8_t *)"\xf0\x9f\x98\x80", 4, 0, &cp), 4);
    CHECK_EQ_LL(cp, 0x1F600);
    return CHECK_RESULT();
}
