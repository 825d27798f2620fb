/*
 * job.c - the model's worker thread of `grit serve` (see serve_internal.h):
 * takes the queued jobs in order, tokenizes the prompt or renders the chat,
 * generates, and for a streaming job appends one server-sent event per token
 * that completes text (OpenAI's text_completion / chat.completion.chunk
 * shapes), then a last event with finish_reason and usage, then [DONE].
 *
 * Generation is grit generate's: gxi_sample with rng stream "gen" seeded by the
 * request's seed, stopping at any of the vocabulary's end tokens (the families'
 * end-of-text and end-of-turn tokens) or after max_tokens, so a greedy answer
 * equals `grit generate` (with --chat for a chat).
 *
 * Streamed text concatenates to exactly the non-streaming text: an event holds
 * the bytes that no later token can change, i.e. the text minus the last
 * (longest stop string - 1) bytes (a stop string could still begin there) and
 * minus a UTF-8 character cut at its end; each piece starts where the
 * whole-text cleaning (U+FFFD per maximal ill-formed part, as Python's
 * decode(errors="replace")) would be at a boundary, so cleaning the pieces
 * equals cleaning the whole. The rest goes out with the last event.
 */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/connguard.h"
#include "core/progress.h"
#include "core/rng.h"
#include "serve/serve_internal.h"

/* Scans b[0..n) as serve__utf8_clean does; returns the offset of a character cut by
 * the end of b (n when none): the cleaning of b[0..that) is final. */
static size_t utf8_scan(const char *b, size_t n, char *o, size_t *olen)
{
    size_t j = 0;
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
        if (!o && len && k < len && i + k == n)
            return i; /* valid so far, cut by the end */
        if (len && k == len) {
            if (o)
                memcpy(o + j, b + i, len);
            j += len;
            i += len;
        } else {
            if (o)
                memcpy(o + j, "\xef\xbf\xbd", 3);
            j += 3;
            i += k ? k : 1;
        }
    }
    if (olen)
        *olen = j;
    return n;
}

char *serve__utf8_clean(const char *b, size_t n, size_t *outlen)
{
    char *o = malloc(3 * n + 1);
    if (!o)
        return NULL;
    utf8_scan(b, n, o, outlen);
    o[*outlen] = 0;
    return o;
}

void serve__job_release(serve_server *s, serve__job *j)
{
    (void)s;
    if (--j->refs > 0)
        return;
    if (j->conn)
        j->conn->job = NULL;
    bpe_ids_free(&j->ids);
    free(j->msgs);
    free(j->text);
    free(j->sse);
    free(j);
}

/* Appends text to j's events (under s->mu); -1 when out of memory. */
static int put_raw(serve__job *j, const char *text)
{
    size_t need = j->sse_len + strlen(text) + 1;
    if (need > j->sse_cap) {
        size_t cap = need * 2;
        char *p = realloc(j->sse, cap);
        if (!p)
            return -1;
        j->sse = p;
        j->sse_cap = cap;
    }
    memcpy(j->sse + j->sse_len, text, strlen(text) + 1);
    j->sse_len += strlen(text);
    return 0;
}

/* Appends the event "data: JSON\n\n" for json (stolen); -1 when out of memory. */
static int put_event(serve__job *j, json_t *json)
{
    char *t = json ? json_dumps(json, JSON_COMPACT) : NULL;
    json_decref(json);
    int rc = t && put_raw(j, "data: ") == 0 && put_raw(j, t) == 0 && put_raw(j, "\n\n") == 0;
    free(t);
    return rc ? 0 : -1;
}

/* One streamed event: the text piece (may be NULL with finish) and, in the last event,
 * finish_reason and usage. */
static json_t *chunk(serve_server *s, serve__job *j, const char *piece, size_t plen,
                     const char *finish, int role)
{
    json_t *choice;
    if (j->route == SERVE_ROUTE_CHAT) {
        json_t *delta = json_object();
        if (role)
            json_object_set_new(delta, "role", json_string("assistant"));
        if (piece)
            json_object_set_new(delta, "content", json_stringn(piece, plen));
        choice = json_pack("{s:i,s:o,s:n,s:o}", "index", 0, "delta", delta, "logprobs",
                           "finish_reason", finish ? json_string(finish) : json_null());
    } else
        choice = json_pack("{s:s%,s:i,s:n,s:o}", "text", piece ? piece : "", piece ? plen : 0,
                           "index", 0, "logprobs", "finish_reason",
                           finish ? json_string(finish) : json_null());
    json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:[o]}", "id", j->cid, "object",
                          j->route == SERVE_ROUTE_CHAT ? "chat.completion.chunk"
                                                       : "text_completion",
                          "created", (json_int_t)j->created, "model", s->model_id, "choices",
                          choice);
    if (o && finish)
        json_object_set_new(o, "usage", json_pack("{s:i,s:i,s:i}", "prompt_tokens",
                                                  (int)j->ids.n, "completion_tokens", j->made,
                                                  "total_tokens", (int)j->ids.n + j->made));
    return o;
}

