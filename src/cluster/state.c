/*
 * state.c - SQLite store of clusters, nodes and operations (see state.h).
 *
 * Statements are prepared per call (the store is touched a few times a second
 * at most); every error carries SQLite's message and the database path.
 */
#include "cluster/state.h"

#include <jansson.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "core/sqldb.h"

struct cluster_state {
    sqlite3 *db;
    char path[PATH_MAX];
};

static const char *schema =
    "PRAGMA journal_mode=WAL;"
    "PRAGMA synchronous=FULL;"
    "CREATE TABLE IF NOT EXISTS clusters(name TEXT PRIMARY KEY, spec TEXT NOT NULL,"
    " base TEXT NOT NULL, status TEXT NOT NULL, dir TEXT NOT NULL, created REAL NOT NULL,"
    " agent_pid INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE IF NOT EXISTS nodes(id TEXT PRIMARY KEY, cluster TEXT NOT NULL,"
    " grp TEXT NOT NULL, slot INTEGER NOT NULL, spare INTEGER NOT NULL, status TEXT NOT NULL,"
    " message TEXT NOT NULL DEFAULT '', launch_time REAL NOT NULL,"
    " lifecycle_rc INTEGER NOT NULL DEFAULT -1, lifecycle_log TEXT NOT NULL DEFAULT '');"
    "CREATE INDEX IF NOT EXISTS nodes_cluster ON nodes(cluster, slot);"
    "CREATE TABLE IF NOT EXISTS operations(id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " cluster TEXT NOT NULL, kind TEXT NOT NULL, target TEXT NOT NULL, status TEXT NOT NULL,"
    " started REAL NOT NULL, ended REAL, detail TEXT NOT NULL DEFAULT '');";

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static grit_err dberr(cluster_state *st, const char *what)
{
    return grit_errf(GRIT_EIO, "%s: %s: %s", st->path, what, sqlite3_errmsg(st->db));
}

grit_err cluster_state_open(cluster_state **out, const char *path)
{
    *out = NULL;
    cluster_state *st = calloc(1, sizeof *st);
    if (!st)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    snprintf(st->path, sizeof st->path, "%s", path);
    grit_err rc = sqldb_open(path, schema, "cluster", &st->db);
    if (rc != GRIT_OK) {
        cluster_state_close(st);
        return rc;
    }
    *out = st;
    return GRIT_OK;
}

void cluster_state_close(cluster_state *st)
{
    if (!st)
        return;
    sqlite3_close(st->db);
    free(st);
}

static grit_err exec(cluster_state *st, const char *sql)
{
    return sqlite3_exec(st->db, sql, NULL, NULL, NULL) == SQLITE_OK ? GRIT_OK : dberr(st, sql);
}

grit_err cluster_state_begin(cluster_state *st) { return exec(st, "BEGIN IMMEDIATE"); }
grit_err cluster_state_commit(cluster_state *st) { return exec(st, "COMMIT"); }
void cluster_state_rollback(cluster_state *st) { sqlite3_exec(st->db, "ROLLBACK", 0, 0, 0); }

/* Prepares sql and binds the arguments described by fmt: s = text, i = int,
 * d = double, l = int64. */
static grit_err prep(cluster_state *st, sqlite3_stmt **s, const char *sql, const char *fmt, ...)
{
    if (sqlite3_prepare_v2(st->db, sql, -1, s, NULL) != SQLITE_OK)
        return dberr(st, "prepare");
    va_list ap;
    va_start(ap, fmt);
    for (int i = 0; fmt[i]; i++) {
        int k = i + 1;
        switch (fmt[i]) {
        case 's': sqlite3_bind_text(*s, k, va_arg(ap, const char *), -1, SQLITE_TRANSIENT); break;
        case 'i': sqlite3_bind_int(*s, k, va_arg(ap, int)); break;
        case 'd': sqlite3_bind_double(*s, k, va_arg(ap, double)); break;
        case 'l': sqlite3_bind_int64(*s, k, va_arg(ap, int64_t)); break;
        }
    }
    va_end(ap);
    return GRIT_OK;
}

