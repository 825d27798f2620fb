/*
 * ompenv.h - the OpenMP wait policy grit runs under (docs/performance.md, "Contention").
 *
 * libgomp (and OpenBLAS's OpenMP build, which runs on libgomp's threads) waits at every
 * barrier by spinning ~300,000 pauses before it sleeps. On a core shared with a busy
 * process that is ruinous: the spinning thread spends its share of the core, and the
 * thread everyone waits for is descheduled for a whole time slice at each of the
 * hundreds of parallel regions of a step (2 threads beside one busy process were
 * measured ~12x slower than 1 thread). grit waits with a short spin and then sleeps
 * (GOMP_SPINCOUNT=OMPENV_SPINCOUNT): a sleeper keeps its claim on the core, and the
 * scheduler runs it as soon as it is woken.
 *
 * libgomp reads its variables once, when it is loaded, before main: so main sets them
 * and executes itself again (same pid, same arguments), once. A user's explicit
 * OMP_WAIT_POLICY or GOMP_SPINCOUNT is left as it is. GRIT_OMP_POLICY marks the
 * environment grit set, for the log line (ompenv_describe) and for child processes.
 */
#ifndef GRIT_CORE_OMPENV_H
#define GRIT_CORE_OMPENV_H

#include <stddef.h>

/* the spin count grit chooses: ~0.1 ms of pauses, then a futex sleep (bench/contention.sh) */
#define OMPENV_SPINCOUNT "10000"

/* The decision, from the two variables' values (NULL: unset): 1 when grit sets its
 * policy (both unset or empty), 0 when the user's choice stands. */
int ompenv_wanted(const char *wait_policy, const char *spincount);

/* Sets grit's policy in the environment when ompenv_wanted says so: returns 1 when it
 * did (the caller must execute the program again for libgomp to see it), 0 when there
 * was nothing to do, -1 when setenv failed (nothing changed). */
int ompenv_apply(void);

/* Undoes ompenv_apply (the re-execution failed: say what is really in force). */
void ompenv_revert(void);

/* One line for logs, e.g. "GOMP_SPINCOUNT=10000 (grit)", "OMP_WAIT_POLICY=active (user)"
 * or "libgomp default (spin 300000 then sleep)"; returns buf. */
const char *ompenv_describe(char *buf, size_t cap);

#endif
