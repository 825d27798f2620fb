/*
 * backend_slurm.c - grit launch inside a Slurm allocation (see backend.h).
 *
 *   hosts        `scontrol show hostnames $SLURM_JOB_NODELIST`
 *   job_argv     srun --overlap --mpi=pmix -K1 -N A -n A*R --distribution=arbitrary
 *                     -w <each active host R times, by position> CMD
 *                (arbitrary distribution: rank r runs on the r/R-th listed host, so the
 *                supervisor's position -> node map is Slurm's too)
 *   check_node   srun --overlap -N1 -n1 -w NODE grit health --quick, killed after
 *                --health-timeout seconds (default 15): a node that cannot run it
 *                (dead or hung slurmd) is unhealthy; check_begin runs the checks of
 *                all suspects at once, so diagnosis takes as long as the slowest
 *   cordoned     scontrol update NodeName=NODE State=DRAIN Reason="grit: <why>"
 *   job_stopped  scancel --signal=KILL for this job's steps named grit-step (ranks on a
 *                node that did not hear srun's SIGTERM)
 *   no_spare     policy requeue: scontrol requeue $SLURM_JOB_ID (Slurm allocates
 *                healthy nodes; the batch script runs again and resumes)
 *   grow         job expansion (slurm.conf: SchedulerParameters=permit_job_expansion):
 *                salloc --no-shell -N1 -w NODE --dependency=expand:$SLURM_JOB_ID, then
 *                scontrol update JobId=<that job> NumNodes=0 hands its node to this job;
 *                this process's SLURM_JOB_NODELIST, SLURM_NODELIST, SLURM_JOB_NUM_NODES,
 *                SLURM_NNODES and SLURM_JOB_CPUS_PER_NODE are set from `scontrol -o show
 *                job` (what Slurm's slurm_job_<id>_resize.sh would set) so the next srun
 *                may use it. Nothing when NODE is in the allocation already.
 *   addrs        sinfo -h -N -o "%N %o" --nodes=<up to 64 hosts> (Slurm's NodeAddr,
 *                the address slurmctld reaches each node at); a name-valued NodeAddr,
 *                or a host sinfo did not list, through getaddrinfo (IPv4)
 *
 * Every Slurm command is run directly (fork/exec, no shell), with a time limit, its
 * output captured (never shown with the job's secret: the environment is not logged).
 * $GRIT_SCONTROL, $GRIT_SRUN, $GRIT_SCANCEL, $GRIT_SQUEUE, $GRIT_SINFO, $GRIT_SALLOC
 * override the programs.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/progress.h"
#include "supervise/backend.h"
#include "supervise/cluster.h"

static const char *prog(const char *env, const char *dflt)
{
    const char *p = getenv(env);
    return p && *p ? p : dflt;
}

/* A child program with its output captured (up to 8 KiB kept). */
typedef struct proc {
    pid_t pid;
    int fd, rc;
    size_t len;
    char out[8192];
} proc;

/* Starts argv in its own process group, stdin /dev/null, stdout+stderr into p->out.
 * Returns 0, or -1 (p->rc = -1) when it cannot start. */
static int proc_start(proc *p, char *const argv[])
{
    int fds[2];
    memset(p, 0, sizeof *p);
    p->rc = -1;
    p->fd = -1;
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0)
            dup2(nul, 0);
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    p->pid = pid;
    p->fd = fds[0];
    return 0;
}

static void proc_read(proc *p)
{
    char tmp[1024];
    ssize_t r;
    while (p->fd >= 0 && (r = read(p->fd, tmp, sizeof tmp)) != 0) {
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return;
            break;
        }
        size_t k = (size_t)r < sizeof p->out - 1 - p->len ? (size_t)r : sizeof p->out - 1 - p->len;
        memcpy(p->out + p->len, tmp, k);
        p->len += k;
        p->out[p->len] = '\0';
    }
    close(p->fd);
    p->fd = -1;
}

/* Waits for all n started programs; one still running after timeout seconds is
 * SIGKILLed (with its process group) and gets rc -1. Else rc is the exit status, or
 * 128+signal. */
