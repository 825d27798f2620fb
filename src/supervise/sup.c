/*
 * sup.c - the supervisor state machine (drawn in sup.h) and its detectors.
 *
 * One loop, one job at a time. While RUNNING it polls every 50 ms: the
 * heartbeat socket (progress, loss, per-rank compute and communication time,
 * worker events such as an injected fault), the job's exit status, and the
 * job's log size (progress for programs that send no heartbeats).
 *
 * Detectors: exit or signal of any rank (which rank: mpirun's report, or the
 * heartbeats); hang (no step progress for the hang timeout: fixed, or 10x the
 * median step time within [floor, cap], the startup timeout before the first
 * step); NaN loss (heartbeat or the trainer's event); straggler (straggler.h:
 * a node whose compute time, step minus communication, is above factor x the
 * median of the others and by more than a gap, on each of the last window
 * steps that every rank reported); loss spike (the step's loss more than
 * spike_z robust standard deviations, 1.4826 x MAD, above the median of the
 * last 32 steps); a failing periodic health check (grit health --quick in the
 * background every health_every seconds).
 *
 * Faults for tests and demos (--inject) are sup_inject.c's: it puts them into the
 * environment of the processes they break (the job, a node's health check), and
 * every detector and the diagnosis here see only what those processes do.
 */
#define _GNU_SOURCE
#include "supervise/sup.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/events.h"
#include "core/fsutil.h"
#include "core/progress.h"
#include "obs/obs.h"
#include "supervise/backend.h"
#include "supervise/cluster.h"
#include "heartbeat/hb.h"
#include "supervise/sup_internal.h"

static const char *const state_names[] = {"PREFLIGHT",  "LAUNCHING", "RUNNING", "DETECTED",
                                          "DIAGNOSING", "REPAIRING", "DONE",    "GAVE_UP"};

