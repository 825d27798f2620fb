/*
 * complete.c - POST /v1/completions and POST /v1/chat/completions (see
 * serve.h): parse and check the request, queue it for the worker (job.c),
 * answer in OpenAI's shapes: text_completion / chat.completion as one JSON
 * body, or with "stream": true as server-sent events (text/event-stream, chunked)
 * that the connection's content reader takes from the job as the worker makes them.
 *
 * The request, every field checked (anything else is a 400 naming the field):
 *   prompt       (completions) a string (tokenized with the served tokenizer; ""
 *                starts from <|endoftext|> as grit generate does) or an array of ids
 *   messages     (chat) a non-empty list of {"role", "content"} strings: role
 *                "system" (first only), then "user" and "assistant" alternating,
 *                user first and last; rendered with the server's chat template
 *   max_tokens   integer >= 0 (16); fewer when the context ends first
 *   temperature  number in [0, 100] (1; 0 is greedy); top_p in (0, 1] (1);
 *   top_k        integer >= 0 (0 = all); seed integer >= 0 (0)
 *   stop         a string or an array of up to 4 non-empty strings: the text ends
 *                before the first occurrence (finish_reason "stop")
 *   stream       boolean (false)
 *   model        string (any: one model is served); user string (ignored); n 1 only
 *
 * A stream whose client goes away: MHD frees the response, whose free callback
 * marks the job cancelled; the worker stops at its next token. Writes never
 * raise SIGPIPE (MHD sends with MSG_NOSIGNAL; grit serve also ignores SIGPIPE).
 */
#define _GNU_SOURCE
#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/progress.h"
#include "serve/serve_internal.h"

char *serve__error_body(const char *type, const char *param, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *e = json_pack("{s:{s:s,s:s,s:o,s:n}}", "error", "message", msg, "type", type,
                          "param", param ? json_string(param) : json_null(), "code");
    char *s = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    return s;
}

/* Reads an integer field in [lo, hi]; absent keeps *out. */
static int get_int(json_t *o, const char *k, long lo, long hi, long *out, char *err, size_t cap)
{
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        snprintf(err, cap, "'%s': expected an integer in [%ld, %ld]", k, lo, hi);
        return -1;
    }
    *out = (long)json_integer_value(v);
    return 0;
}

