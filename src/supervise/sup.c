/*
 * sup.c - the supervisor's loop (states and transitions: sup_fsm.h) and its detectors.
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
 * background every health_every seconds); silent slowdowns (silent.h: a node whose
 * utilisation (CPU, or GPU busy share and SM clock) or peak network throughput from the
 * heartbeats stays below its peers' and its own baseline while the job's steps slow
 * down; ticked every SILENT_TICK_S).
 *
 * Faults for tests and demos (--inject) are sup_inject.c's: it puts them into the
 * environment of the processes they break (the job, a node's health check), and
 * every detector and the diagnosis here see only what those processes do.
 *
 * Cost per second at scale (docs/supervisor.md; bench/supervisor_scale.sh): a beat is
 * O(1) (its rank by index, the dashboard's node by hash); per 50 ms poll the work over
 * all ranks is bounded: process liveness checks a slice of the ranks in turn (every
 * rank within LIVE_ROUND_S), the hang timeout's median is recomputed at most every
 * HANG_MEDIAN_S, the straggler check, O(window x (ranks + nodes log nodes)), runs every
 * STRAG_EVERY_S. Jobs of at most LIVE_MIN ranks get all of it on every poll.
 */
#define _GNU_SOURCE
#include "supervise/sup.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
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

#define LIVE_ROUND_S 2.0  /* every rank's process is looked at within this (large jobs) */
#define SILENT_TICK_S 1.0 /* the silent detector's tick: the workers' beat period */
#define STRAG_EVERY_S 0.25 /* the straggler check's period past LIVE_MIN ranks */
#define LIVE_MIN 64       /* ranks looked at per poll at least (all of a small job) */
#define HANG_MEDIAN_S 1.0 /* the derived hang timeout is recomputed this often */
#define POLL_S 0.05

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
    json_object_set_new(fields, "state", json_string(sup_state_name(s->state)));
    events_emit(&s->ev, kind, fields);
}

grit_err sup_set_state(sup *s, sup_state st)
{
    const sup_transition *t = sup_fsm_find(s->state, st);
    if (!t) {
        sup_event(s, "illegal_transition", json_pack("{s:s,s:s}", "from", sup_state_name(s->state),
                                                     "to", sup_state_name(st)));
        fprintf(stderr, "grit launch: illegal state transition %s -> %s (a bug: refused)\n",
                sup_state_name(s->state), sup_state_name(st));
        return grit_errf(GRIT_EINVAL, "illegal state transition %s -> %s",
                         sup_state_name(s->state), sup_state_name(st));
    }
    sup_event(s, "state", json_pack("{s:s,s:s,s:s}", "from", sup_state_name(s->state), "to",
                                    sup_state_name(st), "via", t->via));
    s->state = st;
    return GRIT_OK;
}

grit_err sup_grow(void **p, int *cap, int n, size_t sz, const char *what)
{
    if (n <= *cap)
        return GRIT_OK;
    long want = *cap < 8 ? 16 : 2L * *cap;
    if (want < n)
        want = n;
    if (want > INT_MAX / 2)
        return grit_errf(GRIT_ENOMEM, "%s: %d entries is more than the supervisor can hold", what, n);
    char *q = realloc(*p, (size_t)want * sz);
    if (!q)
        return grit_errf(GRIT_ENOMEM, "%s: out of memory for %ld entries", what, want);
    memset(q + (size_t)*cap * sz, 0, (size_t)(want - *cap) * sz);
    *p = q;
    *cap = (int)want;
    return GRIT_OK;
}

void sup_implicate(sup *s, const char *node)
{
    if (sup_is_implicated(s, node))
        return;
    if (sup_grow((void **)&s->implicated, &s->impl_cap, s->nimplicated + 1,
                 sizeof *s->implicated, "implicated nodes") != GRIT_OK) {
        /* no memory for one more name: every active node is checked instead */
        sup_say(s, "%s: diagnosing every node", grit_errmsg());
        s->nimplicated = 0;
        return;
    }
    snprintf(s->implicated[s->nimplicated++], sizeof *s->implicated, "%s", node);
}

static void on_reject(void *ctx, const char *why);

/* --- launching and stopping -------------------------------------------------------- */

/* The heartbeat socket's receive buffer holds one beat of every rank (a synchronous
 * job's ranks finish a step together); where the kernel allows less, say so once. */
