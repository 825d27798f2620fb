/*
 * complete.c - POST /v1/completions (see serve.h): parse and check the request,
 * wait for the model, generate, answer in OpenAI's text_completion shape.
 *
 * The request, every field checked (anything else is a 400 naming the field):
 *   prompt       string (tokenized with the served tokenizer; "" starts from
 *                <|endoftext|> as grit generate does) or an array of token ids
 *   max_tokens   integer >= 0 (16); fewer when the context ends first
 *   temperature  number in [0, 100] (1; 0 is greedy); top_p in (0, 1] (1);
 *   top_k        integer >= 0 (0 = all); seed integer >= 0 (0)
 *   stop         a string or an array of up to 4 non-empty strings: the text ends
 *                before the first occurrence (finish_reason "stop")
 *   model        string (any: one model is served); user string (ignored)
 *   n            1 only; stream false only
 * Generation stops at <|endoftext|> (finish_reason "stop") or after max_tokens
 * ("length"). The draw is gxi_sample with rng stream "gen" seeded by seed, as in
 * grit generate, so the same request gives the same text.
 *
 * Text: the completion's bytes are the tokens' bytes; a byte sequence that is not
 * valid UTF-8 (a character cut between tokens) becomes U+FFFD in the JSON string, one
 * per maximal ill-formed part (as Python's decode(errors="replace")).
 */
#define _GNU_SOURCE
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/progress.h"
#include "core/rng.h"
#include "serve/serve_internal.h"

#define STOP_MAX 4
#define STOP_LEN 256

/* One queued generation: the connection thread fills the request and waits for done. */
struct serve__job {
    struct creq *q;
    char *text;
    size_t tlen;
    int made;
    const char *finish;
    char err[1200];
    unsigned status;
    int done;
    serve__job *next;
};

typedef struct creq {
    bpe_ids ids;
    int max_tokens, top_k, nstop;
    double temperature, top_p;
    uint64_t seed;
    char stop[STOP_MAX][STOP_LEN];
    const char *prompt; /* into the parsed document, or NULL for ids */
} creq;

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

static const char *const known[] = {"prompt", "max_tokens", "temperature", "top_p", "top_k",
                                    "seed",   "stop",       "model",       "user",  "n",
                                    "stream", NULL};

/* Parses the request into q; on error fills err and *param (the field) and returns -1. */
static int parse(serve_server *s, json_t *o, creq *q, char *err, size_t cap, const char **param)
{
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        int ok = 0;
        for (const char *const *n = known; *n; n++)
            ok |= !strcmp(k, *n);
        if (!ok) {
            *param = k;
            snprintf(err, cap, "unknown field '%s'; expected one of: prompt, max_tokens, "
                               "temperature, top_p, top_k, seed, stop, model, user, n, stream", k);
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
    q->temperature = 1.0;
    q->top_p = 1.0;
    CHECK("temperature", get_num(o, "temperature", 0, 100, 0, &q->temperature, err, cap));
    CHECK("top_p", get_num(o, "top_p", 0, 1, 1, &q->top_p, err, cap));
    q->max_tokens = (int)mt;
    q->top_k = (int)tk;
    q->seed = (uint64_t)seed;
    v = json_object_get(o, "stream");
    CHECK("stream", v && !json_is_null(v) && !json_is_false(v) &&
                        snprintf(err, cap, "'stream': only false is supported (no streaming)"));
    for (const char *const *f = (const char *const[]){"model", "user", NULL}; *f; f++) {
        v = json_object_get(o, *f);
        CHECK(*f, v && !json_is_string(v) && snprintf(err, cap, "'%s': expected a string", *f));
    }
    v = json_object_get(o, "stop");
    *param = "stop";
    if (json_is_string(v) || json_is_array(v)) {
        size_t cnt = json_is_string(v) ? 1 : json_array_size(v);
        if (cnt > STOP_MAX) {
            snprintf(err, cap, "'stop': expected at most %d strings, got %zu", STOP_MAX, cnt);
            return -1;
        }
        for (size_t i = 0; i < cnt; i++) {
            json_t *e = json_is_string(v) ? v : json_array_get(v, i);
            if (!json_is_string(e) || !json_string_length(e) ||
                json_string_length(e) >= STOP_LEN) {
                snprintf(err, cap, "'stop': expected non-empty strings shorter than %d bytes",
                         STOP_LEN);
                return -1;
            }
            memcpy(q->stop[q->nstop++], json_string_value(e), json_string_length(e) + 1);
        }
    } else if (v && !json_is_null(v)) {
        snprintf(err, cap, "'stop': expected a string or an array of strings");
        return -1;
    }
    *param = "prompt";
    v = json_object_get(o, "prompt");
    if (json_is_string(v)) {
        q->prompt = json_string_value(v);
    } else if (json_is_array(v)) {
        size_t cnt = json_array_size(v);
        q->ids.v = malloc(sizeof *q->ids.v * (cnt ? cnt : 1));
        if (!q->ids.v) {
            snprintf(err, cap, "out of memory");
            return -1;
        }
        q->ids.cap = cnt ? cnt : 1;
        for (size_t i = 0; i < cnt; i++) {
            json_t *e = json_array_get(v, i);
            if (!json_is_integer(e) || json_integer_value(e) < 0 ||
                json_integer_value(e) >= s->m.cfg.vocab) {
                snprintf(err, cap, "'prompt': entry %zu: expected a token id in [0, %d)", i,
                         s->m.cfg.vocab);
                return -1;
            }
            q->ids.v[q->ids.n++] = (uint32_t)json_integer_value(e);
        }
    } else {
        snprintf(err, cap, v ? "'prompt': expected a string or an array of token ids"
                             : "missing field 'prompt'");
        return -1;
    }
#undef CHECK
    *param = NULL;
    return 0;
}

/* Copies b[0..n) with every ill-formed part replaced by U+FFFD, one per maximal
 * subpart of a valid sequence (Unicode's recommended practice, as Python's
 * decode(errors="replace") does); *outlen its length. */
static char *utf8_clean(const char *b, size_t n, size_t *outlen)
{
    char *o = malloc(3 * n + 1);
    size_t j = 0;
    if (!o)
        return NULL;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)b[i];
        size_t len = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
                                 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        size_t k = len ? 1 : 0;
        while (k && k < len && i + k < n) {
            unsigned char d = (unsigned char)b[i + k], lo = 0x80, hi = 0xbf;
            if (k == 1) { /* no overlongs, surrogates or code points past U+10FFFF */
                lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : lo;
                hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : hi;
            }
            if (d < lo || d > hi)
                break;
            k++;
        }
        if (len && k == len) {
            memcpy(o + j, b + i, len);
            j += len;
            i += len;
        } else {
            memcpy(o + j, "\xef\xbf\xbd", 3);
            j += 3;
            i += k ? k : 1;
        }
    }
    o[j] = 0;
    *outlen = j;
    return o;
}

