/*
 * sup_provision.c - PROVISIONING (sup_fsm.h): a node must be cordoned and the job's
 * pool has no spare left, so --on-no-spare CMD asks the world outside for one (a
 * cluster provider: `grit cluster provide-spare`, an operator's script).
 *
 * The contract with the command (docs/supervisor.md, "Asking for a node"):
 *   - argv as given, no shell; its own process group; stdin /dev/null; stderr into
 *     RUN/logs/on_no_spare_NN.log; environment GRIT_FAILED_NODE (the node to replace),
 *     GRIT_FAILED_REASON, GRIT_RUN (the run directory), GRIT_CLUSTER_JSON;
 *   - it prints the new node's name on stdout, one line, and exits 0 within
 *     --on-no-spare-timeout seconds (default 600; then its group is SIGKILLed);
 *   - the name must be 1-31 of [A-Za-z0-9._-], not a node the job runs on, not a
 *     quarantined node (sup_strikes.c), join the job's allocation where the backend
 *     has one (sup_backend.grow: Slurm job expansion) and pass the same health check
 *     a suspect gets; it then becomes a spare slot (cluster.json grows) and REPAIRING
 *     puts it at the failed node's position. The failed node's own name is accepted too (a
 *     provider that replaces a machine under the same name, as `grit cluster
 *     replace-node` does): when its check passes it stays, uncordoned.
 * Anything else (an exit status other than 0, a signal, the timeout, no line, two
 * lines, a bad name, a refused expansion, a failed check) gives up with the reason in
 * the gave_up event, on stderr and in the summary. A SIGTERM/SIGINT to grit launch ends
 * the command.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fsutil.h"
#include "core/progress.h"
#include "supervise/sup_internal.h"

#define PROV_OUT_MAX 4096 /* bytes of stdout read; more is garbage */

/* The command's last stderr line (its log), for the reason; "" when none. */
static void last_line(const char *path, char *out, size_t cap)
{
    char *text = NULL;
    size_t n = 0;
    out[0] = '\0';
    if (fs_read_all(path, &text, &n) != GRIT_OK)
        return;
    while (n && (text[n - 1] == '\n' || text[n - 1] == '\r'))
        text[--n] = '\0';
    char *nl = strrchr(text, '\n');
    snprintf(out, cap, "%.150s", nl ? nl + 1 : text);
    free(text);
}

/* A printable, bounded copy of what the command printed, for a message. */
static void shown(const char *in, size_t n, char *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 5 < cap && i < 60; i++)
        out[k++] = isprint((unsigned char)in[i]) ? in[i] : in[i] == '\n' ? '|' : '?';
    if (n > 60 && k + 4 < cap)
        out[k++] = '.', out[k++] = '.', out[k++] = '.';
    out[k] = '\0';
}

/* The one name in buf[0..n): 0 and name filled, else -1 and what is wrong in why. */
static int parse_name(const char *buf, size_t n, char *name, size_t cap, char *why, size_t wcap)
{
    char show[80];
    shown(buf, n, show, sizeof show);
    size_t end = n;
    while (end && (buf[end - 1] == '\n' || buf[end - 1] == '\r' || buf[end - 1] == ' '))
        end--;
    size_t start = 0;
    while (start < end && buf[start] == ' ')
        start++;
    if (start == end) {
        snprintf(why, wcap, "printed no node name (expected one line: the new node's name)");
        return -1;
    }
    size_t len = end - start;
    int ok = len < cap && len <= 31;
    for (size_t i = start; ok && i < end; i++)
        ok = isalnum((unsigned char)buf[i]) || buf[i] == '.' || buf[i] == '_' || buf[i] == '-';
    if (!ok) {
        snprintf(why, wcap, "printed '%s' (expected one line: a node name of 1-31 letters, "
                            "digits, '.', '_' or '-')", show);
        return -1;
    }
    memcpy(name, buf + start, len);
    name[len] = '\0';
    return 0;
}