static void size_socket(sup *s)
{
    int want = s->nranks > INT_MAX / 2048 ? INT_MAX : s->nranks * 2048, got = 0;
    socklen_t len = sizeof got;
    getsockopt(s->hb.fd, SOL_SOCKET, SO_RCVBUF, &got, &len);
    if (got >= want)
        return;
    if (setsockopt(s->hb.fd, SOL_SOCKET, SO_RCVBUFFORCE, &want, sizeof want) != 0)
        setsockopt(s->hb.fd, SOL_SOCKET, SO_RCVBUF, &want, sizeof want);
    len = sizeof got;
    getsockopt(s->hb.fd, SOL_SOCKET, SO_RCVBUF, &got, &len);
    if (got < want && !s->rcvbuf_warned) {
        s->rcvbuf_warned = 1;
        sup_say(s, "heartbeat socket buffer %d bytes, %d wanted for %d ranks: beats of a burst "
                   "may be lost (raise net.core.rmem_max)", got, want, s->nranks);
        sup_event(s, "heartbeat_buffer", json_pack("{s:i,s:i,s:i}", "bytes", got, "wanted", want,
                                                   "ranks", s->nranks));
    }
}

static grit_err launch(sup *s)
{
    int act = cluster_active(&s->cl), R = s->o->ranks_per_node;
    if (R < 1 || act > INT_MAX / R)
        return grit_errf(GRIT_EINVAL, "%d nodes x %d ranks per node: too many ranks", act, R);
    s->nranks = act * R;
    grit_err grc = sup_grow((void **)&s->rk, &s->rk_cap, s->nranks, sizeof *s->rk, "ranks");
    if (grc != GRIT_OK)
        return grc;
    size_t ncap = (size_t)act * sizeof s->cl.n->name + 1, acap = 8192 + (size_t)s->nranks * 40;
    char *names = malloc(ncap), *argbuf = malloc(acap);
    char **argv = malloc((BACKEND_ARGV_MAX + 1) * sizeof *argv);
    int *node_of = malloc((size_t)(s->nranks ? s->nranks : 1) * sizeof *node_of);
    const node_slot **at = calloc((size_t)(act ? act : 1), sizeof *at);
    if (!names || !argbuf || !argv || !node_of || !at) {
        free(names), free(argbuf), free(argv), free(node_of), free(at);
        return grit_errf(GRIT_ENOMEM, "launch: out of memory for %d ranks", s->nranks);
    }
    char trainer[2048], logpath[1200], rpn[16];
    cluster_names(&s->cl, names, ncap);
    sup_inject_job_faults(s->inj, s->attempt, trainer, sizeof trainer); /* for the event */
    snprintf(logpath, sizeof logpath, "%s/attempt_%02d.log", s->logdir, s->attempt);
    snprintf(rpn, sizeof rpn, "%d", R);
    memset(s->rk, 0, (size_t)s->nranks * sizeof *s->rk);
    for (int i = 0; i < s->cl.count; i++)
        if (s->cl.n[i].state == NODE_ACTIVE && s->cl.n[i].position >= 0 && s->cl.n[i].position < act)
            at[s->cl.n[i].position] = &s->cl.n[i];
    for (int r = 0; r < s->nranks; r++) {
        const node_slot *n = at[r / R];
        snprintf(s->rk[r].node, sizeof s->rk[r].node, "%s", n ? n->name : "?");
        s->rk[r].step = -1;
        node_of[r] = r / R;
    }
    free(at);
    sup_hb_launched(s); /* which ranks are elsewhere: their silence is watched */
    s->live_next = 0;
    s->hang_cache_ts = 0;
    size_socket(s);
    straggler_cfg sc = {.factor = s->o->straggler_factor, .window = s->o->straggler_window,
                        .min_gap = s->o->straggler_min_gap};
    grit_err src = straggler_init(&s->strag, &sc, s->nranks, node_of);
    silent_cfg lc = {.util_factor = s->o->util_factor, .net_factor = s->o->net_factor,
                     .window = s->o->signal_window, .warmup = s->o->signal_warmup,
                     .min_rate = s->o->net_min_rate, .step_slow = s->o->signal_step_slow,
                     .clock_factor = s->o->clock_factor};
    silent_free(&s->sil); /* off (every factor 0): a freed st judges nothing */
    /* a new baseline for every launch */
    if (src == GRIT_OK && (lc.util_factor > 0 || lc.net_factor > 0 || lc.clock_factor > 0))
        src = silent_init(&s->sil, &lc, s->nranks, node_of);
    s->sil_ts = now_seconds();
    free(node_of);
    if (src != GRIT_OK) {
        free(names), free(argbuf), free(argv);
        return src;
    }
    s->max_step = -1;
    s->log_size = 0;
    s->fatal[0] = '\0';
    hb_msg stale; /* beats the previous job sent before it was stopped belong to no one now */
    while (hb_server_poll(&s->hb, &stale, on_reject, s)) /* forged ones are still reported */
        ;
    if (s->be->job_argv(s->o, names, act, R, s->attempt, argv, argbuf, acap) != 0) {
        free(names), free(argbuf), free(argv);
        return grit_errf(GRIT_EINVAL, "the %s launch command is too long", s->be->name);
    }
    char donedir[1300];
    sup_done_dir(s, donedir, sizeof donedir);
    char doneparent[1300];
    snprintf(doneparent, sizeof doneparent, "%s/.done", s->o->run_dir);
    if (!s->be->remote_ranks && ((mkdir(doneparent, 0700) != 0 && errno != EEXIST) ||
                                 (mkdir(donedir, 0700) != 0 && errno != EEXIST))) {
        free(names), free(argbuf), free(argv);
        return grit_errf(GRIT_EIO, "%s: %s", donedir, strerror(errno));
    }
    pid_t pid = fork();
    if (pid < 0) {
        free(names), free(argbuf), free(argv);
        return grit_errf(GRIT_EIO, "fork: %s", strerror(errno));
    }
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
        setenv("GRIT_SUP_LOCK", s->lock->path, 1);
        setenv("GRIT_SUP_LOCK_TOKEN", s->lock->token, 1);
        if (!s->be->remote_ranks) /* the done marker: a rank's "done" survives a lost datagram */
            setenv("GRIT_SUP_DONE_DIR", donedir, 1);
        setenv("GRIT_NODES", names, 1);
        setenv("GRIT_RANKS_PER_NODE", rpn, 1);
        char grace[32]; /* the trainer's final save must be done before the supervisor kills */
        snprintf(grace, sizeof grace, "%.1f", s->o->stop_grace > 2 ? s->o->stop_grace - 2 : 0.0);
        setenv("GRIT_STOP_GRACE", grace, 1);
        sup_inject_export_job(s->inj, s->attempt);
        if (s->skip_steps && s->skip_steps[0])
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
    free(names), free(argbuf), free(argv);
    sup_ledger_save(s);
    return sup_set_state(s, S_RUNNING);
}

