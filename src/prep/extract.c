/*
 * extract.c - see extract.h. Two walks over gumbo's tree: the first is
 * implicit in dens() (text and link characters below a node, computed on
 * demand at each block element; pages are small, so the repeat cost is
 * low), the second emits text with a pending-break state: 0 none, 1 line,
 * 2 paragraph, so breaks never pile up past two newlines.
 */
#include "prep/extract.h"

#include <ctype.h>
#include <gumbo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Elements nested deeper than this are ignored (bounded recursion on
 * hostile pages; real pages stay far below). */
#define WALK_MAX_DEPTH 512

grit_err prep_buf_reserve(prep_buf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return GRIT_OK;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p)
        return GRIT_ENOMEM;
    b->p = p;
    b->cap = cap;
    return GRIT_OK;
}

grit_err prep_buf_put(prep_buf *b, const char *s, size_t n)
{
    if (prep_buf_reserve(b, n) != GRIT_OK)
        return GRIT_ENOMEM;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return GRIT_OK;
}

void prep_buf_free(prep_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

typedef struct ex {
    prep_buf *out;
    int pending;  /* 0 none, 1 newline, 2 blank line */
    int space;    /* a space is pending inside the block */
    double max_ld;
    grit_err err;
} ex;

static int is_dropped_tag(GumboTag t)
{
    switch (t) {
    case GUMBO_TAG_SCRIPT: case GUMBO_TAG_STYLE: case GUMBO_TAG_NOSCRIPT:
    case GUMBO_TAG_TEMPLATE: case GUMBO_TAG_SVG: case GUMBO_TAG_MATH:
    case GUMBO_TAG_IFRAME: case GUMBO_TAG_OBJECT: case GUMBO_TAG_HEAD:
    case GUMBO_TAG_NAV: case GUMBO_TAG_HEADER: case GUMBO_TAG_FOOTER:
    case GUMBO_TAG_ASIDE: case GUMBO_TAG_FORM: case GUMBO_TAG_BUTTON:
    case GUMBO_TAG_SELECT: case GUMBO_TAG_TEXTAREA: case GUMBO_TAG_MENU:
    case GUMBO_TAG_INPUT: case GUMBO_TAG_IMG: case GUMBO_TAG_CANVAS:
    case GUMBO_TAG_VIDEO: case GUMBO_TAG_AUDIO: case GUMBO_TAG_EMBED:
        return 1;
    default:
        return 0;
    }
}

/* 2: paragraph-level block (blank line around), 1: line-level block, 0 inline. */
static int block_kind(GumboTag t)
{
    switch (t) {
    case GUMBO_TAG_P: case GUMBO_TAG_H1: case GUMBO_TAG_H2: case GUMBO_TAG_H3:
    case GUMBO_TAG_H4: case GUMBO_TAG_H5: case GUMBO_TAG_H6: case GUMBO_TAG_PRE:
    case GUMBO_TAG_BLOCKQUOTE: case GUMBO_TAG_TABLE: case GUMBO_TAG_UL: case GUMBO_TAG_OL:
    case GUMBO_TAG_DL: case GUMBO_TAG_SECTION: case GUMBO_TAG_ARTICLE: case GUMBO_TAG_FIGURE:
    case GUMBO_TAG_HR:
        return 2;
    case GUMBO_TAG_DIV: case GUMBO_TAG_LI: case GUMBO_TAG_TR: case GUMBO_TAG_DT:
    case GUMBO_TAG_DD: case GUMBO_TAG_BR: case GUMBO_TAG_MAIN: case GUMBO_TAG_BODY:
    case GUMBO_TAG_CAPTION: case GUMBO_TAG_FIGCAPTION: case GUMBO_TAG_ADDRESS:
    case GUMBO_TAG_CENTER: case GUMBO_TAG_DETAILS: case GUMBO_TAG_SUMMARY:
    case GUMBO_TAG_TBODY: case GUMBO_TAG_THEAD: case GUMBO_TAG_TFOOT:
        return 1;
    default:
        return 0;
    }
}

/* Does a class/id value name boilerplate? Matched per space-separated word,
 * on the word or its '-'/'_'-separated parts. */
static int boiler_word(const char *w, size_t n)
{
    static const char *const words[] = {
        "nav", "navbar", "navigation", "menu", "breadcrumb", "breadcrumbs", "footer",
        "header", "sidebar", "banner", "cookie", "cookies", "docnav", "navheader",
        "navfooter", "skip", "share", "social", "related", "comments", "advert", "ads",
        "toc", "masthead", "pagination", "copyright", "newsletter", "popup", "modal",
        NULL};
    for (int i = 0; words[i]; i++)
        if (strlen(words[i]) == n && !strncasecmp(words[i], w, n))
            return 1;
    return 0;
}

static int boiler_attr(const char *v)
{
    if (!v)
        return 0;
    const char *p = v;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == '-' || *p == '_')
            p++;
        size_t n = strcspn(p, " \t-_");
        if (n && boiler_word(p, n))
            return 1;
        /* the whole space-separated word too (e.g. "navheader") */
        p += n;
    }
    return 0;
}

