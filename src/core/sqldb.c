/* sqldb.c - see sqldb.h. */
#include "core/sqldb.h"

#include <stddef.h>

grit_err sqldb_open(const char *path, const char *schema, const char *what, sqlite3 **out)
{
    sqlite3 *db = NULL;
    *out = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        grit_err rc = grit_errf(GRIT_EIO, "%s: cannot open the %s database: %s", path, what,
                                db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return rc;
    }
    sqlite3_busy_timeout(db, 10000);
    char *msg = NULL;
    if (sqlite3_exec(db, schema, NULL, NULL, &msg) != SQLITE_OK) {
        grit_err rc = grit_errf(GRIT_EIO, "%s: not a usable grit %s database: %s", path, what,
                                msg ? msg : "?");
        sqlite3_free(msg);
        sqlite3_close(db);
        return rc;
    }
    *out = db;
    return GRIT_OK;
}
