/*
 * test_reader.c - the streaming readers (src/prep/reader.c): WARC gzip'ed
 * per record and plain, with non-response and non-HTML records skipped and
 * counted; JSONL with url/text fields, blank lines, errors naming file:line;
 * whole-file HTML/text; truncated and malformed WARC input is an error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "../check.h"
#include "prep/reader.h"

static char dir[] = "/tmp/grit-test-reader.XXXXXX";

static void put(const char *name, const char *data, size_t n, int gz)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (gz) {
        gzFile f = gzopen(p, "wb");
        gzwrite(f, data, (unsigned)n);
        gzclose(f);
    } else {
        FILE *f = fopen(p, "wb");
        fwrite(data, 1, n, f);
        fclose(f);
    }
}

static size_t warc_record(char *out, const char *type, const char *url, const char *payload)
{
    return (size_t)sprintf(out, "WARC/1.0\r\nWARC-Type: %s\r\nWARC-Target-URI: <%s>\r\n"
                                "Content-Length: %zu\r\n\r\n%s\r\n\r\n",
                           type, url, strlen(payload), payload);
}

/* Reads every document of name into a "url|body;" list. */
static int read_all(const char *name, char *list, size_t cap, prep_reader_stats *st)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    prep_reader *r = NULL;
    list[0] = 0;
    if (prep_reader_open(&r, p, PREP_FMT_AUTO, NULL) != GRIT_OK)
        return -100;
    prep_doc d;
    int k, n = 0;
    while ((k = prep_reader_next(r, &d)) == 1) {
        size_t l = strlen(list);
        snprintf(list + l, cap - l, "%.*s|%.*s;", (int)d.url_len, d.url, (int)d.len, d.body);
        n++;
    }
    if (st)
        *st = *prep_reader_stats_get(r);
    prep_reader_close(r);
    return k < 0 ? k : n;
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    char w[8192], list[8192];
    size_t n = 0;
    n += warc_record(w + n, "warcinfo", "x", "software: test");
    n += warc_record(w + n, "response", "http://a/",
                     "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>A</p>");
    n += warc_record(w + n, "request", "http://a/", "GET / HTTP/1.1\r\n\r\n");
    n += warc_record(w + n, "response", "http://a/img",
                     "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\n\r\nPNG");
    n += warc_record(w + n, "response", "http://b/",
                     "HTTP/1.1 200 OK\r\ncontent-type: TEXT/HTML; charset=utf-8\r\n\r\n<p>B</p>");
    put("plain.warc", w, n, 0);
    put("z.warc.gz", w, n, 1);
    prep_reader_stats st;
    for (int gz = 0; gz < 2; gz++) {
        CHECK_INT(read_all(gz ? "z.warc.gz" : "plain.warc", list, sizeof list, &st), 2);
        CHECK(strcmp(list, "http://a/|<p>A</p>;http://b/|<p>B</p>;") == 0);
        CHECK_INT(st.skipped_records, 3);
        CHECK_INT(st.bytes, n);
    }
    /* truncated: the content ends early */
    put("trunc.warc", w, n - 20, 0);
    CHECK(read_all("trunc.warc", list, sizeof list, NULL) < 0);
    CHECK(strstr(grit_errmsg(), "trunc.warc: record 5: truncated") != NULL);
    put("junk.warc", "hello\r\n", 7, 0);
    CHECK(read_all("junk.warc", list, sizeof list, NULL) < 0);
    CHECK(strstr(grit_errmsg(), "expected a 'WARC/1.x' version line") != NULL);

    const char *jl = "{\"text\": \"one\", \"url\": \"u1\"}\n\n  \n{\"text\": \"two\"}\r\n";
    put("d.jsonl", jl, strlen(jl), 0);
    CHECK_INT(read_all("d.jsonl", list, sizeof list, NULL), 2);
    char want[512];
    snprintf(want, sizeof want, "u1|one;%s/d.jsonl:4|two;", dir);
    CHECK(strcmp(list, want) == 0);
    put("bad.jsonl", "{\"text\": \"ok\"}\n{\"txt\": 1}\n", 27, 0);
    CHECK(read_all("bad.jsonl", list, sizeof list, NULL) < 0);
    CHECK(strstr(grit_errmsg(), "bad.jsonl:2: field 'text': expected a string") != NULL);

    put("p.html", "<p>x</p>", 8, 0);
    put("t.txt.gz", "plain text", 10, 1);
    CHECK_INT(read_all("p.html", list, sizeof list, NULL), 1);
    CHECK(strstr(list, "|<p>x</p>;") != NULL);
    CHECK_INT(read_all("t.txt.gz", list, sizeof list, NULL), 1);
    CHECK(strstr(list, "|plain text;") != NULL);
    CHECK_INT(prep_format_of("a.WARC.GZ"), PREP_FMT_WARC);
    CHECK_INT(prep_format_of("a.jsonl.gz"), PREP_FMT_JSONL);
    CHECK_INT(prep_format_of("a.htm"), PREP_FMT_HTML);
    CHECK(!prep_is_document_name("style.css"));

    static const char *const files[] = {"plain.warc", "z.warc.gz", "trunc.warc", "junk.warc",
                                        "d.jsonl", "bad.jsonl", "p.html", "t.txt.gz", NULL};
    for (int i = 0; files[i]; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
    return check_failures ? 1 : 0;
}