static int get_num(json_t *o, const char *k, double lo, double hi, int lo_open, double *out,
                   char *err, size_t cap)
{
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v))
        return 0;
    double x = json_number_value(v);
    if (!json_is_number(v) || !(lo_open ? x > lo : x >= lo) || !(x <= hi)) {
        snprintf(err, cap, "'%s': expected a number in %c%g, %g]", k, lo_open ? '(' : '[', lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

static const char *const known_common[] = {"max_tokens", "temperature", "top_p", "top_k", "seed",
                                           "stop",       "model",       "user",  "n",     "stream",
                                           NULL};

/* The chat's messages into j->msgs (pointers into the document). */
static int parse_messages(json_t *v, serve__job *j, char *err, size_t cap, const char **param,
                          char *pbuf, size_t pcap)
{
    *param = "messages";
    if (!v) {
        snprintf(err, cap, "missing field 'messages'");
        return -1;
    }
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > 4096) {
        snprintf(err, cap, "'messages': expected a non-empty list of {\"role\", \"content\"} "
                           "objects (at most 4096)");
        return -1;
    }
    size_t n = json_array_size(v);
    if (!(j->msgs = calloc(n, sizeof *j->msgs))) {
        snprintf(err, cap, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(v, i);
        const char *role = json_string_value(json_object_get(m, "role"));
        const char *content = json_string_value(json_object_get(m, "content"));
        int sys = role && !strcmp(role, "system"), usr = role && !strcmp(role, "user"),
            ast = role && !strcmp(role, "assistant");
        int want_user = i == 0 || (i == 1 && !strcmp(j->msgs[0].role, "system")) ||
                        !strcmp(j->msgs[i - 1].role, "assistant");
        snprintf(pbuf, pcap, "messages[%zu].role", i);
        *param = pbuf;
        if (!json_is_object(m)) {
            snprintf(pbuf, pcap, "messages[%zu]", i);
            snprintf(err, cap, "'%s': expected an object {\"role\", \"content\"}", pbuf);
            return -1;
        }
        if (!sys && !usr && !ast) {
            snprintf(err, cap, "'%s': expected \"system\", \"user\" or \"assistant\"%s", pbuf,
                     role ? "" : " (missing or not a string)");
            return -1;
        }
        if (sys && i != 0) {
            snprintf(err, cap, "'%s': \"system\" only as the first message", pbuf);
            return -1;
        }
        if (!sys && want_user != usr) {
            snprintf(err, cap, "'%s': expected \"%s\" (user and assistant turns alternate, "
                               "user first)", pbuf, want_user ? "user" : "assistant");
            return -1;
        }
        if (!content) {
            snprintf(pbuf, pcap, "messages[%zu].content", i);
            snprintf(err, cap, "'%s': expected a string", pbuf);
            return -1;
        }
        j->msgs[j->nmsgs++] = (sft_msg){role, content};
    }
    if (strcmp(j->msgs[n - 1].role, "user")) {
        snprintf(pbuf, pcap, "messages[%zu].role", n - 1);
        snprintf(err, cap, "'%s': the last message must be \"user\" (the model answers it)",
                 pbuf);
        return -1;
    }
    *param = NULL;
    return 0;
}

/* Parses the request into j; on error fills err and *param (the field) and returns -1. */
static int parse(serve_server *s, json_t *o, serve__job *j, char *err, size_t cap,
                 const char **param, char *pbuf, size_t pcap)
{
    const char *k, *own = j->route == SERVE_ROUTE_CHAT ? "messages" : "prompt";
    json_t *v;
    json_object_foreach(o, k, v)
    {
        int ok = !strcmp(k, own);
        for (const char *const *n = known_common; *n; n++)
            ok |= !strcmp(k, *n);
        if (!ok) {
            *param = k;
            snprintf(err, cap, "unknown field '%s'; expected one of: %s, max_tokens, "
                               "temperature, top_p, top_k, seed, stop, stream, model, user, n",
                     k, own);
            return -1;
        }
    }
    long mt = 16, tk = 0, seed = 0, n = 1;
    *param = NULL;
#define CHECK(f, call)                                                                             \
    do {                                                                                           \
        *param = f;                                                                                \
        if (call)                                                                                  \
            return -1;                                                                             \
    } while (0)
    CHECK("max_tokens", get_int(o, "max_tokens", 0, 1 << 20, &mt, err, cap));
    CHECK("top_k", get_int(o, "top_k", 0, 1 << 24, &tk, err, cap));
    CHECK("seed", get_int(o, "seed", 0, 0x7fffffffffffffffL, &seed, err, cap));
    CHECK("n", get_int(o, "n", 1, 1, &n, err, cap));
    j->temperature = 1.0;
    j->top_p = 1.0;
    CHECK("temperature", get_num(o, "temperature", 0, 100, 0, &j->temperature, err, cap));
    CHECK("top_p", get_num(o, "top_p", 0, 1, 1, &j->top_p, err, cap));
    j->max_tokens = (int)mt;
    j->top_k = (int)tk;
    j->seed = (uint64_t)seed;
    v = json_object_get(o, "stream");
    CHECK("stream", v && !json_is_null(v) && !json_is_boolean(v) &&
                        snprintf(err, cap, "'stream': expected true or false"));
    j->stream = json_is_true(v);
    for (const char *const *f = (const char *const[]){"model", "user", NULL}; *f; f++) {
        v = json_object_get(o, *f);
        CHECK(*f, v && !json_is_string(v) && snprintf(err, cap, "'%s': expected a string", *f));
    }
    v = json_object_get(o, "stop");
    *param = "stop";
    if (json_is_string(v) || json_is_array(v)) {
        size_t cnt = json_is_string(v) ? 1 : json_array_size(v);
        if (cnt > SERVE_STOP_MAX) {
            snprintf(err, cap, "'stop': expected at most %d strings, got %zu", SERVE_STOP_MAX,
                     cnt);
            return -1;
        }
        for (size_t i = 0; i < cnt; i++) {
            json_t *e = json_is_string(v) ? v : json_array_get(v, i);
            if (!json_is_string(e) || !json_string_length(e) ||
                json_string_length(e) >= SERVE_STOP_LEN) {
                snprintf(err, cap, "'stop': expected non-empty strings shorter than %d bytes",
                         SERVE_STOP_LEN);
                return -1;
            }
            memcpy(j->stop[j->nstop++], json_string_value(e), json_string_length(e) + 1);
        }
    } else if (v && !json_is_null(v)) {
        snprintf(err, cap, "'stop': expected a string or an array of strings");
        return -1;
    }
#undef CHECK
    if (j->route == SERVE_ROUTE_CHAT) {
        if (!s->chat_ok) {
            *param = NULL;
            snprintf(err, cap, "this server has no chat template: %s", s->chat_why);
            return -1;
        }
        return parse_messages(json_object_get(o, "messages"), j, err, cap, param, pbuf, pcap);
    }
    *param = "prompt";
    v = json_object_get(o, "prompt");
    if (json_is_string(v)) {
        j->prompt = json_string_value(v);
    } else if (json_is_array(v)) {
        size_t cnt = json_array_size(v);
        j->ids.v = malloc(sizeof *j->ids.v * (cnt ? cnt : 1));
        if (!j->ids.v) {
            snprintf(err, cap, "out of memory");
            return -1;
        }
        j->ids.cap = cnt ? cnt : 1;
        for (size_t i = 0; i < cnt; i++) {
            json_t *e = json_array_get(v, i);
            if (!json_is_integer(e) || json_integer_value(e) < 0 ||
                json_integer_value(e) >= s->m.cfg.vocab) {
                snprintf(err, cap, "'prompt': entry %zu: expected a token id in [0, %d)", i,
                         s->m.cfg.vocab);
                return -1;
            }
            j->ids.v[j->ids.n++] = (uint32_t)json_integer_value(e);
        }
    } else {
        snprintf(err, cap, v ? "'prompt': expected a string or an array of token ids"
                             : "missing field 'prompt'");
        return -1;
    }
    *param = NULL;
    return 0;
}

/* The whole answer of a finished job (a JSON body, malloc'd; NULL without memory). */
static char *answer(serve_server *s, serve__job *j)
{
    size_t clen;
    char *clean = serve__utf8_clean(j->text, j->tlen, &clen);
    if (!clean)
        return NULL;
    json_t *usage = json_pack("{s:i,s:i,s:i}", "prompt_tokens", (int)j->ids.n,
                              "completion_tokens", j->made, "total_tokens",
                              (int)j->ids.n + j->made);
    json_t *r;
    if (j->route == SERVE_ROUTE_CHAT)
        r = json_pack("{s:s,s:s,s:I,s:s,s:[{s:i,s:{s:s,s:s%},s:n,s:s}],s:o}", "id", j->cid,
                      "object", "chat.completion", "created", (json_int_t)j->created, "model",
                      s->model_id, "choices", "index", 0, "message", "role", "assistant",
                      "content", clean, clen, "logprobs", "finish_reason", j->finish, "usage",
                      usage);
    else
        r = json_pack("{s:s,s:s,s:I,s:s,s:[{s:s%,s:i,s:n,s:s}],s:o}", "id", j->cid, "object",
                      "text_completion", "created", (json_int_t)j->created, "model",
                      s->model_id, "choices", "text", clean, clen, "index", 0, "logprobs",
                      "finish_reason", j->finish, "usage", usage);
    free(clean);
    char *out = r ? json_dumps(r, JSON_COMPACT) : NULL;
    json_decref(r);
    return out;
}

/* A stream's content reader: the events the worker has made, waiting for more. */
typedef struct sse_ctx {
    serve_server *s;
    serve__job *j;
    struct MHD_Connection *c;
} sse_ctx;

static void account_job(serve_server *s, serve__job *j, int cancelled)
{
    /* under s->mu: take the numbers, count once */
    int nin = (int)j->ids.n, nout = j->made, route = j->route;
    double ttft = j->ttft, dt = now_seconds() - j->t0;
    j->accounted = 1;
    pthread_mutex_unlock(&s->mu);
    serve__account(s, route, 200, nin, nout, dt, ttft, cancelled);
    pthread_mutex_lock(&s->mu);
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    sse_ctx *x = cls;
    serve_server *s = x->s;
    serve__job *j = x->j;
    pthread_mutex_lock(&s->mu);
    while (j->sse_off == j->sse_len && !j->done)
        pthread_cond_wait(&s->done_cv, &s->mu);
    size_t n = j->sse_len - j->sse_off;
    if (n == 0) { /* counted before the client sees the end, so /metrics then includes it */
        if (!j->accounted)
            account_job(s, j, 0);
        pthread_mutex_unlock(&s->mu);
        serve__set_deadline(s, x->c, SERVE_RESPONSE_S); /* the stream's end must be taken */
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    n = n < max ? n : max;
    memcpy(buf, j->sse + j->sse_off, n);
    j->sse_off += n;
    pthread_mutex_unlock(&s->mu);
    return (ssize_t)n;
}

/* The response is gone (sent, or the client disconnected): the worker stops. */
static void sse_free(void *cls)
{
    sse_ctx *x = cls;
    serve_server *s = x->s;
    pthread_mutex_lock(&s->mu);
    if (!x->j->done) /* the worker stops at its next token and counts the request then */
        x->j->cancelled = 1;
    else if (!x->j->accounted) /* made, but the client left before the end */
        account_job(s, x->j, 1);
    serve__job_release(s, x->j);
    pthread_mutex_unlock(&s->mu);
    free(x);
}

int serve__generate_route(serve_server *s, struct MHD_Connection *c, int route, const char *body,
                          size_t len, double t0)
{
    char perr[1200] = "", pbuf[64];
    const char *param = NULL;
    unsigned status = 400;
    char *out = NULL;
    int nin = 0, nout = 0;
    double ttft = -1;
    json_error_t je;
    serve__job *j = calloc(1, sizeof *j);
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!j) {
        status = 500;
        out = serve__error_body("server_error", NULL, "out of memory");
        goto done;
    }
    j->route = route;
    j->t0 = t0;
    j->ttft = -1;
    j->refs = 1;
    if (!o || !json_is_object(o)) {
        out = o ? serve__error_body("invalid_request_error", NULL,
                                    "the request body must be a JSON object")
                : serve__error_body("invalid_request_error", NULL,
                                    "malformed JSON at line %d, column %d: %s", je.line,
                                    je.column, je.text);
        goto done;
    }
    if (parse(s, o, j, perr, sizeof perr, &param, pbuf, sizeof pbuf) != 0) {
        out = serve__error_body("invalid_request_error", param, "%s", perr);
        goto done;
    }
    serve__set_deadline(s, c, INFINITY); /* queued or generating: the queue bound applies */
    pthread_mutex_lock(&s->mu); /* queue for the worker, or refuse when the queue is full */
    if (s->waiting >= s->max_queue) {
        pthread_mutex_unlock(&s->mu);
        status = 503;
        out = serve__error_body("server_error", NULL, "busy: %d requests are waiting; retry later",
                                s->max_queue);
        goto done;
    }
    snprintf(j->cid, sizeof j->cid, "%s-grit-%llu",
             route == SERVE_ROUTE_CHAT ? "chatcmpl" : "cmpl", (unsigned long long)++s->next_id);
    j->created = (long long)time(NULL);
    j->refs = 2; /* the worker's and ours */
    s->waiting++;
    if (s->qtail)
        s->qtail->next = j;
    else
        s->qhead = j;
    s->qtail = j;
    pthread_cond_signal(&s->job_cv);
    while (!(j->stream ? j->started : j->done))
        pthread_cond_wait(&s->done_cv, &s->mu);
    status = j->status;
    nin = (int)j->ids.n;
    pthread_mutex_unlock(&s->mu);
    if (status) {
        out = serve__error_body(status == 400 ? "invalid_request_error" : "server_error",
                                j->param, "%s", j->err);
        goto done;
    }
    if (j->stream) { /* the events go out as the worker makes them; the job is the reader's */
        sse_ctx *x = malloc(sizeof *x);
        struct MHD_Response *r =
            x ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, x, sse_free)
              : NULL;
        json_decref(o);
        if (!r) {
            free(x);
            pthread_mutex_lock(&s->mu);
            j->cancelled = 1;
            serve__job_release(s, j);
            pthread_mutex_unlock(&s->mu);
            return MHD_NO;
        }
        *x = (sse_ctx){s, j, c};
        serve__conn *h = serve__conn_of(c);
        pthread_mutex_lock(&s->mu);
        int ended = j->done;
        if (h && !ended) { /* the worker starts the response deadline at the end */
            if (h->job && h->job != j)
                h->job->conn = NULL;
            j->conn = h;
            h->job = j;
        }
        pthread_mutex_unlock(&s->mu);
        if (ended)
            serve__set_deadline(s, c, SERVE_RESPONSE_S);
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-store");
        MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
        enum MHD_Result ret = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return ret;
    }
    nout = j->made;
    ttft = j->ttft;
    out = answer(s, j);
    status = out ? 200 : 500;
done:
    serve__set_deadline(s, c, SERVE_RESPONSE_S);
    serve__account(s, route, status, nin, nout, now_seconds() - t0, ttft, 0);
    if (j) {
        pthread_mutex_lock(&s->mu);
        serve__job_release(s, j);
        pthread_mutex_unlock(&s->mu);
    }
    json_decref(o);
    return serve__reply(c, status, "application/json", out);
}