static void proc_wait_all(proc *ps, int n, double timeout)
{
    double t0 = now_seconds();
    for (;;) {
        int running = 0;
        struct pollfd pf[64];
        int np = 0;
        for (int i = 0; i < n; i++) {
            proc *p = &ps[i];
            if (p->pid <= 0)
                continue;
            proc_read(p);
            int status;
            if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
                proc_read(p);
                p->rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                p->pid = 0;
                continue;
            }
            running++;
            if (p->fd >= 0 && np < 64)
                pf[np++] = (struct pollfd){.fd = p->fd, .events = POLLIN};
        }
        if (!running)
            break;
        if (now_seconds() - t0 > timeout) {
            for (int i = 0; i < n; i++)
                if (ps[i].pid > 0) {
                    kill(-ps[i].pid, SIGKILL);
                    kill(ps[i].pid, SIGKILL);
                    waitpid(ps[i].pid, NULL, 0);
                    ps[i].pid = 0;
                    ps[i].rc = -1;
                }
            break;
        }
        if (np)
            poll(pf, (nfds_t)np, 20);
        else
            usleep(20000);
    }
    for (int i = 0; i < n; i++)
        if (ps[i].fd >= 0) {
            close(ps[i].fd);
            ps[i].fd = -1;
        }
}

/* Runs argv to the end (at most timeout seconds); its output into out when given.
 * Returns the exit status, 128+signal, or -1 (could not start, or timed out). */
static int run_capture(char *const argv[], double timeout, char *out, size_t cap)
{
    proc p;
    if (proc_start(&p, argv) == 0)
        proc_wait_all(&p, 1, timeout);
    if (out && cap) {
        size_t k = p.len < cap - 1 ? p.len : cap - 1;
        memcpy(out, p.out, k);
        out[k] = '\0';
    }
    return p.rc;
}

/* `scontrol show hostnames LIST` into out, one host per line; GRIT_OK, else the error
 * (a failed command, or more output than out holds: never a partial host list). */
static grit_err show_hostnames(const char *list, char *out, size_t cap)
{
    char *argv[] = {(char *)prog("GRIT_SCONTROL", "scontrol"), "show", "hostnames", (char *)list,
                    NULL};
    int rc = run_capture(argv, 30, out, cap);
    if (rc != 0)
        return grit_errf(GRIT_EIO, "scontrol show hostnames %s failed (status %d): %.200s", list,
                         rc, out);
    if (strlen(out) >= cap - 1) /* the capture is full */
        return grit_errf(GRIT_EINVAL, "allocation %s: scontrol printed more than %zu bytes of "
                                      "host names (the most grit launch reads)", list, cap - 1);
    return GRIT_OK;
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
    grit_err rc = show_hostnames(list, out, sizeof out);
    if (rc != GRIT_OK)
        return rc;
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
    /* -w: every host once per rank, in position order; written straight into buf */
    const char *key = "--nodelist=";
    size_t kl = strlen(key), wl = 0;
    if (off + kl + 1 > cap)
        return -1;
    char *w = buf + off;
    memcpy(w, key, kl);
    wl = kl;
    for (const char *h = nodes; *h;) {
        size_t hl = strcspn(h, ",");
        for (int r = 0; r < rpn; r++) {
            if (off + wl + hl + 2 > cap)
                return -1;
            if (wl > kl)
                w[wl++] = ',';
            memcpy(w + wl, h, hl);
            wl += hl;
        }
        h += hl + (h[hl] == ',');
    }
    w[wl] = '\0';
    argv[k++] = w;
    off += wl + 1;
#undef PUT
    for (int i = 0; i < ne; i++)
        argv[k++] = o->srun_args[i];
    for (int i = 0; i < n; i++)
        argv[k++] = o->cmd[i];
    argv[k] = NULL;
    return 0;
}

/* Verdicts of the checks started together by check_begin, handed out by check_node
 * (allocated for the suspects of the latest check_begin). */
static struct verdict {
    char node[64], why[200];
    int bad, valid;
} *verdicts;
static int nverdicts;

static void health_argv(const sup_opts *o, const char *node, const char *fault, char *w,
                        size_t wcap, char *exp, size_t ecap, char **argv)
{
    snprintf(w, wcap, "--nodelist=%s", node);
    /* an injected fault reaches the task through srun's environment export */
    snprintf(exp, ecap, "--export=ALL%s%s", fault ? ",GRIT_HEALTH_FAULT=" : "",
             fault ? fault : "");
    char *a[] = {(char *)prog("GRIT_SRUN", "srun"), "--overlap", "--nodes=1", "--ntasks=1", w,
                 "--job-name=grit-health", exp, (char *)o->grit, "health", "--quick", NULL};
    memcpy(argv, a, sizeof a);
}

