/*
 * web.c - `grit rate serve`: the raters' web app (libmicrohttpd, as the
 * dashboard and grit serve; its own routes, no state but the database).
 *
 *   GET  /                 the page (page.c): prompt + answer, 1-5, fabrication
 *   GET  /rate.js /rate.css its script and style
 *   GET  /api/next         [rater] the rater's next unrated answer, blinded:
 *                          {"answer", "prompt", "text", "position", "total"} or
 *                          {"done": true, "total"}
 *   POST /api/rate         [rater] {"answer": int, "score": 1..5,
 *                          "fabrication": bool, "comment": string (optional)}
 *                          -> {"ok": true} once the row is committed and fsync'd
 *
 * Authentication: "Authorization: Bearer TOKEN", TOKEN a rater's token
 * (rate add-rater); the database holds its SHA-256 only. The token never
 * reaches the log, a response or an error message. The page keeps it in the
 * tab's sessionStorage; a link PAGE#token=TOKEN fills it (a fragment is never
 * sent to a server, so it is in no access log either).
 *
 * Limits: bodies over RATE_MAX_BODY get a 413 without being read further;
 * malformed JSON, unknown fields, wrong types and out-of-range values get a
 * 400 naming the field; a second rating of one answer by one rater a 409; a
 * missing or unknown token a 401. One polling thread handles every request in
 * turn (a rating is a few milliseconds); every connection has absolute
 * deadlines no trickling client extends (core/httpguard.h: its request within
 * RATE_REQUEST_S, its response taken within RATE_RESPONSE_S); at most
 * RATE_SLOTS connections at once and, bound beyond loopback, RATE_PER_IP per
 * client address. It binds 127.0.0.1 unless told.
 *
 * After each rating, batches whose every answer has reached webhook_min
 * ratings are announced once (batches.notified) to the webhook, if any: the
 * request queues the text and a notifier thread posts it, so a slow or dead
 * receiver never holds a rater's request (at close, queued posts still go out).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/httpguard.h"
#include "rate/rate_internal.h"

#define RATE_SLOTS 64
#define RATE_PER_IP 16
#define RATE_IDLE_S 10
#define RATE_REQUEST_S 5.0   /* a whole request, from the connection or the previous response */
#define RATE_RESPONSE_S 30.0 /* a response, from its request */

extern const char rate__page_html[], rate__page_js[], rate__page_css[];

#define RATE_HOOK_QUEUE 64 /* announcements waiting for the notifier thread */

struct rate_server {
    rate_db *db;
    struct MHD_Daemon *d;
    http_guard *guard;
    int port;
    char webhook[2048];
    int webhook_min;
    FILE *log;
    /* the notifier: webhooks are posted off the request thread (a slow or dead receiver
     * would otherwise hold every rater's request for up to the post's 10 s timeout) */
    pthread_t hook_th;
    int hook_on, hook_stop, hook_n;
    pthread_mutex_t hook_mu;
    pthread_cond_t hook_cv;
    char *hook_q[RATE_HOOK_QUEUE];
};

typedef struct req {
    char *body;
    size_t len;
    int too_big;
} req;

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             char *data, size_t len, enum MHD_ResponseMemoryMode mode)
{
    return http_reply(c, status, type, "default-src 'self'", data, len, mode);
}

static enum MHD_Result jreply(rate_server *s, struct MHD_Connection *c, unsigned status,
                              json_t *o, const char *method, const char *url, const char *who)
{
    char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!t) { /* out of memory (the answers are valid UTF-8: gen.c) */
        status = 500;
        t = strdup("{\"error\":\"the server could not build the response\"}");
    }
    if (s->log) {
        fprintf(s->log, "grit rate serve: %s %s %u%s%s\n", method, url, status, who ? " " : "",
                who ? who : "");
        fflush(s->log);
    }
    if (!t)
        return MHD_NO;
    return reply(c, status, "application/json", t, strlen(t), MHD_RESPMEM_MUST_FREE);
}

static enum MHD_Result error(rate_server *s, struct MHD_Connection *c, unsigned status,
                             const char *msg, const char *method, const char *url,
                             const char *who)
{
    return jreply(s, c, status, json_pack("{ss}", "error", msg), method, url, who);
}

/* Posts queued announcements in order; at close, those still queued are posted first. */
static void *notifier(void *arg)
{
    rate_server *s = arg;
    pthread_mutex_lock(&s->hook_mu);
    for (;;) {
        while (!s->hook_n && !s->hook_stop)
            pthread_cond_wait(&s->hook_cv, &s->hook_mu);
        if (!s->hook_n)
            break;
        char *text = s->hook_q[0];
        memmove(s->hook_q, s->hook_q + 1, sizeof *s->hook_q * (size_t)--s->hook_n);
        pthread_mutex_unlock(&s->hook_mu);
        if (rate_webhook(s->webhook, text) != GRIT_OK && s->log)
            fprintf(s->log, "grit rate serve: %s\n", grit_errmsg());
        else if (s->log)
            fprintf(s->log, "grit rate serve: webhook posted: %.120s\n", text);
        free(text);
        pthread_mutex_lock(&s->hook_mu);
    }
    pthread_mutex_unlock(&s->hook_mu);
    return NULL;
}

