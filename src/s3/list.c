/*
 * list.c - S3 listings: ListObjectsV2 with pagination (s3_list) and the multipart
 * uploads in progress (s3_list_uploads), which a writer that died leaves behind.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3/internal.h"

/* XML text with the five predefined entities decoded */
void s3i_xml_unescape(char *s)
{
    static const struct {
        const char *e;
        char c;
    } ents[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    char *w = s;
    for (char *r = s; *r;) {
        int hit = 0;
        for (size_t i = 0; i < sizeof ents / sizeof ents[0] && *r == '&'; i++) {
            size_t l = strlen(ents[i].e);
            if (!strncmp(r, ents[i].e, l)) {
                *w++ = ents[i].c;
                r += l;
                hit = 1;
                break;
            }
        }
        if (!hit)
            *w++ = *r++;
    }
    *w = '\0';
}

grit_err s3_list(s3_client *c, const char *bucket, const char *prefix, char delim, s3_list_fn fn,
                 void *ctx)
{
    char token[2048] = "", page[16], dl[2] = {delim, 0};
    snprintf(page, sizeof page, "%d", c->o.list_page);
    size_t plen = strlen(prefix);
    grit_err rc = GRIT_OK;
    for (;;) {
        s3_req r;
        s3i_req_init(&r, "GET", bucket, "");
        r.label = prefix;
        int k = 0;
        r.q[k++] = (s3_kv){"list-type", "2"};
        r.q[k++] = (s3_kv){"prefix", prefix};
        r.q[k++] = (s3_kv){"max-keys", page};
        if (delim)
            r.q[k++] = (s3_kv){"delimiter", dl};
        if (token[0])
            r.q[k++] = (s3_kv){"continuation-token", token};
        r.nq = k;
        rc = s3i_one(c, &r, false);
        if (rc != GRIT_OK) {
            s3i_req_free(&r);
            return rc;
        }
        const char *x = r.resp.p ? r.resp.p : "";
        char item[2048], name[2048];
        /* objects */
        for (const char *p = strstr(x, "<Contents>"); p; p = strstr(p + 1, "<Contents>")) {
            const char *end = strstr(p, "</Contents>");
            if (!end)
                break;
            char one_xml[4096];
            snprintf(one_xml, sizeof one_xml, "%.*s", (int)(end - p), p);
            char sz[32] = "0";
            if (s3i_xml_tag(one_xml, "Key", item, sizeof item))
                continue;
            s3i_xml_tag(one_xml, "Size", sz, sizeof sz);
            s3i_xml_unescape(item);
            if (strncmp(item, prefix, plen) != 0)
                continue;
            snprintf(name, sizeof name, "%s", item + plen);
            if (name[0])
                fn(ctx, name, (size_t)strtoull(sz, NULL, 10));
        }
        for (const char *p = strstr(x, "<CommonPrefixes>"); p;
             p = strstr(p + 1, "<CommonPrefixes>")) {
            if (s3i_xml_tag(p, "Prefix", item, sizeof item))
                break;
            s3i_xml_unescape(item);
            size_t l = strlen(item);
            if (l && item[l - 1] == delim)
                item[l - 1] = '\0';
            if (strncmp(item, prefix, plen) == 0 && item[plen])
                fn(ctx, item + plen, 0);
        }
        char trunc[16] = "", next[2048] = "";
        s3i_xml_tag(x, "IsTruncated", trunc, sizeof trunc);
        s3i_xml_tag(x, "NextContinuationToken", next, sizeof next);
        s3i_req_free(&r);
        if (strcmp(trunc, "true") != 0)
            break;
        if (!next[0])
            return grit_errf(GRIT_EIO, "S3 list s3://%s/%s: truncated answer without "
                                       "NextContinuationToken", bucket, prefix);
        s3i_xml_unescape(next);
        snprintf(token, sizeof token, "%s", next);
    }
    return rc;
}

grit_err s3_abort_upload(s3_client *c, const char *bucket, const char *key, const char *upload_id)
{
    s3_req r;
    s3i_req_init(&r, "DELETE", bucket, key);
    r.q[0] = (s3_kv){"uploadId", upload_id};
    r.nq = 1;
    grit_err rc = s3i_one(c, &r, true); /* 404 NoSuchUpload: already gone */
    s3i_req_free(&r);
    if (rc == GRIT_OK)
        c->stats.aborted_uploads++;
    return rc;
}

grit_err s3_list_uploads(s3_client *c, const char *bucket, const char *prefix,
                         s3_upload_fn fn, void *ctx)
{
    char kmark[1024] = "", umark[1024] = "", page[16];
    snprintf(page, sizeof page, "%d", c->o.list_page);
    size_t plen = strlen(prefix);
    for (;;) {
        s3_req r;
        s3i_req_init(&r, "GET", bucket, "");
        r.label = prefix;
        int k = 0;
        r.q[k++] = (s3_kv){"uploads", ""};
        r.q[k++] = (s3_kv){"prefix", prefix};
        r.q[k++] = (s3_kv){"max-uploads", page};
        if (kmark[0]) {
            r.q[k++] = (s3_kv){"key-marker", kmark};
            r.q[k++] = (s3_kv){"upload-id-marker", umark};
        }
        r.nq = k;
        grit_err rc = s3i_one(c, &r, false);
        if (rc != GRIT_OK) {
            s3i_req_free(&r);
            return rc;
        }
        const char *x = r.resp.p ? r.resp.p : "";
        for (const char *p = strstr(x, "<Upload>"); p; p = strstr(p + 1, "<Upload>")) {
            const char *end = strstr(p, "</Upload>");
            if (!end)
                break;
            char one_xml[4096], key[1024], id[1024], when[64] = "";
            snprintf(one_xml, sizeof one_xml, "%.*s", (int)(end - p), p);
            if (s3i_xml_tag(one_xml, "Key", key, sizeof key) ||
                s3i_xml_tag(one_xml, "UploadId", id, sizeof id))
                continue;
            s3i_xml_tag(one_xml, "Initiated", when, sizeof when);
            s3i_xml_unescape(key);
            s3i_xml_unescape(id);
            if (!strncmp(key, prefix, plen)) /* a server that ignores prefix= */
                fn(ctx, key, id, when);
        }
        char trunc[16] = "";
        s3i_xml_tag(x, "IsTruncated", trunc, sizeof trunc);
        int more = !strcmp(trunc, "true");
        if (more && (s3i_xml_tag(x, "NextKeyMarker", kmark, sizeof kmark) || !kmark[0])) {
            s3i_req_free(&r);
            return grit_errf(GRIT_EIO, "S3 list uploads s3://%s/%s: truncated answer without "
                                       "NextKeyMarker", bucket, prefix);
        }
        if (more) {
            s3i_xml_unescape(kmark);
            if (s3i_xml_tag(x, "NextUploadIdMarker", umark, sizeof umark))
                umark[0] = '\0';
            s3i_xml_unescape(umark);
        }
        s3i_req_free(&r);
        if (!more)
            return GRIT_OK;
    }
}