/* SIGCONT + SIGTERM to the job's group and every known rank; SIGKILL after the grace. */
int sup_stop_job(sup *s)
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
/* The directory a local job's ranks mark "done" in (GRIT_SUP_DONE_DIR), one per attempt:
 * a heartbeat is a UDP datagram, and a flood (or a full socket buffer) can drop a rank's
 * last one; the file is written before the rank exits, so a rank that is gone and has it
 * finished normally. */
void sup_done_dir(const sup *s, char *out, size_t cap)
{
    snprintf(out, cap, "%s/.done/attempt_%02d", s->o->run_dir, s->attempt);
}

int sup_done_marked(const sup *s, int rank)
{
    if (s->be->remote_ranks)
        return 0;
    char dir[1300], path[1400];
    sup_done_dir(s, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/rank_%d", dir, rank);
    return access(path, F_OK) == 0;
}

char sup_proc_state(long pid)
{
    char p[64], line[512], state = 0;
    snprintf(p, sizeof p, "/proc/%ld/stat", pid);
    int fd = open(p, O_RDONLY | O_CLOEXEC); /* no stdio: thousands of these a second */
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, line, sizeof line - 1);
    close(fd);
    if (n > 0) {
        line[n] = '\0';
        char *rp = strrchr(line, ')');
        if (rp && rp[1] && rp[2])
            state = rp[2];
    }
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
        char p[64], line[256], state = sup_proc_state(pid);
        FILE *st;
        if (f)
            fprintf(f, "== rank %d (pid %ld, node %s): state %c\n", r, pid, s->rk[r].node, state);
        snprintf(p, sizeof p, "/proc/%ld/stack", pid);
        if (f && (st = fopen(p, "r"))) {
            while (fgets(line, sizeof line, st))
                fputs(line, f);
            fclose(st);
        }
        if (state == 'T') {
            s->rk[r].lost = 'T';
            sup_implicate(s, s->rk[r].node);
            s->f_rank = r;
        }
    }
    if (f)
        fclose(f);
    sup_event(s, "stacks_captured", json_pack("{s:s}", "path", path));
}

/* --- detection ------------------------------------------------------------------------- */

static double hang_timeout(sup *s)
{
    if (s->max_step < 0 && s->o->hang_timeout <= 0)
        return s->o->startup_timeout;
    if (s->o->hang_timeout > 0)
        return s->max_step < 0 ? fmax(s->o->hang_timeout, s->o->startup_timeout) : s->o->hang_timeout;
    double now = now_seconds();
    if (s->hang_cache_ts > 0 && now - s->hang_cache_ts < HANG_MEDIAN_S)
        return s->hang_to; /* the median of thousands of ranks is not a per-poll cost */
    double *v = malloc((size_t)(s->nranks ? s->nranks : 1) * sizeof *v);
    int n = 0;
    for (int r = 0; v && r < s->nranks; r++)
        if (s->rk[r].ncompute)
            v[n++] = s->rk[r].compute;
    double med = v ? sup_median(v, n) : 0;
    free(v);
    s->hang_to = fmin(s->o->hang_cap, fmax(s->o->hang_floor, 10.0 * med));
    s->hang_cache_ts = now;
    return s->hang_to;
}

