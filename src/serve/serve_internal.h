/*
 * serve_internal.h - what serve.c (HTTP, auth, deadlines, metrics) and
 * complete.c (the completion request: parse, generate, answer) share.
 */
#ifndef GRIT_SERVE_INTERNAL_H
#define GRIT_SERVE_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "data/bpe.h"
#include "model/gptneox_infer.h"
#include "serve/serve.h"

typedef struct serve__conn serve__conn;
typedef struct serve__job serve__job;

struct serve_server {
    struct MHD_Daemon *d;
    int port;
    char token[256];
    size_t token_len;
    char model_id[256];
    char where[4400];
    FILE *log;
    /* the model: used only by the worker thread, one request at a time */
    gx_model m;
    gxi_state st;
    float *logits; /* [vocab] */
    bpe *tok;
    bpe_ctx *ctx;
    int hf;        /* tokenizer.json: special tokens are recognised in prompts */
    uint32_t eod;
    int has_eod;
    /* the queue, the guard's connections and the metrics, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int max_queue, waiting, running, stop, stop_worker;
    serve__job *qhead, *qtail; /* requests for the worker, first come first served */
    pthread_cond_t job_cv, done_cv;
    pthread_t worker;
    int working;
    serve__conn *conns;
    pthread_t guard;
    int guarding;
    uint64_t next_id;
    uint64_t requests, failed, prompt_tokens, completion_tokens;
    double gen_seconds, latency_sum;
    uint64_t latency_bucket[8]; /* cumulative counts <= serve__buckets[i] */
};

extern const double serve__buckets[8];

/* An OpenAI-style error body {"error":{"message","type","param","code"}} (malloc'd). */
char *serve__error_body(const char *type, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The worker thread: runs the queued requests' generations one at a time, until
 * stop_worker (set after the daemon, whose connection threads wait for their jobs,
 * has stopped). One long-lived thread keeps one OpenMP team for the model. */
void *serve__worker(void *arg);

/* POST /v1/completions with body[0..len): *status and *out (a malloc'd JSON body);
 * *ntok_in / *ntok_out: the prompt and completion tokens (for the log and metrics). */
void serve__complete(serve_server *s, const char *body, size_t len, unsigned *status,
                     char **out, int *ntok_in, int *ntok_out);

#endif