static int is_hidden(const GumboElement *e)
{
    if (gumbo_get_attribute(&e->attributes, "hidden"))
        return 1;
    GumboAttribute *a = gumbo_get_attribute(&e->attributes, "aria-hidden");
    if (a && !strcasecmp(a->value, "true"))
        return 1;
    a = gumbo_get_attribute(&e->attributes, "style");
    if (a && (strstr(a->value, "display:none") || strstr(a->value, "display: none")))
        return 1;
    return 0;
}

static int skip_element(const GumboNode *n)
{
    const GumboElement *e = &n->v.element;
    if (is_dropped_tag(e->tag) || is_hidden(e))
        return 1;
    GumboAttribute *c = gumbo_get_attribute(&e->attributes, "class");
    GumboAttribute *id = gumbo_get_attribute(&e->attributes, "id");
    /* the body and html elements carry site-wide classes: never drop them */
    if (e->tag == GUMBO_TAG_BODY || e->tag == GUMBO_TAG_HTML)
        return 0;
    return boiler_attr(c ? c->value : NULL) || boiler_attr(id ? id->value : NULL);
}

static size_t text_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += !(*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r') &&
             (((unsigned char)*s & 0xC0) != 0x80);
    return n;
}

/* Visible characters below n, and those inside links. */
static void dens(const GumboNode *n, int in_link, size_t *text, size_t *link, int depth)
{
    if (n->type == GUMBO_NODE_TEXT || n->type == GUMBO_NODE_CDATA) {
        size_t c = text_chars(n->v.text.text);
        *text += c;
        if (in_link)
            *link += c;
        return;
    }
    if (n->type != GUMBO_NODE_ELEMENT || skip_element(n) || depth > WALK_MAX_DEPTH)
        return;
    int l = in_link || n->v.element.tag == GUMBO_TAG_A;
    const GumboVector *ch = &n->v.element.children;
    for (unsigned i = 0; i < ch->length; i++)
        dens(ch->data[i], l, text, link, depth + 1);
}

static void brk(ex *x, int kind)
{
    if (kind > x->pending)
        x->pending = kind;
    x->space = 0;
}

static void put(ex *x, const char *s, size_t n)
{
    if (x->err == GRIT_OK)
        x->err = prep_buf_put(x->out, s, n);
}

static void emit_text(ex *x, const char *s, int pre)
{
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        int ws = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
        if (pre && c == '\n') {
            brk(x, 1);
            continue;
        }
        if (ws) {
            x->space = 1;
            continue;
        }
        /* U+00A0 no-break space counts as space */
        if (c == 0xC2 && (unsigned char)p[1] == 0xA0) {
            x->space = 1;
            p++;
            continue;
        }
        if (x->out->len > 0) {
            if (x->pending == 2)
                put(x, "\n\n", 2);
            else if (x->pending == 1)
                put(x, "\n", 1);
            else if (x->space)
                put(x, " ", 1);
        }
        x->pending = 0;
        x->space = 0;
        size_t run = 1;
        while (p[run] && !(p[run] == ' ' || p[run] == '\t' || p[run] == '\n' || p[run] == '\r' ||
                           p[run] == '\f' || ((unsigned char)p[run] == 0xC2 &&
                                              (unsigned char)p[run + 1] == 0xA0)))
            run++;
        put(x, p, run);
        p += run - 1;
    }
}

static void walk(ex *x, const GumboNode *n, int pre, int depth)
{
    if (depth > WALK_MAX_DEPTH)
        return;
    if (n->type == GUMBO_NODE_TEXT || n->type == GUMBO_NODE_CDATA ||
        (n->type == GUMBO_NODE_WHITESPACE && !pre)) {
        emit_text(x, n->v.text.text, pre);
        return;
    }
    if (n->type == GUMBO_NODE_WHITESPACE) {
        emit_text(x, n->v.text.text, pre);
        return;
    }
    if (n->type != GUMBO_NODE_ELEMENT && n->type != GUMBO_NODE_DOCUMENT &&
        n->type != GUMBO_NODE_TEMPLATE)
        return;
    const GumboVector *ch;
    int kind = 0;
    if (n->type == GUMBO_NODE_DOCUMENT) {
        ch = &n->v.document.children;
    } else {
        if (skip_element(n))
            return;
        GumboTag t = n->v.element.tag;
        kind = block_kind(t);
        if (kind && t != GUMBO_TAG_BODY && t != GUMBO_TAG_BR && t != GUMBO_TAG_HR) {
            size_t text = 0, link = 0;
            dens(n, 0, &text, &link, depth);
            if (text == 0 || (double)link > x->max_ld * (double)text)
                return;
        }
        if (t == GUMBO_TAG_TD || t == GUMBO_TAG_TH)
            x->space = 1;
        if (t == GUMBO_TAG_PRE)
            pre = 1;
        ch = &n->v.element.children;
    }
    if (kind)
        brk(x, kind);
    for (unsigned i = 0; i < ch->length; i++)
        walk(x, ch->data[i], pre, depth + 1);
    if (kind)
        brk(x, kind);
}

