/*
 * db.c - the rating database (schema in rate.h): prompts, raters, the per-rater
 * order, ratings and the batch-complete announcements.
 *
 * Durability: journal_mode=WAL with synchronous=FULL, so every committed
 * transaction is fsync'd to the WAL before sqlite3_step returns; rate_submit
 * commits before the web app answers, so a rating the rater saw accepted
 * survives kill -9 of the server. Statements are prepared per call (a few a
 * second at most); every error names the database and SQLite's message.
 *
 * The rater's order: every answer of the DB, shuffled by Fisher-Yates with a
 * generator seeded by the rater id, so each rater sees the checkpoints' answers
 * interleaved in an order of its own that is the same on every page load and
 * after a server restart.
 */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/fsutil.h"
#include "core/randhex.h"
#include "core/rng.h"
#include "core/sqldb.h"
#include "rate/rate_internal.h"

static const char *schema =
    "PRAGMA journal_mode=WAL;"
    "PRAGMA synchronous=FULL;"
    "PRAGMA foreign_keys=ON;"
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS prompts(id TEXT PRIMARY KEY, prompt TEXT NOT NULL,"
    " version TEXT NOT NULL, ord INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS batches(id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " created REAL NOT NULL, version TEXT NOT NULL, max_tokens INTEGER NOT NULL,"
    " temperature REAL NOT NULL, seed INTEGER NOT NULL, notified INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE IF NOT EXISTS answers(id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " batch INTEGER NOT NULL REFERENCES batches(id), prompt TEXT NOT NULL REFERENCES prompts(id),"
    " version TEXT NOT NULL, checkpoint TEXT NOT NULL, step INTEGER NOT NULL,"
    " text TEXT NOT NULL, created REAL NOT NULL);"
    "CREATE TABLE IF NOT EXISTS raters(id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " name TEXT NOT NULL UNIQUE, token_hash TEXT NOT NULL UNIQUE, created REAL NOT NULL);"
    "CREATE TABLE IF NOT EXISTS ratings(id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " rater INTEGER NOT NULL REFERENCES raters(id), answer INTEGER NOT NULL REFERENCES answers(id),"
    " checkpoint TEXT NOT NULL, version TEXT NOT NULL,"
    " score INTEGER NOT NULL CHECK(score BETWEEN 1 AND 5),"
    " fabrication INTEGER NOT NULL CHECK(fabrication IN (0, 1)), comment TEXT NOT NULL,"
    " created REAL NOT NULL, UNIQUE(rater, answer));";

double rate__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

grit_err rate__dberr(rate_db *d, const char *what)
{
    return grit_errf(GRIT_EIO, "%s: %s: %s", d->path, what, sqlite3_errmsg(d->db));
}

grit_err rate__prep(rate_db *d, sqlite3_stmt **s, const char *sql, const char *fmt, ...)
{
    if (sqlite3_prepare_v2(d->db, sql, -1, s, NULL) != SQLITE_OK)
        return rate__dberr(d, sql);
    va_list ap;
    va_start(ap, fmt);
    for (int k = 1; fmt && fmt[k - 1]; k++)
        switch (fmt[k - 1]) {
        case 's': sqlite3_bind_text(*s, k, va_arg(ap, const char *), -1, SQLITE_TRANSIENT); break;
        case 'i': sqlite3_bind_int(*s, k, va_arg(ap, int)); break;
        case 'l': sqlite3_bind_int64(*s, k, va_arg(ap, int64_t)); break;
        case 'd': sqlite3_bind_double(*s, k, va_arg(ap, double)); break;
        }
    va_end(ap);
    return GRIT_OK;
}

grit_err rate__run(rate_db *d, sqlite3_stmt *s)
{
    int r = sqlite3_step(s);
    grit_err rc = r == SQLITE_DONE || r == SQLITE_ROW ? GRIT_OK : rate__dberr(d, sqlite3_sql(s));
    sqlite3_finalize(s);
    return rc;
}

grit_err rate__exec(rate_db *d, const char *sql)
{
    return sqlite3_exec(d->db, sql, NULL, NULL, NULL) == SQLITE_OK ? GRIT_OK : rate__dberr(d, sql);
}