/* Streams the text that is final (all of it when last), then at the end the finish
 * event and [DONE]. Returns 1 when the client is gone (stop generating). */
static int stream_out(serve_server *s, serve__job *j, const char *t, size_t n, int last,
                      int hold)
{
    size_t upto = last ? n : n > (size_t)hold ? n - (size_t)hold : 0;
    if (upto < j->text_sent)
        upto = j->text_sent;
    if (!last)
        upto = j->text_sent + utf8_scan(t + j->text_sent, upto - j->text_sent, NULL, NULL);
    char *piece = NULL;
    size_t plen = 0;
    if (upto > j->text_sent && !(piece = serve__utf8_clean(t + j->text_sent, upto - j->text_sent,
                                                            &plen)))
        return 1;
    pthread_mutex_lock(&s->mu);
    int gone = j->cancelled || s->closing, bad = 0;
    if (!gone && piece) /* a chat's first delta names the role */
        bad |= put_event(j, chunk(s, j, piece, plen, NULL, j->sse_len == 0));
    if (!gone && last) {
        bad |= put_event(j, chunk(s, j, NULL, 0, j->finish, j->sse_len == 0));
        bad |= put_raw(j, "data: [DONE]\n\n");
    }
    j->text_sent = upto;
    if (bad) { /* out of memory: end the stream where it is */
        j->cancelled = 1;
        gone = 1;
    }
    pthread_cond_broadcast(&s->done_cv);
    pthread_mutex_unlock(&s->mu);
    free(piece);
    return gone;
}

/* Makes the prompt's ids (on the worker: the tokenizer's context is its own). 0, or an
 * HTTP status with err and param filled. */
static unsigned prepare(serve_server *s, serve__job *j)
{
    int ctxlen = s->m.cfg.max_positions;
    if (j->route == SERVE_ROUTE_CHAT) {
        if (sft_render_chat(s->tok, s->chat, j->msgs, j->nmsgs, &j->ids) != GRIT_OK) {
            j->param = "messages";
            snprintf(j->err, sizeof j->err, "'messages': cannot render with template %s: %s",
                     sft_template_name(s->chat), grit_errmsg());
            return 400;
        }
    } else if (j->prompt && *j->prompt &&
               bpe_encode(s->ctx, j->prompt, strlen(j->prompt), s->hf ? BPE_ALLOW_SPECIAL : 0,
                          &j->ids) != GRIT_OK) {
        j->param = "prompt";
        snprintf(j->err, sizeof j->err, "'prompt': cannot tokenize: %s", grit_errmsg());
        return 400;
    }
    j->param = j->route == SERVE_ROUTE_CHAT ? "messages" : "prompt";
    if (j->ids.n == 0) {
        if (!s->has_eod) {
            snprintf(j->err, sizeof j->err, "'prompt': empty, and the tokenizer has no end "
                                            "token (<|endoftext|>, </s>) to start from");
            return 400;
        }
        if (!j->ids.cap && !(j->ids.v = malloc(sizeof *j->ids.v))) {
            snprintf(j->err, sizeof j->err, "out of memory");
            return 500;
        }
        j->ids.cap = j->ids.cap ? j->ids.cap : 1;
        j->ids.v[j->ids.n++] = s->eod;
    }
    if ((int)j->ids.n >= ctxlen) {
        snprintf(j->err, sizeof j->err, "'%s': %zu tokens; the model's context is %d (prompt "
                                        "and completion together)",
                 j->param, j->ids.n, ctxlen);
        return 400;
    }
    j->param = NULL;
    return 0;
}

/* The KV-cache bytes j needs (prompt and the tokens it may make), and whether they can
 * ever fit the budget. 0, or 400 with err and param filled. */
