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

/* Lossy UTF-8 decoding (pretok_utf8_lossy) must replace exactly what WHATWG's TextDecoder
 * and Python's errors="replace" replace: one U+FFFD per maximal subpart. `want` uses '?'
 * for U+FFFD (none of the inputs hold a real '?'). */
static void lossy(const char *in, size_t n, const char *want, size_t want_replaced)
{
    uint8_t out[256];
    char got[256];
    size_t rep, len = pretok_utf8_lossy((const uint8_t *)in, n, out, &rep), k = 0;
    for (size_t i = 0; i < len; k++) {
        if (i + 2 < len && out[i] == 0xEF && out[i + 1] == 0xBF && out[i + 2] == 0xBD) {
            got[k] = '?';
            i += 3;
        } else {
            got[k] = (char)out[i++];
        }
    }
    got[k] = 0;
    if (strcmp(got, want) != 0 || rep != want_replaced) {
        fprintf(stderr, "lossy: got \"%s\" (%zu replaced), want \"%s\" (%zu)\n", got, rep, want,
                want_replaced);
        check_failures++;
    }
    CHECK_INT(pretok_utf8_valid_len((const uint8_t *)in, n) == n, want_replaced == 0);
}

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
    /* invalid UTF-8 -> U+FFFD per maximal subpart */
    lossy("world\xffhello", 11, "world?hello", 1);
    lossy("a\xc0\xaf" "b", 4, "a??b", 2);          /* C0, C1 never start a sequence */
    lossy("\xed\xa0\x80", 3, "???", 3);          /* a surrogate: ED takes 80-9F only */
    lossy("\xf4\x90\x80\x80", 4, "????", 4);    /* past U+10FFFF */
    lossy("\xe0\x80\x80", 3, "???", 3);          /* overlong: E0 takes A0-BF only */
    lossy("\xe2\x82", 2, "?", 2);                 /* truncated at the end: one unit */
    lossy("\xe2\x82z", 3, "?z", 2);
    lossy("\xf0\x9f\x98 x", 5, "? x", 3);
    lossy("\xf8\x88\x80\x80\x80", 5, "?????", 5);
    lossy("\x80\x80", 2, "??", 2);
    lossy("ok \xc3\xa9 \xf0\x9f\x98\x80", 10, "ok \xc3\xa9 \xf0\x9f\x98\x80", 0);
    lossy("\xef\xbf\xbd", 3, "?", 0);             /* a real U+FFFD is valid, not replaced */
    lossy("", 0, "", 0);
    return CHECK_RESULT();
}