static double health_timeout(const sup_opts *o)
{
    return o->health_timeout > 0 ? o->health_timeout : 15;
}

/* The verdict on one finished check: 0 healthy, 1 unhealthy (why filled). */
static int verdict(const proc *p, double secs, char *why, size_t cap)
{
    if (p->rc == 0) {
        snprintf(why, cap, "healthy");
        return 0;
    }
    /* grit health's verdict line names the first failing check; else srun's own
     * error says why the node could not run it */
    const char *first = strstr(p->out, "failed, first "), *err = strstr(p->out, "srun: error: ");
    if (p->rc < 0)
        snprintf(why, cap, "no answer from the node within %.0f s (hung or dead)", secs);
    else if (first)
        snprintf(why, cap, "grit health: %.*s failed", (int)strcspn(first + 14, " \n"),
                 first + 14);
    else if (err)
        snprintf(why, cap, "unreachable: %.*s", (int)strcspn(err + 13, "\n"), err + 13);
    else
        snprintf(why, cap, "cannot run grit health on the node (srun status %d)", p->rc);
    return 1;
}

static void slurm_check_begin(const sup_opts *o, char targets[][64], int n,
                              const char *const *faults)
{
    free(verdicts);
    nverdicts = 0;
    verdicts = calloc(n > 0 ? (size_t)n : 1, sizeof *verdicts);
    proc *ps = calloc(n > 0 ? (size_t)n : 1, sizeof *ps);
    char (*w)[96] = calloc(n > 0 ? (size_t)n : 1, sizeof *w);
    char (*exp)[128] = calloc(n > 0 ? (size_t)n : 1, sizeof *exp);
    if (!verdicts || !ps || !w || !exp) { /* check_node then checks one by one */
        free(verdicts), free(ps), free(w), free(exp);
        verdicts = NULL;
        return;
    }
    nverdicts = n;
    double t0 = now_seconds();
    for (int i = 0; i < n; i++) {
        char *argv[11];
        health_argv(o, targets[i], faults[i], w[i], sizeof w[i], exp[i], sizeof exp[i], argv);
        proc_start(&ps[i], argv);
    }
    proc_wait_all(ps, n, health_timeout(o));
    for (int i = 0; i < n; i++) {
        snprintf(verdicts[i].node, sizeof verdicts[i].node, "%s", targets[i]);
        verdicts[i].bad = verdict(&ps[i], now_seconds() - t0, verdicts[i].why,
                                  sizeof verdicts[i].why);
        verdicts[i].valid = 1;
    }
    free(ps), free(w), free(exp);
}

static int slurm_check_node(const sup_opts *o, const char *node, const char *fault, char *why,
                            size_t cap)
{
    for (int i = 0; i < nverdicts; i++)
        if (verdicts[i].valid && !strcmp(verdicts[i].node, node)) {
            verdicts[i].valid = 0; /* each verdict is used once */
            snprintf(why, cap, "%s", verdicts[i].why);
            return verdicts[i].bad;
        }
    char w[96], exp[128], *argv[11];
    health_argv(o, node, fault, w, sizeof w, exp, sizeof exp, argv);
    proc p;
    double t0 = now_seconds();
    if (proc_start(&p, argv) == 0)
        proc_wait_all(&p, 1, health_timeout(o));
    return verdict(&p, now_seconds() - t0, why, cap);
}

/* The MPI pairwise network check between nodes a and b: `grit health --quick` as two ranks,
 * one per node, in one srun step. The link is judged by the checks a slower or broken link
 * fails, pair bandwidth and exact all-reduce sums (latency and the small all-reduce's busbw
 * are timing noise on a loaded host); 256 KiB ping-pong messages, all-reduces up to 64 KiB,
 * so a link at a few Mbit/s still answers within --health-timeout (no answer: failed). */