/* Generates (on the worker thread). Returns 0, or an HTTP status with err filled. */
static unsigned generate(serve_server *s, creq *q, char **text, size_t *tlen, int *made,
                         const char **finish, char *err, size_t cap)
{
    int ctxlen = s->st.max_t, want;
    if (q->prompt && *q->prompt &&
        bpe_encode(s->ctx, q->prompt, strlen(q->prompt), s->hf ? BPE_ALLOW_SPECIAL : 0,
                   &q->ids) != GRIT_OK) {
        snprintf(err, cap, "'prompt': cannot tokenize: %s", grit_errmsg());
        return 400;
    }
    if (q->ids.n == 0) {
        if (!s->has_eod) {
            snprintf(err, cap, "'prompt': empty, and the tokenizer has no <|endoftext|> token to "
                               "start from");
            return 400;
        }
        if (!q->ids.cap && !(q->ids.v = malloc(sizeof *q->ids.v))) {
            snprintf(err, cap, "out of memory");
            return 500;
        }
        q->ids.cap = q->ids.cap ? q->ids.cap : 1;
        q->ids.v[q->ids.n++] = s->eod;
    }
    if ((int)q->ids.n >= ctxlen) {
        snprintf(err, cap, "'prompt': %zu tokens; the model's context is %d (prompt and "
                           "completion together)", q->ids.n, ctxlen);
        return 400;
    }
    want = q->max_tokens < ctxlen - (int)q->ids.n ? q->max_tokens : ctxlen - (int)q->ids.n;
    size_t cap_text = 4096, n = 0;
    char *t = malloc(cap_text);
    if (!t) {
        snprintf(err, cap, "out of memory");
        return 500;
    }
    rng_t rng;
    rng_seed(&rng, q->seed, 0x67656e); /* stream "gen", as grit generate */
    gxi_reset(&s->st);
    grit_err rc = gxi_forward(&s->st, (const int32_t *)q->ids.v, (int)q->ids.n, s->logits, NULL);
    *finish = "length";
    *made = 0;
    for (; rc == GRIT_OK && *made < want; (*made)++) {
        int32_t next = gxi_sample(&s->st, s->logits, q->temperature, q->top_k, q->top_p, &rng);
        if (s->has_eod && (uint32_t)next == s->eod) {
            *finish = "stop";
            break;
        }
        size_t len;
        const char *b = bpe_token_bytes(s->tok, (uint32_t)next, &len);
        if (b && len) {
            if (n + len + 1 > cap_text) {
                char *p = realloc(t, cap_text = 2 * (n + len + 1));
                if (!p) {
                    free(t);
                    snprintf(err, cap, "out of memory");
                    return 500;
                }
                t = p;
            }
            size_t from = n;
            memcpy(t + n, b, len);
            n += len;
            int hit = 0;
            for (int k = 0; k < q->nstop && !hit; k++) { /* only where the new bytes can end one */
                size_t sl = strlen(q->stop[k]), at = from >= sl ? from - sl + 1 : 0;
                char *f = memmem(t + at, n - at, q->stop[k], sl);
                if (f) {
                    n = (size_t)(f - t);
                    hit = 1;
                }
            }
            if (hit) {
                (*made)++;
                *finish = "stop";
                break;
            }
        }
        if (*made + 1 < want)
            rc = gxi_forward(&s->st, &next, 1, s->logits, NULL);
    }
    if (rc != GRIT_OK) {
        free(t);
        snprintf(err, cap, "generation failed: %s", grit_errmsg());
        return 500;
    }
    *text = t;
    *tlen = n;
    return 0;
}

