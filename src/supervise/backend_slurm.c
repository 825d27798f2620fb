/*
 * backend_slurm.c - grit launch inside a Slurm allocation (see backend.h).
 *
 *   hosts        `scontrol show hostnames $SLURM_JOB_NODELIST`
 *   job_argv     srun --overlap --mpi=pmix -K1 -N A -n A*R --distribution=arbitrary
 *                     -w <each active host R times, by position> CMD
 *                (arbitrary distribution: rank r runs on the r/R-th listed host, so the
 *                supervisor's position -> node map is Slurm's too)
 *   check_node   srun --overlap -N1 -n1 -w NODE grit health --quick, killed after
 *                GRIT_SLURM_HEALTH_TIMEOUT seconds (default 15): a node that cannot
 *                run it (dead or hung slurmd) is unhealthy
 *   cordoned     scontrol update NodeName=NODE State=DRAIN Reason="grit: <why>"
 *   job_stopped  scancel --signal=KILL for this job's steps named grit-step (ranks on a
 *                node that did not hear srun's SIGTERM)
 *   no_spare     policy requeue: scontrol requeue $SLURM_JOB_ID (Slurm allocates
 *                healthy nodes; the batch script runs again and resumes)
 *
 * Every Slurm command is run directly (fork/exec, no shell), with a time limit, its
 * output captured (never shown with the job's secret: the environment is not logged).
 * $GRIT_SCONTROL, $GRIT_SRUN, $GRIT_SCANCEL, $GRIT_SQUEUE override the programs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/progress.h"
#include "supervise/backend.h"

static const char *prog(const char *env, const char *dflt)
{
    const char *p = getenv(env);
    return p && *p ? p : dflt;
}

/* Runs argv; its stdout (and stderr) into out (truncated to cap, NUL-terminated) when out
 * is given, else to /dev/null. Returns the exit status, 128+signal, or -1 when it could
 * not start or ran past timeout seconds (then it is SIGKILLed). */
