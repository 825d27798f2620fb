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
    free(html);
    well_formed();
    return 0;
}

static void html(const char *s)
{
    CHECK_INT(extract_html(s, strlen(s), NULL, &tx), GRIT_OK);
}

int main(void)
{
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