static unsigned size_up(serve_server *s, serve__job *j)
{
    int ctxlen = s->m.cfg.max_positions;
    j->want = j->max_tokens < ctxlen - (int)j->ids.n ? j->max_tokens : ctxlen - (int)j->ids.n;
    j->kv = gxi_cache_bytes(&s->m, (int)j->ids.n + j->want);
    if (j->kv <= s->kv_budget)
        return 0;
    j->param = "max_tokens";
    snprintf(j->err, sizeof j->err, "'max_tokens': %zu prompt tokens and %d to generate need a "
             "%.3f MiB KV cache; this server's budget for all requests is %.3f MiB "
             "(--kv-budget-mib): ask for fewer tokens",
             j->ids.n, j->want, (double)j->kv / 1048576.0, (double)s->kv_budget / 1048576.0);
    return 400;
}

/* Starts j (admitted, its kv counted): its cache, its prompt through the model, the
 * logits after it into logits. 0, or an HTTP status with err filled. */
static unsigned start(serve_server *s, serve__job *j, float *logits)
{
    for (int k = 0; k < j->nstop; k++)
        if ((int)strlen(j->stop[k]) - 1 > j->hold)
            j->hold = (int)strlen(j->stop[k]) - 1;
    rng_seed(&j->rng, j->seed, 0x67656e); /* stream "gen", as grit generate */
    j->finish = "length";
    j->made = 0;
    j->tcap = 4096;
    if (!(j->t = malloc(j->tcap))) {
        snprintf(j->err, sizeof j->err, "out of memory");
        return 500;
    }
    if (j->want == 0)
        return 0;
    if (gxi_init_cache(&j->cache, &s->m, (int)j->ids.n + j->want) != GRIT_OK ||
        gxi_forward_in(&s->work, &j->cache, (const int32_t *)j->ids.v, (int)j->ids.n, logits,
                       NULL) != GRIT_OK) {
        snprintf(j->err, sizeof j->err, "generation failed: %s", grit_errmsg());
        return 500;
    }
    return 0;
}

/* One token of j from the logits after its last one: sample with j's parameters and
 * rng, stop at an end token, a stop string or want tokens, stream what is final.
 * Returns 1 when j goes on (j->feed is to be fed), 0 when it is finished (text made,
 * status 0), or an HTTP status > 1 with err filled. */
static unsigned token(serve_server *s, serve__job *j, float *logits)
{
    if (j->made >= j->want || j->gone)
        return 0;
    int32_t next = gxi_sample(&s->work, logits, j->temperature, j->top_k, j->top_p, &j->rng);
    if (j->ttft < 0)
        j->ttft = now_seconds() - j->t0;
    for (int k = 0; k < s->nends; k++)
        if ((uint32_t)next == s->ends[k]) {
            j->finish = "stop";
            return 0;
        }
    size_t len;
    const char *b = bpe_token_bytes(s->tok, (uint32_t)next, &len);
    if (b && len) {
        if (j->n + len + 1 > j->tcap) {
            char *p = realloc(j->t, j->tcap = 2 * (j->n + len + 1));
            if (!p) {
                snprintf(j->err, sizeof j->err, "out of memory");
                return 500;
            }
            j->t = p;
        }
        size_t from = j->n;
        memcpy(j->t + j->n, b, len);
        j->n += len;
        for (int k = 0; k < j->nstop; k++) { /* only where the new bytes can end one */
            size_t sl = strlen(j->stop[k]), at = from >= sl ? from - sl + 1 : 0;
            char *f = memmem(j->t + at, j->n - at, j->stop[k], sl);
            if (f) {
                j->n = (size_t)(f - j->t);
                j->made++;
                j->finish = "stop";
                return 0;
            }
        }
    }
    if (j->stream)
        j->gone = stream_out(s, j, j->t, j->n, 0, j->hold);
    j->made++;
    j->feed = next;
    return j->made < j->want && !j->gone;
}

/* Ends j with status st (0: its text is the answer): the stream's last events, the
 * connection's response deadline, the count of a stream whose client left; frees its
 * cache and gives its bytes back to the budget. Takes and drops s->mu. */
