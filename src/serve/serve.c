/*
 * serve.c - the HTTP side of `grit serve` (see serve.h): libmicrohttpd with a
 * thread per connection, bearer-token authentication, absolute deadlines, the
 * routes and the Prometheus counters. The completion itself is complete.c.
 *
 * A thread per connection (at most SERVE_SLOTS) so that a request waiting for
 * the model, or generating, never blocks /health or another client's upload.
 * The deadline guard is the dashboard's (core/connguard.h): each connection has
 * an absolute deadline that a trickling client cannot extend; the guard shuts
 * down the sockets past theirs and libmicrohttpd then frees the slot. While a request waits
 * for the model or generates, its connection has no deadline (the queue is
 * bounded instead); its response then has SERVE_RESPONSE_S to be taken. The
 * model runs on one worker thread (job.c) that batches the queued requests
 * continuously: a long-lived thread keeps one OpenMP team instead of one per
 * connection.
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
#include "core/connguard.h"
#include "core/progress.h"
#include "serve/serve_internal.h"

const double serve__lat_buckets[SERVE_NLAT] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
const double serve__ttft_buckets[SERVE_NTTFT] = {0.005, 0.01, 0.025, 0.05, 0.1,
                                                 0.25,  0.5,  1,     2.5,  10};
const double serve__batch_buckets[SERVE_NBATCH] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
const unsigned serve__codes[SERVE_NCODES] = {200, 400, 401, 404, 405, 413, 500, 503, 0};
const char *const serve__route_names[SERVE_NROUTES] = {"/v1/completions",
                                                       "/v1/chat/completions"};

/* One request in progress: its body so far. */
typedef struct sreq {
    char *body;
    size_t len, cap;
    int too_big;
    double t0;
} sreq;

/* A connection opened or closed (closed comes before its socket closes). Its socket
 * context is a serve__conn: the guard's entry and the stream it carries, if any. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    serve_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        serve__conn *h = ci ? calloc(1, sizeof *h) : NULL;
        /* without memory the connection goes unguarded: MHD's idle timeout remains */
        if (h && !(h->e = conn_guard_add(s->guard, ci->connect_fd, SERVE_REQUEST_S))) {
            free(h);
            h = NULL;
        }
        *socket_context = h;
    } else if (*socket_context) {
        serve__conn *h = *socket_context;
        pthread_mutex_lock(&s->mu);
        if (h->job) /* the worker must not reach this connection any more */
            h->job->conn = NULL;
        pthread_mutex_unlock(&s->mu);
        conn_guard_remove(s->guard, h->e);
        free(h);
        *socket_context = NULL;
    }
}

serve__conn *serve__conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

void serve__set_deadline(serve_server *s, struct MHD_Connection *c, double seconds)
{
    serve__conn *h = serve__conn_of(c);
    if (h)
        conn_guard_set(s->guard, h->e, seconds);
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
    serve__set_deadline(cls, c, SERVE_REQUEST_S); /* the next request on this connection */
}

int serve__reply(struct MHD_Connection *c, unsigned status, const char *type, char *body)
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

void serve__account(serve_server *s, int route, unsigned status, int nin, int nout, double dt,
                    double ttft, int cancelled)
{
    int k = 0;
    while (k < SERVE_NCODES - 1 && serve__codes[k] != status)
        k++;
    pthread_mutex_lock(&s->mu);
    s->requests[route][k]++;
    s->prompt_tokens += (uint64_t)nin;
    s->completion_tokens += (uint64_t)nout;
    s->cancelled += (uint64_t)cancelled;
    s->latency_sum += dt;
    s->latency_count++;
    for (int i = 0; i < SERVE_NLAT; i++)
        s->latency_bucket[i] += dt <= serve__lat_buckets[i];
    if (ttft >= 0) {
        s->ttft_sum += ttft;
        s->ttft_count++;
        for (int i = 0; i < SERVE_NTTFT; i++)
            s->ttft_bucket[i] += ttft <= serve__ttft_buckets[i];
    }
    if (s->log) /* never a header: the token stays out of logs */
        fprintf(s->log, "grit serve: POST %s %u prompt %d completion %d tokens %.3fs%s\n",
                serve__route_names[route], status, nin, nout, dt,
                cancelled ? " (client gone)" : "");
    pthread_mutex_unlock(&s->mu);
}