static void fail(sup *s, sup_fail kind, int rank, const char *detail)
{
    s->f_kind = kind;
    snprintf(s->f_detail, sizeof s->f_detail, "%s", detail);
    s->f_rank = rank;
    if (rank >= 0 && rank < s->nranks)
        sup_implicate(s, s->rk[rank].node);
}

static void note_fault(sup *s)
{
    if (s->ninc >= s->inc_cap) /* never: room for the next incident is kept (sup_run) */
        return;
    incident *in = &s->inc[s->ninc];
    if (in->fault_ts == 0) /* for the detection latency only */
        in->fault_ts = wall_seconds();
}

static void on_reject(void *ctx, const char *why)
{
    sup_reject_note(ctx, why); /* counted; logged at a bounded rate (sup_incident.c) */
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

/* One poll of everything: 0 nothing new, 1 a failure (s->f_*), 2 the job finished,
 * 3 a stop signal (sup_stop.c). */
static int poll_running(sup *s)
{
    if (sup_stop_pending())
        return 3;
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
            if (!strcmp(m.kind, "validation") && m.rank == 0)
                sup_check_validation(s, m.step, m.detail);
            if (!strcmp(m.kind, "layout") && m.rank == 0)
                sup_note_layout(s, m.detail);
            if (!strcmp(m.kind, "fatal")) /* its exit will follow: a retry would repeat it */
                snprintf(s->fatal, sizeof s->fatal, "%s", m.detail[0] ? m.detail : "fatal");
            if (!strcmp(m.kind, "nan")) {
                char d[128];
                snprintf(d, sizeof d, "non-finite %s at step %ld", m.detail, m.step);
                fail(s, F_NAN, -1, d);
                s->f_nan_step = m.step; /* for the skip policy */
                return 1;
            }
            continue;
        }
        s->beats = 1;
        obs_beat(m.node, m.rank, m.step, m.step_time, m.comm_time); /* dashboard, /metrics */
        obs_energy_beat(&(obs_host_beat){.host = m.host, .node = m.node, .rank = m.rank,
                                         .pid = m.pid, .joules = m.energy_j, .watts = m.power_w,
                                         .sources = m.esrc, .gpus = m.gpus});
        /* a liveness beat of a step seen already carries no new step time */
        silent_record(&s->sil, m.rank, m.util, m.step > ri->step && m.step > 0 ? m.step_time : NAN,
                      m.comm_time, isfinite(m.net_rx) ? fmax(m.net_rx, m.net_tx) : NAN);
        silent_record_gpu(&s->sil, m.rank, m.gpu_util, m.sm_clock);
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
                /* every row of the failure (one per node it hit) recovers at once */
                for (int i = s->ninc - 1; s->max_step < 0 && i >= 0 && s->inc[i].recovered_ts == 0; i--) {
                    incident *in = &s->inc[i];
                    in->recovered_ts = wall_seconds();
                    in->resumed_at = m.step - 1;
                    double from = in->fault_ts > 0 ? in->fault_ts : in->detect_ts;
                    sup_event(s, "recovered", json_pack("{s:s,s:s,s:I,s:f,s:I}", "kind",
                                                    sup_fail_name(in->kind), "node",
                                                    in->node[0] ? in->node : "-",
                                                    "resumed_at_step", (json_int_t)(m.step - 1),
                                                    "recovery_s", in->recovered_ts - from,
                                                    "steps_lost",
                                                    (json_int_t)(in->step_seen - (m.step - 1))));
                    sup_say(s, "recovered: training again at step %ld, %.2f s after the failure",
                        m.step, in->recovered_ts - from);
                    if (i == 0 || s->inc[i - 1].recovered_ts != 0)
                        sup_ledger_save(s);
                }
                s->max_step = m.step;
                s->progress_ts = now_seconds();
            }
            /* every rank reports the same (all-reduced) loss: rank 0's stream is the series */
            if (m.rank == 0 && isfinite(m.loss) && sup_check_spike(s, m.loss)) {
                char d[160];
                snprintf(d, sizeof d, "loss %.4g at step %ld is a spike (robust z > %.1f)",
                         m.loss, m.step, s->o->spike_z);
                fail(s, F_SPIKE, -1, d);
                s->f_nan_step = m.step; /* rolled back like a NaN; skipped if it repeats */
                return 1;
            }
        }
        if (m.has_loss && !isfinite(m.loss) && m.step > 0) { /* no loss= is no loss, not NaN */
            char d[64];
            snprintf(d, sizeof d, "non-finite loss at step %ld", m.step);
            fail(s, F_NAN, -1, d);
            return 1;
        }
    }
    sup_hb_watch(s); /* ranks elsewhere that were never heard: a warning */
    /* a rank process that is gone (or a zombie) is a failure now, before mpirun notices;
     * a large job's ranks are looked at a slice per poll, each within LIVE_ROUND_S */
    int slice = (int)ceil(s->nranks * POLL_S / LIVE_ROUND_S);
    if (slice < LIVE_MIN)
        slice = LIVE_MIN;
    if (slice > s->nranks)
        slice = s->nranks;
    for (int k = 0; k < slice; k++) {
        int r = s->live_next;
        s->live_next = s->live_next + 1 < s->nranks ? s->live_next + 1 : 0;
        if (s->rk[r].pid <= 0 || s->rk[r].done)
            continue;
        char state = sup_proc_state(s->rk[r].pid);
        if ((state == 0 || state == 'Z' || state == 'X') && sup_done_marked(s, r)) {
            s->rk[r].done = 1; /* it finished; its "done" datagram was lost (a flood) */
            continue;
        }
        if (state == 0 || state == 'Z' || state == 'X') {
            char d[160];
            snprintf(d, sizeof d, "rank %d (pid %ld) died", r, s->rk[r].pid);
            s->rk[r].lost = 'D';
            fail(s, F_EXIT, r, d);
            sup_collect_lost(s); /* every other rank gone or stopped right now, too */
            return 1;
        }
    }
    int status;
    pid_t w = waitpid(s->job, &status, WNOHANG);
    if (w == s->job) {
        s->job = 0;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            return 2; /* finished: the loop moves to DONE */
        }
        /* which rank: the launcher's report in the log (backend.h failed_rank) */
        char path[1300], *text = NULL, detail[200];
        int rank = -1;
        snprintf(path, sizeof path, "%s/attempt_%02d.log", s->logdir, s->attempt);
        if (fs_read_all(path, &text, NULL) == GRIT_OK) {
            rank = s->be->failed_rank ? s->be->failed_rank(text) : -1;
            free(text);
        }
        if (WIFEXITED(status) && WEXITSTATUS(status) == SUP_EXIT_PERMANENT && !s->fatal[0])
            snprintf(s->fatal, sizeof s->fatal, "exit status 3");
        snprintf(detail, sizeof detail, "job %s %d%s%s%s", WIFSIGNALED(status) ? "killed by signal" : "exited with",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
                 rank >= 0 ? " (a rank died)" : "", s->fatal[0] ? ": will not retry: " : "",
                 s->fatal);
        fail(s, F_EXIT, rank, detail);
        return 1;
    }
    /* progress for programs without heartbeats: their log grows. A program that beats (a
     * heartbeat, liveness or step, in this or an earlier attempt) gets the startup timeout
     * to its first step, whatever it prints: a start stuck in a retry loop that logs is
     * still stuck */
    char path[1300];
    struct stat st;
    snprintf(path, sizeof path, "%s/attempt_%02d.log", s->logdir, s->attempt);
    if (!s->beats && stat(path, &st) == 0 && st.st_size != s->log_size) {
        s->log_size = st.st_size;
        if (s->max_step < 0)
            s->progress_ts = now_seconds();
    }
    double to = hang_timeout(s);
    /* once a rank said "done" the job is finishing: the others may still be writing final
     * files (rank 0's last checkpoint and model), which no step marks; they get as long as
     * a start may take, not one step's hang timeout */
    int finishing = 0;
    for (int r = 0; r < s->nranks && !finishing; r++)
        finishing = s->rk[r].done;
    if (finishing)
        to = fmax(to, s->o->startup_timeout);
    if (now_seconds() - s->progress_ts > to) {
        char d[160];
        snprintf(d, sizeof d, "no progress for %.1f s (timeout %.1f s) after step %ld%s",
                 now_seconds() - s->progress_ts, to, s->max_step,
                 finishing ? " while the job was finishing (a rank said done)" : "");
        fail(s, F_HANG, -1, d);
        return 1;
    }
    if (poll_health(s)) {
        fail(s, F_HEALTH, -1, "periodic grit health --quick failed");
        return 1;
    }
    straggler_verdict sv; /* a large job's steps are not milliseconds: not every poll */
    int strag_due = s->nranks <= LIVE_MIN || now_seconds() - s->strag_ts >= STRAG_EVERY_S;
    if (strag_due)
        s->strag_ts = now_seconds();
    if (strag_due && straggler_check(&s->strag, &sv)) {
        char d[200];
        straggler_describe(&s->strag, &sv, s->rk[sv.rank].node, d, sizeof d);
        fail(s, F_STRAGGLER, sv.rank, d);
        return 1;
    }
    if (now_seconds() - s->sil_ts >= SILENT_TICK_S) { /* one sample per node per beat */
        s->sil_ts = now_seconds();
        silent_tick(&s->sil);
        if (s->sil_trace)
            silent_trace(&s->sil, stderr);
        silent_verdict lv;
        if (silent_check(&s->sil, &lv)) {
            char d[200];
            int rank = 0;
            while (rank < s->nranks && s->sil.node_of[rank] != lv.node)
                rank++;
            silent_describe(&lv, s->rk[rank].node, d, sizeof d);
            fail(s, lv.signal == SILENT_NET ? F_NETWORK : F_UTIL, rank, d);
            return 1;
        }
    }
    return 0;
}

