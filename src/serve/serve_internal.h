/*
 * serve_internal.h - what serve.c (HTTP, auth, deadlines, metrics), complete.c
 * (the requests: parse, queue, answer as JSON or server-sent events) and job.c
 * (the model's worker thread: generate, stream) share.
 *
 * A job is one generation request. The connection thread fills its request
 * part and queues it; the worker tokenizes (or renders the chat), marks it
 * started (status 0) or done with an error status, generates, and marks it
 * done. A streaming job also collects its server-sent events in sse[] as the
 * tokens come, which the connection's content reader sends. A job is freed by
 * whoever drops the last of its two references (the worker's and the
 * connection's): a client that disconnects mid-stream drops its reference and
 * sets cancelled, and the worker stops at its next token.
 */
#ifndef GRIT_SERVE_INTERNAL_H
#define GRIT_SERVE_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "data/bpe.h"
#include "core/rng.h"
#include "data/sft.h"
#include "model/gptneox_infer.h"
#include "serve/serve.h"

#define SERVE_STOP_MAX 4   /* stop strings of a request */
#define SERVE_STOP_LEN 256 /* bytes of a stop string, with its terminator */
#define SERVE_END_MAX 5    /* end tokens (<|endoftext|>, </s>, <|eot_id|>, ...) */
#define SERVE_NLAT 10      /* latency histogram buckets (serve__lat_buckets) */
#define SERVE_NTTFT 10     /* time-to-first-token buckets */
#define SERVE_NCODES 9     /* status codes counted (serve__codes), the last "other" */
#define SERVE_NBATCH 9     /* decode batch size buckets (serve__batch_buckets) */

enum { SERVE_ROUTE_COMPLETIONS, SERVE_ROUTE_CHAT, SERVE_NROUTES };

typedef struct serve__job serve__job;

/* A connection (MHD's socket context): its deadline, and the stream it carries (both
 * links under s->mu, cut by whichever of the two goes first), so that the worker can
 * start the response deadline when a stream's generation ends even if the client has
 * stopped reading (MHD then calls no content reader). */
typedef struct serve__conn {
    struct conn_guard_entry *e;
    serve__job *job;
} serve__conn;

struct serve__job {
    /* the request, filled by the connection thread */
    int route, stream;
    bpe_ids ids;         /* the prompt's ids (given, or made by the worker) */
    const char *prompt;  /* a text prompt, tokenized by the worker; NULL: ids */
    sft_msg *msgs;       /* chat: rendered by the worker */
    int nmsgs;
    int max_tokens, top_k, nstop;
    double temperature, top_p;
    uint64_t seed;
    char stop[SERVE_STOP_MAX][SERVE_STOP_LEN];
    double t0;           /* now_seconds() when the request arrived */
    serve__conn *conn;   /* a stream's connection, until either ends (under s->mu) */
    char cid[64];        /* the response id */
    long long created;   /* time(NULL) */
    /* the outcome, under s->mu */
    int started, done, cancelled, refs, accounted;
    unsigned status;     /* 0, or an HTTP status with err (and param) */
    char err[1200];
    const char *param;
    char *text;          /* the completion's bytes (not yet UTF-8 cleaned) */
    size_t tlen, text_sent; /* text_sent: bytes already streamed */
    int made;            /* tokens generated */
    const char *finish;  /* "stop" or "length" */
    double ttft;         /* seconds from t0 to the first token; < 0: none */
    char *sse;           /* streaming: the events so far */
    size_t sse_len, sse_cap, sse_off; /* sse_off: bytes the connection has taken */
    serve__job *next;
    /* the generation in progress: the worker's only */
    gxi_state cache;     /* this request's KV cache (gxi_init_cache) */
    size_t kv;           /* its bytes, counted in s->kv_used while admitted */
    int want, hold;      /* tokens to make at most; stop-string bytes held back */
    int32_t feed;        /* the token to feed at the next decode step */
    rng_t rng;           /* stream "gen", seeded by the request */
    char *t;             /* the text so far (becomes text) */
    size_t n, tcap;
    int gone;            /* the stream's client left (or the server is closing) */
};

