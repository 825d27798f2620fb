/*
 * client.c - S3 over libcurl's multi interface (see client.h for the contract).
 *
 * Every operation is a batch of requests run by run_batch(): up to `concurrency`
 * easy handles in flight on one multi handle (its connection cache keeps the TCP
 * connections alive across requests and batches). Each request goes through
 *
 *   WAIT --start()--> FLIGHT --2xx--> DONE
 *    ^                  |
 *    +--retryable, attempts <= retries: not_before = now + jittered backoff
 *                       |
 *                       +--other answer, or retries spent--> FAILED (batch stops,
 *                          in-flight transfers are removed, the error names the
 *                          request, the HTTP status and S3's error code/message)
 *
 * A request is signed afresh at each attempt (x-amz-date moves on). Bodies are
 * read straight from the caller's buffers (a scatter list and a window into it), so
 * a multipart upload copies nothing.
 */
#define _GNU_SOURCE
#include "s3/client.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "s3/internal.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t rnd(s3_client *c)
{
    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    return c->rng;
}

grit_err s3_client_open(const s3_opts *o, s3_client **out)
{
    *out = NULL;
    pthread_once(&curl_once, curl_init_once);
    s3_client *c = calloc(1, sizeof *c);
    if (!c)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    c->o = *o;
    if (!c->o.part_size)
        c->o.part_size = 8u << 20;
    if (c->o.concurrency <= 0)
        c->o.concurrency = 16;
    if (c->o.retries < 0)
        c->o.retries = 5;
    if (c->o.list_page <= 0)
        c->o.list_page = 1000;
    if (!c->o.region[0]) {
        const char *r = getenv("AWS_REGION");
        if (!r || !*r)
            r = getenv("AWS_DEFAULT_REGION");
        snprintf(c->o.region, sizeof c->o.region, "%s", r && *r ? r : "us-east-1");
    }
    if (!c->o.endpoint[0]) {
        const char *e = getenv("AWS_ENDPOINT_URL");
        if (e && *e)
            snprintf(c->o.endpoint, sizeof c->o.endpoint, "%s", e);
    }
    grit_err rc = GRIT_OK;
    if (c->o.endpoint[0])
        rc = s3_parse_endpoint(c->o.endpoint, c->host, sizeof c->host, c->base, sizeof c->base);
    else {
        c->aws_default = true;
        snprintf(c->host, sizeof c->host, "s3.%s.amazonaws.com", c->o.region);
        snprintf(c->base, sizeof c->base, "https://%s", c->host);
    }
    if (rc == GRIT_OK)
        rc = s3_creds_load(&c->cred);
    if (rc == GRIT_OK) {
        c->multi = curl_multi_init();
        c->easy = calloc((size_t)c->o.concurrency, sizeof *c->easy);
        if (!c->multi || !c->easy)
            rc = grit_errf(GRIT_ENOMEM, "out of memory");
    }
    for (int i = 0; rc == GRIT_OK && i < c->o.concurrency; i++)
        if (!(c->easy[i] = curl_easy_init()))
            rc = grit_errf(GRIT_ENOMEM, "curl_easy_init failed");
    if (rc == GRIT_OK)
        curl_multi_setopt(c->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)c->o.concurrency);
    c->rng = (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)(uintptr_t)c;
    if (!c->rng)
        c->rng = 1;
    if (rc != GRIT_OK) {
        s3_client_close(c);
        return rc;
    }
    *out = c;
    return GRIT_OK;
}

void s3_client_close(s3_client *c)
{
    if (!c)
        return;
    for (int i = 0; c->easy && i < c->o.concurrency; i++)
        if (c->easy[i])
            curl_easy_cleanup(c->easy[i]);
    free(c->easy);
    if (c->multi)
        curl_multi_cleanup(c->multi);
    s3_creds_wipe(&c->cred);
    free(c);
}

