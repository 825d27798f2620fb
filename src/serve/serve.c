/*
 * serve.c - the HTTP side of `grit serve` (see serve.h): libmicrohttpd with a
 * thread per connection, bearer-token authentication, absolute deadlines, the
 * routes and the Prometheus counters. The completion itself is complete.c.
 *
 * A thread per connection (at most SERVE_SLOTS) so that a request waiting for
 * the model, or generating, never blocks /health or another client's upload.
 * The deadline guard works as the dashboard's (obs/http.c): each connection has
 * an absolute deadline that a trickling client cannot extend; a guard thread
 * shuts down the sockets past theirs four times a second, and libmicrohttpd
 * then sees the end of the stream and frees the slot. While a request waits
 * for the model or generates, its connection has no deadline (the queue is
 * bounded instead); its response then has SERVE_RESPONSE_S to be taken. The
 * model runs on one worker thread (complete.c) that takes the queued requests in
 * order: a long-lived thread keeps one OpenMP team instead of one per connection.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <cblas.h>
#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/pretrained.h"
#include "core/progress.h"
#include "serve/serve_internal.h"

const double serve__buckets[8] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

struct serve__conn {
    int fd;
    double deadline; /* CLOCK_MONOTONIC seconds; 0: shut down already; INFINITY: none */
    serve__conn *prev, *next;
};

/* One request in progress: its body so far. */
typedef struct sreq {
    char *body;
    size_t len, cap;
    int too_big;
    double t0;
} sreq;

static double mono_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    serve_server *s = cls;
    pthread_mutex_lock(&s->mu);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        serve__conn *h = ci ? calloc(1, sizeof *h) : NULL;
        if (h) { /* without memory the connection goes unguarded: MHD's idle timeout remains */
            h->fd = ci->connect_fd;
            h->deadline = mono_now() + SERVE_REQUEST_S;
            h->next = s->conns;
            if (s->conns)
                s->conns->prev = h;
            s->conns = h;
        }
        *socket_context = h;
    } else if (*socket_context) {
        serve__conn *h = *socket_context;
        if (h->prev)
            h->prev->next = h->next;
        else
            s->conns = h->next;
        if (h->next)
            h->next->prev = h->prev;
        free(h);
        *socket_context = NULL;
    }
    pthread_mutex_unlock(&s->mu);
}

/* Sets the connection's deadline to now + seconds (INFINITY: none). */
static void set_deadline(serve_server *s, struct MHD_Connection *c, double seconds)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (!ci || !ci->socket_context)
        return;
    pthread_mutex_lock(&s->mu);
    serve__conn *h = ci->socket_context;
    if (h->deadline > 0)
        h->deadline = isinf(seconds) ? INFINITY : mono_now() + seconds;
    pthread_mutex_unlock(&s->mu);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req,
                         enum MHD_RequestTerminationCode code)
{
    (void)code;
    sreq *r = *req;
    if (r) {
        free(r->body);
        free(r);
        *req = NULL;
    }
    set_deadline(cls, c, SERVE_REQUEST_S); /* the next request on this connection */
}

static void *guard(void *arg)
{
    serve_server *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        double now = mono_now();
        for (serve__conn *h = s->conns; h; h = h->next)
            if (h->deadline > 0 && now > h->deadline) {
                shutdown(h->fd, SHUT_RDWR);
                h->deadline = 0;
            }
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 250000000L;
        if (t.tv_nsec >= 1000000000L) {
            t.tv_sec++;
            t.tv_nsec -= 1000000000L;
        }
        if (!s->stop)
            pthread_cond_timedwait(&s->cv, &s->mu, &t);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             char *body)
{
    if (!body)
        return MHD_NO;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    if (status == 401)
        MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* Constant time in the length of the presented value: no timing says how much matched. */
static int token_ok(const serve_server *s, struct MHD_Connection *c)
{
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7))
        return 0;
    const char *t = h + 7;
    size_t n = strlen(t);
    unsigned char diff = n != s->token_len;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)t[i] ^ (unsigned char)s->token[i % s->token_len];
    return diff == 0;
}

