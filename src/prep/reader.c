/*
 * reader.c - see reader.h. A small buffered layer over zlib's gzFile (which
 * also reads uncompressed files) gives line and block reads; WARC records
 * are parsed header by header, the content read as one block of exactly
 * Content-Length bytes.
 */
#include "prep/reader.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#define RD_BUF (1 << 16)
#define RD_MAX_RECORD (64u << 20)
#define RD_MAX_LINE (64u << 20)

struct prep_reader {
    char *path;
    int fmt;
    const char *field;
    gzFile gz;
    char buf[RD_BUF];
    size_t pos, end;
    int eof;
    char *rec;          /* record / line / file bytes */
    size_t rec_cap;
    char *url;          /* owned copies for the current doc */
    size_t url_cap;
    char *text;         /* decoded JSONL text */
    long line;          /* JSONL line or WARC record number */
    int done_single;    /* html/text: file already returned */
    prep_reader_stats st;
};

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcasecmp(s + n - m, suf);
}

int prep_format_of(const char *path)
{
    if (ends_with(path, ".warc") || ends_with(path, ".warc.gz"))
        return PREP_FMT_WARC;
    if (ends_with(path, ".jsonl") || ends_with(path, ".jsonl.gz") || ends_with(path, ".json"))
        return PREP_FMT_JSONL;
    if (ends_with(path, ".html") || ends_with(path, ".htm") || ends_with(path, ".xhtml") ||
        ends_with(path, ".html.gz"))
        return PREP_FMT_HTML;
    return PREP_FMT_TEXT;
}

int prep_is_document_name(const char *path)
{
    static const char *const ext[] = {".warc", ".warc.gz", ".jsonl", ".jsonl.gz", ".json",
                                      ".html", ".htm", ".xhtml", ".html.gz", ".txt", ".txt.gz",
                                      ".text", ".md", NULL};
    for (int i = 0; ext[i]; i++)
        if (ends_with(path, ext[i]))
            return 1;
    return 0;
}

const char *prep_format_name(int fmt)
{
    static const char *names[] = {"auto", "warc", "html", "text", "jsonl"};
    return fmt >= 0 && fmt <= PREP_FMT_JSONL ? names[fmt] : "?";
}

static int fill(prep_reader *r)
{
    if (r->eof)
        return 0;
    if (r->pos < r->end && r->pos > 0) {
        memmove(r->buf, r->buf + r->pos, r->end - r->pos);
        r->end -= r->pos;
        r->pos = 0;
    } else if (r->pos >= r->end) {
        r->pos = r->end = 0;
    }
    int n = gzread(r->gz, r->buf + r->end, (unsigned)(RD_BUF - r->end));
    if (n < 0) {
        int e;
        const char *m = gzerror(r->gz, &e);
        return grit_errf(GRIT_EIO, "%s: read error: %s", r->path, m);
    }
    if (n == 0) {
        r->eof = 1;
        return 0;
    }
    r->end += (size_t)n;
    r->st.bytes += (uint64_t)n;
    return n;
}

static grit_err ensure_rec(prep_reader *r, size_t need)
{
    if (need <= r->rec_cap)
        return GRIT_OK;
    size_t cap = r->rec_cap ? r->rec_cap : 4096;
    while (cap < need)
        cap *= 2;
    char *p = realloc(r->rec, cap);
    if (!p)
        return GRIT_ENOMEM;
    r->rec = p;
    r->rec_cap = cap;
    return GRIT_OK;
}

/* Reads one line (without "\n" or "\r\n") into r->rec; *len its length.
 * 1 = line, 0 = end of input, < 0 = error. */