void *serve__worker(void *arg)
{
    serve_server *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop_worker || s->qhead) {
        serve__job *j = s->qhead;
        if (!j) {
            pthread_cond_wait(&s->job_cv, &s->mu);
            continue;
        }
        s->qhead = j->next;
        if (!s->qhead)
            s->qtail = NULL;
        s->waiting--;
        s->running = 1;
        pthread_mutex_unlock(&s->mu);
        double t0 = now_seconds();
        j->status = generate(s, j->q, &j->text, &j->tlen, &j->made, &j->finish, j->err,
                             sizeof j->err);
        double dt = now_seconds() - t0;
        pthread_mutex_lock(&s->mu);
        s->running = 0;
        s->gen_seconds += dt;
        j->done = 1;
        pthread_cond_broadcast(&s->done_cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

void serve__complete(serve_server *s, const char *body, size_t len, unsigned *status, char **out,
                     int *ntok_in, int *ntok_out)
{
    char perr[1200] = "";
    const char *param = NULL;
    creq q;
    memset(&q, 0, sizeof q);
    json_error_t je;
    *ntok_in = *ntok_out = 0;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!o || !json_is_object(o)) {
        *status = 400;
        *out = o ? serve__error_body("invalid_request_error", NULL,
                                     "the request body must be a JSON object")
                 : serve__error_body("invalid_request_error", NULL,
                                     "malformed JSON at line %d, column %d: %s", je.line,
                                     je.column, je.text);
        json_decref(o);
        return;
    }
    if (parse(s, o, &q, perr, sizeof perr, &param) != 0) {
        *status = 400;
        *out = serve__error_body("invalid_request_error", param, "%s", perr);
        goto done;
    }
    /* queue for the worker, or refuse when the queue is full */
    serve__job job;
    memset(&job, 0, sizeof job);
    job.q = &q;
    job.finish = "length";
    pthread_mutex_lock(&s->mu);
    if (s->waiting >= s->max_queue) {
        pthread_mutex_unlock(&s->mu);
        *status = 503;
        *out = serve__error_body("server_error", NULL, "busy: %d requests are waiting; retry later",
                                 s->max_queue);
        goto done;
    }
    s->waiting++;
    if (s->qtail)
        s->qtail->next = &job;
    else
        s->qhead = &job;
    s->qtail = &job;
    pthread_cond_signal(&s->job_cv);
    while (!job.done)
        pthread_cond_wait(&s->done_cv, &s->mu);
    uint64_t id = ++s->next_id;
    pthread_mutex_unlock(&s->mu);
    char *text = job.text, *err = job.err;
    size_t tlen = job.tlen;
    int made = job.made;
    const char *finish = job.finish;
    unsigned st = job.status;
    *ntok_in = (int)q.ids.n;
    if (st) {
        *status = st;
        *out = serve__error_body(st == 400 ? "invalid_request_error" : "server_error",
                                 st == 400 ? "prompt" : NULL, "%s", err);
        goto done;
    }
    size_t clen;
    char *clean = utf8_clean(text, tlen, &clen);
    free(text);
    char cid[64];
    snprintf(cid, sizeof cid, "cmpl-grit-%llu", (unsigned long long)id);
    json_t *r = clean ? json_pack("{s:s,s:s,s:I,s:s,s:[{s:s%,s:i,s:n,s:s}],s:{s:i,s:i,s:i}}",
                                  "id", cid, "object", "text_completion", "created",
                                  (json_int_t)time(NULL), "model", s->model_id, "choices",
                                  "text", clean, clen, "index", 0, "logprobs", "finish_reason",
                                  finish, "usage", "prompt_tokens", (int)q.ids.n,
                                  "completion_tokens", made, "total_tokens",
                                  (int)q.ids.n + made)
                      : NULL;
    free(clean);
    *out = r ? json_dumps(r, JSON_COMPACT) : NULL;
    json_decref(r);
    *status = *out ? 200 : 500;
    *ntok_out = made;
done:
    bpe_ids_free(&q.ids);
    json_decref(o);
}