/* Appends a Prometheus histogram (name, buckets, cumulative counts) to *at. */
static size_t histogram(char *out, size_t cap, const char *name, const char *help,
                        const double *le, const uint64_t *cnt, int n, double sum,
                        uint64_t count)
{
    size_t at = (size_t)snprintf(out, cap, "# HELP %s %s\n# TYPE %s histogram\n", name, help,
                                 name);
    for (int i = 0; i < n && at < cap; i++)
        at += (size_t)snprintf(out + at, cap - at, "%s_bucket{le=\"%g\"} %llu\n", name, le[i],
                               (unsigned long long)cnt[i]);
    if (at < cap)
        at += (size_t)snprintf(out + at, cap - at,
                               "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
                               (unsigned long long)count, name, sum, name,
                               (unsigned long long)count);
    return at < cap ? at : cap - 1;
}

static char *metrics_text(serve_server *s)
{
    char *out = NULL, req[4096], lat[2048], ttft[2048], bat[2048];
    pthread_mutex_lock(&s->mu);
    size_t at = (size_t)snprintf(req, sizeof req,
                                 "# HELP grit_serve_requests_total Generation requests answered, "
                                 "by route and HTTP status.\n"
                                 "# TYPE grit_serve_requests_total counter\n");
    for (int r = 0; r < SERVE_NROUTES; r++)
        for (int k = 0; k < SERVE_NCODES && at < sizeof req; k++)
            if (s->requests[r][k] || serve__codes[k] == 200)
                at += (size_t)snprintf(req + at, sizeof req - at,
                                       "grit_serve_requests_total{route=\"%s\",code=\"%s%.0u\"} "
                                       "%llu\n",
                                       serve__route_names[r], serve__codes[k] ? "" : "other",
                                       serve__codes[k], (unsigned long long)s->requests[r][k]);
    histogram(lat, sizeof lat, "grit_serve_request_seconds",
              "Generation request latency, arrival to the last byte made (every status).",
              serve__lat_buckets, s->latency_bucket, SERVE_NLAT, s->latency_sum,
              s->latency_count);
    histogram(ttft, sizeof ttft, "grit_serve_time_to_first_token_seconds",
              "Arrival to the first generated token (queueing included).", serve__ttft_buckets,
              s->ttft_bucket, SERVE_NTTFT, s->ttft_sum, s->ttft_count);
    histogram(bat, sizeof bat, "grit_serve_batch_size_steps",
              "Requests in each decode step (the continuous batch).", serve__batch_buckets,
              s->batch_bucket, SERVE_NBATCH, s->batch_sum, s->steps);
    int rc = asprintf(
        &out,
        "%s"
        "# HELP grit_serve_prompt_tokens_total Prompt tokens read.\n"
        "# TYPE grit_serve_prompt_tokens_total counter\ngrit_serve_prompt_tokens_total %llu\n"
        "# HELP grit_serve_completion_tokens_total Tokens generated.\n"
        "# TYPE grit_serve_completion_tokens_total counter\n"
        "grit_serve_completion_tokens_total %llu\n"
        "# HELP grit_serve_streams_cancelled_total Streams whose client went away first.\n"
        "# TYPE grit_serve_streams_cancelled_total counter\n"
        "grit_serve_streams_cancelled_total %llu\n"
        "# HELP grit_serve_generation_seconds_total Time the model spent on requests.\n"
        "# TYPE grit_serve_generation_seconds_total counter\n"
        "grit_serve_generation_seconds_total %.6f\n"
        "# HELP grit_serve_queue_depth Requests waiting for the model.\n"
        "# TYPE grit_serve_queue_depth gauge\ngrit_serve_queue_depth %d\n"
        "# HELP grit_serve_busy 1 while a request is generating.\n"
        "# TYPE grit_serve_busy gauge\ngrit_serve_busy %d\n"
        "# HELP grit_serve_batch_size Requests generating now (the batch).\n"
        "# TYPE grit_serve_batch_size gauge\ngrit_serve_batch_size %d\n"
        "# HELP grit_serve_max_batch Requests that may generate at once (--max-batch).\n"
        "# TYPE grit_serve_max_batch gauge\ngrit_serve_max_batch %d\n"
        "# HELP grit_serve_kv_cache_bytes KV-cache memory of the requests generating.\n"
        "# TYPE grit_serve_kv_cache_bytes gauge\ngrit_serve_kv_cache_bytes %zu\n"
        "# HELP grit_serve_kv_budget_bytes KV-cache memory budget (--kv-budget-mib).\n"
        "# TYPE grit_serve_kv_budget_bytes gauge\ngrit_serve_kv_budget_bytes %zu\n%s%s%s",
        req, (unsigned long long)s->prompt_tokens, (unsigned long long)s->completion_tokens,
        (unsigned long long)s->cancelled, s->gen_seconds, s->waiting, s->active > 0, s->active,
        s->max_batch, s->kv_used, s->kv_budget, lat, ttft, bat);
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
            return serve__reply(c, 413, JSON_CT,
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
        return serve__reply(c, 413, JSON_CT,
                     serve__error_body("invalid_request_error", NULL,
                                       "request body over the limit of %d bytes", SERVE_MAX_BODY));
    if (!strcmp(url, "/health") && get) {
        char *b = NULL;
        pthread_mutex_lock(&s->mu);
        int rc = asprintf(&b, "{\"status\":\"ok\",\"model\":\"%s\",\"queue_depth\":%d,"
                              "\"batch_size\":%d}",
                          s->model_id, s->waiting, s->active);
        pthread_mutex_unlock(&s->mu);
        return serve__reply(c, 200, JSON_CT, rc < 0 ? NULL : b);
    }
    if (!strcmp(url, "/metrics") && get)
        return serve__reply(c, 200, "text/plain; version=0.0.4; charset=utf-8", metrics_text(s));
    int route = !strcmp(url, "/v1/completions")        ? SERVE_ROUTE_COMPLETIONS
                : !strcmp(url, "/v1/chat/completions") ? SERVE_ROUTE_CHAT
                                                       : -1;
    int models = !strcmp(url, "/v1/models");
    if (route < 0 && !models)
        return serve__reply(c, 404, JSON_CT,
                            serve__error_body("invalid_request_error", NULL,
                                              "no route %s %s (POST /v1/completions, POST "
                                              "/v1/chat/completions, GET /v1/models, GET "
                                              "/health, GET /metrics)",
                                              method, url));
    if (!token_ok(s, c)) {
        if (route >= 0)
            serve__account(s, route, 401, 0, 0, now_seconds() - r->t0, -1, 0);
        return serve__reply(c, 401, JSON_CT,
                            serve__error_body("authentication_error", NULL,
                                              "missing or wrong bearer token (Authorization: "
                                              "Bearer TOKEN, the job's secret)"));
    }
    if (models) {
        if (!get)
            return serve__reply(c, 405, JSON_CT,
                                serve__error_body("invalid_request_error", NULL,
                                                  "use GET /v1/models"));
        char *b = NULL;
        int rc = asprintf(&b, "{\"object\":\"list\",\"data\":[{\"id\":\"%s\",\"object\":"
                              "\"model\",\"owned_by\":\"grit\"}]}",
                          s->model_id);
        return serve__reply(c, 200, JSON_CT, rc < 0 ? NULL : b);
    }
    if (!post) {
        serve__account(s, route, 405, 0, 0, now_seconds() - r->t0, -1, 0);
        return serve__reply(c, 405, JSON_CT,
                            serve__error_body("invalid_request_error", NULL, "use POST %s",
                                              serve__route_names[route]));
    }
    return serve__generate_route(s, c, route, r->body ? r->body : "", r->len, r->t0);
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
    pthread_cond_init(&s->job_cv, NULL);
    pthread_cond_init(&s->done_cv, NULL);
    snprintf(s->token, sizeof s->token, "%s", o->token);
    s->token_len = strlen(s->token);
    s->max_queue = o->max_queue > 0 ? o->max_queue : 32;
    s->max_batch = o->max_batch > 0 ? o->max_batch : 32;
    if (s->max_batch > SERVE_MAX_BATCH) {
        serve_close(s);
        return grit_errf(GRIT_EINVAL, "serve --max-batch %d: expected 1..%d", o->max_batch,
                         SERVE_MAX_BATCH);
    }
    s->kv_budget = (size_t)((o->kv_budget_mib > 0 ? o->kv_budget_mib : 1024.0) * 1048576.0);
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
    if (rc == GRIT_OK) { /* the end tokens grit generate stops at; the first starts "" */
        static const char *const ends[SERVE_END_MAX] = {"<|endoftext|>", "</s>",
                                                        "<|end_of_text|>", "<|eot_id|>",
                                                        "<|im_end|>"};
        for (int k = 0; k < SERVE_END_MAX; k++)
            if (bpe_token_id(s->tok, ends[k], strlen(ends[k]), &s->ends[s->nends]) == GRIT_OK)
                s->nends++;
        s->has_eod = s->nends > 0;
        s->eod = s->ends[0];
        rc = bpe_ctx_open(&s->ctx, s->tok);
    }
    if (rc == GRIT_OK) { /* the chat template: named, or the tokenizer config's */
        sft_template t = SFT_TPL_AUTO;
        if (o->chat && (rc = sft_template_parse(o->chat, &t)) != GRIT_OK)
            rc = grit_errf(GRIT_EINVAL, "serve --chat '%s': expected auto, llama2, llama3, "
                                        "chatml, zephyr or plain", o->chat);
        else if (sft_template_resolve(o->tokenizer ? o->tokenizer : tj, t, &s->chat) == GRIT_OK)
            s->chat_ok = 1;
        else if (o->chat) /* asked for explicitly: it must work */
            rc = grit_errf(GRIT_EINVAL, "serve --chat %s: %s", o->chat, grit_errmsg());
        else
            snprintf(s->chat_why, sizeof s->chat_why, "%s; start grit serve with --chat "
                     "TEMPLATE (llama2, llama3, chatml, zephyr, plain)", grit_errmsg());
    }
    if (rc == GRIT_OK &&
        (rc = gxi_init_work(&s->work, &s->m, s->max_batch > 256 ? s->max_batch : 256, nt)) ==
            GRIT_OK &&
        !(s->logits = malloc(sizeof *s->logits * (size_t)s->max_batch * (size_t)s->m.cfg.vocab)))
        rc = grit_errf(GRIT_ENOMEM, "out of memory");
    if (rc != GRIT_OK) {
        serve_close(s);
        return rc;
    }
    model_id(s->where, s->model_id, sizeof s->model_id);
    openblas_set_num_threads(nt); /* the worker's OpenMP team is sized by gxi (nthreads) */
    if (conn_guard_start(&s->guard) != GRIT_OK) {
        serve_close(s);
        return grit_errf(GRIT_EIO, "serve: cannot start the deadline thread");
    }
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
    s->closing = 1; /* streams end at their next token */
    pthread_mutex_unlock(&s->mu);
    if (s->d) /* joins the connection threads; the worker still finishes their jobs */
        MHD_stop_daemon(s->d);
    conn_guard_stop(s->guard);
    pthread_mutex_lock(&s->mu);
    s->stop_worker = 1;
    pthread_cond_broadcast(&s->job_cv);
    pthread_mutex_unlock(&s->mu);
    if (s->working)
        pthread_join(s->worker, NULL);
    free(s->logits);
    gxi_free(&s->work);
    gx_free(&s->m);
    bpe_ctx_close(s->ctx);
    bpe_close(s->tok);
    explicit_bzero(s->token, sizeof s->token);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->job_cv);
    pthread_cond_destroy(&s->done_cv);
    free(s);
}