/* Runs the command; 0 exited 0 (out[0..*n) its stdout), -1 failed (why), 2 a stop signal. */
static int run_command(sup *s, const char *log, char *out, size_t *n, char *why, size_t wcap)
{
    char *const *argv = s->o->on_no_spare;
    double to = s->o->on_no_spare_timeout > 0 ? s->o->on_no_spare_timeout : 600;
    int fds[2];
    *n = 0;
    if (pipe2(fds, O_CLOEXEC) != 0) {
        snprintf(why, wcap, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, wcap, "fork: %s", strerror(errno));
        close(fds[0]), close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a killed supervisor ends its request */
        dup2(fds[1], 1);
        int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (nul >= 0)
            dup2(nul, 0);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0)
            dup2(fd, 2);
        setenv("GRIT_FAILED_NODE", s->prov_node, 1);
        setenv("GRIT_FAILED_REASON", s->prov_why, 1);
        setenv("GRIT_RUN", s->o->run_dir, 1);
        setenv("GRIT_CLUSTER_JSON", s->cl.path, 1);
        execvp(argv[0], argv);
        fprintf(stderr, "grit launch: --on-no-spare: cannot run %s: %s\n", argv[0],
                strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    close(fds[1]);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    double t0 = now_seconds(), exited_at = 0;
    int status = 0, eof = 0, exited = 0, over = 0, rc = 0;
    while (!(exited && (eof || now_seconds() - exited_at > 1.0))) {
        if (sup_stop_pending()) {
            rc = 2;
            break;
        }
        if (now_seconds() - t0 > to) {
            snprintf(why, wcap, "timed out after %.0f s (--on-no-spare-timeout)", to);
            rc = -1;
            break;
        }
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        if (!eof && poll(&p, 1, 100) > 0) {
            char chunk[1024];
            ssize_t k = read(fds[0], chunk, sizeof chunk);
            if (k == 0)
                eof = 1;
            else if (k > 0) {
                size_t room = PROV_OUT_MAX - *n;
                memcpy(out + *n, chunk, (size_t)k < room ? (size_t)k : room);
                *n += (size_t)k < room ? (size_t)k : room;
                over |= (size_t)k > room;
            }
        } else if (eof)
            usleep(20000);
        if (!exited && waitpid(pid, &status, WNOHANG) == pid) {
            exited = 1;
            exited_at = now_seconds();
        }
    }
    close(fds[0]);
    if (!exited) { /* timed out or stopped: the command and everything it started */
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        return rc;
    }
    /* what it left running after a normal exit is left alone: a provider may have
     * started the new node's daemons from it */
    if (rc)
        return rc;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char tail[160];
        last_line(log, tail, sizeof tail);
        snprintf(why, wcap, "%s %d%s%s", WIFSIGNALED(status) ? "killed by signal" : "exited with",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
                 tail[0] ? ": " : "", tail);
        return -1;
    }
    if (over) {
        snprintf(why, wcap, "printed more than %d bytes (expected one line: the new node's name)",
                 PROV_OUT_MAX);
        return -1;
    }
    return 0;
}

/* Whether name can be the replacement; 0 yes, else why. Between the checks of the
 * name and of the machine, the backend's grow makes the node reachable by the job's
 * steps (Slurm: the allocation expanded onto it, sup_backend.grow), since the health
 * check runs as one of them. */
static int validate(sup *s, const char *name, char *why, size_t wcap)
{
    node_slot *n = cluster_find(&s->cl, name);
    if (sup_quarantined(s, name)) {
        snprintf(why, wcap, "named %s, which is quarantined for this run", name);
        return -1;
    }
    if (n && strcmp(name, s->prov_node) && n->state == NODE_ACTIVE) {
        snprintf(why, wcap, "named %s, which the job already runs on", name);
        return -1;
    }
    if (s->be->grow) {
        char did[320] = "", gw[360] = "";
        double t0 = now_seconds();
        if (s->be->grow(s->o, name, did, sizeof did, gw, sizeof gw) != 0) {
            snprintf(why, wcap, "named %s, which could not join the job's allocation: %.330s",
                     name, gw);
            return -1;
        }
        if (did[0]) {
            sup_event(s, "allocation_grown", json_pack("{s:s,s:s,s:f}", "node", name, "detail",
                                                      did, "seconds", now_seconds() - t0));
            sup_say(s, "%s in %.2f s", did, now_seconds() - t0);
        }
    }
    int machine_ok = -1;
    char hw[200];
    if (sup_check_node(s, name, &machine_ok, hw, sizeof hw) != 0) {
        snprintf(why, wcap, "named %s, which failed its health check (%.150s)", name, hw);
        return -1;
    }
    return 0;
}