/* --- the loop ----------------------------------------------------------------------------- */

/* Moves to st; an illegal move (a bug) is refused by sup_set_state, and the
 * supervisor then gives up through ERROR rather than carry on in a state nobody drew.
 * 0, or -1 after giving up. */
static int move(sup *s, sup_state st);

/* ERROR -> GAVE_UP: the one way out of an internal error, on purpose: the reason
 * recorded (event gave_up, stderr), the job stopped, the summary written. */
static void give_up_error(sup *s, const char *why)
{
    char reason[400];
    snprintf(reason, sizeof reason, "%s", why);
    fprintf(stderr, "grit launch: %s\n", reason);
    if (s->state != S_ERROR && sup_set_state(s, S_ERROR) != GRIT_OK)
        return; /* already final (DONE or GAVE_UP): nothing left to do */
    sup_event(s, "gave_up", json_pack("{s:s}", "reason", reason));
    sup_say(s, "giving up: %s", reason);
    snprintf(s->end_reason, sizeof s->end_reason, "%s", reason);
    if (s->job > 0)
        sup_event(s, "job_stopped", json_pack("{s:i}", "status", sup_stop_job(s)));
    sup_set_state(s, S_GAVE_UP);
    sup_summary(s, 0);
}

static int move(sup *s, sup_state st)
{
    if (sup_set_state(s, st) == GRIT_OK)
        return 0;
    give_up_error(s, grit_errmsg());
    return -1;
}

