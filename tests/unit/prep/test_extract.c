/*
 * test_extract.c - HTML main-text extraction (src/prep/extract.c).
 *
 * Real pages: three Debian pages from two generators (publican for the
 * Debian Administrator's Handbook, DocBook XSL for the installation guide),
 * in English and German, against hand-made expectations read off the
 * pages: body text and headings kept (with inline markup joined and source
 * line breaks collapsed), navigation (prev/next/home bars, the table of
 * contents, banners) gone. Then small synthetic pages for each rule.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "core/fsutil.h"
#include "prep/extract.h"

#define HB "/usr/share/doc/debian-handbook/html/"
#define IG "/usr/share/doc/installation-guide-amd64/"

static prep_buf tx;

static int has(const char *s)
{
    return strstr(tx.p, s) != NULL;
}

#define KEEP(s)                                                                      \
    do {                                                                             \
        if (!has(s)) {                                                               \
            fprintf(stderr, "%s:%d: missing body text \"%s\"\n", __FILE__, __LINE__, s); \
            check_failures++;                                                        \
        }                                                                            \
    } while (0)
#define DROP(s)                                                                      \
    do {                                                                             \
        if (has(s)) {                                                                \
            fprintf(stderr, "%s:%d: boilerplate kept: \"%s\"\n", __FILE__, __LINE__, s); \
            check_failures++;                                                        \
        }                                                                            \
    } while (0)

static void well_formed(void)
{
    CHECK(tx.len > 0);
    CHECK(strstr(tx.p, "\n\n\n") == NULL);
    CHECK(strstr(tx.p, "  ") == NULL);
    CHECK(strstr(tx.p, " \n") == NULL);
    CHECK(tx.p[0] != '\n' && tx.p[0] != ' ');
    CHECK(tx.p[tx.len - 1] != '\n' && tx.p[tx.len - 1] != ' ');
    CHECK(strlen(tx.p) == tx.len);
}

static int page(const char *path)
{
    char *html = NULL;
    size_t len;
    if (fs_read_all(path, &html, &len) != GRIT_OK) {
        fprintf(stderr, "%s: missing (make deps installs debian-handbook and "
                        "installation-guide-amd64)\n", path);
        return -1;
    }
    CHECK_INT(extract_html(html, len, NULL, &tx), GRIT_OK);
    CHECK(extract_refusal(html, len, NULL) == NULL);
    free(html);
    well_formed();
    return 0;
}

static void html(const char *s)
{
    CHECK_INT(extract_html(s, strlen(s), NULL, &tx), GRIT_OK);
    CHECK(extract_refusal(s, strlen(s), NULL) == NULL);
}

/* n copies of open then one of close, in a fresh buffer */
static char *repeat(const char *open, const char *mid, const char *close, int n)
{
    size_t lo = strlen(open), lm = strlen(mid), lc = strlen(close);
    char *s = malloc(n * (lo + lc) + lm + 1), *p = s;
    for (int i = 0; i < n; i++, p += lo)
        memcpy(p, open, lo);
    memcpy(p, mid, lm), p += lm;
    for (int i = 0; i < n; i++, p += lc)
        memcpy(p, close, lc);
    *p = 0;
    return s;
}

/* The guards: a page nested deeper than max_depth or larger than max_bytes is refused
 * before the parser sees it (200,000 nested divs took the parser minutes); pages that
 * repeat void or implicitly closed elements are not deep; script content is not markup. */