static char *metrics_text(serve_server *s)
{
    char *out = NULL;
    pthread_mutex_lock(&s->mu);
    char hist[1024];
    size_t at = 0;
    for (int i = 0; i < 8; i++)
        at += (size_t)snprintf(hist + at, sizeof hist - at,
                               "grit_serve_request_seconds_bucket{le=\"%g\"} %llu\n",
                               serve__buckets[i], (unsigned long long)s->latency_bucket[i]);
    int rc = asprintf(
        &out,
        "# HELP grit_serve_requests_total Completion requests answered.\n"
        "# TYPE grit_serve_requests_total counter\ngrit_serve_requests_total %llu\n"
        "# HELP grit_serve_requests_failed_total Completion requests answered with an error.\n"
        "# TYPE grit_serve_requests_failed_total counter\ngrit_serve_requests_failed_total %llu\n"
        "# HELP grit_serve_prompt_tokens_total Prompt tokens read.\n"
        "# TYPE grit_serve_prompt_tokens_total counter\ngrit_serve_prompt_tokens_total %llu\n"
        "# HELP grit_serve_completion_tokens_total Tokens generated.\n"
        "# TYPE grit_serve_completion_tokens_total counter\n"
        "grit_serve_completion_tokens_total %llu\n"
        "# HELP grit_serve_generation_seconds_total Time the model spent on requests.\n"
        "# TYPE grit_serve_generation_seconds_total counter\n"
        "grit_serve_generation_seconds_total %.6f\n"
        "# HELP grit_serve_queue_depth Requests waiting for the model.\n"
        "# TYPE grit_serve_queue_depth gauge\ngrit_serve_queue_depth %d\n"
        "# HELP grit_serve_busy 1 while a request is generating.\n"
        "# TYPE grit_serve_busy gauge\ngrit_serve_busy %d\n"
        "# HELP grit_serve_request_seconds Completion request latency.\n"
        "# TYPE grit_serve_request_seconds histogram\n%s"
        "grit_serve_request_seconds_bucket{le=\"+Inf\"} %llu\n"
        "grit_serve_request_seconds_sum %.6f\ngrit_serve_request_seconds_count %llu\n",
        (unsigned long long)s->requests, (unsigned long long)s->failed,
        (unsigned long long)s->prompt_tokens, (unsigned long long)s->completion_tokens,
        s->gen_seconds, s->waiting, s->running, hist, (unsigned long long)s->requests,
        s->latency_sum, (unsigned long long)s->requests);
    pthread_mutex_unlock(&s->mu);
    return rc < 0 ? NULL : out;
}