/* DETECTED: the incident recorded (a new row: the table grows, never overwrites). */
static grit_err record_incident(sup *s)
{
    incident *in = &s->inc[s->ninc]; /* room kept: sup_run and below */
    in->kind = s->f_kind;
    snprintf(in->detail, sizeof in->detail, "%s", s->f_detail);
    in->detect_ts = wall_seconds();
    in->step_seen = s->max_step;
    in->rank = s->f_rank;
    if (s->f_kind == F_HANG)
        capture_stacks(s);
    if (s->nimplicated)
        snprintf(in->node, sizeof in->node, "%s", s->implicated[0]);
    char nodes[512] = ""; /* every implicated node: a correlated failure names them all */
    for (int i = 0, n = 0; i < s->nimplicated && n + 70 < (int)sizeof nodes; i++)
        n += snprintf(nodes + n, sizeof nodes - (size_t)n, "%s%s", i ? "," : "", s->implicated[i]);
    sup_event(s, "detected", json_pack("{s:s,s:s,s:s,s:I,s:f,s:s}", "kind", sup_fail_name(in->kind),
                                       "node", in->node[0] ? in->node : "-", "detail", in->detail,
                                       "step", (json_int_t)in->step_seen, "latency_s",
                                       in->fault_ts > 0 ? in->detect_ts - in->fault_ts : -1.0,
                                       "nodes", nodes[0] ? nodes : "-"));
    sup_say(s, "detected %s%s%s: %s", sup_fail_name(in->kind), in->node[0] ? " on " : "",
            s->nimplicated > 1 ? nodes : in->node, in->detail);
    s->ninc++;
    incident first = *in;
    /* the next incident's row exists before its fault can be noted (note_fault) */
    grit_err rc = sup_grow((void **)&s->inc, &s->inc_cap, s->ninc + 1, sizeof *s->inc, "incidents");
    if (rc == GRIT_OK)
        rc = sup_record_more(s, &first); /* a row for each other node it hit */
    if (rc == GRIT_OK)
        sup_ledger_save(s);
    return rc;
}

/* A numeric failure at the same step twice: that step's batch is skipped from now on. */
static grit_err skip_policy(sup *s, long nan_step)
{
    for (int i = 0; i < s->nnan; i++)
        if (s->nan_steps[i] == nan_step) {
            size_t l = s->skip_steps ? strlen(s->skip_steps) : 0;
            grit_err rc = sup_grow((void **)&s->skip_steps, &s->skip_cap, (int)l + 24, 1,
                                   "skipped steps");
            if (rc != GRIT_OK)
                return rc;
            snprintf(s->skip_steps + l, (size_t)s->skip_cap - l, "%s%ld", l ? "," : "", nan_step);
            sup_event(s, "skip_batches", json_pack("{s:s}", "steps", s->skip_steps));
            sup_say(s, "%s at step %ld again: skipping that step's batch", sup_fail_name(s->f_kind),
                    nan_step);
            return GRIT_OK;
        }
    grit_err rc = sup_grow((void **)&s->nan_steps, &s->nan_cap, s->nnan + 1, sizeof *s->nan_steps,
                           "numeric failure steps");
    if (rc == GRIT_OK)
        s->nan_steps[s->nnan++] = nan_step;
    return rc;
}