/* Batches that this rating completed: marked announced in the DB and queued for the
 * notifier; the request does not wait for the post. */
static void announce(rate_server *s)
{
    int64_t ids[16];
    int n = 0;
    if (!s->hook_on || rate_complete_batches(s->db, s->webhook_min, ids, 16, &n) != GRIT_OK)
        return;
    for (int k = 0; k < n; k++) {
        char text[PATH_MAX + 256];
        snprintf(text, sizeof text,
                 "grit rate: batch %lld is rated (every answer has at least %d ratings); "
                 "see grit rate results %s",
                 (long long)ids[k], s->webhook_min, rate_db_path(s->db));
        char *t = strdup(text);
        int queued = 0;
        pthread_mutex_lock(&s->hook_mu);
        if (t && s->hook_n < RATE_HOOK_QUEUE) {
            s->hook_q[s->hook_n++] = t;
            queued = 1;
            pthread_cond_signal(&s->hook_cv);
        }
        pthread_mutex_unlock(&s->hook_mu);
        if (!queued) { /* out of memory, or a receiver far behind: said, not posted */
            free(t);
            if (s->log)
                fprintf(s->log, "grit rate serve: webhook queue full, batch %lld not "
                                "announced\n", (long long)ids[k]);
        }
    }
}

static enum MHD_Result post_rate(rate_server *s, struct MHD_Connection *c, int64_t rater,
                                 const char *who, req *q, const char *m, const char *url)
{
    json_error_t e;
    json_t *j = json_loadb(q->body ? q->body : "", q->len, 0, &e);
    if (!j || !json_is_object(j)) {
        char msg[256];
        snprintf(msg, sizeof msg, "body: expected a JSON object, %s", j ? "got another value" : e.text);
        json_decref(j);
        return error(s, c, 400, msg, m, url, who);
    }
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v)
    {
        if (strcmp(key, "answer") && strcmp(key, "score") && strcmp(key, "fabrication") &&
            strcmp(key, "comment")) {
            char msg[200];
            snprintf(msg, sizeof msg, "unknown field '%.64s' (expected answer, score, "
                                      "fabrication, comment)", key);
            json_decref(j);
            return error(s, c, 400, msg, m, url, who);
        }
    }
    json_t *a = json_object_get(j, "answer"), *sc = json_object_get(j, "score"),
           *f = json_object_get(j, "fabrication"), *cm = json_object_get(j, "comment");
    const char *bad = !json_is_integer(a)                     ? "field 'answer': expected an integer"
                      : !json_is_integer(sc)                  ? "field 'score': expected an integer 1 to 5"
                      : json_integer_value(sc) < 1 || json_integer_value(sc) > 5
                          ? "field 'score': expected an integer 1 to 5"
                      : !json_is_boolean(f)                   ? "field 'fabrication': expected true or false"
                      : cm && !json_is_string(cm)             ? "field 'comment': expected a string"
                                                              : NULL;
    if (bad) {
        json_decref(j);
        return error(s, c, 400, bad, m, url, who);
    }
    grit_err rc = rate_submit(s->db, rater, json_integer_value(a), (int)json_integer_value(sc),
                              json_is_true(f), cm ? json_string_value(cm) : "");
    json_decref(j);
    if (rc) {
        const char *msg = grit_errmsg();
        unsigned st = rc != GRIT_EINVAL ? 500 : strstr(msg, "already rated") ? 409
                                            : strstr(msg, "no answer")      ? 404
                                                                            : 400;
        return error(s, c, st, msg, m, url, who);
    }
    announce(s);
    return jreply(s, c, 200, json_pack("{sb}", "ok", 1), m, url, who);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *data,
                              size_t *size, void **con_cls)
{
    (void)version;
    rate_server *s = cls;
    req *q = *con_cls;
    if (!q) {
        if (!(q = calloc(1, sizeof *q)))
            return MHD_NO;
        *con_cls = q;
        return MHD_YES;
    }
    if (*size) { /* body bytes */
        if (!q->too_big && q->len + *size <= RATE_MAX_BODY) {
            char *t = realloc(q->body, q->len + *size + 1);
            if (!t)
                return MHD_NO;
            q->body = t;
            memcpy(q->body + q->len, data, *size);
            q->len += *size;
        } else {
            q->too_big = 1;
        }
        *size = 0;
        return MHD_YES;
    }
    http_guard_request_in(s->guard, c); /* the request is in: its response has a deadline */
    int get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    if (get && !strcmp(url, "/"))
        return reply(c, 200, "text/html; charset=utf-8", (char *)rate__page_html,
                     strlen(rate__page_html), MHD_RESPMEM_PERSISTENT);
    if (get && !strcmp(url, "/rate.js"))
        return reply(c, 200, "text/javascript; charset=utf-8", (char *)rate__page_js,
                     strlen(rate__page_js), MHD_RESPMEM_PERSISTENT);
    if (get && !strcmp(url, "/rate.css"))
        return reply(c, 200, "text/css; charset=utf-8", (char *)rate__page_css,
                     strlen(rate__page_css), MHD_RESPMEM_PERSISTENT);
    int next = !strcmp(url, "/api/next"), rate = !strcmp(url, "/api/rate");
    if (!next && !rate && strcmp(url, "/") && strcmp(url, "/rate.js") && strcmp(url, "/rate.css"))
        return error(s, c, 404, "no such route (/, /api/next, /api/rate)", method, url, NULL);
    if ((next && !get) || (rate && !post) || (!next && !rate))
        return error(s, c, 405, "method not allowed", method, url, NULL);
    if (q->too_big)
        return error(s, c, 413, "request body too large", method, url, NULL);
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    char name[80];
    int64_t rater = 0;
    if (auth && !strncmp(auth, "Bearer ", 7))
        rater = rate_auth(s->db, auth + 7, name, sizeof name);
    if (!rater)
        return error(s, c, 401,
                     auth ? "unknown rater token" : "missing 'Authorization: Bearer TOKEN'",
                     method, url, NULL);
    if (rate)
        return post_rate(s, c, rater, name, q, method, url);
    rate_item it;
    int done = 0;
    if (rate_next(s->db, rater, &it, &done) != GRIT_OK)
        return error(s, c, 500, grit_errmsg(), method, url, name);
    json_t *o = done ? json_pack("{sbsi}", "done", 1, "total", it.total)
                     : json_pack("{sIssss}", "answer", (json_int_t)it.answer, "prompt",
                                 it.prompt, "text", it.text);
    if (o && !done) {
        json_object_set_new(o, "position", json_integer(it.position));
        json_object_set_new(o, "total", json_integer(it.total));
    }
    rate_item_free(&it);
    return jreply(s, c, 200, o, method, url, name);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode code)
{
    (void)code;
    rate_server *s = cls;
    http_guard_response_out(s->guard, c); /* the next request has RATE_REQUEST_S from now */
    req *q = *con_cls;
    if (q) {
        free(q->body);
        free(q);
    }
    *con_cls = NULL;
}