grit_err rate_db_open(const char *path, rate_db **out)
{
    *out = NULL;
    rate_db *d = calloc(1, sizeof *d);
    if (!d)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    snprintf(d->path, sizeof d->path, "%s", path);
    pthread_mutex_init(&d->mu, NULL);
    grit_err rc = sqldb_open(path, schema, "rating", &d->db);
    if (rc != GRIT_OK) {
        rate_db_close(d);
        return rc;
    }
    *out = d;
    return GRIT_OK;
}

void rate_db_close(rate_db *d)
{
    if (!d)
        return;
    sqlite3_close(d->db);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

const char *rate_db_path(const rate_db *d) { return d->path; }

grit_err rate_version(rate_db *d, char *version, size_t cap)
{
    sqlite3_stmt *s;
    grit_err rc = rate__prep(d, &s, "SELECT value FROM meta WHERE key='version'", "");
    if (rc)
        return rc;
    version[0] = 0;
    if (sqlite3_step(s) == SQLITE_ROW)
        snprintf(version, cap, "%s", (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    return GRIT_OK;
}

static grit_err prompt_line(const char *file, int line, const char *p, size_t n, json_t **out)
{
    json_error_t e;
    json_t *j = json_loadb(p, n, 0, &e);
    if (!j)
        return grit_errf(GRIT_EFORMAT, "%s:%d: not JSON: %s", file, line, e.text);
    const char *bad = !json_is_object(j)                        ? "the line"
                      : !json_is_string(json_object_get(j, "id")) ? "field 'id'"
                      : !json_is_string(json_object_get(j, "prompt")) ? "field 'prompt'"
                                                                    : NULL;
    if (bad) {
        json_decref(j);
        return grit_errf(GRIT_EFORMAT, "%s:%d: %s: expected %s", file, line, bad,
                         !strcmp(bad, "the line") ? "a JSON object {\"id\": ..., \"prompt\": ...}"
                                                  : "a string");
    }
    if (!json_string_length(json_object_get(j, "id"))) {
        json_decref(j);
        return grit_errf(GRIT_EFORMAT, "%s:%d: field 'id': expected a non-empty string", file,
                         line);
    }
    *out = j;
    return GRIT_OK;
}

grit_err rate_init_prompts(rate_db *d, const char *prompts, int *n, char *version)
{
    char *buf = NULL, old[80];
    size_t len = 0;
    *n = 0;
    grit_err rc = fs_read_all(prompts, &buf, &len);
    if (rc)
        return rc;
    rate_sha256_hex(buf, len, version);
    if ((rc = rate_version(d, old, sizeof old))) {
        free(buf);
        return rc;
    }
    if (old[0]) {
        free(buf);
        if (!strcmp(old, version))
            return grit_errf(GRIT_EINVAL, "%s: already holds this prompt set (version %.12s)",
                             d->path, version);
        return grit_errf(GRIT_EINVAL,
                         "%s: holds prompt set version %.12s; %s is version %.12s: a database "
                         "rates one prompt set (start a new database for a new set)",
                         d->path, old, prompts, version);
    }
    pthread_mutex_lock(&d->mu);
    rc = rate__exec(d, "BEGIN IMMEDIATE");
    int line = 0;
    for (char *p = buf; rc == GRIT_OK && p < buf + len;) {
        char *e = memchr(p, '\n', (size_t)(buf + len - p));
        size_t ln = e ? (size_t)(e - p) : (size_t)(buf + len - p);
        line++;
        size_t k = 0;
        while (k < ln && (p[k] == ' ' || p[k] == '\t' || p[k] == '\r'))
            k++;
        if (k < ln) {
            json_t *j = NULL;
            if ((rc = prompt_line(prompts, line, p, ln, &j)) == GRIT_OK) {
                sqlite3_stmt *s;
                const char *id = json_string_value(json_object_get(j, "id"));
                if ((rc = rate__prep(d, &s, "INSERT INTO prompts VALUES(?,?,?,?)", "sssi", id,
                                     json_string_value(json_object_get(j, "prompt")), version,
                                     *n)) == GRIT_OK) {
                    if (sqlite3_step(s) != SQLITE_DONE)
                        rc = grit_errf(GRIT_EFORMAT, "%s:%d: field 'id': '%s' %s", prompts, line,
                                       id,
                                       sqlite3_errcode(d->db) == SQLITE_CONSTRAINT
                                           ? "appears twice (ids must be unique)"
                                           : sqlite3_errmsg(d->db));
                    sqlite3_finalize(s);
                }
                (*n)++;
                json_decref(j);
            }
        }
        p += ln + 1;
    }
    if (rc == GRIT_OK && *n == 0)
        rc = grit_errf(GRIT_EFORMAT, "%s: no prompts (expected one JSON object per line)",
                       prompts);
    sqlite3_stmt *s;
    if (rc == GRIT_OK &&
        (rc = rate__prep(d, &s, "INSERT INTO meta VALUES('version',?),('prompts',?)", "ss",
                         version, prompts)) == GRIT_OK)
        rc = rate__run(d, s);
    if (rc == GRIT_OK)
        rc = rate__exec(d, "COMMIT");
    else
        sqlite3_exec(d->db, "ROLLBACK", NULL, NULL, NULL);
    pthread_mutex_unlock(&d->mu);
    free(buf);
    return rc;
}

grit_err rate_add_rater(rate_db *d, const char *name, char *token)
{
    size_t nl = strlen(name);
    int ok = nl >= 1 && nl <= 64;
    for (size_t i = 0; ok && i < nl; i++)
        ok = (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
             (name[i] >= '0' && name[i] <= '9') || strchr("-_.", name[i]);
    if (!ok)
        return grit_errf(GRIT_EINVAL,
                         "rater name '%s': expected 1 to 64 letters, digits, '-', '_' or '.'",
                         name);
    grit_err trc = rand_hex(token, RATE_TOKEN_HEX / 2, "the rater's token");
    if (trc != GRIT_OK)
        return trc;
    char hash[65];
    rate_sha256_hex(token, RATE_TOKEN_HEX, hash);
    sqlite3_stmt *s;
    pthread_mutex_lock(&d->mu);
    grit_err rc = rate__prep(d, &s, "INSERT INTO raters(name, token_hash, created) VALUES(?,?,?)",
                             "ssd", name, hash, rate__now());
    if (rc == GRIT_OK) {
        if (sqlite3_step(s) != SQLITE_DONE)
            rc = sqlite3_errcode(d->db) == SQLITE_CONSTRAINT
                     ? grit_errf(GRIT_EINVAL, "%s: rater '%s' exists already", d->path, name)
                     : rate__dberr(d, "adding a rater");
        sqlite3_finalize(s);
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

int64_t rate_auth(rate_db *d, const char *token, char *name, size_t cap)
{
    if (!token || strlen(token) != RATE_TOKEN_HEX)
        return 0;
    char hash[65];
    rate_sha256_hex(token, RATE_TOKEN_HEX, hash);
    sqlite3_stmt *s;
    int64_t id = 0;
    pthread_mutex_lock(&d->mu);
    /* the lookup is by the hash: a timing difference tells nothing about the token */
    if (rate__prep(d, &s, "SELECT id, name FROM raters WHERE token_hash=?", "s", hash) ==
        GRIT_OK) {
        if (sqlite3_step(s) == SQLITE_ROW) {
            id = sqlite3_column_int64(s, 0);
            snprintf(name, cap, "%s", (const char *)sqlite3_column_text(s, 1));
        }
        sqlite3_finalize(s);
    }
    pthread_mutex_unlock(&d->mu);
    return id;
}

static char *col_dup(sqlite3_stmt *s, int c)
{
    const char *t = (const char *)sqlite3_column_text(s, c);
    return strdup(t ? t : "");
}

static grit_err next_locked(rate_db *d, int64_t rater, rate_item *it, int *done)
{
    sqlite3_stmt *s;
    grit_err rc = rate__prep(d, &s, "SELECT id FROM answers ORDER BY id", "");
    if (rc)
        return rc;
    int64_t *ids = NULL;
    size_t n = 0, cap = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            int64_t *t = realloc(ids, cap * sizeof *ids);
            if (!t) {
                free(ids);
                sqlite3_finalize(s);
                return grit_errf(GRIT_ENOMEM, "out of memory");
            }
            ids = t;
        }
        ids[n++] = sqlite3_column_int64(s, 0);
    }
    sqlite3_finalize(s);
    rng_t r;
    rng_seed(&r, (uint64_t)rater, 0x72617465); /* stream "rate" */
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)rng_below(&r, i);
        int64_t t = ids[i - 1];
        ids[i - 1] = ids[j];
        ids[j] = t;
    }
    *done = 1;
    it->total = (int)n;
    for (size_t i = 0; rc == GRIT_OK && i < n && *done; i++) {
        if ((rc = rate__prep(d, &s,
                             "SELECT p.prompt, a.text FROM answers a JOIN prompts p ON p.id=a.prompt"
                             " WHERE a.id=?1 AND NOT EXISTS (SELECT 1 FROM ratings r"
                             " WHERE r.answer=?1 AND r.rater=?2)",
                             "ll", ids[i], rater)))
            break;
        if (sqlite3_step(s) == SQLITE_ROW) {
            it->answer = ids[i];
            it->prompt = col_dup(s, 0);
            it->text = col_dup(s, 1);
            it->position = (int)i + 1;
            *done = 0;
            if (!it->prompt || !it->text)
                rc = grit_errf(GRIT_ENOMEM, "out of memory");
        }
        sqlite3_finalize(s);
    }
    free(ids);
    return rc;
}

grit_err rate_next(rate_db *d, int64_t rater, rate_item *it, int *done)
{
    memset(it, 0, sizeof *it);
    pthread_mutex_lock(&d->mu);
    grit_err rc = next_locked(d, rater, it, done);
    pthread_mutex_unlock(&d->mu);
    if (rc)
        rate_item_free(it);
    return rc;
}

void rate_item_free(rate_item *it)
{
    free(it->prompt);
    free(it->text);
    it->prompt = it->text = NULL;
}

grit_err rate_submit(rate_db *d, int64_t rater, int64_t answer, int score, int fabrication,
                     const char *comment)
{
    if (score < 1 || score > 5)
        return grit_errf(GRIT_EINVAL, "field 'score': expected an integer 1 to 5, got %d", score);
    if (strlen(comment) > RATE_MAX_COMMENT)
        return grit_errf(GRIT_EINVAL, "field 'comment': expected at most %d characters",
                         RATE_MAX_COMMENT);
    sqlite3_stmt *s;
    pthread_mutex_lock(&d->mu);
    grit_err rc = rate__prep(
        d, &s,
        "INSERT INTO ratings(rater, answer, checkpoint, version, score, fabrication, comment,"
        " created) SELECT ?1, a.id, a.checkpoint, a.version, ?3, ?4, ?5, ?6 FROM answers a"
        " WHERE a.id=?2",
        "llii" "sd", rater, answer, score, fabrication ? 1 : 0, comment, rate__now());
    if (rc == GRIT_OK) {
        int r = sqlite3_step(s);
        if (r != SQLITE_DONE)
            rc = sqlite3_errcode(d->db) == SQLITE_CONSTRAINT
                     ? grit_errf(GRIT_EINVAL, "answer %lld: already rated by this rater",
                                 (long long)answer)
                     : rate__dberr(d, "storing a rating");
        else if (sqlite3_changes(d->db) != 1)
            rc = grit_errf(GRIT_EINVAL, "field 'answer': no answer %lld", (long long)answer);
        sqlite3_finalize(s);
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

grit_err rate_complete_batches(rate_db *d, int min, int64_t *ids, int cap, int *n)
{
    *n = 0;
    sqlite3_stmt *s;
    pthread_mutex_lock(&d->mu);
    grit_err rc = rate__prep(
        d, &s,
        "SELECT b.id FROM batches b WHERE b.notified=0 AND EXISTS (SELECT 1 FROM answers a"
        " WHERE a.batch=b.id) AND NOT EXISTS (SELECT 1 FROM answers a WHERE a.batch=b.id AND"
        " (SELECT count(*) FROM ratings r WHERE r.answer=a.id) < ?1)",
        "i", min);
    if (rc == GRIT_OK) {
        while (*n < cap && sqlite3_step(s) == SQLITE_ROW)
            ids[(*n)++] = sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
    }
    for (int k = 0; rc == GRIT_OK && k < *n; k++)
        if ((rc = rate__prep(d, &s, "UPDATE batches SET notified=1 WHERE id=?", "l", ids[k])) ==
            GRIT_OK)
            rc = rate__run(d, s);
    pthread_mutex_unlock(&d->mu);
    return rc;
}