static void finish(serve_server *s, serve__job *j, unsigned st, int admitted)
{
    if (st == 0 && j->stream && !j->gone)
        stream_out(s, j, j->t, j->n, 1, j->hold);
    if (st == 0) {
        j->text = j->t;
        j->tlen = j->n;
    } else
        free(j->t);
    j->t = NULL;
    gxi_free(&j->cache);
    pthread_mutex_lock(&s->mu);
    if (admitted)
        s->kv_used -= j->kv;
    j->status = st;
    j->done = 1;
    pthread_cond_broadcast(&s->done_cv);
    if (j->conn) /* a stream: the rest must be taken in time, read or not */
        conn_guard_set(s->guard, j->conn->e, SERVE_RESPONSE_S);
    if (j->cancelled && !j->accounted) { /* a stream whose client left: counted here */
        int nin = (int)j->ids.n, nout = j->made, route = j->route;
        double ttft = j->ttft, lat = now_seconds() - j->t0;
        j->accounted = 1;
        pthread_mutex_unlock(&s->mu);
        serve__account(s, route, 200, nin, nout, lat, ttft, 1);
        pthread_mutex_lock(&s->mu);
    }
    serve__job_release(s, j);
    pthread_mutex_unlock(&s->mu);
}

/* The next job to admit (under s->mu, dropped meanwhile): *held (prepared, waiting for
 * cache memory) or the queue's head, prepared and sized; jobs that fail there are
 * finished. NULL when none waits. */
static serve__job *next_job(serve_server *s, serve__job **held)
{
    while (!*held && s->qhead) {
        serve__job *j = s->qhead;
        s->qhead = j->next;
        if (!s->qhead)
            s->qtail = NULL;
        pthread_mutex_unlock(&s->mu);
        unsigned st = prepare(s, j);
        if (st == 0)
            st = size_up(s, j);
        pthread_mutex_lock(&s->mu);
        j->status = st;
        j->started = 1; /* the connection may answer now (the stream's headers) */
        pthread_cond_broadcast(&s->done_cv);
        if (st) {
            s->waiting--;
            pthread_mutex_unlock(&s->mu);
            finish(s, j, st, 0);
            pthread_mutex_lock(&s->mu);
        } else
            *held = j;
    }
    return *held;
}

void *serve__worker(void *arg)
{
    serve_server *s = arg;
    int V = s->m.cfg.vocab, na = 0;
    serve__job *act[SERVE_MAX_BATCH], *held = NULL;
    gxi_state *seq[SERVE_MAX_BATCH];
    int32_t tok[SERVE_MAX_BATCH];
    pthread_mutex_lock(&s->mu);
    for (;;) {
        double t0 = now_seconds();
        int worked = 0;
        serve__job *j;
        /* admit, first come first served: up to max_batch, within the cache budget (a job
         * that does not fit yet waits, and so do those behind it) */
        while (na < s->max_batch && (j = next_job(s, &held)) &&
               s->kv_used + j->kv <= s->kv_budget) {
            held = NULL;
            s->waiting--;
            s->kv_used += j->kv;
            s->active = na + 1;
            pthread_mutex_unlock(&s->mu);
            float *lg = s->logits + (size_t)na * (size_t)V;
            unsigned st = start(s, j, lg);
            if (st == 0)
                st = token(s, j, lg);
            if (st == 1)
                act[na++] = j;
            else
                finish(s, j, st, 1);
            worked = 1;
            pthread_mutex_lock(&s->mu);
            s->active = na;
        }
        if (na == 0) {
            if (worked)
                s->gen_seconds += now_seconds() - t0;
            else if (s->stop_worker && !s->qhead && !held)
                break;
            else if (!held && !s->qhead)
                pthread_cond_wait(&s->job_cv, &s->mu);
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        /* one decode step for every active job, then a token for each */
        for (int i = 0; i < na; i++) {
            seq[i] = &act[i]->cache;
            tok[i] = act[i]->feed;
        }
        grit_err rc = gxi_decode(&s->work, seq, tok, na, s->logits);
        int keep = 0;
        for (int i = 0; i < na; i++) {
            unsigned st = rc != GRIT_OK ? 500 : token(s, act[i], s->logits + (size_t)i * (size_t)V);
            if (rc != GRIT_OK)
                snprintf(act[i]->err, sizeof act[i]->err, "generation failed: %s",
                         grit_errmsg());
            if (st == 1)
                act[keep++] = act[i];
            else
                finish(s, act[i], st, 1);
        }
        pthread_mutex_lock(&s->mu);
        s->steps++;
        s->batch_sum += na;
        for (int b = 0; b < SERVE_NBATCH; b++)
            s->batch_bucket[b] += na <= serve__batch_buckets[b];
        s->active = na = keep;
        s->gen_seconds += now_seconds() - t0;
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}
