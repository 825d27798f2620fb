/*
 * sqldb.h - opening a grit SQLite database: created when missing, a 10 s busy timeout
 * (another process of the same tool may hold the write lock for a moment), the
 * caller's schema applied (CREATE ... IF NOT EXISTS, pragmas), and an error that names
 * the file and what it was meant to be. Used by grit cluster's state and grit rate.
 */
#ifndef GRIT_CORE_SQLDB_H
#define GRIT_CORE_SQLDB_H

#include <sqlite3.h>

#include "core/error.h"

/* *out: the open database (close with sqlite3_close), NULL on error. what: "cluster",
 * "rating", ... for the message ("PATH: cannot open the WHAT database: ..."). */
grit_err sqldb_open(const char *path, const char *schema, const char *what, sqlite3 **out);

#endif