static int slurm_pair_check(const sup_opts *o, const char *a, const char *b, char *why,
                            size_t cap)
{
    char w[160];
    snprintf(w, sizeof w, "--nodelist=%s,%s", a, b);
    char *argv[] = {(char *)prog("GRIT_SRUN", "srun"), "--overlap", "--mpi=pmix", "--nodes=2",
                    "--ntasks=2", "--ntasks-per-node=1", w, "--job-name=grit-health-pair",
                    (char *)o->grit, "health", "--quick", "--net-pair-bytes", "262144",
                    "--net-max-bytes", "65536", NULL};
    proc p;
    if (proc_start(&p, argv) != 0) {
        snprintf(why, cap, "could not start %s", argv[0]);
        return -1;
    }
    proc_wait_all(&p, 1, health_timeout(o));
    if (p.rc < 0) { /* killed at the timeout: a link too slow to answer */
        snprintf(why, cap, "no answer within %.0f s", health_timeout(o));
        return 1;
    }
    static const char *judged[] = {"network.pair_bandwidth", "network.allreduce_correct"};
    int seen = 0;
    for (int k = 0; k < 2; k++) {
        /* the report's table row: NAME VERDICT MEASURED OP THRESHOLD UNIT REASON */
        for (const char *l = p.out; (l = strstr(l, judged[k])); l += strlen(judged[k])) {
            if (l != p.out && l[-1] != '\n')
                continue;
            const char *v = l + strlen(judged[k]);
            v += strspn(v, " ");
            seen++;
            if (!strncmp(v, "fail", 4) || !strncmp(v, "error", 5)) {
                /* pair bandwidth: from "slowest pair ..."; else the whole row */
                const char *r = k == 0 ? strstr(v, "slowest pair") : NULL;
                r = r && r < v + strcspn(v, "\n") ? r : v;
                snprintf(why, cap, "%s: %.*s", judged[k], (int)strcspn(r, "\n"), r);
                return 1;
            }
            break;
        }
    }
    if (seen == 2) {
        snprintf(why, cap, "healthy");
        return 0;
    }
    const char *err = strstr(p.out, "srun: error: ");
    if (err)
        snprintf(why, cap, "could not run: %.*s", (int)strcspn(err + 13, "\n"), err + 13);
    else
        snprintf(why, cap, "could not run (status %d, no network checks in the report)", p.rc);
    return -1;
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
        /* slurmctld acts on the request once sent; scancel may then wait for a dead
         * node's answer, which nobody here needs */
        run_capture(kill_argv, 1.0, NULL, 0);
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

/* KEY's value in one line of `scontrol -o show job` (space-separated Key=Value; KEY
 * must start a field, so NodeList= is not ReqNodeList=). 0 found, -1 not. */
static int job_field(const char *line, const char *key, char *out, size_t cap)
{
    size_t kl = strlen(key);
    for (const char *p = line; (p = strstr(p, key)) != NULL; p += kl)
        if ((p == line || p[-1] == ' ' || p[-1] == '\n') && p[kl] == '=') {
            p += kl + 1;
            size_t n = strcspn(p, " \n");
            if (n >= cap)
                return -1;
            memcpy(out, p, n);
            out[n] = '\0';
            return 0;
        }
    return -1;
}

/* The fields of job id that grow needs. */
typedef struct job_info {
    char nodelist[4096], partition[128], state[64];
    long nnodes, ncpus;
} job_info;

static int show_job(const char *id, job_info *j, char *why, size_t wcap)
{
    char out[8192], n[32], c[32];
    char *argv[] = {(char *)prog("GRIT_SCONTROL", "scontrol"), "-o", "show", "job",
                    (char *)id, NULL};
    int rc = run_capture(argv, 30, out, sizeof out);
    memset(j, 0, sizeof *j);
    if (rc != 0 || job_field(out, "NodeList", j->nodelist, sizeof j->nodelist) ||
        job_field(out, "NumNodes", n, sizeof n) || job_field(out, "NumCPUs", c, sizeof c)) {
        snprintf(why, wcap, "scontrol -o show job %s failed (status %d): %.200s", id, rc,
                 out);
        return -1;
    }
    job_field(out, "Partition", j->partition, sizeof j->partition);
    job_field(out, "JobState", j->state, sizeof j->state);
    j->nnodes = strtol(n, NULL, 10);
    j->ncpus = strtol(c, NULL, 10);
    return 0;
}

/* 1 when node is one of list's hosts, 0 not, -1 scontrol failed (why). */
static int in_list(const char *list, const char *node, char *why, size_t wcap)
{
    char out[8192];
    if (show_hostnames(list, out, sizeof out) != GRIT_OK) {
        snprintf(why, wcap, "%s", grit_errmsg());
        return -1;
    }
    for (char *sv = NULL, *h = strtok_r(out, "\n", &sv); h; h = strtok_r(NULL, "\n", &sv))
        if (!strcmp(h, node))
            return 1;
    return 0;
}

/* The last non-empty line of a command's output, for a message. */
static const char *tail_line(char *out)
{
    size_t n = strlen(out);
    while (n && (out[n - 1] == '\n' || out[n - 1] == ' '))
        out[--n] = '\0';
    char *nl = strrchr(out, '\n');
    return nl ? nl + 1 : out;
}

#define GROW_WAIT_S 60 /* salloc --immediate: the node must be allocatable by then */

static int slurm_grow(const sup_opts *o, const char *node, char *did, size_t dcap, char *why,
                      size_t wcap)
{
    (void)o;
    did[0] = '\0';
    const char *job = getenv("SLURM_JOB_ID");
    if (!job || !*job) {
        snprintf(why, wcap, "SLURM_JOB_ID is not set: no allocation to grow");
        return -1;
    }
    job_info j;
    if (show_job(job, &j, why, wcap) != 0)
        return -1;
    int in = in_list(j.nodelist, node, why, wcap);
    if (in != 0)
        return in > 0 ? 0 : -1; /* in the allocation already: nothing to do */
    /* the new node gets as many CPUs as this job's first node has */
    const char *cpn = getenv("SLURM_JOB_CPUS_PER_NODE");
    long cpus = cpn ? strtol(cpn, NULL, 10) : 0;
    char w[64], part[160], dep[64], imm[32], cpt[48], out[8192];
    snprintf(w, sizeof w, "--nodelist=%s", node);
    snprintf(part, sizeof part, "--partition=%s", j.partition);
    snprintf(dep, sizeof dep, "--dependency=expand:%s", job);
    snprintf(imm, sizeof imm, "--immediate=%d", GROW_WAIT_S);
    snprintf(cpt, sizeof cpt, "--cpus-per-task=%ld", cpus > 0 ? cpus : 1);
    char *sa[] = {(char *)prog("GRIT_SALLOC", "salloc"), "--no-shell", imm, "--nodes=1",
                  "--ntasks=1", cpt, w, dep, "--job-name=grit-grow",
                  j.partition[0] ? part : NULL, NULL};
    int rc = run_capture(sa, GROW_WAIT_S + 30, out, sizeof out);
    const char *g = strstr(out, "Granted job allocation ");
    long b = g ? strtol(g + 23, NULL, 10) : 0;
    if (rc != 0 || b <= 0) {
        const char *last = tail_line(out);
        /* the hint first: a shortened message (the summary's reason) keeps it */
        snprintf(why, wcap, "%ssalloc --dependency=expand:%s -w %s failed (status %d): %.160s",
                 strstr(out, "not supported") ? "Slurm refuses job expansion (slurm.conf needs "
                 "SchedulerParameters=permit_job_expansion); " : "", job, node, rc, last);
        return -1;
    }
    char bid[32], nn[32];
    snprintf(bid, sizeof bid, "%ld", b);
    snprintf(nn, sizeof nn, "JobId=%ld", b);
    char *up[] = {(char *)prog("GRIT_SCONTROL", "scontrol"), "update", nn, "NumNodes=0", NULL};
    rc = run_capture(up, 30, out, sizeof out);
    if (rc != 0) {
        char *cancel[] = {(char *)prog("GRIT_SCANCEL", "scancel"), bid, NULL};
        char ign[256];
        run_capture(cancel, 15, ign, sizeof ign);
        snprintf(why, wcap, "scontrol update JobId=%ld NumNodes=0 (hand %s to job %s) failed "
                 "(status %d): %.160s; job %ld cancelled", b, node, job, rc, tail_line(out), b);
        return -1;
    }
    if (show_job(job, &j, why, wcap) != 0)
        return -1;
    if ((in = in_list(j.nodelist, node, why, wcap)) != 1) {
        if (in == 0)
            snprintf(why, wcap, "job %ld's node %s was not merged into job %s (its nodes: "
                     "%.200s)", b, node, job, j.nodelist);
        return -1;
    }
    /* what slurm_job_<id>_resize.sh sets: the next srun reads them */
    char num[32], cpus_pn[64];
    snprintf(num, sizeof num, "%ld", j.nnodes);
    setenv("SLURM_JOB_NODELIST", j.nodelist, 1);
    setenv("SLURM_NODELIST", j.nodelist, 1);
    setenv("SLURM_JOB_NUM_NODES", num, 1);
    setenv("SLURM_NNODES", num, 1);
    if (j.nnodes > 0 && j.ncpus % j.nnodes == 0) {
        if (j.nnodes == 1)
            snprintf(cpus_pn, sizeof cpus_pn, "%ld", j.ncpus);
        else
            snprintf(cpus_pn, sizeof cpus_pn, "%ld(x%ld)", j.ncpus / j.nnodes, j.nnodes);
        setenv("SLURM_JOB_CPUS_PER_NODE", cpus_pn, 1);
    } else /* uneven: not known per node from here; srun asks slurmctld */
        unsetenv("SLURM_JOB_CPUS_PER_NODE");
    unsetenv("SLURM_TASKS_PER_NODE");
    snprintf(did, dcap, "job %s expanded onto %s (job %ld merged): nodes %.200s", job, node, b,
             j.nodelist);
    return 0;
}

/* srun's report does not say which node failed: when a node dies, its tasks are not
 * reported at all (their slurmstepd died too) and srun itself kills the others
 * (--kill-on-bad-exit), which then read "Killed". So no rank is named and the
 * supervisor checks every active node, all at once (check_begin). */
static int slurm_failed_rank(const char *log)
{
    (void)log;
    return -1;
}

/* name (a host name or a dotted address) as a dotted IPv4 address into out; "" when it
 * does not resolve */
static void resolve4(const char *name, char out[16])
{
    out[0] = '\0';
    struct in_addr a;
    if (inet_pton(AF_INET, name, &a) == 1) {
        snprintf(out, 16, "%s", name);
        return;
    }
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *res = NULL;
    if (getaddrinfo(name, NULL, &hints, &res) != 0 || !res)
        return;
    inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, out, 16);
    freeaddrinfo(res);
}