struct serve_server {
    struct MHD_Daemon *d;
    int port;
    char token[256];
    size_t token_len;
    char model_id[256];
    char where[4400];
    FILE *log;
    /* the model: used only by the worker thread */
    gx_model m;
    gxi_state work;  /* scratch for a decode step of max_batch rows or a prompt's piece */
    float *logits;   /* [max_batch][vocab] */
    int max_batch;
    size_t kv_budget; /* bytes for the active requests' caches */
    bpe *tok;
    bpe_ctx *ctx;
    int hf;        /* tokenizer.json: special tokens are recognised in prompts */
    uint32_t eod;  /* the first end token: starts an empty prompt */
    int has_eod;
    uint32_t ends[SERVE_END_MAX]; /* generation stops at any of these, as grit generate */
    int nends;
    sft_template chat; /* the chat template; chat_ok 0: none (chat_why says why) */
    int chat_ok;
    char chat_why[900];
    struct conn_guard *guard; /* the connections' deadlines (core/connguard.h) */
    /* the queue and the metrics, under mu */
    pthread_mutex_t mu;
    int max_queue, waiting, stop_worker, closing; /* waiting: queued or held for memory */
    serve__job *qhead, *qtail; /* requests for the worker, first come first served */
    pthread_cond_t job_cv, done_cv; /* done_cv: a job started, progressed or ended */
    pthread_t worker;
    int working;
    uint64_t next_id;
    uint64_t requests[SERVE_NROUTES][SERVE_NCODES], prompt_tokens, completion_tokens, cancelled;
    double gen_seconds, latency_sum, ttft_sum;
    uint64_t latency_count, latency_bucket[SERVE_NLAT]; /* bucket: counts <= serve__lat_buckets */
    uint64_t ttft_count, ttft_bucket[SERVE_NTTFT];
    size_t kv_used;   /* bytes of the active requests' caches */
    int active;       /* requests generating (the batch) */
    uint64_t steps, batch_bucket[SERVE_NBATCH]; /* decode steps by batch size */
    double batch_sum;
};

extern const double serve__lat_buckets[SERVE_NLAT], serve__ttft_buckets[SERVE_NTTFT],
    serve__batch_buckets[SERVE_NBATCH];
extern const unsigned serve__codes[SERVE_NCODES];
extern const char *const serve__route_names[SERVE_NROUTES];

/* An OpenAI-style error body {"error":{"message","type","param","code"}} (malloc'd). */
char *serve__error_body(const char *type, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Counts one answered request in the metrics and logs it (takes s->mu). ttft < 0: none. */
void serve__account(serve_server *s, int route, unsigned status, int nin, int nout, double dt,
                    double ttft, int cancelled);

/* The worker thread: batches the queued jobs continuously (job.c), until stop_worker
 * (set after the daemon, whose connection threads wait for their jobs, has stopped)
 * and every job is done. One long-lived thread keeps one OpenMP team for the model. */
void *serve__worker(void *arg);

/* Drops one reference to j (under s->mu); the last frees it. */
void serve__job_release(serve_server *s, serve__job *j);

/* The text's bytes with every ill-formed UTF-8 part replaced by U+FFFD (malloc'd). */
char *serve__utf8_clean(const char *b, size_t n, size_t *outlen);

/* Queues body (malloc'd, freed here; NULL: MHD_NO) as the response with status and type. */
struct MHD_Connection;
int serve__reply(struct MHD_Connection *c, unsigned status, const char *type, char *body);

/* The connection's serve__conn (NULL when unguarded). */
serve__conn *serve__conn_of(struct MHD_Connection *c);

/* Sets the connection's deadline to now + seconds (INFINITY: none). */
void serve__set_deadline(serve_server *s, struct MHD_Connection *c, double seconds);

/* A request to POST /v1/completions or /v1/chat/completions, body[0..len). Answers on c
 * (JSON, or server-sent events for "stream": true) and returns MHD's result. */
int serve__generate_route(serve_server *s, struct MHD_Connection *c, int route, const char *body,
                          size_t len, double t0);

#endif