static void guards(void)
{
    const char *why;
    char *deep = repeat("<div>", "<p>x", "</div>", 200000);
    CHECK_INT(extract_depth(deep, strlen(deep), EXTRACT_MAX_DEPTH), EXTRACT_MAX_DEPTH + 1);
    CHECK_INT(extract_html(deep, strlen(deep), NULL, &tx), GRIT_OK);
    why = extract_refusal(deep, strlen(deep), NULL);
    CHECK(why && !strcmp(why, "html_too_deep"));
    CHECK_INT((int)tx.len, 0);
    free(deep);
    char *ok = repeat("<div>", "<p>deep but fine", "</div>", 900);
    CHECK_INT(extract_depth(ok, strlen(ok), EXTRACT_MAX_DEPTH), 900);
    CHECK_INT(extract_html(ok, strlen(ok), NULL, &tx), GRIT_OK);
    why = extract_refusal(ok, strlen(ok), NULL);
    CHECK(why == NULL); /* parsed (text below the walk's own depth bound is not kept) */
    free(ok);
    ok = repeat("<div>", "<p>deep but fine", "</div>", 400);
    CHECK_INT(extract_html(ok, strlen(ok), NULL, &tx), GRIT_OK);
    CHECK(has("deep but fine"));
    free(ok);
    extract_opts o = {.max_depth = 100};
    ok = repeat("<span>", "x", "</span>", 101);
    CHECK_INT(extract_html(ok, strlen(ok), &o, &tx), GRIT_OK);
    why = extract_refusal(ok, strlen(ok), &o);
    CHECK(why && !strcmp(why, "html_too_deep"));
    free(ok);
    /* flat: unclosed p/li/td, void and self-closing elements, comments, script text */
    char *flat = repeat("<p>a<li>b<br><img src=x><td>c<x-y/><!-- <div><div> -->", "", "", 50000);
    CHECK_INT(extract_depth(flat, strlen(flat), EXTRACT_MAX_DEPTH), 0);
    free(flat);
    const char *scr = "<div><script>for(i=0;i<n;i++) s='<div><div><div>';</script></div>";
    CHECK_INT(extract_depth(scr, strlen(scr), 10), 1);
    const char *mixed = "<DIV><Section><div></DIV></div><div>";
    CHECK_INT(extract_depth(mixed, strlen(mixed), 10), 3);
    extract_opts small = {.max_bytes = 4096};
    char *big = repeat("<p>words ", "", "", 1000);
    CHECK_INT(extract_html(big, strlen(big), &small, &tx), GRIT_OK);
    why = extract_refusal(big, strlen(big), &small);
    CHECK(why && !strcmp(why, "html_too_large"));
    free(big);
}

int main(void)
{
    guards();
    if (page(HB "en-US/sect.apt-get.html"))
        return 1;
    KEEP("6.2. aptitude, apt-get, and apt Commands");
    KEEP("Logic patterns can be combined with other packages to form more complex expressions.");
    KEEP("we can use apt list ?automatic to list all the packages automatically installed");
    DROP("Download the ebook");   /* banner */
    DROP("Prev");                 /* docnav bars, top and bottom */
    DROP("6.3. The apt-cache Command");
    DROP("The Debian Administrator's Handbook");

    if (page(HB "en-US/apt.html"))
        return 1;
    KEEP("Chapter 6. Maintenance and Updates: The APT Tools");
    KEEP("APT is the abbreviation for Advanced Packaging Tool.");
    DROP("6.5. Frontends"); /* only in the chapter's table of contents */
    DROP("Next");

    if (page(HB "de-DE/sect.apt-get.html"))
        return 1;
    KEEP("6.2. aptitude, apt-get und apt Befehle");
    KEEP("6.2.1. Initialisierung");
    DROP("Zurück");
    DROP("Weiter");
    DROP("Das Debian Administrationshandbuch");

    if (page(IG "en/ch06s03.html"))
        return 1;
    KEEP("6.3. Using Individual Components");
    /* source line breaks inside <p> collapse to spaces */
    KEEP("In this section we will describe each installer component in detail. The components "
         "have been grouped into stages");
    DROP("6.2. Components Introduction"); /* navfooter */
    DROP("6.4. Loading Missing Firmware");
    DROP("Chapter 6. Using the Debian Installer"); /* navheader */

    /* synthetic rules */
    html("<html><head><title>T</title><style>p{}</style><script>var x=1;</script></head><body>"
         "<nav><a href=/>Home</a> <a href=/a>About</a></nav>"
         "<header>Site name</header>"
         "<h1>Heading one</h1><p>First   paragraph\n text.</p><p>Second <b>bold</b> text.</p>"
         "<ul><li><a href=1>Link one</a></li><li><a href=2>Link two</a></li></ul>"
         "<div class=\"sidebar-widget\">Widget text</div>"
         "<div hidden>Hidden text</div><div style=\"display: none\">Invisible</div>"
         "<p>A sentence with <a href=x>one link</a> inside a longer paragraph of text.</p>"
         "<pre>line 1\nline 2</pre>"
         "<form>Your email <button>Subscribe</button></form>"
         "<footer>Copyright 2024</footer></body></html>");
    CHECK(strcmp(tx.p, "Heading one\n\nFirst paragraph text.\n\nSecond bold text.\n\n"
                       "A sentence with one link inside a longer paragraph of text.\n\n"
                       "line 1\nline 2") == 0);
    if (check_failures)
        fprintf(stderr, "got: [%s]\n", tx.p);
    /* broken HTML parses as browsers do; empty input gives empty text */
    html("<p>unclosed <b>bold <i>italic</p><p>next");
    CHECK(strcmp(tx.p, "unclosed bold italic\n\nnext") == 0);
    html("");
    CHECK_INT(tx.len, 0);
    prep_buf_free(&tx);
    return check_failures ? 1 : 0;
}
