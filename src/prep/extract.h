/*
 * extract.h - main text from an HTML page (gumbo, a conforming HTML5
 * parser).
 *
 * Kept: text of paragraphs, headings, list items, table cells, pre blocks,
 * definition lists. Dropped, with everything below them: script, style,
 * noscript, template, svg, math, iframe, object, head, nav, header, footer,
 * aside, form, button, select, textarea, menu; elements whose class or id
 * names boilerplate (nav, navbar, menu, breadcrumb, footer, header, sidebar,
 * banner, cookie, docnav, navheader, navfooter, skip, share, social,
 * related, comments, advert, toc); hidden elements (hidden attribute,
 * aria-hidden="true"); and block elements with a low text density: where
 * link text is more than `max_link_density` of the block's text (menus,
 * tables of contents, link lists).
 *
 * Output: block elements separated by a newline, paragraphs and headings by
 * a blank line; runs of white space inside a block collapse to one space;
 * never more than two consecutive newlines; no leading or trailing white
 * space.
 *
 * Guards: an HTML5 parser keeps a stack of open elements and scans it for
 * most tags, so a page of 200,000 nested <div>s takes minutes. A page larger
 * than `max_bytes`, or whose elements would nest deeper than `max_depth`
 * (counted by a linear pre-scan before parsing), is not parsed: it gives no
 * text, and the caller asks extract_refusal for the reason to count it under.
 *
 * Ownership: the caller owns `out` (a growable buffer, reused across calls).
 */
#ifndef GRIT_PREP_EXTRACT_H
#define GRIT_PREP_EXTRACT_H
#include <stddef.h>
#include "core/error.h"

typedef struct prep_buf {
    char *p;
    size_t len, cap;
} prep_buf;

grit_err prep_buf_reserve(prep_buf *b, size_t extra);
grit_err prep_buf_put(prep_buf *b, const char *s, size_t n);
void prep_buf_free(prep_buf *b);

typedef struct extract_opts {
    double max_link_density; /* 0..1, default 0.5 */
    int max_depth;           /* element nesting, default EXTRACT_MAX_DEPTH */
    size_t max_bytes;        /* page size, default EXTRACT_MAX_BYTES */
} extract_opts;

#define EXTRACT_MAX_DEPTH 1000
#define EXTRACT_MAX_BYTES ((size_t)16 << 20)

/* Extracts html[0..len) into out (reset first, NUL-terminated); a page the
 * guards refuse gives empty text (extract_refusal says why). Errors:
 * GRIT_ENOMEM only; broken HTML is parsed as browsers do. */
grit_err extract_html(const char *html, size_t len, const extract_opts *o, prep_buf *out);

/* Why the guards refuse html[0..len): "html_too_large", "html_too_deep", or NULL. */
const char *extract_refusal(const char *html, size_t len, const extract_opts *o);

/* The deepest nesting of elements html[0..len) can open, counted in one pass:
 * start tags open, end tags close; void elements, self-closing tags, elements
 * whose end tag is optional (p, li, td, ...), comments, declarations and the
 * contents of script/style/textarea/title are not counted. An upper bound in
 * practice for what a parser's open-element stack reaches; stops counting
 * past `cap` and returns cap + 1. */
int extract_depth(const char *html, size_t len, int cap);

#endif
