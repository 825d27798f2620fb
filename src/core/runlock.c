/*
 * runlock.c - see runlock.h.
 *
 * The file's text: "token=<32 hex>\npid=<n>\nhost=<name>\nsince=<UTC>\n", rewritten in
 * place by each owner (not temp + rename: the lock belongs to this inode). A reader
 * judges by the lock first, then the token:
 *
 *                     token is ours     another token
 *   lock free         GONE              UNKNOWN (a stale file of another run, or a
 *                                                node-local copy of the path)
 *   lock held         ALIVE             SUPERSEDED
 */
#define _GNU_SOURCE
#include "core/runlock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "core/progress.h"
#include "core/randhex.h"

/* The value of "key=" in text (up to the line's end), "" when absent. */
static void field(const char *text, const char *key, char *out, size_t cap)
{
    size_t kl = strlen(key);
    out[0] = '\0';
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, key, kl) && p[kl] == '=') {
            snprintf(out, cap, "%.*s", (int)strcspn(p + kl + 1, "\n"), p + kl + 1);
            return;
        }
}

static void read_text(int fd, char *buf, size_t cap)
{
    ssize_t n = pread(fd, buf, cap - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
}

/* "grit launch pid N on HOST (since T)" from the file's text. */
static void holder(const char *text, char *out, size_t cap)
{
    char pid[32], host[128], since[64];
    field(text, "pid", pid, sizeof pid);
    field(text, "host", host, sizeof host);
    field(text, "since", since, sizeof since);
    if (!pid[0])
        snprintf(out, cap, "another grit launch");
    else
        snprintf(out, cap, "grit launch pid %s on %s%s%s%s", pid, host[0] ? host : "?",
                 since[0] ? " (since " : "", since, since[0] ? ")" : "");
}

grit_err runlock_take(runlock *l, const char *dir, double wait_s)
{
    memset(l, 0, sizeof *l);
    l->fd = -1;
    char abs[PATH_MAX];
    if (!realpath(dir, abs))
        return grit_errf(GRIT_EIO, "%s: %s", dir, strerror(errno));
    if ((size_t)snprintf(l->path, sizeof l->path, "%s/%s", abs, RUNLOCK_NAME) >= sizeof l->path)
        return grit_errf(GRIT_EINVAL, "%s: path too long for the run lock", abs);
    int fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return grit_errf(GRIT_EIO, "%s: %s", l->path, strerror(errno));
    double until = now_seconds() + wait_s;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EINTR)
            continue;
        if (errno != EWOULDBLOCK) {
            grit_err rc = grit_errf(GRIT_EIO, "%s: cannot lock: %s", l->path, strerror(errno));
            close(fd);
            return rc;
        }
        if (now_seconds() >= until) {
            char text[512], who[256];
            read_text(fd, text, sizeof text);
            holder(text, who, sizeof who);
            close(fd);
            return grit_errf(GRIT_EINVAL,
                             "run directory %s is in use by %s: one supervisor per run "
                             "directory (stop it, or use another --run)",
                             abs, who);
        }
        usleep(20000);
    }
    grit_err trc = rand_hex(l->token, 16, "the run lock's token");
    if (trc != GRIT_OK) {
        close(fd);
        return trc;
    }
    char host[128] = "?", since[64] = "";
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", &tm);
    char text[512];
    int n = snprintf(text, sizeof text, "token=%s\npid=%ld\nhost=%s\nsince=%s\n", l->token,
                     (long)getpid(), host, since);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)n, 0) != n || fsync(fd) != 0) {
        grit_err rc = grit_errf(GRIT_EIO, "%s: %s", l->path, strerror(errno));
        close(fd);
        return rc;
    }
    l->fd = fd;
    return GRIT_OK;
}

void runlock_release(runlock *l)
{
    if (l->fd >= 0)
        close(l->fd); /* closing the last descriptor drops the flock */
    l->fd = -1;
}

runlock_state runlock_owner(const char *path, const char *token, char *why, size_t cap)
{
    if (why && cap)
        why[0] = '\0';
    if (!path || !*path || !token || !*token)
        return RUNLOCK_UNKNOWN;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return RUNLOCK_UNKNOWN;
    int fr;
    while ((fr = flock(fd, LOCK_SH | LOCK_NB)) != 0 && errno == EINTR)
        ;
    int held = fr != 0 && errno == EWOULDBLOCK;
    if (fr != 0 && !held) { /* ENOLCK (a file system without locks): cannot tell */
        close(fd);
        return RUNLOCK_UNKNOWN;
    }
    if (!held)
        flock(fd, LOCK_UN);
    char text[512], tok[64], who[256];
    read_text(fd, text, sizeof text);
    close(fd);
    field(text, "token", tok, sizeof tok);
    holder(text, who, sizeof who);
    int ours = !strcmp(tok, token);
    if (held && ours)
        return RUNLOCK_ALIVE;
    if (!held && !ours)
        return RUNLOCK_UNKNOWN;
    if (why && cap) {
        if (held)
            snprintf(why, cap, "%s now owns the run (%s)", who, path);
        else
            snprintf(why, cap, "the supervisor that launched this rank (%s) is gone: nobody holds %s",
                     who, path);
    }
    return held ? RUNLOCK_SUPERSEDED : RUNLOCK_GONE;
}

runlock_state runlock_env_owner(double min_interval_s, char *why, size_t cap)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static double last = -1;
    static runlock_state st = RUNLOCK_UNKNOWN;
    static char last_why[400];
    const char *path = getenv("GRIT_SUP_LOCK"), *token = getenv("GRIT_SUP_LOCK_TOKEN");
    if (!path || !*path || !token || !*token)
        return RUNLOCK_UNKNOWN;
    pthread_mutex_lock(&mu);
    double now = now_seconds();
    if (last < 0 || min_interval_s <= 0 || now - last >= min_interval_s) {
        st = runlock_owner(path, token, last_why, sizeof last_why);
        last = now;
    }
    runlock_state r = st;
    if (why && cap)
        snprintf(why, cap, "%s", last_why);
    pthread_mutex_unlock(&mu);
    return r;
}