static int read_line(prep_reader *r, size_t *len)
{
    size_t n = 0;
    for (;;) {
        if (r->pos >= r->end) {
            int f = fill(r);
            if (f < 0)
                return f;
            if (f == 0) {
                if (n == 0)
                    return 0;
                break;
            }
        }
        char *nl = memchr(r->buf + r->pos, '\n', r->end - r->pos);
        size_t take = nl ? (size_t)(nl - (r->buf + r->pos)) : r->end - r->pos;
        if (n + take + 1 > RD_MAX_LINE)
            return grit_errf(GRIT_EFORMAT, "%s:%ld: line longer than %u bytes", r->path,
                             r->line + 1, RD_MAX_LINE);
        if (ensure_rec(r, n + take + 1) != GRIT_OK)
            return GRIT_ENOMEM;
        memcpy(r->rec + n, r->buf + r->pos, take);
        n += take;
        r->pos += take;
        if (nl) {
            r->pos++;
            break;
        }
    }
    if (n > 0 && r->rec[n - 1] == '\r')
        n--;
    r->rec[n] = 0;
    *len = n;
    return 1;
}

/* Reads exactly n bytes into dst (or discards them when dst is NULL).
 * Returns 0 on success, < 0 on error or truncation. */
static int read_exact(prep_reader *r, char *dst, size_t n)
{
    while (n > 0) {
        if (r->pos >= r->end) {
            int f = fill(r);
            if (f < 0)
                return f;
            if (f == 0)
                return grit_errf(GRIT_EFORMAT, "%s: record %ld: truncated content "
                                 "(file ends early)", r->path, r->line);
        }
        size_t take = r->end - r->pos < n ? r->end - r->pos : n;
        if (dst) {
            memcpy(dst, r->buf + r->pos, take);
            dst += take;
        }
        r->pos += take;
        n -= take;
    }
    return 0;
}

grit_err prep_reader_open(prep_reader **out, const char *path, int fmt, const char *field)
{
    return prep_reader_open_as(out, path, path, fmt, field);
}

grit_err prep_reader_open_as(prep_reader **out, const char *path, const char *name, int fmt,
                             const char *field)
{
    *out = NULL;
    prep_reader *r = calloc(1, sizeof *r);
    if (!r)
        return GRIT_ENOMEM;
    r->path = strdup(name);
    r->fmt = fmt == PREP_FMT_AUTO ? prep_format_of(name) : fmt;
    r->field = field ? field : "text";
    if (!r->path) {
        free(r);
        return GRIT_ENOMEM;
    }
    r->gz = gzopen(path, "rb");
    if (!r->gz) {
        grit_err e = grit_errf(GRIT_EIO, "%s: cannot open: %s", name,
                               errno ? strerror(errno) : "out of memory");
        free(r->path);
        free(r);
        return e;
    }
    gzbuffer(r->gz, 1 << 17);
    *out = r;
    return GRIT_OK;
}

void prep_reader_close(prep_reader *r)
{
    if (!r)
        return;
    if (r->gz)
        gzclose(r->gz);
    free(r->rec);
    free(r->url);
    free(r->text);
    free(r->path);
    free(r);
}

const prep_reader_stats *prep_reader_stats_get(const prep_reader *r)
{
    return &r->st;
}

static grit_err set_url(prep_reader *r, const char *s, size_t n)
{
    if (n + 1 > r->url_cap) {
        char *p = realloc(r->url, n + 1);
        if (!p)
            return GRIT_ENOMEM;
        r->url = p;
        r->url_cap = n + 1;
    }
    memcpy(r->url, s, n);
    r->url[n] = 0;
    return GRIT_OK;
}

static int next_whole(prep_reader *r, prep_doc *d)
{
    if (r->done_single)
        return 0;
    r->done_single = 1;
    size_t n = 0;
    for (;;) {
        if (ensure_rec(r, n + RD_BUF + 1) != GRIT_OK)
            return GRIT_ENOMEM;
        int got = gzread(r->gz, r->rec + n, RD_BUF);
        if (got < 0) {
            int e;
            return grit_errf(GRIT_EIO, "%s: read error: %s", r->path, gzerror(r->gz, &e));
        }
        if (got == 0)
            break;
        n += (size_t)got;
        r->st.bytes += (uint64_t)got;
        if (n > RD_MAX_RECORD)
            return grit_errf(GRIT_EFORMAT, "%s: file larger than %u MiB", r->path,
                             RD_MAX_RECORD >> 20);
    }
    r->rec[n] = 0;
    if (set_url(r, r->path, strlen(r->path)) != GRIT_OK)
        return GRIT_ENOMEM;
    d->url = r->url;
    d->url_len = strlen(r->url);
    d->body = r->rec;
    d->len = n;
    d->is_html = r->fmt == PREP_FMT_HTML;
    return 1;
}