s3_stats s3_client_stats(const s3_client *c) { return c->stats; }

void s3_client_set_progress(s3_client *c, s3_progress_fn fn, void *ctx)
{
    c->progress = fn;
    c->progress_ctx = ctx;
}

/* --- one request ------------------------------------------------------------------ */

static void gb_append(growbuf *g, const char *p, size_t n)
{
    if (g->n + n + 1 > g->cap) {
        if (g->n + n + 1 > RESP_CAP)
            return; /* responses we read are small; the rest is dropped */
        size_t nc = g->cap ? g->cap : 4096;
        while (nc < g->n + n + 1)
            nc *= 2;
        char *np = realloc(g->p, nc);
        if (!np)
            return;
        g->p = np;
        g->cap = nc;
    }
    memcpy(g->p + g->n, p, n);
    g->n += n;
    g->p[g->n] = '\0';
}

static size_t on_write(char *p, size_t sz, size_t nm, void *ud)
{
    s3_req *r = ud;
    size_t n = sz * nm;
    long code = 0;
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
    if (r->dst && code >= 200 && code < 300) {
        if (r->got + n > r->dcap)
            return 0; /* more than asked for: fail the transfer */
        memcpy(r->dst + r->got, p, n);
        r->got += n;
        return n;
    }
    gb_append(&r->resp, p, n);
    return n;
}

static size_t on_header(char *p, size_t sz, size_t nm, void *ud)
{
    s3_req *r = ud;
    size_t n = sz * nm;
    if (n > 5 && !strncasecmp(p, "etag:", 5)) {
        size_t i = 5;
        while (i < n && (p[i] == ' ' || p[i] == '\t'))
            i++;
        size_t e = n;
        while (e > i && (p[e - 1] == '\r' || p[e - 1] == '\n' || p[e - 1] == ' '))
            e--;
        snprintf(r->etag, sizeof r->etag, "%.*s", (int)(e - i), p + i);
    }
    return n;
}

/* Upload body: the window [boff, boff+blen) of the scatter list. */
static size_t on_read(char *out, size_t sz, size_t nm, void *ud)
{
    s3_req *r = ud;
    size_t want = sz * nm, done = 0;
    while (done < want && r->sent < r->blen && r->bi < r->nbufs) {
        size_t avail = r->lens[r->bi] - r->bpos;
        if (avail == 0) {
            r->bi++;
            r->bpos = 0;
            continue;
        }
        size_t k = want - done;
        if (k > avail)
            k = avail;
        if (k > r->blen - r->sent)
            k = r->blen - r->sent;
        memcpy(out + done, (const char *)r->bufs[r->bi] + r->bpos, k);
        r->bpos += k;
        r->sent += k;
        done += k;
    }
    return done;
}

/* Positions the upload cursor at window offset `at`. */
static void seek_body(s3_req *r, size_t at)
{
    size_t pos = r->boff + at;
    r->bi = 0;
    while (r->bi < r->nbufs && pos >= r->lens[r->bi]) {
        pos -= r->lens[r->bi];
        r->bi++;
    }
    r->bpos = pos;
    r->sent = at;
}

static int on_seek(void *ud, curl_off_t off, int origin)
{
    s3_req *r = ud;
    if (origin != SEEK_SET || off < 0 || (size_t)off > r->blen)
        return CURL_SEEKFUNC_FAIL;
    seek_body(r, (size_t)off);
    return CURL_SEEKFUNC_OK;
}

static void body_hash(s3_req *r)
{
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    unsigned char md[32];
    unsigned int ml = 32;
    EVP_DigestInit_ex(m, EVP_sha256(), NULL);
    seek_body(r, 0);
    while (r->sent < r->blen && r->bi < r->nbufs) {
        size_t k = r->lens[r->bi] - r->bpos;
        if (k > r->blen - r->sent)
            k = r->blen - r->sent;
        EVP_DigestUpdate(m, (const char *)r->bufs[r->bi] + r->bpos, k);
        r->sent += k;
        r->bi++;
        r->bpos = 0;
    }
    EVP_DigestFinal_ex(m, md, &ml);
    EVP_MD_CTX_free(m);
    static const char d[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        r->hash[2 * i] = d[md[i] >> 4];
        r->hash[2 * i + 1] = d[md[i] & 15];
    }
    r->hash[64] = '\0';
}

