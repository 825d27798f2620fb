/*
 * run.c - fork/exec with a deadline, output to a file or a buffer (see run.h).
 *
 * The child's output goes through a pipe when captured (read while waiting, so
 * a chatty child never blocks on a full pipe) or straight to the log file.
 */
#include "cluster/run.h"

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RUN_CAP (1 << 20)

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

grit_err cluster_run(char *const argv[], char *const env[], const char *log, char **out,
                     double timeout_s, int *status)
{
    int pfd[2] = {-1, -1}, lfd = -1;
    *status = -1;
    if (out) {
        *out = NULL;
        if (pipe2(pfd, O_CLOEXEC) != 0)
            return grit_errf(GRIT_EIO, "pipe: %s", strerror(errno));
    } else if (log) {
        lfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (lfd < 0)
            return grit_errf(GRIT_EIO, "%s: %s", log, strerror(errno));
    }
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        if (pfd[0] >= 0) {
            close(pfd[0]);
            close(pfd[1]);
        }
        if (lfd >= 0)
            close(lfd);
        return grit_errf(GRIT_EIO, "fork: %s", strerror(e));
    }
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* grit killed: its helper goes too (daemons the
                                             helper started in their own sessions stay) */
        if (getppid() == 1)
            _exit(127);
        signal(SIGPIPE, SIG_DFL);
        int nul = open("/dev/null", O_RDWR);
        int o = pfd[1] >= 0 ? pfd[1] : lfd >= 0 ? lfd : nul;
        dup2(nul, 0);
        dup2(o, 1);
        dup2(o, 2);
        for (int i = 0; env && env[i]; i++)
            putenv(env[i]);
        execvp(argv[0], argv);
        dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* both sides: no race with the child's own call */
    if (lfd >= 0)
        close(lfd);
    char *buf = NULL;
    size_t len = 0;
    if (out) {
        close(pfd[1]);
        buf = malloc(RUN_CAP + 1);
        if (!buf) {
            kill(-pid, SIGKILL);
            waitpid(pid, NULL, 0);
            close(pfd[0]);
            return grit_errf(GRIT_ENOMEM, "out of memory");
        }
    }
    double deadline = mono() + timeout_s;
    int st = 0, done = 0, timed_out = 0, eof = !out;
    double done_at = 0;
    while (!done || !eof) {
        if (!done) {
            pid_t w = waitpid(pid, &st, WNOHANG);
            if (w == pid)
                done = 1, done_at = mono();
        }
        if (!done && mono() > deadline) {
            kill(-pid, SIGKILL);
            waitpid(pid, &st, 0);
            done = timed_out = 1;
            done_at = mono();
        }
        if (!eof) {
            struct pollfd p = {.fd = pfd[0], .events = POLLIN};
            if (poll(&p, 1, 20) > 0) {
                char tmp[4096];
                ssize_t n = read(pfd[0], tmp, sizeof tmp);
                if (n <= 0)
                    eof = 1;
                else if (len < RUN_CAP) {
                    size_t k = (size_t)n < RUN_CAP - len ? (size_t)n : RUN_CAP - len;
                    memcpy(buf + len, tmp, k);
                    len += k;
                }
            } else if (done && (timed_out || mono() > done_at + 1.0))
                eof = 1; /* a daemon it left may hold the pipe: do not wait for it */
        } else if (!done)
            usleep(20000);
    }
    if (out) {
        close(pfd[0]);
        buf[len] = '\0';
        *out = buf;
    }
    *status = timed_out ? 124 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return GRIT_OK;
}