/* Runs a statement that returns no rows. */
static grit_err run(cluster_state *st, sqlite3_stmt *s)
{
    int r = sqlite3_step(s);
    grit_err rc = r == SQLITE_DONE ? GRIT_OK
                  : r == SQLITE_CONSTRAINT ? grit_errf(GRIT_EINVAL, "%s: %s", st->path,
                                                       sqlite3_errmsg(st->db))
                                           : dberr(st, "write");
    sqlite3_finalize(s);
    return rc;
}

static void col_text(sqlite3_stmt *s, int c, char *dst, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(s, c);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

static void read_cluster(sqlite3_stmt *s, cluster_row *r)
{
    memset(r, 0, sizeof *r);
    col_text(s, 0, r->name, sizeof r->name);
    col_text(s, 1, r->status, sizeof r->status);
    col_text(s, 2, r->dir, sizeof r->dir);
    col_text(s, 3, r->base, sizeof r->base);
    r->created = sqlite3_column_double(s, 4);
    r->agent_pid = sqlite3_column_int(s, 5);
}

#define CLUSTER_COLS "name, status, dir, base, created, agent_pid, spec"

grit_err cluster_state_get(cluster_state *st, const char *name, cluster_row *row, char **spec_text)
{
    sqlite3_stmt *s;
    if (spec_text)
        *spec_text = NULL;
    grit_err rc = prep(st, &s, "SELECT " CLUSTER_COLS " FROM clusters WHERE name = ?", "s", name);
    if (rc != GRIT_OK)
        return rc;
    int r = sqlite3_step(s);
    if (r == SQLITE_ROW) {
        read_cluster(s, row);
        if (spec_text) {
            const unsigned char *t = sqlite3_column_text(s, 6);
            *spec_text = strdup(t ? (const char *)t : "");
            if (!*spec_text)
                rc = grit_errf(GRIT_ENOMEM, "out of memory");
        }
    } else if (r == SQLITE_DONE)
        rc = grit_errf(GRIT_ENOTFOUND, "no cluster named \"%s\" (grit cluster list)", name);
    else
        rc = dberr(st, "read clusters");
    sqlite3_finalize(s);
    return rc;
}

grit_err cluster_state_add(cluster_state *st, const cluster_row *row, const char *spec_text)
{
    sqlite3_stmt *s;
    grit_err rc = prep(st, &s, "INSERT INTO clusters(name, spec, base, status, dir, created) "
                               "VALUES(?, ?, ?, ?, ?, ?)", "sssssd", row->name, spec_text,
                       row->base, row->status, row->dir, row->created > 0 ? row->created : wall_now());
    return rc != GRIT_OK ? rc : run(st, s);
}

grit_err cluster_state_set_status(cluster_state *st, const char *name, const char *status)
{
    sqlite3_stmt *s;
    grit_err rc = prep(st, &s, "UPDATE clusters SET status = ? WHERE name = ?", "ss", status, name);
    return rc != GRIT_OK ? rc : run(st, s);
}

grit_err cluster_state_set_spec(cluster_state *st, const char *name, const char *spec_text,
                                const char *base)
{
    sqlite3_stmt *s;
    grit_err rc = prep(st, &s, "UPDATE clusters SET spec = ?, base = ? WHERE name = ?", "sss",
                       spec_text, base, name);
    return rc != GRIT_OK ? rc : run(st, s);
}

grit_err cluster_state_set_agent(cluster_state *st, const char *name, int pid)
{
    sqlite3_stmt *s;
    grit_err rc = prep(st, &s, "UPDATE clusters SET agent_pid = ? WHERE name = ?", "is", pid, name);
    return rc != GRIT_OK ? rc : run(st, s);
}

grit_err cluster_state_remove(cluster_state *st, const char *name)
{
    grit_err rc = cluster_state_begin(st);
    const char *sql[] = {"DELETE FROM nodes WHERE cluster = ?",
                         "DELETE FROM operations WHERE cluster = ?",
                         "DELETE FROM clusters WHERE name = ?"};
    for (int i = 0; i < 3 && rc == GRIT_OK; i++) {
        sqlite3_stmt *s;
        rc = prep(st, &s, sql[i], "s", name);
        if (rc == GRIT_OK)
            rc = run(st, s);
    }
    if (rc == GRIT_OK)
        return cluster_state_commit(st);
    cluster_state_rollback(st);
    return rc;
}

grit_err cluster_state_list(cluster_state *st, cluster_row **rows, int *n)
{
    sqlite3_stmt *s;
    *rows = NULL;
    *n = 0;
    grit_err rc = prep(st, &s, "SELECT " CLUSTER_COLS " FROM clusters ORDER BY name", "");
    if (rc != GRIT_OK)
        return rc;
    int r;
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
        cluster_row *g = realloc(*rows, (size_t)(*n + 1) * sizeof **rows);
        if (!g) {
            rc = grit_errf(GRIT_ENOMEM, "out of memory");
            break;
        }
        *rows = g;
        read_cluster(s, &g[(*n)++]);
    }
    if (rc == GRIT_OK && r != SQLITE_DONE)
        rc = dberr(st, "read clusters");
    sqlite3_finalize(s);
    return rc;
}

