/*
 * stopsig.h - a graceful stop on SIGTERM or SIGINT (Slurm preemption, Ctrl-C).
 *
 * The first SIGTERM/SIGINT only records itself: the program sees it with
 * stopsig_pending() at a point where stopping is safe (the trainer after a step, the
 * supervisor in its poll loop), finishes what it must (a final checkpoint, a summary)
 * and exits with 128 + the signal (143 for SIGTERM, 130 for SIGINT), as a shell does.
 * A second signal of either kind stops the process at once: the handler puts the
 * default action back and raises the signal again.
 *
 * Process-wide state: only a main (src/cli) calls stopsig_install; library code only
 * reads stopsig_pending (0 when nothing was installed). Async-signal-safe handler.
 */
#ifndef GRIT_CORE_STOPSIG_H
#define GRIT_CORE_STOPSIG_H

/* Installs the handlers for SIGTERM and SIGINT (SA_RESTART: no system call fails
 * with EINTR because of the first signal). */
void stopsig_install(void);

/* The first stop signal received (SIGTERM or SIGINT), 0 when none. */
int stopsig_pending(void);

/* When the first signal arrived (CLOCK_MONOTONIC seconds, as now_seconds), 0 when none. */
double stopsig_when(void);

#endif
