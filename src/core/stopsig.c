/* stopsig.c - the first SIGTERM/SIGINT asks for a graceful stop, the second stops at
 * once (see stopsig.h). The handler touches only sig_atomic_t flags and calls only
 * async-signal-safe functions (clock_gettime, signal, raise). */
#define _GNU_SOURCE
#include "core/stopsig.h"

#include <signal.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t pending;
static volatile sig_atomic_t when_s, when_ms; /* CLOCK_MONOTONIC of the first signal */

static void on_stop(int sig)
{
    if (pending) { /* the second: the default action now (the process ends) */
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        raise(sig);
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    when_s = (sig_atomic_t)ts.tv_sec;
    when_ms = (sig_atomic_t)(ts.tv_nsec / 1000000);
    pending = sig;
}

void stopsig_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    /* a blocked mask is inherited across exec (srun re-executed as grit launch by the
     * SPANK plugin had both blocked): without this the handler would never run */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
}

int stopsig_pending(void)
{
    return pending;
}

double stopsig_when(void)
{
    return pending ? (double)when_s + (double)when_ms / 1000.0 : 0.0;
}
