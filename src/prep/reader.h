/*
 * reader.h - streaming document readers for grit prep.
 *
 * Formats (PREP_FMT_*), chosen by extension unless forced:
 *   warc   .warc, .warc.gz: WARC/1.0 or 1.1, gzip'ed (per-record members or
 *          whole file) or plain. Only `response` records whose HTTP payload
 *          is text/html (or has no Content-Type) become documents: url =
 *          WARC-Target-URI, body = the HTTP body after the headers. Other
 *          records are skipped and counted. A record larger than 64 MiB is
 *          skipped (counted as oversized), not loaded.
 *   html   .html, .htm, .xhtml: the whole file is one HTML document; url =
 *          the path.
 *   text   anything else: the whole file is one plain-text document.
 *   jsonl  .jsonl, .jsonl.gz: one JSON object per line, text in `field`
 *          (default "text"), url in "url" when present (else path:line);
 *          blank lines skipped, a malformed line is an error (file:line).
 * gzip is read transparently (zlib) for every format.
 *
 * Memory: one record (WARC), one line (JSONL) or one file at a time.
 * Ownership: prep_reader_open allocates, prep_reader_close frees. The doc
 * filled by prep_reader_next points into the reader and is valid until the
 * next call.
 */
#ifndef GRIT_PREP_READER_H
#define GRIT_PREP_READER_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"

enum { PREP_FMT_AUTO = 0, PREP_FMT_WARC, PREP_FMT_HTML, PREP_FMT_TEXT, PREP_FMT_JSONL };

typedef struct prep_doc {
    const char *url;
    size_t url_len;
    const char *body;
    size_t len;
    int is_html;   /* body needs extraction */
} prep_doc;

typedef struct prep_reader_stats {
    uint64_t bytes;          /* input bytes consumed (uncompressed) */
    uint64_t skipped_records; /* WARC records that are not html responses */
    uint64_t oversized;       /* WARC records skipped for size */
} prep_reader_stats;

typedef struct prep_reader prep_reader;

/* Format guess from the file name. */
int prep_format_of(const char *path);
const char *prep_format_name(int fmt);
/* 1 if the name has a document extension (.warc[.gz], .jsonl[.gz], .json,
 * .html, .htm, .xhtml, .html.gz, .txt[.gz], .text, .md): directory walks
 * take only those, so stylesheets and images next to pages are ignored. */
int prep_is_document_name(const char *path);
/* fmt: PREP_FMT_*; field: JSONL text field (NULL = "text"). */
grit_err prep_reader_open(prep_reader **out, const char *path, int fmt, const char *field);
/* The same, reading the file path but naming it name (format by name, and
 * in messages and URLs): a local copy of an s3:// object. */
grit_err prep_reader_open_as(prep_reader **out, const char *path, const char *name, int fmt,
                             const char *field);
/* 1: *d filled; 0: end of input; < 0: error (message names file and
 * record or line). */
int prep_reader_next(prep_reader *r, prep_doc *d);
const prep_reader_stats *prep_reader_stats_get(const prep_reader *r);
void prep_reader_close(prep_reader *r);

#endif
