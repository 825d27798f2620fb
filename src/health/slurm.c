/* slurm.c - drain on failure, resume only what grit drained (see slurm.h). */
#include "health/slurm.h"

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

void health_slurm_node(char *out, size_t cap)
{
    const char *n = getenv("SLURMD_NODENAME");
    if (n && *n) {
        snprintf(out, cap, "%s", n);
        return;
    }
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "localhost");
    char *dot = strchr(host, '.');
    if (dot)
        *dot = '\0';
    snprintf(out, cap, "%s", host);
}

/* Runs argv; captures up to cap-1 bytes of stdout into out (may be NULL).
 * Returns GRIT_OK when it exited 0. */
static grit_err run_cmd(char *const argv[], char *out, size_t cap)
{
    int pfd[2] = {-1, -1};
    if (out && pipe(pfd) != 0)
        return grit_errf(GRIT_EIO, "pipe: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (out) {
        posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
        posix_spawn_file_actions_addclose(&fa, pfd[0]);
        posix_spawn_file_actions_addclose(&fa, pfd[1]);
    }
    pid_t pid;
    int e = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (out)
        close(pfd[1]);
    if (e != 0) {
        if (out)
            close(pfd[0]);
        return grit_errf(GRIT_EIO, "cannot run %s: %s", argv[0], strerror(e));
    }
    if (out) {
        size_t len = 0;
        for (;;) {
            char tmp[4096];
            ssize_t k = read(pfd[0], tmp, sizeof tmp);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                break;
            size_t take = (size_t)k < cap - 1 - len ? (size_t)k : cap - 1 - len;
            memcpy(out + len, tmp, take);
            len += take;
        }
        out[len] = '\0';
        close(pfd[0]);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return grit_errf(GRIT_EIO, "waitpid: %s", strerror(errno));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return grit_errf(GRIT_EIO, "%s %s failed (%s %d)", argv[0], argv[1],
                         WIFEXITED(st) ? "exit" : "signal",
                         WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    return GRIT_OK;
}

grit_err health_slurm_apply(const health_report *r, health_slurm_result *res)
{
    memset(res, 0, sizeof *res);
    health_slurm_node(res->node, sizeof res->node);
    const char *sc = getenv("GRIT_SCONTROL");
    if (!sc || !*sc)
        sc = "scontrol";
    char nodearg[160];
    snprintf(nodearg, sizeof nodearg, "NodeName=%s", res->node);
    int code = health_exit_code(r);
    if (code == 2) {
        snprintf(res->detail, sizeof res->detail, "checks could not run; node state unchanged");
        return GRIT_OK;
    }
    if (code == 1) {
        const health_result *bad = health_first_bad(r);
        char reason[128];
        snprintf(reason, sizeof reason, "Reason=grit: %s", bad ? bad->name : "unknown");
        char *argv[] = {(char *)sc, "update", nodearg, "State=DRAIN", reason, NULL};
        grit_err rc = run_cmd(argv, NULL, 0);
        if (rc != GRIT_OK)
            return rc;
        res->action = HEALTH_SLURM_DRAINED;
        snprintf(res->detail, sizeof res->detail, "drained %s (%s)", res->node, reason + 7);
        return GRIT_OK;
    }
    size_t cap = 65536;
    char *show = malloc(cap);
    if (!show)
        return grit_errf(GRIT_ENOMEM, "slurm: out of memory");
    char *argv[] = {(char *)sc, "show", "node", res->node, NULL};
    grit_err rc = run_cmd(argv, show, cap);
    if (rc != GRIT_OK)
        goto out;
    /* "Reason=grit: compute.gemm_kat [root@2026-01-01T00:00:00]" to end of line. */
    const char *p = show, *reason = NULL;
    while ((p = strstr(p, "Reason=")) != NULL) {
        if (p == show || p[-1] == ' ' || p[-1] == '\n' || p[-1] == '\t') {
            reason = p + 7;
            break;
        }
        p += 7;
    }
    if (!reason || strncmp(reason, "grit:", 5) != 0) {
        char cur[96] = "none";
        if (reason)
            snprintf(cur, sizeof cur, "%.*s", (int)strcspn(reason, "\n"), reason);
        snprintf(res->detail, sizeof res->detail,
                 "healthy; node not drained by grit (Reason=%s), state unchanged", cur);
        goto out;
    }
    char *uargv[] = {(char *)sc, "update", nodearg, "State=RESUME", NULL};
    rc = run_cmd(uargv, NULL, 0);
    if (rc != GRIT_OK)
        goto out;
    res->action = HEALTH_SLURM_RESUMED;
    snprintf(res->detail, sizeof res->detail, "resumed %s (grit had drained it: %.*s)", res->node,
             (int)strcspn(reason, "\n"), reason);
out:
    free(show);
    return rc;
}