static int put_hdr(struct curl_slist **l, const char *fmt, const char *v)
{
    char line[4400];
    snprintf(line, sizeof line, fmt, v);
    struct curl_slist *n = curl_slist_append(*l, line);
    if (!n)
        return -1;
    *l = n;
    return 0;
}

/* path of bucket/key as the URL and the signature see it */
static int req_path(const s3_client *c, const s3_req *r, char *out, size_t cap)
{
    char raw[1400];
    if (c->aws_default)
        snprintf(raw, sizeof raw, "/%s", r->key);
    else
        snprintf(raw, sizeof raw, "/%s%s%s", r->bucket, r->key[0] ? "/" : "", r->key);
    return s3_uri_encode(raw, 1, out, cap);
}

static grit_err start(s3_client *c, s3_req *r, CURL *e)
{
    char path[4200], query[3000], url[8000], amz[20], auth[1024], host[400], range[64];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(amz, sizeof amz, "%Y%m%dT%H%M%SZ", &tm);
    if (c->aws_default)
        snprintf(host, sizeof host, "%s.%s", r->bucket, c->host);
    else
        snprintf(host, sizeof host, "%s", c->host);
    if (req_path(c, r, path, sizeof path) || s3_sigv4_query(r->q, r->nq, query, sizeof query))
        return grit_errf(GRIT_EINVAL, "S3 key or query too long: %s", r->key);
    if (!r->hash[0]) {
        if (c->o.unsigned_payload && r->blen > 0)
            snprintf(r->hash, sizeof r->hash, "UNSIGNED-PAYLOAD");
        else
            body_hash(r);
    }
    s3_kv h[6] = {{"host", host}, {"x-amz-content-sha256", r->hash}, {"x-amz-date", amz}};
    int nh = 3;
    if (r->rlen >= 0) {
        snprintf(range, sizeof range, "bytes=%lld-%lld", r->roff, r->roff + r->rlen - 1);
        h[nh++] = (s3_kv){"range", range};
    }
    if (c->cred.token[0])
        h[nh++] = (s3_kv){"x-amz-security-token", c->cred.token};
    s3_sigv4_req sr = {.method = r->method, .path = path, .query = query, .headers = h,
                       .nheaders = nh, .payload_hash = r->hash, .access_key = c->cred.access,
                       .secret = c->cred.secret, .region = c->o.region, .service = "s3",
                       .amz_date = amz};
    if (s3_sigv4_sign(&sr, auth, sizeof auth, NULL))
        return grit_errf(GRIT_EINVAL, "S3: cannot sign the request for %s", r->key);
    snprintf(url, sizeof url, c->aws_default ? "https://%s%s%s%s" : "%s%s%s%s",
             c->aws_default ? host : c->base, path, query[0] ? "?" : "", query);

    curl_easy_reset(e);
    r->easy = e;
    r->hdrs = NULL;
    r->got = 0;
    r->resp.n = 0;
    r->etag[0] = '\0';
    r->cerr[0] = '\0';
    r->clen = -1;
    seek_body(r, 0);
    int bad = put_hdr(&r->hdrs, "Host: %s", host) || put_hdr(&r->hdrs, "Authorization: %s", auth) ||
              put_hdr(&r->hdrs, "x-amz-date: %s", amz) ||
              put_hdr(&r->hdrs, "x-amz-content-sha256: %s", r->hash) ||
              (r->rlen >= 0 && put_hdr(&r->hdrs, "Range: %s", range)) ||
              (c->cred.token[0] && put_hdr(&r->hdrs, "x-amz-security-token: %s", c->cred.token)) ||
              (r->ctype && put_hdr(&r->hdrs, "Content-Type: %s", r->ctype));
    memset(auth, 0, sizeof auth);
    if (bad)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs);
    curl_easy_setopt(e, CURLOPT_PRIVATE, r);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->cerr);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L); /* a stalled transfer fails (retried) */
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, 30L);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 256L << 10);
    curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, 256L << 10);
    if (!strcmp(r->method, "PUT")) {
        curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(e, CURLOPT_READDATA, r);
        curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, on_seek);
        curl_easy_setopt(e, CURLOPT_SEEKDATA, r);
        curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->blen);
    } else if (!strcmp(r->method, "POST")) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->blen);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS,
                         r->blen ? (const char *)r->bufs[0] + r->boff : "");
    } else if (!strcmp(r->method, "HEAD")) {
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (!strcmp(r->method, "DELETE")) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
    }
    r->attempts++;
    c->stats.requests++;
    r->st = R_FLIGHT;
    if (curl_multi_add_handle(c->multi, e) != CURLM_OK)
        return grit_errf(GRIT_EIO, "curl_multi_add_handle failed");
    return GRIT_OK;
}

