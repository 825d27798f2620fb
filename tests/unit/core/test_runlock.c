/* test_runlock.c - one supervisor per run directory, and what its ranks see: alive while
 * the holder lives, gone once it is killed (kill -9; a child it exec'd keeps no lock),
 * superseded once another takes the directory, unknown for a stale file of another run or
 * no file; a second taker is refused with the holder named. Holders are real processes. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../check.h"
#include "core/runlock.h"

/* A child that takes the lock in dir, writes its token to the pipe, execs `sleep 60` from a
 * grandchild (which must not inherit the lock) and waits to be killed. */
static pid_t holder(const char *dir, char token[33], pid_t *grandchild)
{
    int p[2];
    if (pipe(p) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        runlock l;
        if (runlock_take(&l, dir, 0) != GRIT_OK)
            _exit(3);
        int e[2]; /* closed by the grandchild's exec (O_CLOEXEC): EOF says it exec'd */
        if (pipe2(e, O_CLOEXEC) != 0)
            _exit(5);
        pid_t g = fork();
        if (g == 0) {
            execlp("sleep", "sleep", "60", (char *)NULL);
            _exit(127);
        }
        close(e[1]);
        char c;
        while (read(e[0], &c, 1) > 0)
            ;
        if (write(p[1], l.token, 33) != 33 || write(p[1], &g, sizeof g) != (ssize_t)sizeof g)
            _exit(4);
        for (;;)
            pause();
    }
    close(p[1]);
    ssize_t n = read(p[0], token, 33);
    ssize_t m = read(p[0], grandchild, sizeof *grandchild);
    close(p[0]);
    if (n != 33 || m != (ssize_t)sizeof *grandchild) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    return pid;
}

int main(void)
{
    char dir[] = "/tmp/grit-runlock-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256], why[400], tok[33], tok2[33];
    snprintf(path, sizeof path, "%s/" RUNLOCK_NAME, dir);

    /* no file, no names: unknown (a rank not started by grit launch) */
    CHECK_INT(runlock_owner(path, "00", why, sizeof why), RUNLOCK_UNKNOWN);
    CHECK_INT(runlock_owner(NULL, NULL, why, sizeof why), RUNLOCK_UNKNOWN);
    unsetenv("GRIT_SUP_LOCK");
    CHECK_INT(runlock_env_owner(0, why, sizeof why), RUNLOCK_UNKNOWN);

    pid_t g1 = -1, h1 = holder(dir, tok, &g1);
    CHECK(h1 > 0);
    CHECK_INT(runlock_owner(path, tok, why, sizeof why), RUNLOCK_ALIVE);

    /* a second supervisor on the same directory is refused, naming the first */
    runlock l2;
    CHECK(runlock_take(&l2, dir, 0.2) != GRIT_OK);
    char want[64];
    snprintf(want, sizeof want, "pid %ld", (long)h1);
    CHECK(strstr(grit_errmsg(), want) != NULL);
    CHECK(strstr(grit_errmsg(), "in use") != NULL);
    CHECK_INT(l2.fd, -1);

    /* through the environment, cached between asks */
    setenv("GRIT_SUP_LOCK", path, 1);
    setenv("GRIT_SUP_LOCK_TOKEN", tok, 1);
    CHECK_INT(runlock_env_owner(0, why, sizeof why), RUNLOCK_ALIVE);

    /* kill -9 of the holder frees the lock although its exec'd child lives on */
    kill(h1, SIGKILL);
    waitpid(h1, NULL, 0);
    CHECK(kill(g1, 0) == 0);
    CHECK_INT(runlock_env_owner(60, why, sizeof why), RUNLOCK_ALIVE); /* the cached answer */
    CHECK_INT(runlock_env_owner(0, why, sizeof why), RUNLOCK_GONE);
    CHECK(strstr(why, "is gone") != NULL && strstr(why, want) != NULL);
    CHECK_INT(runlock_owner(path, tok, why, sizeof why), RUNLOCK_GONE);
    kill(g1, SIGKILL);
    waitpid(g1, NULL, 0);

    /* a new supervisor: the old token is superseded, the new one alive */
    pid_t g2 = -1, h2 = holder(dir, tok2, &g2);
    CHECK(h2 > 0);
    CHECK(strcmp(tok, tok2) != 0);
    CHECK_INT(runlock_owner(path, tok, why, sizeof why), RUNLOCK_SUPERSEDED);
    CHECK(strstr(why, "now owns the run") != NULL);
    CHECK_INT(runlock_owner(path, tok2, why, sizeof why), RUNLOCK_ALIVE);
    kill(h2, SIGKILL);
    kill(g2, SIGKILL);
    waitpid(h2, NULL, 0);
    waitpid(g2, NULL, 0);
    /* nobody holds it and the token is another run's: a stale file, not ours to judge */
    CHECK_INT(runlock_owner(path, tok, why, sizeof why), RUNLOCK_UNKNOWN);
    CHECK_INT(runlock_owner(path, tok2, why, sizeof why), RUNLOCK_GONE);

    /* this process takes it now, and release frees it for the next */
    runlock l3;
    CHECK_INT(runlock_take(&l3, dir, 0), GRIT_OK);
    CHECK_INT(runlock_owner(path, l3.token, why, sizeof why), RUNLOCK_ALIVE);
    runlock_release(&l3);
    CHECK_INT(runlock_take(&l3, dir, 0), GRIT_OK);
    runlock_release(&l3);

    /* a directory that does not exist: a clear error */
    char missing[300];
    snprintf(missing, sizeof missing, "%s/nope", dir);
    CHECK(runlock_take(&l3, missing, 0) != GRIT_OK);
    CHECK(strstr(grit_errmsg(), "nope") != NULL);

    unlink(path);
    rmdir(dir);
    CHECK_DONE();
}