static int run_capture(char *const argv[], double timeout, char *out, size_t cap)
{
    int fds[2] = {-1, -1};
    if (out && pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        if (out) {
            close(fds[0]);
            close(fds[1]);
        }
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0)
            dup2(nul, 0);
        int o = out ? fds[1] : nul;
        if (o >= 0) {
            dup2(o, 1);
            dup2(o, 2);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    size_t len = 0;
    if (out) {
        close(fds[1]);
        out[0] = '\0';
    }
    double t0 = now_seconds();
    int status = 0, timed_out = 0;
    for (;;) {
        if (out && fds[0] >= 0) {
            struct pollfd p = {.fd = fds[0], .events = POLLIN};
            if (poll(&p, 1, 50) > 0) {
                char tmp[512];
                ssize_t r = read(fds[0], tmp, sizeof tmp);
                if (r <= 0) {
                    close(fds[0]);
                    fds[0] = -1;
                } else if (len + 1 < cap) {
                    size_t k = (size_t)r < cap - 1 - len ? (size_t)r : cap - 1 - len;
                    memcpy(out + len, tmp, k);
                    len += k;
                    out[len] = '\0';
                }
            }
        } else
            usleep(20000);
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (now_seconds() - t0 > timeout) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            timed_out = 1;
            break;
        }
    }
    if (out && fds[0] >= 0)
        close(fds[0]);
    if (timed_out)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static grit_err slurm_hosts(const sup_opts *o, char names[][32], int cap, int *n)
{
    (void)o;
    const char *list = getenv("SLURM_JOB_NODELIST");
    if (!list || !*list)
        list = getenv("SLURM_NODELIST");
    if (!list || !*list)
        return grit_errf(GRIT_EINVAL, "--backend slurm: SLURM_JOB_NODELIST is not set "
                                      "(expected to run inside sbatch/salloc)");
    char out[8192];
    char *argv[] = {(char *)prog("GRIT_SCONTROL", "scontrol"), "show", "hostnames", (char *)list,
                    NULL};
    int rc = run_capture(argv, 30, out, sizeof out);
    if (rc != 0)
        return grit_errf(GRIT_EIO, "scontrol show hostnames %s failed (status %d): %.200s", list,
                         rc, out);
    *n = 0;
    for (char *sv = NULL, *h = strtok_r(out, "\n", &sv); h; h = strtok_r(NULL, "\n", &sv)) {
        if (!*h)
            continue;
        if (*n >= cap)
            return grit_errf(GRIT_EINVAL, "allocation %s: more than %d hosts", list, cap);
        if (strlen(h) >= 32)
            return grit_errf(GRIT_EINVAL, "allocation %s: host name '%.40s...' longer than 31",
                             list, h);
        snprintf(names[(*n)++], 32, "%s", h);
    }
    if (*n == 0)
        return grit_errf(GRIT_EINVAL, "allocation %s: no hosts", list);
    return GRIT_OK;
}

static int slurm_job_argv(const sup_opts *o, const char *nodes, int count, int rpn, int attempt,
                          char **argv, char *buf, size_t cap)
{
    int k = 0, n = 0, ne = 0;
    while (o->cmd[n])
        n++;
    while (o->srun_args && o->srun_args[ne])
        ne++;
    if (n + ne + 16 > BACKEND_ARGV_MAX)
        return -1;
    /* buf: "-N<a>\0-n<r>\0--ntasks-per-node=<rpn>\0-w<host,host,...>\0--job-name=..." */
    size_t off = 0;
#define PUT(...)                                                                         \
    do {                                                                                 \
        int w_ = snprintf(buf + off, cap - off, __VA_ARGS__);                            \
        if (w_ < 0 || (size_t)w_ >= cap - off)                                           \
            return -1;                                                                   \
        argv[k++] = buf + off;                                                           \
        off += (size_t)w_ + 1;                                                           \
    } while (0)
    argv[k++] = (char *)prog("GRIT_SRUN", "srun");
    argv[k++] = "--overlap";
    argv[k++] = "--mpi=pmix";
    argv[k++] = "--kill-on-bad-exit=1";
    argv[k++] = "--distribution=arbitrary";
    PUT("--nodes=%d", count);
    PUT("--ntasks=%d", count * rpn);
    PUT("--job-name=grit-step-%d", attempt);
    /* -w: every host once per rank, in position order */
    char w[4096] = "";
    size_t wl = 0;
    char names[1024];
    snprintf(names, sizeof names, "%s", nodes);
    for (char *sv = NULL, *h = strtok_r(names, ",", &sv); h; h = strtok_r(NULL, ",", &sv))
        for (int r = 0; r < rpn; r++) {
            int x = snprintf(w + wl, sizeof w - wl, "%s%s", wl ? "," : "", h);
            if (x < 0 || (size_t)x >= sizeof w - wl)
                return -1;
            wl += (size_t)x;
        }
    PUT("--nodelist=%s", w);
#undef PUT
    for (int i = 0; i < ne; i++)
        argv[k++] = o->srun_args[i];
    for (int i = 0; i < n; i++)
        argv[k++] = o->cmd[i];
    argv[k] = NULL;
    return 0;
}

static double health_timeout(void)
{
    const char *t = getenv("GRIT_SLURM_HEALTH_TIMEOUT");
    double v = t ? atof(t) : 0;
    return v > 0 ? v : 15;
}

static int slurm_check_node(const sup_opts *o, const char *node, const char *fault, char *why,
                            size_t cap)
{
    char w[64], exp[128];
    snprintf(w, sizeof w, "--nodelist=%s", node);
    /* an injected fault reaches the task through srun's environment export */
    snprintf(exp, sizeof exp, "--export=ALL%s%s", fault ? ",GRIT_HEALTH_FAULT=" : "",
             fault ? fault : "");
    char *argv[] = {(char *)prog("GRIT_SRUN", "srun"), "--overlap", "--nodes=1", "--ntasks=1",
                    w, "--job-name=grit-health", exp, (char *)o->grit, "health", "--quick",
                    NULL};
    char out[4096];
    double t0 = now_seconds();
    int rc = run_capture(argv, health_timeout(), out, sizeof out);
    if (rc == 0) {
        snprintf(why, cap, "healthy");
        return 0;
    }
    /* grit health's verdict line names the first failing check; else srun's own
     * error says why the node could not run it */
    const char *first = strstr(out, "failed, first "), *err = strstr(out, "srun: error: ");
    if (rc < 0)
        snprintf(why, cap, "no answer from the node within %.0f s (hung or dead)",
                 now_seconds() - t0);
    else if (first)
        snprintf(why, cap, "grit health: %.*s failed", (int)strcspn(first + 14, " \n"),
                 first + 14);
    else if (err)
        snprintf(why, cap, "unreachable: %.*s", (int)strcspn(err + 13, "\n"), err + 13);
    else
        snprintf(why, cap, "cannot run grit health on the node (srun status %d)", rc);
    return 1;
}

static void slurm_cordoned(const sup_opts *o, const char *node, const char *reason)
{
    (void)o;
    char n[64], r[220];
    snprintf(n, sizeof n, "NodeName=%s", node);
    snprintf(r, sizeof r, "Reason=grit: %.200s", reason);
    char *argv[] = {(char *)prog("GRIT_SCONTROL", "scontrol"), "update", n, "State=DRAIN", r,
                    NULL};
    char out[1024];
    int rc = run_capture(argv, 30, out, sizeof out);
    if (rc != 0)
        fprintf(stderr, "grit launch: scontrol update %s State=DRAIN failed (status %d): %s\n",
                node, rc, out);
}

/* Kills what is left of this job's training steps: ranks on a node that srun could
 * not reach when it was stopped would otherwise spin in their collectives. */
static void slurm_job_stopped(const sup_opts *o)
{
    (void)o;
    const char *job = getenv("SLURM_JOB_ID");
    if (!job)
        return;
    char out[8192];
    char *ls[] = {(char *)prog("GRIT_SQUEUE", "squeue"), "-h", "-s", "-j", (char *)job, "-o",
                  "%i %j", NULL};
    if (run_capture(ls, 15, out, sizeof out) != 0)
        return;
    for (char *sv = NULL, *l = strtok_r(out, "\n", &sv); l; l = strtok_r(NULL, "\n", &sv)) {
        char id[64], name[128];
        if (sscanf(l, "%63s %127s", id, name) != 2 || strncmp(name, "grit-step-", 10))
            continue;
        char *kill_argv[] = {(char *)prog("GRIT_SCANCEL", "scancel"), "--signal=KILL", id, NULL};
        run_capture(kill_argv, 15, NULL, 0);
    }
}

static int slurm_no_spare(const sup_opts *o, const char *reason)
{
    if (!o->no_spare || strcmp(o->no_spare, "requeue"))
        return 0;
    const char *job = getenv("SLURM_JOB_ID");
    if (!job) {
        fprintf(stderr, "grit launch: cannot requeue: SLURM_JOB_ID is not set\n");
        return 0;
    }
    fprintf(stderr, "grit launch: %s: requeueing job %s\n", reason, job);
    char *argv[] = {(char *)prog("GRIT_SCONTROL", "scontrol"), "requeue", (char *)job, NULL};
    char out[1024];
    int rc = run_capture(argv, 30, out, sizeof out);
    if (rc != 0) {
        fprintf(stderr, "grit launch: scontrol requeue %s failed (status %d): %s\n", job, rc, out);
        return 0;
    }
    return 1;
}

/* srun's "srun: error: NODE: task R: Killed" (or a signal); -1 when no task was killed
 * (ranks that merely exited with an error followed a peer's failure). */
static int slurm_failed_rank(const char *log)
{
    for (const char *p = log; (p = strstr(p, ": task ")); p++) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char line[256];
        snprintf(line, sizeof line, "%.*s", (int)(len < 255 ? len : 255), p);
        if (strstr(line, "Killed") || strstr(line, "Segmentation") || strstr(line, "Aborted") ||
            strstr(line, "Bus error"))
            return atoi(p + 7);
    }
    return -1;
}

const sup_backend sup_backend_slurm = {
    .name = "slurm",
    .remote_ranks = 1,
    .hosts = slurm_hosts,
    .job_argv = slurm_job_argv,
    .check_node = slurm_check_node,
    .cordoned = slurm_cordoned,
    .job_stopped = slurm_job_stopped,
    .no_spare = slurm_no_spare,
    .failed_rank = slurm_failed_rank,
};