static int next_jsonl(prep_reader *r, prep_doc *d)
{
    for (;;) {
        size_t n;
        int rc = read_line(r, &n);
        if (rc <= 0)
            return rc;
        r->line++;
        size_t i = 0;
        while (i < n && (r->rec[i] == ' ' || r->rec[i] == '\t'))
            i++;
        if (i == n)
            continue;
        json_error_t je;
        json_t *o = json_loadb(r->rec, n, JSON_ALLOW_NUL, &je);
        if (!o || !json_is_object(o)) {
            json_decref(o);
            return grit_errf(GRIT_EFORMAT, "%s:%ld: expected a JSON object per line%s%s",
                             r->path, r->line, o ? "" : ": ", o ? "" : je.text);
        }
        json_t *t = json_object_get(o, r->field);
        if (!json_is_string(t)) {
            json_decref(o);
            return grit_errf(GRIT_EFORMAT, "%s:%ld: field '%s': expected a string", r->path,
                             r->line, r->field);
        }
        size_t tl = json_string_length(t);
        free(r->text);
        r->text = malloc(tl + 1);
        if (!r->text) {
            json_decref(o);
            return GRIT_ENOMEM;
        }
        memcpy(r->text, json_string_value(t), tl);
        r->text[tl] = 0;
        json_t *u = json_object_get(o, "url");
        grit_err e;
        if (json_is_string(u)) {
            e = set_url(r, json_string_value(u), json_string_length(u));
        } else {
            char tmp[64];
            snprintf(tmp, sizeof tmp, ":%ld", r->line);
            e = set_url(r, r->path, strlen(r->path));
            if (e == GRIT_OK) {
                size_t pl = strlen(r->url), tlen = strlen(tmp);
                char *p = realloc(r->url, pl + tlen + 1);
                if (p) {
                    memcpy(p + pl, tmp, tlen + 1);
                    r->url = p;
                    r->url_cap = pl + tlen + 1;
                } else {
                    e = GRIT_ENOMEM;
                }
            }
        }
        json_decref(o);
        if (e != GRIT_OK)
            return e;
        d->url = r->url;
        d->url_len = strlen(r->url);
        d->body = r->text;
        d->len = tl;
        d->is_html = 0;
        return 1;
    }
}

/* Value of header `name` in [h, h+n) (lines separated by \r\n or \n), or
 * NULL; *vl its length. */
static const char *header_get(const char *h, size_t n, const char *name, size_t *vl)
{
    size_t nl = strlen(name);
    const char *p = h, *end = h + n;
    while (p < end) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if (!e)
            e = end;
        if ((size_t)(e - p) > nl && p[nl] == ':' && !strncasecmp(p, name, nl)) {
            const char *v = p + nl + 1, *ve = e;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' '))
                ve--;
            *vl = (size_t)(ve - v);
            return v;
        }
        p = e + 1;
    }
    return NULL;
}