void sup_say(sup *s, const char *fmt, ...)
{
    if (s->o->quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "grit launch: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void sup_event(sup *s, const char *kind, json_t *fields)
{
    if (!fields)
        fields = json_object();
    json_object_set_new(fields, "source", json_string("supervisor"));
    json_object_set_new(fields, "state", json_string(state_names[s->state]));
    events_emit(&s->ev, kind, fields);
}

void sup_set_state(sup *s, sup_state st)
{
    if (s->state != st)
        sup_event(s, "state", json_pack("{s:s,s:s}", "from", state_names[s->state], "to",
                                    state_names[st]));
    s->state = st;
}

static void save_state(sup *s)
{
    char text[128];
    snprintf(text, sizeof text, "{\"restarts\": %d, \"attempt\": %d}\n", s->restarts, s->attempt);
    fs_write_durable(s->statepath, text, strlen(text));
}

static void load_state(sup *s)
{
    char *text = NULL;
    if (fs_read_all(s->statepath, &text, NULL) != GRIT_OK)
        return;
    json_t *j = json_loads(text, 0, NULL);
    free(text);
    s->restarts = (int)json_integer_value(json_object_get(j, "restarts"));
    s->attempt = (int)json_integer_value(json_object_get(j, "attempt")) + 1;
    json_decref(j);
}

static void on_reject(void *ctx, const char *why);

/* --- launching and stopping -------------------------------------------------------- */

static grit_err launch(sup *s)
{
    sup_set_state(s, S_LAUNCHING);
    int act = cluster_active(&s->cl), R = s->o->ranks_per_node;
    s->nranks = act * R;
    if (s->nranks > MAX_RANKS)
        return grit_errf(GRIT_EINVAL, "%d ranks exceed %d", s->nranks, MAX_RANKS);
    char names[1024], trainer[2048], logpath[1200], rpn[16];
    cluster_names(&s->cl, names, sizeof names);
    sup_inject_job_faults(s->inj, s->attempt, trainer, sizeof trainer); /* for the event */
    snprintf(logpath, sizeof logpath, "%s/attempt_%02d.log", s->logdir, s->attempt);
    snprintf(rpn, sizeof rpn, "%d", R);
    memset(s->rk, 0, sizeof s->rk);
    int node_of[MAX_RANKS];
    for (int r = 0; r < s->nranks; r++) {
        const node_slot *n = cluster_at(&s->cl, r / R);
        snprintf(s->rk[r].node, sizeof s->rk[r].node, "%s", n ? n->name : "?");
        s->rk[r].step = -1;
        node_of[r] = r / R;
    }
    straggler_cfg sc = {.factor = s->o->straggler_factor, .window = s->o->straggler_window,
                        .min_gap = s->o->straggler_min_gap};
    grit_err src = straggler_init(&s->strag, &sc, s->nranks, node_of);
    if (src != GRIT_OK)
        return src;
    s->max_step = -1;
    s->log_size = 0;
    hb_msg stale; /* beats the previous job sent before it was stopped belong to no one now */
    while (hb_server_poll(&s->hb, &stale, on_reject, s)) /* forged ones are still reported */
        ;
    char *argv[BACKEND_ARGV_MAX + 1], argbuf[8192];
    if (s->be->job_argv(s->o, names, act, R, s->attempt, argv, argbuf, sizeof argbuf) != 0)
        return grit_errf(GRIT_EINVAL, "the %s launch command is too long", s->be->name);
    pid_t pid = fork();
    if (pid < 0)
        return grit_errf(GRIT_EIO, "fork: %s", strerror(errno));
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* a killed supervisor takes its job down */
        int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (nul >= 0)
            dup2(nul, 0); /* the job reads nothing from the supervisor's terminal */
        setenv("GRIT_SUP_ADDR", s->hb.addr, 1);
        setenv("GRIT_SUP_SECRET", s->hb.secret, 1);
        setenv("GRIT_NODES", names, 1);
        setenv("GRIT_RANKS_PER_NODE", rpn, 1);
        sup_inject_export_job(s->inj, s->attempt);
        if (s->skip_steps[0])
            setenv("GRIT_SKIP_STEPS", s->skip_steps, 1);
        if (getuid() == 0) {
            setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
            setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
        }
        execvp(argv[0], argv);
        fprintf(stderr, "grit launch: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    s->job = pid;
    s->launch_ts = s->progress_ts = now_seconds();
    if (s->first_launch_ts == 0)
        s->first_launch_ts = wall_seconds();
    sup_event(s, "launch", json_pack("{s:i,s:i,s:s,s:i,s:s,s:s}", "attempt", s->attempt, "ranks",
                                 s->nranks, "nodes", names, "pid", (int)pid, "log", logpath,
                                 "faults", trainer[0] ? trainer : "-"));
    sup_say(s, "attempt %d: %d ranks on %s (log %s)", s->attempt, s->nranks, names, logpath);
    save_state(s);
    sup_set_state(s, S_RUNNING);
    return GRIT_OK;
}

/* SIGCONT + SIGTERM to the job's group and every known rank; SIGKILL after the grace. */
static int stop_job(sup *s)
{
    if (s->job <= 0)
        return 0;
    int status = 0;
    kill(-s->job, SIGCONT);
    kill(-s->job, SIGTERM);
    for (int r = 0; r < s->nranks; r++)
        if (s->rk[r].pid > 0) {
            kill((pid_t)s->rk[r].pid, SIGCONT);
            kill((pid_t)s->rk[r].pid, SIGTERM);
        }
    double t0 = now_seconds();
    while (waitpid(s->job, &status, WNOHANG) == 0) {
        if (now_seconds() - t0 > s->o->grace) {
            kill(-s->job, SIGKILL);
            for (int r = 0; r < s->nranks; r++)
                if (s->rk[r].pid > 0)
                    kill((pid_t)s->rk[r].pid, SIGKILL);
            waitpid(s->job, &status, 0);
            break;
        }
        usleep(20000);
    }
    for (int r = 0; r < s->nranks; r++) /* no rank may outlive its job */
        if (s->rk[r].pid > 0 && kill((pid_t)s->rk[r].pid, 0) == 0)
            kill((pid_t)s->rk[r].pid, SIGKILL);
    s->job = 0;
    if (s->be->job_stopped)
        s->be->job_stopped(s->o);
    return status;
}

/* The state letter of /proc/PID/stat (R, S, D, T, Z, ...), 0 when the process is gone. */
static char proc_state(long pid)
{
    char p[64], line[512], state = 0;
    snprintf(p, sizeof p, "/proc/%ld/stat", pid);
    FILE *st = fopen(p, "r");
    if (!st)
        return 0;
    if (fgets(line, sizeof line, st)) {
        char *rp = strrchr(line, ')');
        if (rp && rp[1] && rp[2])
            state = rp[2];
    }
    fclose(st);
    return state;
}

/* On a hang: the state of every rank and its kernel stack into the logs; ranks found
 * stopped (state T) are the implicated ones. */
static void capture_stacks(sup *s)
{
    char path[1300];
    snprintf(path, sizeof path, "%s/stacks_attempt_%02d.txt", s->logdir, s->attempt);
    FILE *f = fopen(path, "w");
    for (int r = 0; r < s->nranks; r++) {
        long pid = s->rk[r].pid;
        if (pid <= 0)
            continue;
        char p[64], line[256], state = proc_state(pid);
        FILE *st;
        if (f)
            fprintf(f, "== rank %d (pid %ld, node %s): state %c\n", r, pid, s->rk[r].node, state);
        snprintf(p, sizeof p, "/proc/%ld/stack", pid);
        if (f && (st = fopen(p, "r"))) {
            while (fgets(line, sizeof line, st))
                fputs(line, f);
            fclose(st);
        }
        if (state == 'T' && s->nimplicated < 8) {
            snprintf(s->implicated[s->nimplicated++], 64, "%s", s->rk[r].node);
            s->f_rank = r;
        }
    }
    if (f)
        fclose(f);
    sup_event(s, "stacks_captured", json_pack("{s:s}", "path", path));
}

/* --- detection ------------------------------------------------------------------------- */

static double median(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n ? (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2])) : 0;
}

static double hang_timeout(sup *s)
{
    if (s->max_step < 0 && s->o->hang_timeout <= 0)
        return s->o->startup_timeout;
    if (s->o->hang_timeout > 0)
        return s->max_step < 0 ? fmax(s->o->hang_timeout, s->o->startup_timeout) : s->o->hang_timeout;
    double v[MAX_RANKS];
    int n = 0;
    for (int r = 0; r < s->nranks; r++)
        if (s->rk[r].ncompute)
            v[n++] = s->rk[r].compute;
    double t = 10.0 * median(v, n);
    return fmin(s->o->hang_cap, fmax(s->o->hang_floor, t));
}

static void fail(sup *s, const char *kind, int rank, const char *detail)
{
    snprintf(s->f_kind, sizeof s->f_kind, "%s", kind);
    snprintf(s->f_detail, sizeof s->f_detail, "%s", detail);
    s->f_rank = rank;
    if (rank >= 0 && rank < s->nranks && s->nimplicated < 8)
        memcpy(s->implicated[s->nimplicated++], s->rk[rank].node, 64);
}

static void note_fault(sup *s)
{
    if (s->ninc >= MAX_INCIDENTS)
        return;
    incident *in = &s->inc[s->ninc];
    if (in->fault_ts == 0) /* for the detection latency only */
        in->fault_ts = now_seconds();
}

static void on_reject(void *ctx, const char *why)
{
    sup *s = ctx;
    sup_say(s, "%s", why);
    sup_event(s, "heartbeat_rejected", json_pack("{s:s}", "reason", why));
}

/* Starts `grit health --quick` as on node (NULL: this machine, for the periodic
 * check), in that node's environment (sup_inject.c), its output into out (NULL:
 * discarded); returns its pid, or -1. */
pid_t sup_spawn_health(sup *s, const char *node, int periodic, const char *out)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = out ? open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644) : open("/dev/null", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        sup_inject_export_health(s->inj, node, periodic);
        execl(s->o->grit, s->o->grit, "health", "--quick", (char *)NULL);
        _exit(2);
    }
    return pid;
}