#define NODE_COLS "id, grp, slot, spare, status, message, launch_time, lifecycle_rc, lifecycle_log"

static void read_node(sqlite3_stmt *s, cluster_node *d)
{
    memset(d, 0, sizeof *d);
    col_text(s, 0, d->id, sizeof d->id);
    col_text(s, 1, d->group, sizeof d->group);
    d->slot = sqlite3_column_int(s, 2);
    d->spare = sqlite3_column_int(s, 3);
    col_text(s, 4, d->status, sizeof d->status);
    col_text(s, 5, d->message, sizeof d->message);
    d->launch_time = sqlite3_column_double(s, 6);
    d->lifecycle_rc = sqlite3_column_int(s, 7);
    col_text(s, 8, d->lifecycle_log, sizeof d->lifecycle_log);
}

grit_err cluster_state_nodes(cluster_state *st, const char *cluster, int all, cluster_node **rows,
                             int *n)
{
    sqlite3_stmt *s;
    *rows = NULL;
    *n = 0;
    grit_err rc = prep(st, &s, all ? "SELECT " NODE_COLS " FROM nodes WHERE cluster = ? "
                                     "ORDER BY slot, launch_time"
                                   : "SELECT " NODE_COLS " FROM nodes WHERE cluster = ? AND "
                                     "status != 'Terminated' ORDER BY slot, launch_time",
                       "s", cluster);
    if (rc != GRIT_OK)
        return rc;
    int r;
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
        cluster_node *g = realloc(*rows, (size_t)(*n + 1) * sizeof **rows);
        if (!g) {
            rc = grit_errf(GRIT_ENOMEM, "out of memory");
            break;
        }
        *rows = g;
        read_node(s, &g[(*n)++]);
    }
    if (rc == GRIT_OK && r != SQLITE_DONE)
        rc = dberr(st, "read nodes");
    sqlite3_finalize(s);
    return rc;
}

grit_err cluster_state_node(cluster_state *st, const char *cluster, const char *key,
                            cluster_node *node)
{
    int slot = 0;
    if (key[0] == 'n' && key[1] >= '1' && key[1] <= '9')
        slot = atoi(key + 1);
    sqlite3_stmt *s;
    grit_err rc = prep(st, &s, "SELECT " NODE_COLS " FROM nodes WHERE cluster = ? AND "
                               "status != 'Terminated' AND (id = ? OR slot = ?)",
                       "ssi", cluster, key, slot);
    if (rc != GRIT_OK)
        return rc;
    int r = sqlite3_step(s);
    if (r == SQLITE_ROW)
        read_node(s, node);
    else if (r == SQLITE_DONE)
        rc = grit_errf(GRIT_ENOTFOUND, "cluster %s has no node \"%s\" (expected a NodeId or a "
                                       "Slurm name; grit cluster list-nodes %s)", cluster, key,
                       cluster);
    else
        rc = dberr(st, "read nodes");
    sqlite3_finalize(s);
    return rc;
}