#define ADDRS_CHUNK 64 /* hosts per sinfo call: its output stays within proc's 8 KiB */

static void slurm_addrs(const sup_opts *o, const char (*names)[32], int n, char (*addrs)[16])
{
    (void)o;
    char nodeaddr[32];
    for (int i = 0; i < n; i++)
        addrs[i][0] = '\0';
    for (int c0 = 0; c0 < n; c0 += ADDRS_CHUNK) {
        char list[16 + ADDRS_CHUNK * 33] = "--nodes=", out[8192];
        size_t off = strlen(list);
        for (int i = c0; i < n && i < c0 + ADDRS_CHUNK; i++)
            off += (size_t)snprintf(list + off, sizeof list - off, "%s%s", i > c0 ? "," : "",
                                    names[i]);
        char *argv[] = {(char *)prog("GRIT_SINFO", "sinfo"), "-h", "-N", "-o", "%N %o", list,
                        NULL};
        if (run_capture(argv, 30, out, sizeof out) != 0)
            continue; /* every host of the chunk by its name, below */
        for (char *sv = NULL, *l = strtok_r(out, "\n", &sv); l; l = strtok_r(NULL, "\n", &sv)) {
            char name[64];
            if (sscanf(l, "%63s %31s", name, nodeaddr) != 2)
                continue;
            for (int i = c0; i < n && i < c0 + ADDRS_CHUNK; i++)
                if (!addrs[i][0] && !strcmp(names[i], name))
                    resolve4(nodeaddr, addrs[i]);
        }
    }
    for (int i = 0; i < n; i++)
        if (!addrs[i][0])
            resolve4(names[i], addrs[i]);
}

const sup_backend sup_backend_slurm = {
    .name = "slurm",
    .remote_ranks = 1,
    .hosts = slurm_hosts,
    .job_argv = slurm_job_argv,
    .check_node = slurm_check_node,
    .check_begin = slurm_check_begin,
    .pair_check = slurm_pair_check,
    .cordoned = slurm_cordoned,
    .job_stopped = slurm_job_stopped,
    .no_spare = slurm_no_spare,
    .grow = slurm_grow,
    .failed_rank = slurm_failed_rank,
    .addrs = slurm_addrs,
};
