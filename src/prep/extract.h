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
} extract_opts;

/* Extracts html[0..len) into out (reset first, NUL-terminated). Errors:
 * GRIT_ENOMEM only; broken HTML is parsed as browsers do. */
grit_err extract_html(const char *html, size_t len, const extract_opts *o, prep_buf *out);

#endif
