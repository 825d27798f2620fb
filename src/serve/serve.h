/*
 * serve.h - `grit serve`: an HTTP endpoint that generates text from a checkpoint.
 *
 * Routes (docs/serve.md):
 *   POST /v1/completions   OpenAI-compatible completion (prompt -> text)  [token]
 *   POST /v1/chat/completions  chat (messages -> message), chat template  [token]
 *   GET  /v1/models        the one model served                           [token]
 *   GET  /health           {"status":"ok", ...}: liveness, no secret in it
 *   GET  /metrics          Prometheus text: requests, tokens, queue depth, latency
 *
 * Authentication: every /v1/ route needs "Authorization: Bearer TOKEN" with the
 * job's secret (serve_opts.token, compared in constant time); a missing or wrong
 * token is a 401 with an OpenAI-style error body. The token never reaches a log
 * line, a response or an error message. It binds 127.0.0.1 unless told otherwise.
 *
 * Generation is the inference path of grit generate (model/gptneox_infer.h: the
 * same KV cache, sampling and seed stream), so a greedy completion equals
 * `grit generate` on the same prompt. One worker thread batches the requests
 * continuously (job.c): each step it admits waiting requests (first come first
 * served) up to serve_opts.max_batch and within the KV-cache memory budget
 * (serve_opts.kv_budget_mib; a request's cache holds its prompt and max_tokens, one
 * that can never fit is a 400), feeds their prompts, then runs one decode step for
 * every active request (model/gptneox_infer.h: gxi_decode, bitwise the answer each
 * gets alone) and samples each with its own parameters and seed. Requests that are
 * not admitted wait in a bounded queue (serve_opts.max_queue; past it: 503).
 * "stream": true answers with server-sent events as the tokens come (complete.c,
 * job.c); a client that disconnects mid-stream stops its generation at its next
 * token.
 *
 * Deadlines (no slow client holds a slot for long; core/connguard.h): a whole
 * request (headers and body) must arrive within SERVE_REQUEST_S of the connection
 * opening or of its previous response, and a response must be taken within
 * SERVE_RESPONSE_S of its generation's end; the guard shuts down the sockets past
 * their deadline. Bodies over
 * SERVE_MAX_BODY bytes get a 413 without being read; malformed JSON, unknown
 * fields, wrong types, out-of-range values and prompts longer than the context
 * get a 400 naming the field; nothing a client sends can crash the server.
 *
 * Ownership: serve_open / serve_close; the server owns the model and tokenizer.
 */
#ifndef GRIT_SERVE_SERVE_H
#define GRIT_SERVE_SERVE_H

#include <stdio.h>

#include "core/error.h"

#define SERVE_REQUEST_S 10.0 /* a whole request, from the connection or the previous response */
#define SERVE_RESPONSE_S 30.0 /* a response, from the end of its generation */
#define SERVE_MAX_BODY 65536 /* bytes of a request body */
#define SERVE_SLOTS 64       /* connections at once (a thread each) */
#define SERVE_PER_IP 16      /* per client address, when bound beyond loopback */
#define SERVE_TOKEN_MIN 16   /* characters of a bearer token */
#define SERVE_MAX_BATCH 256  /* the largest --max-batch */

typedef struct serve_opts {
    const char *checkpoint; /* run directory, step folder or Hugging Face folder */
    const char *tokenizer;  /* tokenizer.json; NULL: CHECKPOINT/tokenizer.json */
    const char *chat;       /* chat template name (data/sft.h); NULL: tokenizer_config.json's
                               chat_template when grit recognises it, else no chat route */
    const char *bind;       /* IPv4 address; NULL or "localhost": 127.0.0.1 */
    int port;               /* 0: any free port (serve_port says which) */
    const char *token;      /* the bearer token (>= SERVE_TOKEN_MIN characters); copied */
    int threads;            /* compute threads */
    int max_queue;          /* requests waiting to be admitted (0: 32) */
    int max_batch;          /* requests generating at once (0: 32; 1: one at a time) */
    double kv_budget_mib;   /* memory for their KV caches (0: 1024 MiB) */
    FILE *log;              /* one line per request (method, route, status, tokens, time) */
} serve_opts;

typedef struct serve_server serve_server;

/* Loads the model and tokenizer and starts listening. Errors name the file or the
 * address and what is wrong. */
grit_err serve_open(const serve_opts *o, serve_server **out);

/* The port it listens on; the model id it reports (the checkpoint folder's name). */
int serve_port(const serve_server *s);
const char *serve_model_id(const serve_server *s);

/* Stops listening (open connections are closed) and frees everything. NULL: no-op. */
void serve_close(serve_server *s);

#endif