static void finish_handle(s3_client *c, s3_req *r)
{
    if (r->easy)
        curl_multi_remove_handle(c->multi, r->easy);
    curl_slist_free_all(r->hdrs);
    r->hdrs = NULL;
    r->easy = NULL;
}

/* the text of <tag>...</tag> in xml (first one) into out; 0 if found */
int s3i_xml_tag(const char *xml, const char *tag, char *out, size_t cap)
{
    char open[64], close[64];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    const char *a = xml ? strstr(xml, open) : NULL;
    const char *b = a ? strstr(a, close) : NULL;
    if (!b)
        return -1;
    a += strlen(open);
    snprintf(out, cap, "%.*s", (int)(b - a), a);
    return 0;
}

static grit_err req_error(const s3_client *c, const s3_req *r)
{
    char code[128] = "", msg[512] = "", what[1400];
    snprintf(what, sizeof what, "S3 %s s3://%s/%s", r->label ? "list" : r->method, r->bucket,
             r->label ? r->label : r->key);
    if (r->cc != CURLE_OK)
        return grit_errf(GRIT_EIO, "%s (endpoint %s): %s%s%s after %d attempt%s", what, c->base,
                         curl_easy_strerror(r->cc), r->cerr[0] ? ": " : "", r->cerr,
                         r->attempts, r->attempts == 1 ? "" : "s");
    s3i_xml_tag(r->resp.p, "Code", code, sizeof code);
    s3i_xml_tag(r->resp.p, "Message", msg, sizeof msg);
    const char *hint = "";
    if (r->status == 403)
        hint = " (check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or the credentials file, "
               "and the region)";
    if (r->status == 404 && !strcmp(code, "NoSuchBucket"))
        hint = " (create the bucket first)";
    return grit_errf(r->status == 404 ? GRIT_ENOTFOUND : GRIT_EIO,
                     "%s: HTTP %ld%s%s%s%s%s after %d attempt%s", what, r->status,
                     code[0] ? " " : "", code, msg[0] ? ": " : "", msg, hint, r->attempts,
                     r->attempts == 1 ? "" : "s");
}

static int retryable(const s3_req *r)
{
    if (r->cc != CURLE_OK)
        return r->cc != CURLE_WRITE_ERROR; /* WRITE_ERROR: more bytes than asked for */
    return r->status >= 500 || r->status == 429 || r->status == 408;
}

/* Runs n requests, `concurrency` at a time, with retries. ok404: a 404 counts as done
 * (status kept) instead of failing. On error every in-flight transfer is removed. */