/* Records loss; true when it is a spike against the window before it. */
static int check_spike(sup *s, double loss)
{
    int n = s->nloss < 32 ? s->nloss : 32, spike = 0;
    if (s->o->spike_z > 0 && n >= 8) {
        double v[32], dev[32];
        for (int i = 0; i < n; i++)
            v[i] = s->losses[i];
        double med = median(v, n);
        for (int i = 0; i < n; i++)
            dev[i] = fabs(s->losses[i] - med);
        double mad = 1.4826 * median(dev, n);
        spike = mad > 0 && (loss - med) / mad > s->o->spike_z;
    }
    if (!spike)
        s->losses[s->nloss++ % 32] = loss;
    return spike;
}

/* Periodic health check in the background; 1 when one finished and failed. */
static int poll_health(sup *s)
{
    if (s->o->health_every <= 0)
        return 0;
    if (s->health_pid > 0) {
        int status;
        if (waitpid(s->health_pid, &status, WNOHANG) != s->health_pid)
            return 0;
        s->health_pid = 0;
        int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        sup_event(s, "periodic_health", json_pack("{s:s}", "verdict", ok ? "healthy" : "unhealthy"));
        return !ok;
    }
    if (now_seconds() - s->health_ts < s->o->health_every)
        return 0;
    s->health_ts = now_seconds();
    pid_t pid = sup_spawn_health(s, NULL, 1, NULL);
    sup_inject_periodic_started(s->inj);
    s->health_pid = pid > 0 ? pid : 0;
    return 0;
}