/* PREFLIGHT: every active node's health before the first launch, the bad ones
 * replaced; 0 to launch, -1 when it cannot start (no spare: reason recorded). */
static int sup_preflight(sup *s)
{
    s->nimplicated = 0;
    for (int p = 0; p < cluster_active(&s->cl); p++)
        sup_implicate(s, cluster_at(&s->cl, p)->name);
    s->f_kind = F_PREFLIGHT;
    if (sup_diagnose(s) != GRIT_OK) {
        give_up_error(s, grit_errmsg());
        return -1;
    }
    int rc = sup_repair(s);
    s->nimplicated = 0;
    return rc;
}

int sup_run(const sup_opts *o)
{
    sup *s = calloc(1, sizeof *s);
    if (!s)
        return 2;
    s->o = o;
    s->be = o->backend_impl ? o->backend_impl : sup_backend_find(o->backend);
    s->f_rank = -1;
    const char *trace = getenv("GRIT_SILENT_TRACE");
    s->sil_trace = trace && !strcmp(trace, "1");
    int rc = 2;
    char path[1200];
    char (*hosts)[32] = NULL;
    s->own_lock.fd = -1; /* one supervisor per run directory; its ranks watch the lock */
    s->lock = o->lock ? o->lock : &s->own_lock;
    if (fs_mkdirs(o->run_dir) != GRIT_OK ||
        (!o->lock && runlock_take(&s->own_lock, o->run_dir, 0.5) != GRIT_OK)) {
        fprintf(stderr, "grit launch: %s\n", grit_errmsg());
        goto out;
    }
    snprintf(s->logdir, sizeof s->logdir, "%s/logs", o->run_dir);
    snprintf(s->statepath, sizeof s->statepath, "%s/supervisor.json", o->run_dir);
    snprintf(path, sizeof path, "%s/cluster.json", o->run_dir);
    int nhosts = 0;
    if (s->be && s->be->hosts && !(hosts = calloc(CLUSTER_SLOTS_MAX, sizeof *hosts))) {
        fprintf(stderr, "grit launch: out of memory\n");
        goto out;
    }
    grit_err crc = !s->be ? grit_errf(GRIT_EINVAL, "--backend %s: expected local or slurm", o->backend)
                 : fs_mkdirs(s->logdir) != GRIT_OK ? GRIT_EIO
                 : !s->be->hosts ? cluster_open(&s->cl, path, o->nodes, o->spares)
                 : s->be->hosts(o, hosts, CLUSTER_SLOTS_MAX, &nhosts) != GRIT_OK ? GRIT_EINVAL
                 : cluster_open_hosts(&s->cl, path, hosts, nhosts, o->spares);
    if (crc == GRIT_OK && hosts) /* where heartbeats from those hosts can come to */
        crc = sup_hb_plan(s, (const char (*)[32])hosts, nhosts);
    free(hosts);
    if (crc == GRIT_OK)
        crc = sup_inject_open(o->inject, o->run_dir, &s->inj);
    if (crc == GRIT_OK) /* room for what grows with the cluster, and the first incident */
        crc = sup_grow((void **)&s->implicated, &s->impl_cap, s->cl.count, sizeof *s->implicated,
                       "implicated nodes");
    if (crc == GRIT_OK)
        crc = sup_grow((void **)&s->vd, &s->vd_cap, s->cl.count, sizeof *s->vd, "verdicts");
    if (crc == GRIT_OK)
        crc = sup_grow((void **)&s->inc, &s->inc_cap, 1, sizeof *s->inc, "incidents");
    if (crc != GRIT_OK) {
        fprintf(stderr, "grit launch: %s\n", grit_errmsg());
        goto out;
    }
    snprintf(path, sizeof path, "%s/events.jsonl", o->run_dir);
    if (events_open(&s->ev, path) != GRIT_OK || hb_server_open(&s->hb, o->bind        ? o->bind
                                                   : s->hb_bind[0] ? s->hb_bind
                                                                   : NULL) != GRIT_OK) {
        fprintf(stderr, "grit launch: %s\n", grit_errmsg());
        goto out;
    }
    if (sup_ledger_load(s) != GRIT_OK) {
        fprintf(stderr, "grit launch: %s\n", grit_errmsg());
        goto out;
    }
    s->state = S_PREFLIGHT;
    /* the cluster's counts: under --backend slurm the allocation's, not --nodes/--spares */
    sup_event(s, "supervisor_start", json_pack("{s:i,s:i,s:i,s:s,s:i}", "nodes",
                                           cluster_active(&s->cl), "spares",
                                           cluster_spares(&s->cl), "ranks_per_node", o->ranks_per_node,
                                           "heartbeat", s->hb.addr, "attempt", s->attempt));
    sup_hb_announce(s); /* the address and why (sup_hbwatch.c) */
    rc = 1;
    sup_quarantine_enforce(s); /* the ledger's quarantine over cluster.json (sup_strikes.c) */
    if (sup_preflight(s) != 0) {
        if (s->state == S_PREFLIGHT)
            move(s, S_GAVE_UP);
        goto out;
    }
    if (move(s, S_LAUNCHING) != 0)
        goto out;
    for (;;) {
        if (sup_stop_pending()) { /* a signal during preflight, repair or backoff */
            rc = sup_stop(s);
            break;
        }
        if (launch(s) != GRIT_OK) {
            give_up_error(s, grit_errmsg());
            break;
        }
        int r;
        while (!(r = poll_running(s)))
            usleep((useconds_t)(POLL_S * 1e6));
        if (r == 3) {
            rc = sup_stop(s);
            break;
        }
        if (r == 2) {
            if (move(s, S_DONE) != 0)
                break;
            /* a recovery whose first new step came in the last beats */
            sup_summary(s, 1);
            rc = 0;
            break;
        }
        if (move(s, S_DETECTED) != 0)
            break;
        long nan_step = sup_fail_numeric(s->f_kind) ? s->f_nan_step : -1;
        if (record_incident(s) != GRIT_OK) {
            give_up_error(s, grit_errmsg());
            break;
        }
        int st = sup_stop_job(s);
        sup_event(s, "job_stopped", json_pack("{s:i}", "status", st));
        if (s->fatal[0]) { /* deterministic: no diagnosis, no restart (sup_incident.c) */
            rc = sup_give_up_permanent(s);
            break;
        }
        if (nan_step > 0 && skip_policy(s, nan_step) != GRIT_OK) {
            give_up_error(s, grit_errmsg());
            break;
        }
        if (move(s, S_DIAGNOSING) != 0)
            break;
        if (sup_diagnose(s) != GRIT_OK) {
            give_up_error(s, grit_errmsg());
            break;
        }
        if (move(s, S_REPAIRING) != 0)
            break;
        int rp = sup_repair(s);
        while (rp == 1) { /* a node to replace, no spare left: --on-no-spare asks for one */
            if (move(s, S_PROVISIONING) != 0) {
                rp = -2; /* gave up through ERROR: summarised */
                break;
            }
            int pv = sup_provision(s);
            if (pv == 2) { /* a stop signal while asking */
                rc = sup_stop(s);
                rp = -2;
                break;
            }
            if (pv != 0) {
                rp = -1;
                break;
            }
            if (move(s, S_REPAIRING) != 0) {
                rp = -2;
                break;
            }
            rp = sup_repair(s); /* carries on with the node it stopped at */
        }
        if (rp == -1 && move(s, S_GAVE_UP) == 0)
            sup_summary(s, 0);
        if (rp != 0)
            break;
        s->nimplicated = 0;
        s->f_rank = -1;
        s->f_nan_step = -1;
        s->f_kind = F_NONE;
        if (++s->restarts > o->max_restarts) {
            char reason[128];
            snprintf(reason, sizeof reason, "%d restarts exceed --max-restarts %d", s->restarts,
                     o->max_restarts);
            sup_event(s, "gave_up", json_pack("{s:s}", "reason", reason));
            sup_say(s, "giving up: %s", reason);
            snprintf(s->end_reason, sizeof s->end_reason, "%s", reason);
            if (move(s, S_GAVE_UP) == 0)
                sup_summary(s, 0);
            break;
        }
        double wait = fmin(30.0, o->backoff * pow(2.0, s->restarts - 1));
        sup_event(s, "backoff", json_pack("{s:f,s:i}", "seconds", wait, "restart", s->restarts));
        for (double t0 = now_seconds(); now_seconds() - t0 < wait && !sup_stop_pending();)
            usleep(20000); /* a stop signal ends the backoff */
        s->attempt++;
        if (move(s, S_LAUNCHING) != 0)
            break;
    }
out:
    if (s->job > 0)
        sup_stop_job(s);
    if (s->health_pid > 0) {
        kill(s->health_pid, SIGKILL);
        waitpid(s->health_pid, NULL, 0);
    }
    hb_server_close(&s->hb);
    events_close(&s->ev);
    sup_inject_close(s->inj);
    cluster_free(&s->cl);
    straggler_free(&s->strag);
    silent_free(&s->sil);
    free(s->rk), free(s->inc), free(s->nan_steps), free(s->skip_steps), free(s->implicated);
    free(s->vd), free(s->quar), free(s->local_hosts);
    runlock_release(&s->own_lock);
    free(s);
    return rc;
}