static grit_err run_batch(s3_client *c, s3_req *reqs, int n, bool ok404)
{
    int conc = c->o.concurrency, inflight = 0, left = n;
    bool *busy = calloc((size_t)conc, sizeof *busy);
    if (!busy)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    grit_err rc = GRIT_OK;
    int scan = 0; /* requests before scan are done or in flight (first pass) */
    while (left > 0 && rc == GRIT_OK) {
        double t = now_s(), next_wake = t + 0.1;
        for (int i = 0; i < n && inflight < conc && rc == GRIT_OK; i++) {
            s3_req *r = &reqs[i];
            if (i < scan && r->st != R_WAIT)
                continue;
            if (r->st != R_WAIT)
                continue;
            if (r->not_before > t) {
                if (r->not_before < next_wake)
                    next_wake = r->not_before;
                continue;
            }
            int slot = 0;
            while (busy[slot])
                slot++;
            if ((rc = start(c, r, c->easy[slot])) != GRIT_OK)
                break;
            busy[slot] = true;
            inflight++;
            if (i == scan)
                scan++;
        }
        if (rc != GRIT_OK)
            break;
        int running = 0;
        curl_multi_perform(c->multi, &running);
        CURLMsg *m;
        int q, finished = 0;
        while ((m = curl_multi_info_read(c->multi, &q))) {
            finished++;
            if (m->msg != CURLMSG_DONE)
                continue;
            s3_req *r = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
            r->cc = m->data.result;
            r->status = 0;
            curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status);
            curl_off_t cl = -1;
            curl_easy_getinfo(r->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
            r->clen = cl;
            for (int s = 0; s < conc; s++)
                if (c->easy[s] == r->easy)
                    busy[s] = false;
            finish_handle(c, r);
            inflight--;
            bool ok = r->cc == CURLE_OK &&
                      ((r->status >= 200 && r->status < 300) || (ok404 && r->status == 404));
            if (ok) {
                r->st = R_DONE;
                left--;
                c->pdone += r->rlen >= 0 ? (size_t)r->rlen : r->blen;
                if (c->progress && c->ptotal)
                    c->progress(c->progress_ctx, c->pdone, c->ptotal);
            } else if (retryable(r) && r->attempts <= c->o.retries) {
                /* full jitter over an exponential cap: 100 ms, 200 ms, ... up to 5 s */
                double cap = 0.1 * (double)(1u << (r->attempts < 6 ? r->attempts - 1 : 5));
                if (cap > 5)
                    cap = 5;
                r->not_before = now_s() + 0.02 + cap * (double)(rnd(c) % 1000) / 1000.0;
                r->st = R_WAIT;
                c->stats.retries++;
            } else {
                r->st = R_FAILED;
                rc = req_error(c, r);
                break;
            }
        }
        if (rc != GRIT_OK || left == 0)
            break;
        if (finished)
            continue; /* start the next requests now, not after the poll */
        int ms = (int)((next_wake - now_s()) * 1000);
        if (ms < 1)
            ms = 1;
        if (ms > 100)
            ms = 100;
        curl_multi_poll(c->multi, NULL, 0, ms, NULL);
    }
    for (int i = 0; i < n; i++)
        if (reqs[i].st == R_FLIGHT)
            finish_handle(c, &reqs[i]);
    free(busy);
    return rc;
}

void s3i_req_init(s3_req *r, const char *method, const char *bucket, const char *key)
{
    memset(r, 0, sizeof *r);
    r->method = method;
    r->bucket = bucket;
    snprintf(r->key, sizeof r->key, "%s", key);
    r->rlen = -1;
}

void s3i_req_free(s3_req *r) { free(r->resp.p); }

grit_err s3i_one(s3_client *c, s3_req *r, bool ok404)
{
    if (strlen(r->key) >= sizeof r->key - 1)
        return grit_errf(GRIT_EINVAL, "S3 key too long: %s", r->key);
    return run_batch(c, r, 1, ok404);
}

