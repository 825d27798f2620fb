/*
 * rate.h - `grit rate`: human evaluation of checkpoints (docs/rate.md).
 *
 * One SQLite database (WAL, synchronous=FULL: a rating the server has answered
 * 200 for is on disk) holds everything:
 *   meta(key, value)            prompt-set version (a content hash) and file
 *   prompts(id, prompt, version)           the versioned prompt set (rate init)
 *   batches(id, created, version, max_tokens, temperature, seed, notified)
 *   answers(id, batch, prompt, version, checkpoint, step, text, created)
 *   raters(id, name, token_hash, created)  SHA-256 of the token, never the token
 *   ratings(id, rater, answer, checkpoint, version, score, fabrication, comment,
 *           created)                       one row per rating, UNIQUE(rater, answer)
 * Library code (db.c, gen.c, stats.c, web.c, webhook.c) returns errors; the
 * CLI (cli/cmd_rate.c) prints them.
 *
 * Ownership: rate_db_open / rate_db_close; strings returned to the caller are
 * malloc'd and freed by it.
 */
#ifndef GRIT_RATE_RATE_H
#define GRIT_RATE_RATE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/error.h"

#define RATE_TOKEN_HEX 64    /* characters of a rater token (32 random bytes) */
#define RATE_MAX_BODY 16384  /* bytes of a rating POST body */
#define RATE_MAX_COMMENT 2000 /* characters of a comment */

typedef struct rate_db rate_db;

/* Opens (creating the schema if needed) DB. */
grit_err rate_db_open(const char *path, rate_db **out);
void rate_db_close(rate_db *d);
const char *rate_db_path(const rate_db *d);

/* Reads PROMPTS (JSONL: {"id": string, "prompt": string} per line), stores them
 * and their version (hex SHA-256 of the file) in the DB. Refuses a DB that holds
 * another prompt set already. *n receives the prompt count, version (65 bytes). */
grit_err rate_init_prompts(rate_db *d, const char *prompts, int *n, char *version);

/* The DB's prompt-set version ("" when rate init has not run). */
grit_err rate_version(rate_db *d, char *version, size_t cap);

/* Adds rater NAME (letters, digits, '-', '_', '.'; 1..64) and writes its fresh
 * token (RATE_TOKEN_HEX + 1 bytes) to token. The DB stores only its SHA-256. */
grit_err rate_add_rater(rate_db *d, const char *name, char *token);

/* The rater whose token this is, or 0 (with *name untouched) when none. */
int64_t rate_auth(rate_db *d, const char *token, char *name, size_t cap);

/* Generation of one batch (gen.c). */
typedef struct rate_batch_opts {
    const char *const *checkpoints; /* run directories or step folders */
    int ncheckpoints;
    const char *tokenizer; /* tokenizer.json; NULL: CHECKPOINT/tokenizer.json */
    const char *chat;      /* chat template name (data/sft.h) or NULL: raw prompt */
    int max_tokens;        /* per answer */
    double temperature;    /* 0: greedy */
    uint64_t seed;         /* sampling seed (each answer: seed, stream = prompt index) */
    int threads;
    FILE *log; /* one line per checkpoint, or NULL */
} rate_batch_opts;

/* Answers every prompt with every checkpoint; all the batch's answers are
 * committed in one transaction at the end. *batch receives the batch id. */
grit_err rate_batch(rate_db *d, const rate_batch_opts *o, int64_t *batch, int *nanswers);

/* One answer as a rater sees it (no checkpoint: blinded). */
typedef struct rate_item {
    int64_t answer;
    char *prompt, *text;
    int position, total; /* 1-based position in the rater's order; answers in all */
} rate_item;

/* The rater's next unrated answer in its own deterministic shuffled order
 * (seeded by the rater id): *done = 1 when none is left. */
grit_err rate_next(rate_db *d, int64_t rater, rate_item *it, int *done);
void rate_item_free(rate_item *it);