#define JSON_CT "application/json"

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **req)
{
    (void)version;
    serve_server *s = cls;
    sreq *r = *req;
    if (!r) { /* the headers are in */
        if (!(r = calloc(1, sizeof *r)))
            return MHD_NO;
        r->t0 = now_seconds();
        *req = r;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > SERVE_MAX_BODY) /* refused unread */
            return reply(c, 413, JSON_CT,
                         serve__error_body("invalid_request_error", NULL,
                                           "request body of %s bytes; the limit is %d", cl,
                                           SERVE_MAX_BODY));
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (r->too_big || r->len + n > SERVE_MAX_BODY) {
            r->too_big = 1;
            return MHD_YES;
        }
        if (r->len + n + 1 > r->cap) {
            size_t cap = r->cap ? r->cap : 4096;
            while (cap < r->len + n + 1)
                cap *= 2;
            char *p = realloc(r->body, cap);
            if (!p)
                return MHD_NO;
            r->body = p;
            r->cap = cap;
        }
        memcpy(r->body + r->len, upload, n);
        r->len += n;
        return MHD_YES;
    }
    /* the whole request is in */
    int post = !strcmp(method, "POST"), get = !strcmp(method, "GET");
    if (r->too_big)
        return reply(c, 413, JSON_CT,
                     serve__error_body("invalid_request_error", NULL,
                                       "request body over the limit of %d bytes", SERVE_MAX_BODY));
    if (!strcmp(url, "/health") && get) {
        char *b = NULL;
        pthread_mutex_lock(&s->mu);
        int rc = asprintf(&b, "{\"status\":\"ok\",\"model\":\"%s\",\"queue_depth\":%d}",
                          s->model_id, s->waiting);
        pthread_mutex_unlock(&s->mu);
        return reply(c, 200, JSON_CT, rc < 0 ? NULL : b);
    }
    if (!strcmp(url, "/metrics") && get)
        return reply(c, 200, "text/plain; version=0.0.4; charset=utf-8", metrics_text(s));
    int completions = !strcmp(url, "/v1/completions"), models = !strcmp(url, "/v1/models");
    if (!completions && !models)
        return reply(c, 404, JSON_CT,
                     serve__error_body("invalid_request_error", NULL,
                                       "no route %s %s (POST /v1/completions, GET /v1/models, "
                                       "GET /health, GET /metrics)",
                                       method, url));
    if (!token_ok(s, c))
        return reply(c, 401, JSON_CT,
                     serve__error_body("authentication_error", NULL,
                                       "missing or wrong bearer token (Authorization: Bearer "
                                       "TOKEN, the job's secret)"));
    if (models) {
        if (!get)
            return reply(c, 405, JSON_CT,
                         serve__error_body("invalid_request_error", NULL, "use GET /v1/models"));
        char *b = NULL;
        int rc = asprintf(&b, "{\"object\":\"list\",\"data\":[{\"id\":\"%s\",\"object\":"
                              "\"model\",\"owned_by\":\"grit\"}]}",
                          s->model_id);
        return reply(c, 200, JSON_CT, rc < 0 ? NULL : b);
    }
    if (!post)
        return reply(c, 405, JSON_CT,
                     serve__error_body("invalid_request_error", NULL,
                                       "use POST /v1/completions"));
    set_deadline(s, c, INFINITY); /* queued or generating: the queue bound applies instead */
    unsigned status;
    char *out = NULL;
    int nin, nout;
    serve__complete(s, r->body ? r->body : "", r->len, &status, &out, &nin, &nout);
    set_deadline(s, c, SERVE_RESPONSE_S);
    double dt = now_seconds() - r->t0;
    pthread_mutex_lock(&s->mu);
    s->requests++;
    s->failed += status != 200;
    s->prompt_tokens += (uint64_t)nin;
    s->completion_tokens += (uint64_t)nout;
    s->latency_sum += dt;
    for (int i = 0; i < 8; i++)
        s->latency_bucket[i] += dt <= serve__buckets[i];
    if (s->log) /* never a header: the token stays out of logs */
        fprintf(s->log, "grit serve: POST /v1/completions %u prompt %d completion %d tokens "
                        "%.3fs\n",
                status, nin, nout, dt);
    pthread_mutex_unlock(&s->mu);
    return reply(c, status, JSON_CT, out);
}

/* The model id: the name of the folder loaded (a step folder or a Hugging Face folder). */
static void model_id(const char *where, char *out, size_t cap)
{
    char tmp[4400];
    snprintf(tmp, sizeof tmp, "%s", where);
    size_t n = strlen(tmp);
    while (n > 1 && tmp[n - 1] == '/')
        tmp[--n] = 0;
    const char *b = strrchr(tmp, '/');
    snprintf(out, cap, "%s", b ? b + 1 : tmp);
    for (char *p = out; *p; p++) /* it goes into JSON text unescaped */
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
            *p = '_';
}