/* --- operations ------------------------------------------------------------------ */

grit_err s3_head(s3_client *c, const char *bucket, const char *key, size_t *size)
{
    s3_req r;
    s3i_req_init(&r, "HEAD", bucket, key);
    grit_err rc = s3i_one(c, &r, true);
    if (rc == GRIT_OK && r.status == 404)
        rc = grit_errf(GRIT_ENOTFOUND, "s3://%s/%s: not found", bucket, key);
    else if (rc == GRIT_OK && r.clen < 0)
        rc = grit_errf(GRIT_EIO, "S3 HEAD s3://%s/%s: no Content-Length", bucket, key);
    if (rc == GRIT_OK)
        *size = (size_t)r.clen;
    s3i_req_free(&r);
    return rc;
}

grit_err s3_delete(s3_client *c, const char *bucket, const char *key)
{
    s3_req r;
    s3i_req_init(&r, "DELETE", bucket, key);
    grit_err rc = s3i_one(c, &r, true);
    s3i_req_free(&r);
    return rc;
}

grit_err s3_get(s3_client *c, const char *bucket, const char *key, size_t off, size_t len,
                void *buf)
{
    if (len == 0)
        return GRIT_OK;
    size_t ps = c->o.part_size, n = (len + ps - 1) / ps;
    s3_req *r = calloc(n, sizeof *r);
    if (!r)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        s3i_req_init(&r[i], "GET", bucket, key);
        r[i].roff = (long long)(off + i * ps);
        r[i].rlen = (long long)(i + 1 < n ? ps : len - i * ps);
        r[i].dst = (char *)buf + i * ps;
        r[i].dcap = (size_t)r[i].rlen;
    }
    c->pdone = 0;
    c->ptotal = len;
    grit_err rc = run_batch(c, r, (int)n, false);
    c->ptotal = 0;
    for (size_t i = 0; rc == GRIT_OK && i < n; i++)
        if (r[i].got != (size_t)r[i].rlen || (r[i].status != 206 && !(r[i].status == 200 && n == 1 && off == 0)))
            rc = grit_errf(GRIT_EFORMAT, "S3 GET s3://%s/%s bytes %lld-%lld: got %zu bytes "
                                         "(HTTP %ld): the object is shorter than expected",
                           bucket, key, r[i].roff, r[i].roff + r[i].rlen - 1, r[i].got,
                           r[i].status);
    for (size_t i = 0; i < n; i++)
        s3i_req_free(&r[i]);
    free(r);
    return rc;
}

static grit_err put_single(s3_client *c, const char *bucket, const char *key,
                           const void *const *bufs, const size_t *lens, int n, size_t total)
{
    s3_req r;
    s3i_req_init(&r, "PUT", bucket, key);
    r.bufs = bufs;
    r.lens = lens;
    r.nbufs = n;
    r.blen = total;
    r.ctype = "application/octet-stream";
    grit_err rc = s3i_one(c, &r, false);
    s3i_req_free(&r);
    return rc;
}

/* Best-effort abort of a failed upload; returns rc with its message kept. */
static grit_err abort_upload(s3_client *c, const char *bucket, const char *key, const char *id,
                             grit_err rc)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", grit_errmsg());
    int saved = c->o.retries;
    c->o.retries = saved < 2 ? saved : 2; /* the server may be what failed */
    bool ok = s3_abort_upload(c, bucket, key, id) == GRIT_OK;
    c->o.retries = saved;
    return grit_errf(rc, "%s (multipart upload %s)", msg,
                     ok ? "aborted" : "could not be aborted: the next run's start aborts it");
}