/* Stores one rating (committed, fsync'd by SQLite before it returns).
 * GRIT_EINVAL (with a message) for an unknown answer, a score outside 1..5 or a
 * rating given twice. */
grit_err rate_submit(rate_db *d, int64_t rater, int64_t answer, int score, int fabrication,
                     const char *comment);

/* Batches whose every answer has >= min ratings and that were not yet
 * announced: marks them announced and returns their ids (up to cap). */
grit_err rate_complete_batches(rate_db *d, int min, int64_t *ids, int cap, int *n);

/* Statistics (stats.c). */
typedef struct rate_ckpt_stats {
    char checkpoint[1024];
    int64_t step;
    int n;                     /* ratings */
    double mean, sd, lo, hi;   /* mean score, sample sd, 95% CI (Student t) */
    double fabrication;        /* share of ratings flagged */
    double alpha;              /* Krippendorff's alpha (interval) over its answers; NAN if undefined */
    double alpha_ordinal;      /* the same, ordinal metric */
} rate_ckpt_stats;

typedef struct rate_results {
    rate_ckpt_stats *ck;
    int nck;
    int nratings, nraters;
    double alpha;         /* over every answer (interval metric) */
    double alpha_ordinal; /* the same, ordinal metric */
} rate_results;

/* Krippendorff's alpha, interval metric: values v[i] of unit unit[i] (any ids);
 * units with fewer than two values are left out. NAN when there is no
 * disagreement to compare with (fewer than two pairable values or D_e = 0). */
double rate_alpha_interval(const int64_t *unit, const double *v, int n);

/* The same with Krippendorff's ordinal metric (values are ranked; the distance
 * between two counts the pairable values between them). */
double rate_alpha_ordinal(const int64_t *unit, const double *v, int n);

/* The 0.975 quantile of Student's t with df degrees of freedom (df >= 1). */
double rate_t975(int df);

grit_err rate_results_compute(rate_db *d, rate_results *r);
void rate_results_free(rate_results *r);
void rate_results_print(const rate_results *r, FILE *f, int json);

/* Export every rating joined with its answer: CSV (RFC 4180) or JSONL. */
grit_err rate_export(rate_db *d, const char *out, int csv);

/* `grit rate watch` (watch.c): polls run/ckpt every `every` seconds (once with once) and
 * batches its newest verified checkpoint (with baseline, if set, in the same batch) unless
 * the database already has answers from it; posts to webhook, if set, per batch (a failed
 * post is logged, the batch stands). SIGINT/SIGTERM, blocked by the caller, end the wait
 * between polls; a batch in progress then still commits. *batches: batches made. */
typedef struct rate_watch_opts {
    const char *run;       /* the training run directory (its ckpt/ is watched) */
    const char *baseline;  /* a fixed checkpoint answered beside each new one, or NULL */
    double every;          /* seconds between polls */
    int once;              /* one poll, then return */
    const char *webhook;   /* or NULL */
    rate_batch_opts batch; /* generation options (checkpoints ignored) */
} rate_watch_opts;
grit_err rate_watch(rate_db *d, const rate_watch_opts *o, int *batches);

/* Web app (web.c). */
typedef struct rate_serve_opts {
    const char *bind; /* NULL: 127.0.0.1 */
    int port;         /* 0: any free port */
    const char *webhook;
    int webhook_min; /* ratings per answer that complete a batch */
    FILE *log;       /* one line per request (no token) */
} rate_serve_opts;
typedef struct rate_server rate_server;
grit_err rate_serve_open(const char *db, const rate_serve_opts *o, rate_server **out);
int rate_serve_port(const rate_server *s);
void rate_serve_close(rate_server *s);

/* Posts {"text": text} to url (Slack-compatible webhook), 10 s timeout. */
grit_err rate_webhook(const char *url, const char *text);

/* Hex SHA-256 of data (65 bytes out). */
grit_err rate_sha256_hex(const void *data, size_t len, char *out);

#endif