static int next_warc(prep_reader *r, prep_doc *d)
{
    for (;;) {
        size_t n;
        int rc;
        /* skip blank lines between records */
        do {
            rc = read_line(r, &n);
            if (rc <= 0)
                return rc;
        } while (n == 0);
        r->line++;
        if (strncmp(r->rec, "WARC/", 5))
            return grit_errf(GRIT_EFORMAT, "%s: record %ld: expected a 'WARC/1.x' version "
                             "line, got '%.40s'", r->path, r->line, r->rec);
        long long clen = -1;
        int is_response = 0;
        char *url = NULL;
        for (;;) { /* every return below frees url (the record's URI, once seen) */
            rc = read_line(r, &n);
            if (rc < 0) {
                free(url);
                return rc;
            }
            if (rc == 0) {
                free(url);
                return grit_errf(GRIT_EFORMAT, "%s: record %ld: file ends inside the headers",
                                 r->path, r->line);
            }
            if (n == 0)
                break;
            size_t vl;
            const char *v;
            if ((v = header_get(r->rec, n, "Content-Length", &vl))) {
                char *endp;
                errno = 0;
                clen = strtoll(v, &endp, 10);
                if (errno || endp == v || clen < 0) {
                    free(url);
                    return grit_errf(GRIT_EFORMAT, "%s: record %ld: Content-Length: expected "
                                     "a non-negative integer", r->path, r->line);
                }
            } else if ((v = header_get(r->rec, n, "WARC-Type", &vl))) {
                is_response = vl == 8 && !strncmp(v, "response", 8);
            } else if ((v = header_get(r->rec, n, "WARC-Target-URI", &vl))) {
                if (vl >= 2 && v[0] == '<' && v[vl - 1] == '>') {
                    v++;
                    vl -= 2;
                }
                free(url);
                url = strndup(v, vl);
                if (!url)
                    return GRIT_ENOMEM;
            }
        }
        if (clen < 0) {
            free(url);
            return grit_errf(GRIT_EFORMAT, "%s: record %ld: missing Content-Length header",
                             r->path, r->line);
        }
        if (!is_response || (size_t)clen > RD_MAX_RECORD) {
            if (is_response)
                r->st.oversized++;
            else
                r->st.skipped_records++;
            free(url);
            if ((rc = read_exact(r, NULL, (size_t)clen)) < 0)
                return rc;
            continue;
        }
        /* the buffer grows with the bytes that arrive (1 MiB at a time), not with what
         * Content-Length claims: a short file never costs its claimed 64 MiB */
        for (size_t got = 0, step; got < (size_t)clen; got += step) {
            step = (size_t)clen - got < (1u << 20) ? (size_t)clen - got : (1u << 20);
            if (ensure_rec(r, got + step + 1) != GRIT_OK ||
                (rc = read_exact(r, r->rec + got, step)) < 0) {
                free(url);
                return rc < 0 ? rc : GRIT_ENOMEM;
            }
        }
        if (ensure_rec(r, 1) != GRIT_OK) { /* clen 0: room for the terminator */
            free(url);
            return GRIT_ENOMEM;
        }
        r->rec[clen] = 0;
        /* HTTP response: headers, blank line, body */
        const char *body = r->rec;
        size_t blen = (size_t)clen;
        const char *sep = strstr(r->rec, "\r\n\r\n");
        size_t skip = 4;
        if (!sep) {
            sep = strstr(r->rec, "\n\n");
            skip = 2;
        }
        int html = 1;
        if (!strncmp(r->rec, "HTTP/", 5) && sep) {
            size_t vl;
            const char *ct = header_get(r->rec, (size_t)(sep - r->rec), "Content-Type", &vl);
            if (ct && !(vl >= 9 && !strncasecmp(ct, "text/html", 9)) &&
                !(vl >= 21 && !strncasecmp(ct, "application/xhtml+xml", 21)))
                html = 0;
            body = sep + skip;
            blen = (size_t)clen - (size_t)(body - r->rec);
        }
        if (!html) {
            r->st.skipped_records++;
            free(url);
            continue;
        }
        grit_err e = url ? set_url(r, url, strlen(url)) : set_url(r, "", 0);
        free(url);
        if (e != GRIT_OK)
            return e;
        d->url = r->url;
        d->url_len = strlen(r->url);
        d->body = body;
        d->len = blen;
        d->is_html = 1;
        return 1;
    }
}

int prep_reader_next(prep_reader *r, prep_doc *d)
{
    switch (r->fmt) {
    case PREP_FMT_WARC:
        return next_warc(r, d);
    case PREP_FMT_JSONL:
        return next_jsonl(r, d);
    default:
        return next_whole(r, d);
    }
}