grit_err s3_put(s3_client *c, const char *bucket, const char *key, const void *const *bufs,
                const size_t *lens, int n)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += lens[i];
    size_t ps = c->o.part_size;
    c->pdone = 0;
    c->ptotal = 0;
    if (total <= ps)
        return put_single(c, bucket, key, bufs, lens, n, total);
    size_t np = (total + ps - 1) / ps;
    if (np > 10000)
        return grit_errf(GRIT_EINVAL, "s3://%s/%s: %zu bytes need %zu parts of %zu bytes; S3 "
                                      "allows 10000 (raise the part size)",
                         bucket, key, total, np, ps);
    /* initiate */
    s3_req init;
    s3i_req_init(&init, "POST", bucket, key);
    init.q[0] = (s3_kv){"uploads", ""};
    init.nq = 1;
    init.ctype = "application/octet-stream";
    char id[1024] = "";
    grit_err rc = s3i_one(c, &init, false);
    if (rc == GRIT_OK && s3i_xml_tag(init.resp.p, "UploadId", id, sizeof id))
        rc = grit_errf(GRIT_EIO, "S3 POST s3://%s/%s?uploads: no UploadId in the answer",
                       bucket, key);
    s3i_req_free(&init);
    if (rc != GRIT_OK)
        return rc;
    s3_req *p = calloc(np, sizeof *p);
    char (*pn)[8] = calloc(np, sizeof *pn);
    char *xml = NULL;
    if (!p || !pn) {
        rc = grit_errf(GRIT_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < np; i++) {
        s3i_req_init(&p[i], "PUT", bucket, key);
        snprintf(pn[i], sizeof pn[i], "%zu", i + 1);
        p[i].q[0] = (s3_kv){"partNumber", pn[i]};
        p[i].q[1] = (s3_kv){"uploadId", id};
        p[i].nq = 2;
        p[i].bufs = bufs;
        p[i].lens = lens;
        p[i].nbufs = n;
        p[i].boff = i * ps;
        p[i].blen = i + 1 < np ? ps : total - i * ps;
        p[i].ctype = "application/octet-stream";
    }
    c->ptotal = total;
    rc = run_batch(c, p, (int)np, false);
    c->ptotal = 0;
    if (rc != GRIT_OK)
        goto out;
    size_t cap = 128 + np * 128, o = 0;
    if (!(xml = malloc(cap))) {
        rc = grit_errf(GRIT_ENOMEM, "out of memory");
        goto out;
    }
    o += (size_t)snprintf(xml + o, cap - o, "<CompleteMultipartUpload>");
    for (size_t i = 0; i < np; i++) {
        if (!p[i].etag[0] || strlen(p[i].etag) > 100) {
            rc = grit_errf(GRIT_EIO, "S3 PUT s3://%s/%s part %zu: no ETag in the answer", bucket,
                           key, i + 1);
            goto out;
        }
        o += (size_t)snprintf(xml + o, cap - o, "<Part><PartNumber>%zu</PartNumber><ETag>%s</ETag></Part>",
                              i + 1, p[i].etag);
    }
    o += (size_t)snprintf(xml + o, cap - o, "</CompleteMultipartUpload>");
    s3_req done;
    s3i_req_init(&done, "POST", bucket, key);
    done.q[0] = (s3_kv){"uploadId", id};
    done.nq = 1;
    const void *xb[1] = {xml};
    size_t xl[1] = {o};
    done.bufs = xb;
    done.lens = xl;
    done.nbufs = 1;
    done.blen = o;
    done.ctype = "application/xml";
    rc = s3i_one(c, &done, false);
    /* S3 may answer 200 and put the error in the body */
    if (rc == GRIT_OK && done.resp.p && strstr(done.resp.p, "<Error>")) {
        done.status = 500;
        rc = req_error(c, &done);
    }
    s3i_req_free(&done);
out:
    if (rc != GRIT_OK && id[0])
        rc = abort_upload(c, bucket, key, id, rc);
    for (size_t i = 0; p && i < np; i++)
        s3i_req_free(&p[i]);
    free(p);
    free(pn);
    free(xml);
    return rc;
}