grit_err rate_serve_open(const char *db, const rate_serve_opts *o, rate_server **out)
{
    *out = NULL;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)o->port);
    const char *bind = o->bind && strcmp(o->bind, "localhost") ? o->bind : "127.0.0.1";
    if (inet_pton(AF_INET, bind, &sa.sin_addr) != 1)
        return grit_errf(GRIT_EINVAL, "--host: '%s' is not an IPv4 address", bind);
    rate_server *s = calloc(1, sizeof *s);
    if (!s)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    s->log = o->log;
    s->webhook_min = o->webhook_min > 0 ? o->webhook_min : 2;
    if (o->webhook)
        snprintf(s->webhook, sizeof s->webhook, "%s", o->webhook);
    pthread_mutex_init(&s->hook_mu, NULL);
    pthread_cond_init(&s->hook_cv, NULL);
    grit_err rc = rate_db_open(db, &s->db);
    if (rc) {
        rate_serve_close(s);
        return rc;
    }
    if (s->webhook[0]) {
        if (pthread_create(&s->hook_th, NULL, notifier, s) != 0) {
            rate_serve_close(s);
            return grit_errf(GRIT_EIO, "cannot start the webhook thread");
        }
        s->hook_on = 1;
    }
    if ((rc = http_guard_start(&s->guard, RATE_REQUEST_S, RATE_RESPONSE_S))) {
        rate_serve_close(s);
        return rc;
    }
    int loopback = (ntohl(sa.sin_addr.s_addr) >> 24) == 127;
    s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0, NULL, NULL, handle,
                            s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)RATE_SLOTS,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, loopback ? 0u : (unsigned)RATE_PER_IP,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)RATE_IDLE_S,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, s,
                            MHD_OPTION_NOTIFY_CONNECTION, http_guard_notify, s->guard,
                            MHD_OPTION_END);
    if (!s->d) {
        rc = grit_errf(GRIT_EIO, "cannot serve on %s:%d (port in use, or not an address of this "
                                 "machine?)", bind, o->port);
        rate_serve_close(s);
        return rc;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : o->port;
    *out = s;
    return GRIT_OK;
}

int rate_serve_port(const rate_server *s) { return s->port; }

void rate_serve_close(rate_server *s)
{
    if (!s)
        return;
    if (s->d)
        MHD_stop_daemon(s->d);
    if (s->hook_on) { /* what is queued is still posted (each post has its 10 s timeout) */
        pthread_mutex_lock(&s->hook_mu);
        s->hook_stop = 1;
        pthread_cond_signal(&s->hook_cv);
        pthread_mutex_unlock(&s->hook_mu);
        pthread_join(s->hook_th, NULL);
    }
    for (int k = 0; k < s->hook_n; k++)
        free(s->hook_q[k]);
    pthread_mutex_destroy(&s->hook_mu);
    pthread_cond_destroy(&s->hook_cv);
    http_guard_stop(s->guard);
    rate_db_close(s->db);
    free(s);
}
