/*
 * run.h - running the programs a cluster is made of (the local provider's
 * script, Slurm's clients, lifecycle scripts) with a time limit.
 *
 * The child gets its own process group, the caller's environment plus
 * `env` ("K=V" strings, NULL-terminated, may be NULL), stdin from /dev/null,
 * and stdout+stderr appended to `log` (a path) or captured into `*out`
 * (malloc'd, NUL-terminated, at most 1 MiB kept). On timeout the whole group
 * gets SIGKILL and *status is 124 (as timeout(1)); a signal death is 128+sig.
 */
#ifndef GRIT_CLUSTER_RUN_H
#define GRIT_CLUSTER_RUN_H

#include "core/error.h"

/* Runs argv[0] (searched in PATH). GRIT_OK when it ran (whatever its status);
 * an error only when it could not be started. log and out may both be NULL
 * (output discarded); out wins when both are given. */
grit_err cluster_run(char *const argv[], char *const env[], const char *log, char **out,
                     double timeout_s, int *status);

#endif