grit_err cluster_state_put_node(cluster_state *st, const char *cluster, const cluster_node *d)
{
    sqlite3_stmt *s;
    grit_err rc = prep(st, &s, "INSERT INTO nodes(id, cluster, grp, slot, spare, status, message, "
                               "launch_time, lifecycle_rc, lifecycle_log) VALUES(?,?,?,?,?,?,?,?,?,?) "
                               "ON CONFLICT(id) DO UPDATE SET grp = excluded.grp, slot = excluded.slot, "
                               "spare = excluded.spare, status = excluded.status, "
                               "message = excluded.message, launch_time = excluded.launch_time, "
                               "lifecycle_rc = excluded.lifecycle_rc, "
                               "lifecycle_log = excluded.lifecycle_log",
                       "sssiissdis", d->id, cluster, d->group, d->slot, d->spare, d->status,
                       d->message, d->launch_time, d->lifecycle_rc, d->lifecycle_log);
    return rc != GRIT_OK ? rc : run(st, s);
}

void cluster_state_new_id(char id[24])
{
    unsigned char b[8] = {0};
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec;
        memcpy(b, &x, sizeof b);
    }
    snprintf(id, 24, "i-%02x%02x%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5],
             b[6], b[7]);
}

grit_err cluster_state_op_begin(cluster_state *st, const char *cluster, const char *kind,
                                const char *target, int64_t *id)
{
    sqlite3_stmt *s;
    grit_err rc = prep(st, &s, "INSERT INTO operations(cluster, kind, target, status, started) "
                               "VALUES(?, ?, ?, 'InProgress', ?)", "sssd", cluster, kind,
                       target ? target : "", wall_now());
    if (rc == GRIT_OK && (rc = run(st, s)) == GRIT_OK)
        *id = sqlite3_last_insert_rowid(st->db);
    return rc;
}

grit_err cluster_state_op_end(cluster_state *st, int64_t id, const char *status,
                              const char *detail)
{
    sqlite3_stmt *s;
    grit_err rc = prep(st, &s, "UPDATE operations SET status = ?, ended = ?, detail = ? "
                               "WHERE id = ?", "sdsl", status, wall_now(), detail ? detail : "", id);
    return rc != GRIT_OK ? rc : run(st, s);
}

grit_err cluster_state_ops_json(cluster_state *st, const char *cluster, int limit, char **out)
{
    sqlite3_stmt *s;
    *out = NULL;
    grit_err rc = prep(st, &s, "SELECT * FROM (SELECT id, kind, target, status, started, ended, "
                               "detail FROM operations WHERE cluster = ? ORDER BY id DESC LIMIT ?) "
                               "ORDER BY id", "si", cluster, limit);
    if (rc != GRIT_OK)
        return rc;
    json_t *arr = json_array();
    int r;
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
        double t0 = sqlite3_column_double(s, 4);
        int ended = sqlite3_column_type(s, 5) != SQLITE_NULL;
        double t1 = sqlite3_column_double(s, 5);
        json_t *o = json_pack("{s:I, s:s, s:s, s:s, s:f}", "Id",
                              (json_int_t)sqlite3_column_int64(s, 0), "Kind",
                              (const char *)sqlite3_column_text(s, 1), "Target",
                              (const char *)sqlite3_column_text(s, 2), "Status",
                              (const char *)sqlite3_column_text(s, 3), "StartTime", t0);
        if (ended) {
            json_object_set_new(o, "EndTime", json_real(t1));
            json_object_set_new(o, "Seconds", json_real(t1 - t0));
        }
        json_object_set_new(o, "Detail", json_string((const char *)sqlite3_column_text(s, 6)));
        json_array_append_new(arr, o);
    }
    if (r != SQLITE_DONE)
        rc = dberr(st, "read operations");
    sqlite3_finalize(s);
    if (rc == GRIT_OK) {
        *out = json_dumps(arr, JSON_COMPACT);
        if (!*out)
            rc = grit_errf(GRIT_ENOMEM, "out of memory");
    }
    json_decref(arr);
    return rc;
}
