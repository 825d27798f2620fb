/*
 * rate_internal.h - what the files of rate/ share and nothing else sees: the
 * open database handle and the statement helpers of db.c.
 */
#ifndef GRIT_RATE_INTERNAL_H
#define GRIT_RATE_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>

#include "rate/rate.h"

struct rate_db {
    sqlite3 *db;
    pthread_mutex_t mu; /* one statement sequence at a time (the web app's thread, the CLI) */
    char path[PATH_MAX];
};

/* An error carrying SQLite's message, the database path and what was tried. */
grit_err rate__dberr(rate_db *d, const char *what);

/* Prepares sql and binds the arguments given by fmt ('s' text, 'i' int, 'l' int64,
 * 'd' double). */
grit_err rate__prep(rate_db *d, sqlite3_stmt **s, const char *sql, const char *fmt, ...);

/* Runs a statement that returns no rows and finalizes it. */
grit_err rate__run(rate_db *d, sqlite3_stmt *s);
grit_err rate__exec(rate_db *d, const char *sql);

double rate__now(void);

#endif