/* Tags that never open a level: void elements, and elements whose end tag is
 * optional (the parser closes them implicitly, so repeating them does not nest). */
static int flat_tag(const char *t, size_t n)
{
    static const char *const flat[] = {
        "area", "base", "basefont", "bgsound", "br", "col", "embed", "frame", "hr", "img",
        "input", "keygen", "link", "meta", "param", "source", "track", "wbr", "p", "li",
        "dt", "dd", "option", "optgroup", "tr", "td", "th", "thead", "tbody", "tfoot",
        "colgroup", "caption", "rb", "rt", "rtc", "rp", "html", "head", "body", NULL};
    for (int i = 0; flat[i]; i++)
        if (strlen(flat[i]) == n && !strncasecmp(flat[i], t, n))
            return 1;
    return 0;
}

/* Raw-text elements: their content is not markup (up to the matching end tag). */
static int raw_tag(const char *t, size_t n)
{
    static const char *const raw[] = {"script", "style", "textarea", "title", "xmp", NULL};
    for (int i = 0; raw[i]; i++)
        if (strlen(raw[i]) == n && !strncasecmp(raw[i], t, n))
            return 1;
    return 0;
}

static const char *find_ci(const char *p, const char *end, const char *needle)
{
    size_t n = strlen(needle);
    for (; p + n <= end; p++)
        if (!strncasecmp(p, needle, n))
            return p;
    return NULL;
}

int extract_depth(const char *html, size_t len, int cap)
{
    const char *p = html, *end = html + len;
    int depth = 0, max = 0;
    while (p < end && (p = memchr(p, '<', (size_t)(end - p)))) {
        p++;
        if (p < end && *p == '!') { /* comment, doctype, CDATA */
            const char *q = p + 2 < end && p[1] == '-' && p[2] == '-' ? find_ci(p + 3, end, "-->")
                                                                     : memchr(p, '>', (size_t)(end - p));
            p = q ? q + 1 : end;
            continue;
        }
        int closing = p < end && *p == '/';
        const char *t = p + closing, *e = t;
        while (e < end && (isalnum((unsigned char)*e) || *e == '-' || *e == ':'))
            e++;
        if (e == t || !isalpha((unsigned char)*t))
            continue; /* a '<' that starts no tag is text */
        const char *gt = memchr(e, '>', (size_t)(end - e));
        if (!gt)
            break;
        size_t n = (size_t)(e - t);
        if (closing) {
            if (!flat_tag(t, n) && depth > 0)
                depth--;
        } else if (raw_tag(t, n)) {
            char close[16];
            snprintf(close, sizeof close, "</%.*s", (int)n, t);
            const char *q = find_ci(gt + 1, end, close);
            p = q ? q : end;
            continue;
        } else if (!flat_tag(t, n) && gt[-1] != '/' && ++depth > max) {
            max = depth;
            if (max > cap)
                return cap + 1;
        }
        p = gt + 1;
    }
    return max;
}

const char *extract_refusal(const char *html, size_t len, const extract_opts *o)
{
    size_t max_bytes = o && o->max_bytes ? o->max_bytes : EXTRACT_MAX_BYTES;
    int max_depth = o && o->max_depth > 0 ? o->max_depth : EXTRACT_MAX_DEPTH;
    if (len > max_bytes)
        return "html_too_large";
    if (extract_depth(html, len, max_depth) > max_depth)
        return "html_too_deep";
    return NULL;
}

grit_err extract_html(const char *html, size_t len, const extract_opts *o, prep_buf *out)
{
    out->len = 0;
    if (prep_buf_reserve(out, 0) != GRIT_OK)
        return GRIT_ENOMEM;
    out->p[0] = 0;
    if (extract_refusal(html, len, o))
        return GRIT_OK;
    GumboOptions opt = kGumboDefaultOptions;
    opt.max_errors = 0; /* parse errors are not needed: do not record them */
    GumboOutput *g = gumbo_parse_with_options(&opt, html, len);
    if (!g)
        return GRIT_ENOMEM;
    ex x = {.out = out, .max_ld = o && o->max_link_density > 0 ? o->max_link_density : 0.5};
    walk(&x, g->document, 0, 0);
    gumbo_destroy_output(&opt, g);
    return x.err;
}
