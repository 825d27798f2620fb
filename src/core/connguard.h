/*
 * connguard.h - absolute deadlines for server connections, which no trickling
 * client can extend.
 *
 * An HTTP library's own timeout is an idle timeout: a client that sends (or
 * reads) one byte now and then renews it for ever, so a few such clients fill
 * every connection slot. Here each connection registers its socket with a
 * deadline (CLOCK_MONOTONIC); a guard thread shuts down the sockets past their
 * deadline four times a second (shutdown, never close: the server still owns
 * the descriptor, sees the end of the stream and frees the slot itself).
 * Used by the dashboard (obs/http.c) and grit serve (serve/serve.c).
 *
 * Contract: conn_guard_remove must come before the socket is closed, so the
 * guard never touches a descriptor that was reused. All calls are thread-safe.
 * Ownership: conn_guard_start / conn_guard_stop (NULL: no-op); entries are
 * freed by conn_guard_remove, and those left by conn_guard_stop.
 */
#ifndef GRIT_CORE_CONNGUARD_H
#define GRIT_CORE_CONNGUARD_H

#include "core/error.h"

typedef struct conn_guard conn_guard;
typedef struct conn_guard_entry conn_guard_entry;

/* Starts the guard thread. */
grit_err conn_guard_start(conn_guard **out);

/* Registers socket fd with a deadline `seconds` from now (INFINITY: none). NULL when
 * out of memory: the connection then goes unguarded. */
conn_guard_entry *conn_guard_add(conn_guard *g, int fd, double seconds);

/* Moves the deadline to `seconds` from now (INFINITY: none); a connection already
 * shut down stays so. e NULL: no-op. */
void conn_guard_set(conn_guard *g, conn_guard_entry *e, double seconds);

/* Forgets the connection (before its socket closes). e NULL: no-op. */
void conn_guard_remove(conn_guard *g, conn_guard_entry *e);

/* Stops the thread and frees the guard and any entry left. */
void conn_guard_stop(conn_guard *g);

#endif