/* One poll of everything; returns 1 when the state changed. */
static int poll_running(sup *s)
{
    hb_msg m;
    while (hb_server_poll(&s->hb, &m, on_reject, s)) {
        if (m.rank < 0 || m.rank >= s->nranks)
            continue;
        rank_info *ri = &s->rk[m.rank];
        ri->last_beat = now_seconds();
        if (m.pid > 0 && !s->be->remote_ranks) /* a remote PID is not ours to signal */
            ri->pid = m.pid;
        if (m.event) {
            sup_event(s, "worker_event", json_pack("{s:s,s:i,s:s,s:I}", "kind", m.kind, "rank", m.rank,
                                               "node", m.node, "step", (json_int_t)m.step));
            if (!strncmp(m.kind, "fault_", 6))
                note_fault(s);
            if (!strcmp(m.kind, "done"))
                ri->done = 1;
            if (!strcmp(m.kind, "nan")) {
                char d[128];
                snprintf(d, sizeof d, "non-finite %s at step %ld", m.detail, m.step);
                fail(s, "nan", -1, d);
                s->f_nan_step = m.step; /* for the skip policy */
                return 1;
            }
            continue;
        }
        obs_beat(m.node, m.rank, m.step, m.step_time, m.comm_time); /* dashboard, /metrics */
        obs_energy_beat(&(obs_host_beat){.host = m.host, .node = m.node, .rank = m.rank,
                                         .pid = m.pid, .joules = m.energy_j, .watts = m.power_w,
                                         .sources = m.esrc, .gpus = m.gpus});
        if (m.step > ri->step) {
            if (m.step > 0 && m.step_time > 0) { /* step 0 is a liveness beat, no step */
                ri->compute = fmax(0.0, m.step_time - m.comm_time);
                ri->ncompute++;
                straggler_record(&s->strag, m.rank, m.step, ri->compute);
            }
            ri->step = m.step;
            /* step 0 is "alive, no step finished yet" (a resumed worker beats it while it
             * loads the checkpoint): not progress, and not a recovery */
            if (m.step > s->max_step && m.step > 0) {
                if (s->max_step < 0 && s->ninc > 0 && s->inc[s->ninc - 1].recovered_ts == 0) {
                    incident *in = &s->inc[s->ninc - 1];
                    in->recovered_ts = now_seconds();
                    in->resumed_at = m.step - 1;
                    double from = in->fault_ts > 0 ? in->fault_ts : in->detect_ts;
                    sup_event(s, "recovered", json_pack("{s:s,s:I,s:f,s:I}", "kind", in->kind,
                                                    "resumed_at_step", (json_int_t)(m.step - 1),
                                                    "recovery_s", in->recovered_ts - from,
                                                    "steps_lost",
                                                    (json_int_t)(in->step_seen - (m.step - 1))));
                    sup_say(s, "recovered: training again at step %ld, %.2f s after the failure",
                        m.step, in->recovered_ts - from);
                }
                s->max_step = m.step;
                s->progress_ts = now_seconds();
            }
            /* every rank reports the same (all-reduced) loss: rank 0's stream is the series */
            if (m.rank == 0 && isfinite(m.loss) && check_spike(s, m.loss)) {
                char d[160];
                snprintf(d, sizeof d, "loss %.4g at step %ld is a spike (robust z > %.1f)",
                         m.loss, m.step, s->o->spike_z);
                fail(s, "spike", -1, d);
                s->f_nan_step = m.step; /* rolled back like a NaN; skipped if it repeats */
                return 1;
            }
        }
        if (!isfinite(m.loss) && m.step > 0) {
            char d[64];
            snprintf(d, sizeof d, "non-finite loss at step %ld", m.step);
            fail(s, "nan", -1, d);
            return 1;
        }
    }
    /* a rank process that is gone (or a zombie) is a failure now, before mpirun notices */
    for (int r = 0; r < s->nranks; r++) {
        if (s->rk[r].pid <= 0 || s->rk[r].done)
            continue;
        char state = proc_state(s->rk[r].pid);
        if (state == 0 || state == 'Z' || state == 'X') {
            char d[160];
            snprintf(d, sizeof d, "rank %d (pid %ld) died", r, s->rk[r].pid);
            s->rk[r].pid = 0;
            fail(s, "exit", r, d);
            return 1;
        }
    }
    int status;
    pid_t w = waitpid(s->job, &status, WNOHANG);
    if (w == s->job) {
        s->job = 0;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            sup_set_state(s, S_DONE);
            return 1;
        }
        /* which rank: the launcher's report in the log (backend.h failed_rank) */
        char path[1300], *text = NULL, detail[200];
        int rank = -1;
        snprintf(path, sizeof path, "%s/attempt_%02d.log", s->logdir, s->attempt);
        if (fs_read_all(path, &text, NULL) == GRIT_OK) {
            rank = s->be->failed_rank ? s->be->failed_rank(text) : -1;
            free(text);
        }
        snprintf(detail, sizeof detail, "job %s %d%s", WIFSIGNALED(status) ? "killed by signal" : "exited with",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
                 rank >= 0 ? " (a rank died)" : "");
        fail(s, "exit", rank, detail);
        return 1;
    }
    /* progress for programs without heartbeats: their log grows */
    char path[1300];
    struct stat st;
    snprintf(path, sizeof path, "%s/attempt_%02d.log", s->logdir, s->attempt);
    if (stat(path, &st) == 0 && st.st_size != s->log_size) {
        s->log_size = st.st_size;
        if (s->max_step < 0)
            s->progress_ts = now_seconds();
    }
    double to = hang_timeout(s);
    if (now_seconds() - s->progress_ts > to) {
        char d[128];
        snprintf(d, sizeof d, "no progress for %.1f s (timeout %.1f s) after step %ld",
                 now_seconds() - s->progress_ts, to, s->max_step);
        fail(s, "hang", -1, d);
        return 1;
    }
    if (poll_health(s)) {
        fail(s, "health", -1, "periodic grit health --quick failed");
        return 1;
    }
    straggler_verdict sv;
    if (straggler_check(&s->strag, &sv)) {
        char d[200];
        straggler_describe(&s->strag, &sv, s->rk[sv.rank].node, d, sizeof d);
        fail(s, "straggler", sv.rank, d);
        return 1;
    }
    return 0;
}