grit_err serve_open(const serve_opts *o, serve_server **out)
{
    *out = NULL;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    const char *bind = o->bind && strcmp(o->bind, "localhost") ? o->bind : "127.0.0.1";
    if (o->port < 0 || o->port > 65535)
        return grit_errf(GRIT_EINVAL, "serve port %d: expected 0..65535", o->port);
    if (inet_pton(AF_INET, bind, &sa.sin_addr) != 1)
        return grit_errf(GRIT_EINVAL, "serve bind address '%s': expected an IPv4 address such "
                                      "as 127.0.0.1", bind);
    if (!o->token || strlen(o->token) < SERVE_TOKEN_MIN || strlen(o->token) >= 256)
        return grit_errf(GRIT_EINVAL, "serve: the bearer token must have %d to 255 characters",
                         SERVE_TOKEN_MIN);
    serve_server *s = calloc(1, sizeof *s);
    if (!s)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->job_cv, NULL);
    pthread_cond_init(&s->done_cv, NULL);
    snprintf(s->token, sizeof s->token, "%s", o->token);
    s->token_len = strlen(s->token);
    s->max_queue = o->max_queue > 0 ? o->max_queue : 32;
    s->log = o->log;
    int nt = o->threads > 0 ? o->threads : 1;
    grit_err rc = pretrained_load(o->checkpoint, &s->m, nt, s->where, sizeof s->where);
    char tj[4600];
    if (rc == GRIT_OK) {
        snprintf(tj, sizeof tj, "%s/tokenizer.json", s->where);
        const char *tp = o->tokenizer ? o->tokenizer : tj;
        if (!o->tokenizer && access(tj, R_OK) != 0)
            rc = grit_errf(GRIT_ENOTFOUND, "%s: no tokenizer.json in the checkpoint folder; give "
                                           "--tokenizer FILE", s->where);
        else
            rc = bpe_open_hf(&s->tok, tp);
        s->hf = 1;
    }
    if (rc == GRIT_OK) {
        s->has_eod = bpe_token_id(s->tok, "<|endoftext|>", 13, &s->eod) == GRIT_OK;
        rc = bpe_ctx_open(&s->ctx, s->tok);
    }
    if (rc == GRIT_OK &&
        (rc = gxi_init(&s->st, &s->m, s->m.cfg.max_positions, 256, nt)) == GRIT_OK &&
        !(s->logits = malloc(sizeof *s->logits * (size_t)s->m.cfg.vocab)))
        rc = grit_errf(GRIT_ENOMEM, "out of memory");
    if (rc != GRIT_OK) {
        serve_close(s);
        return rc;
    }
    model_id(s->where, s->model_id, sizeof s->model_id);
    openblas_set_num_threads(nt); /* the worker's OpenMP team is sized by gxi (nthreads) */
    if (pthread_create(&s->worker, NULL, serve__worker, s) != 0) {
        serve_close(s);
        return grit_errf(GRIT_EIO, "serve: cannot start the model thread");
    }
    s->working = 1;
    int loopback = (ntohl(sa.sin_addr.s_addr) >> 24) == 127;
    s->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                                MHD_USE_POLL,
                            0, NULL, NULL, handle, s, MHD_OPTION_SOCK_ADDR,
                            (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)SERVE_SLOTS, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                            loopback ? 0u : (unsigned)SERVE_PER_IP, MHD_OPTION_NOTIFY_CONNECTION,
                            on_connection, s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_END);
    if (!s->d) {
        rc = grit_errf(GRIT_EIO, "cannot serve on %s:%d (port in use, or not an address of "
                                 "this machine?)", bind, o->port);
        serve_close(s);
        return rc;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : o->port;
    if (pthread_create(&s->guard, NULL, guard, s) == 0)
        s->guarding = 1;
    *out = s;
    return GRIT_OK;
}

int serve_port(const serve_server *s)
{
    return s->port;
}

const char *serve_model_id(const serve_server *s)
{
    return s->model_id;
}

void serve_close(serve_server *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->guarding)
        pthread_join(s->guard, NULL);
    if (s->d) /* joins the connection threads; the worker still finishes their jobs */
        MHD_stop_daemon(s->d);
    pthread_mutex_lock(&s->mu);
    s->stop_worker = 1;
    pthread_cond_broadcast(&s->job_cv);
    pthread_mutex_unlock(&s->mu);
    if (s->working)
        pthread_join(s->worker, NULL);
    free(s->logits);
    gxi_free(&s->st);
    gx_free(&s->m);
    bpe_ctx_close(s->ctx);
    bpe_close(s->tok);
    explicit_bzero(s->token, sizeof s->token);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->job_cv);
    pthread_cond_destroy(&s->done_cv);
    free(s);
}