int sup_provision(sup *s)
{
    char log[1300], why[400] = "", name[64] = "", *out = malloc(PROV_OUT_MAX + 1);
    size_t n = 0;
    snprintf(log, sizeof log, "%.1100s/on_no_spare_%02d.log", s->logdir, s->nprov++);
    double t0 = now_seconds();
    sup_event(s, "spare_requested", json_pack("{s:s,s:s,s:s,s:f,s:s}", "node", s->prov_node,
                                              "reason", s->prov_why, "command",
                                              s->o->on_no_spare[0], "timeout_s",
                                              s->o->on_no_spare_timeout > 0 ?
                                              s->o->on_no_spare_timeout : 600.0, "log", log));
    sup_say(s, "node %s is unhealthy and no spare is left: asking %s for a node (log %s)",
            s->prov_node, s->o->on_no_spare[0], log);
    int rc = out ? run_command(s, log, out, &n, why, sizeof why) : -1;
    if (!out)
        snprintf(why, sizeof why, "out of memory");
    if (rc == 2) {
        free(out);
        sup_event(s, "spare_request_ended", json_pack("{s:s}", "reason", "a stop signal"));
        return 2;
    }
    if (rc == 0)
        rc = parse_name(out, n, name, sizeof name, why, sizeof why);
    free(out);
    if (rc == 0)
        rc = validate(s, name, why, sizeof why);
    int in_place = rc == 0 && !strcmp(name, s->prov_node);
    if (rc == 0 && !in_place) {
        grit_err e = cluster_add_spare(&s->cl, name);
        if (e != GRIT_OK) {
            snprintf(why, sizeof why, "named %s: %.300s", name, grit_errmsg());
            rc = -1;
        } else
            cluster_save(&s->cl);
    }
    double took = now_seconds() - t0;
    if (rc != 0) {
        char reason[512];
        const char *cmd = strrchr(s->o->on_no_spare[0], '/');
        snprintf(reason, sizeof reason, "node %.60s failed and no spare is left; --on-no-spare "
                 "%.60s %.150s; %.60s: %.80s", s->prov_node, cmd ? cmd + 1 : s->o->on_no_spare[0],
                 why, s->prov_node, s->prov_why);
        if (s->be->cordoned) /* the bad node stays out of the next allocation too */
            s->be->cordoned(s->o, s->prov_node, s->prov_why);
        snprintf(s->end_reason, sizeof s->end_reason, "%s", reason);
        sup_event(s, "gave_up", json_pack("{s:s,s:s,s:s,s:f}", "reason", reason, "cause",
                                          "on_no_spare", "detail", why, "seconds", took));
        sup_say(s, "giving up: %s", reason);
        return -1;
    }
    if (in_place) /* the same name, a fresh machine that passed: it stays */
        for (int i = 0; i < s->nvd; i++)
            if (!strcmp(s->vd[i].node, name)) {
                s->vd[i].bad = 0;
                snprintf(s->vd[i].why, sizeof s->vd[i].why, "replaced in place by --on-no-spare");
            }
    sup_event(s, "spare_provided", json_pack("{s:s,s:s,s:b,s:f}", "node", name, "for",
                                             s->prov_node, "in_place", in_place, "seconds", took));
    sup_say(s, "--on-no-spare gave %s for %s in %.2f s%s", name, s->prov_node, took,
            in_place ? " (the same name: replaced in place)" : "");
    return 0;
}