/* --- the loop ----------------------------------------------------------------------------- */

int sup_run(const sup_opts *o)
{
    sup *s = calloc(1, sizeof *s);
    if (!s)
        return 2;
    s->o = o;
    s->be = sup_backend_find(o->backend);
    s->f_rank = -1;
    int rc = 2;
    char path[1200];
    if (fs_mkdirs(o->run_dir) != GRIT_OK) {
        fprintf(stderr, "grit launch: %s\n", grit_errmsg());
        goto out;
    }
    snprintf(s->logdir, sizeof s->logdir, "%s/logs", o->run_dir);
    snprintf(s->statepath, sizeof s->statepath, "%s/supervisor.json", o->run_dir);
    snprintf(path, sizeof path, "%s/cluster.json", o->run_dir);
    char hosts[CLUSTER_MAX][32];
    int nhosts = 0;
    grit_err crc = !s->be ? grit_errf(GRIT_EINVAL, "--backend %s: expected local or slurm", o->backend)
                 : fs_mkdirs(s->logdir) != GRIT_OK ? GRIT_EIO
                 : !s->be->hosts ? cluster_open(&s->cl, path, o->nodes, o->spares)
                 : s->be->hosts(o, hosts, CLUSTER_MAX, &nhosts) != GRIT_OK ? GRIT_EINVAL
                 : cluster_open_hosts(&s->cl, path, hosts, nhosts, o->spares);
    if (crc == GRIT_OK)
        crc = sup_inject_open(o->inject, o->run_dir, &s->inj);
    if (crc != GRIT_OK) {
        fprintf(stderr, "grit launch: %s\n", grit_errmsg());
        goto out;
    }
    snprintf(path, sizeof path, "%s/events.jsonl", o->run_dir);
    if (events_open(&s->ev, path) != GRIT_OK || hb_server_open(&s->hb, o->bind) != GRIT_OK) {
        fprintf(stderr, "grit launch: %s\n", grit_errmsg());
        goto out;
    }
    load_state(s);
    s->state = S_PREFLIGHT;
    sup_event(s, "supervisor_start", json_pack("{s:i,s:i,s:i,s:s,s:i}", "nodes", o->nodes, "spares",
                                           o->spares, "ranks_per_node", o->ranks_per_node,
                                           "heartbeat", s->hb.addr, "attempt", s->attempt));
    /* PREFLIGHT: every active node's health before the first launch */
    s->nimplicated = 0;
    for (int p = 0; p < cluster_active(&s->cl) && s->nimplicated < 8; p++)
        snprintf(s->implicated[s->nimplicated++], 64, "%s", cluster_at(&s->cl, p)->name);
    snprintf(s->f_kind, sizeof s->f_kind, "preflight");
    if (sup_diagnose_and_repair(s) != 0) {
        sup_set_state(s, S_GAVE_UP);
        rc = 1;
        goto out;
    }
    s->nimplicated = 0;
    for (;;) {
        if (launch(s) != GRIT_OK) {
            fprintf(stderr, "grit launch: %s\n", grit_errmsg());
            sup_set_state(s, S_GAVE_UP);
            rc = 1;
            break;
        }
        while (!poll_running(s))
            usleep(50000);
        if (s->state == S_DONE) {
            /* a recovery whose first new step came in the last beats */
            sup_summary(s, 1);
            rc = 0;
            break;
        }
        sup_set_state(s, S_DETECTED);
        incident *in = s->ninc < MAX_INCIDENTS ? &s->inc[s->ninc] : &s->inc[MAX_INCIDENTS - 1];
        snprintf(in->kind, sizeof in->kind, "%s", s->f_kind);
        snprintf(in->detail, sizeof in->detail, "%s", s->f_detail);
        in->detect_ts = now_seconds();
        in->step_seen = s->max_step;
        in->rank = s->f_rank;
        long nan_step = !strcmp(s->f_kind, "nan") || !strcmp(s->f_kind, "spike") ? s->f_nan_step : -1;
        if (!strcmp(s->f_kind, "hang"))
            capture_stacks(s);
        if (s->nimplicated)
            snprintf(in->node, sizeof in->node, "%s", s->implicated[0]);
        sup_event(s, "detected", json_pack("{s:s,s:s,s:s,s:I,s:f}", "kind", in->kind, "node",
                                       in->node[0] ? in->node : "-", "detail", in->detail, "step",
                                       (json_int_t)in->step_seen,
                                       "latency_s", in->fault_ts > 0 ? in->detect_ts - in->fault_ts : -1.0));
        sup_say(s, "detected %s%s%s: %s", in->kind, in->node[0] ? " on " : "", in->node, in->detail);
        if (s->ninc < MAX_INCIDENTS)
            s->ninc++;
        int st = stop_job(s);
        sup_event(s, "job_stopped", json_pack("{s:i}", "status", st));
        if (nan_step > 0) { /* the same step failing twice: skip its batch from now on */
            int seen = 0;
            for (int i = 0; i < s->nnan; i++)
                seen |= s->nan_steps[i] == nan_step;
            if (seen) {
                size_t l = strlen(s->skip_steps);
                snprintf(s->skip_steps + l, sizeof s->skip_steps - l, "%s%ld", l ? "," : "", nan_step);
                sup_event(s, "skip_batches", json_pack("{s:s}", "steps", s->skip_steps));
                sup_say(s, "%s at step %ld again: skipping that step's batch", s->f_kind, nan_step);
            } else if (s->nnan < 16)
                s->nan_steps[s->nnan++] = nan_step;
        }
        if (sup_diagnose_and_repair(s) != 0) {
            sup_set_state(s, S_GAVE_UP);
            sup_summary(s, 0);
            rc = 1;
            break;
        }
        s->nimplicated = 0;
        s->f_rank = -1;
        s->f_nan_step = -1;
        if (++s->restarts > o->max_restarts) {
            char reason[128];
            snprintf(reason, sizeof reason, "%d restarts exceed --max-restarts %d", s->restarts,
                     o->max_restarts);
            sup_event(s, "gave_up", json_pack("{s:s}", "reason", reason));
            sup_say(s, "giving up: %s", reason);
            sup_set_state(s, S_GAVE_UP);
            sup_summary(s, 0);
            rc = 1;
            break;
        }
        double wait = fmin(30.0, o->backoff * pow(2.0, s->restarts - 1));
        sup_event(s, "backoff", json_pack("{s:f,s:i}", "seconds", wait, "restart", s->restarts));
        usleep((useconds_t)(wait * 1e6));
        s->attempt++;
    }
out:
    if (s->job > 0)
        stop_job(s);
    if (s->health_pid > 0) {
        kill(s->health_pid, SIGKILL);
        waitpid(s->health_pid, NULL, 0);
    }
    hb_server_close(&s->hb);
    events_close(&s->ev);
    sup_inject_close(s->inj);
    free(s);
    return rc;
}
