/*
 * runlock.h - one supervisor per run directory, and ranks that know when theirs is gone.
 *
 * grit launch takes RUN/supervisor.lock (flock, exclusive, held by an open file
 * description that no child inherits: O_CLOEXEC) for its whole life and writes a random
 * token, its pid and host into it. The kernel drops the lock when the supervisor dies,
 * however it dies (kill -9 included). The ranks it launches get the file's absolute path
 * and the token (GRIT_SUP_LOCK, GRIT_SUP_LOCK_TOKEN) and ask runlock_owner_alive:
 *   - the file holds another token: a newer supervisor owns the run (superseded);
 *   - nobody holds the lock: their supervisor is gone (orphaned);
 *   - else it is alive.
 * The trainer stops without a checkpoint when orphaned or superseded, and the checkpoint
 * commit asks the same question just before it commits, so ranks that outlive a killed
 * supervisor never write into a run that a restarted supervisor (or a person) now owns.
 *
 * On shared file systems (NFS v4) flock is a byte-range lock the server arbitrates; where
 * a rank cannot open the file (a node without the run directory) the answer is "unknown"
 * and nothing is stopped.
 */
#ifndef GRIT_CORE_RUNLOCK_H
#define GRIT_CORE_RUNLOCK_H

#include <stddef.h>

#include "core/error.h"

#define RUNLOCK_NAME "supervisor.lock"

typedef struct runlock {
    int fd;          /* -1: not held */
    char path[1200]; /* absolute */
    char token[33];  /* 32 hex digits */
} runlock;

/* Takes DIR/supervisor.lock (DIR must exist). Retries for wait_s seconds (a rank's
 * brief shared probe can hold it for microseconds); a live holder is an error naming it
 * ("in use by grit launch pid N on HOST since ..."). */
grit_err runlock_take(runlock *l, const char *dir, double wait_s);

/* Drops the lock (the file stays: a later owner overwrites it). */
void runlock_release(runlock *l);

typedef enum {
    RUNLOCK_UNKNOWN = -1, /* no lock named, or the file cannot be read here */
    RUNLOCK_GONE = 0,     /* nobody holds it: the supervisor died */
    RUNLOCK_ALIVE = 1,
    RUNLOCK_SUPERSEDED = 2 /* another supervisor's token */
} runlock_state;

/* The state of the supervisor that owns path with token; why (may be NULL) says it in a
 * sentence for GONE and SUPERSEDED. */
runlock_state runlock_owner(const char *path, const char *token, char *why, size_t cap);

/* runlock_owner for this process's supervisor (GRIT_SUP_LOCK, GRIT_SUP_LOCK_TOKEN),
 * asked at most once per min_interval_s (the last answer is kept in between; 0: ask
 * now). UNKNOWN when the process was not started by grit launch. Thread-safe. */
runlock_state runlock_env_owner(double min_interval_s, char *why, size_t cap);

#endif
