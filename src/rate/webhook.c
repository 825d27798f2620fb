/*
 * webhook.c - a Slack-compatible notification: POST {"text": "..."} with
 * Content-Type application/json to the URL the user configured (--webhook),
 * through libcurl (the S3 client's dependency; without it the build has no
 * webhook and says so). 10 s timeout; any answer other than 2xx is an error
 * naming the URL's host part only (a Slack URL carries its secret in the path).
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "rate/rate.h"

#ifdef GRIT_HAVE_S3
#include <curl/curl.h>

static size_t discard(char *p, size_t s, size_t n, void *u)
{
    (void)p, (void)u;
    return s * n;
}

/* scheme://host[:port] of url, for messages */
static void origin(const char *url, char *out, size_t cap)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    size_t n = strcspn(p, "/?#");
    snprintf(out, cap, "%.*s%.*s", (int)(p - url), url, (int)n, p);
}

grit_err rate_webhook(const char *url, const char *text)
{
    char where[256];
    origin(url, where, sizeof where);
    json_t *o = json_pack("{ss}", "text", text);
    char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!body)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    CURL *e = curl_easy_init();
    if (!e) {
        free(body);
        return grit_errf(GRIT_ENOMEM, "curl_easy_init failed");
    }
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
    CURLcode c = curl_easy_perform(e);
    long code = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(h);
    curl_easy_cleanup(e);
    free(body);
    if (c != CURLE_OK)
        return grit_errf(GRIT_EIO, "webhook %s: %s", where, curl_easy_strerror(c));
    if (code < 200 || code > 299)
        return grit_errf(GRIT_EIO, "webhook %s: HTTP %ld (expected 2xx)", where, code);
    return GRIT_OK;
}
#else
grit_err rate_webhook(const char *url, const char *text)
{
    (void)url, (void)text;
    return grit_errf(GRIT_EINVAL, "--webhook: this grit was built without libcurl "
                                  "(install libcurl4-openssl-dev and rebuild)");
}
#endif
