/*
 * agent.c - the healing agent of one cluster (`grit cluster agent NAME`).
 *
 * Every poll interval it reads the nodes (store + sinfo) and acts on live
 * worker nodes whose InstanceStatus is Running:
 *
 *   Slurm reason "Action:Replace..." (any state)  -> replace-node
 *   Slurm reason "Action:Reboot..."  (any state)  -> reboot-node
 *   drained/failed with a reason starting "grit:" -> replace-node (grit launch
 *                                                    or grit health drained it)
 *   down (slurmd not responding) for > down_grace -> replace-node
 *
 * A replaced node comes back under the same Slurm name, fresh (lifecycle,
 * admission, rejoin); that also refills the warm-spare pool, whose members
 * are nodes like any other. Each action is an operation in the store
 * (DetectNode with the reason, then ReplaceNode/RebootNode with the split
 * timings), so `describe` shows what the agent did. The agent does one thing
 * at a time and never acts on a node the CLI is working on (status not Running).
 *
 * Lifecycle: create starts it (cluster_agent_start), delete stops it by its
 * recorded PID, after checking that PID still runs this cluster's agent.
 */
#include "cluster/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster/state.h"

static volatile sig_atomic_t stop_flag;
static void on_term(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static void waitpid_noeintr(pid_t pid)
{
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static void record(const cluster_opts *o, const char *name, const char *kind, const char *target,
                   const char *detail)
{
    char db[PATH_MAX + 16];
    snprintf(db, sizeof db, "%s/state.db", o->state_dir);
    cluster_state *st;
    if (cluster_state_open(&st, db) != GRIT_OK)
        return;
    int64_t id;
    if (cluster_state_op_begin(st, name, kind, target, &id) == GRIT_OK)
        cluster_state_op_end(st, id, "Succeeded", detail);
    cluster_state_close(st);
}

grit_err cluster_agent_run(const cluster_opts *o, const char *name, double poll_s,
                           double down_grace_s)
{
    struct sigaction sa = {.sa_handler = on_term};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    double down_since[64] = {0};
    if (o->progress)
        fprintf(o->progress, "grit cluster agent: watching %s (pid %d)\n", name, (int)getpid());
    while (!stop_flag) {
        json_t *j = NULL;
        grit_err rc = cluster_list_nodes(o, name, &j);
        if (rc == GRIT_ENOTFOUND) {
            json_decref(j);
            return GRIT_OK; /* the cluster was deleted */
        }
        size_t i;
        json_t *n;
        json_array_foreach(json_object_get(j, "ClusterNodeSummaries"), i, n) {
            if (stop_flag)
                break;
            const char *status = jstr(json_object_get(n, "InstanceStatus"), "Status");
            const char *slurm = jstr(n, "SlurmState"), *reason = jstr(n, "SlurmReason");
            const char *node = jstr(n, "PrivateDnsHostname");
            int slot = atoi(node + 1);
            if (strcmp(jstr(n, "Role"), "worker") != 0 || strcmp(status, "Running") != 0 ||
                slot < 1 || slot >= 64)
                continue;
            double t = mono();
            int down = !strncmp(slurm, "down", 4);
            if (!down)
                down_since[slot] = 0;
            else if (down_since[slot] == 0)
                down_since[slot] = t;
            const char *act = NULL;
            if (!strncmp(reason, "Action:Replace", 14))
                act = "replace";
            else if (!strncmp(reason, "Action:Reboot", 13))
                act = "reboot";
            else if (!strncmp(reason, "grit:", 5) &&
                     (strstr(slurm, "drain") || strstr(slurm, "fail") || down))
                act = "replace";
            else if (down && t - down_since[slot] >= down_grace_s)
                act = "replace";
            if (!act)
                continue;
            char detail[512];
            snprintf(detail, sizeof detail, "%s: Slurm state %s, reason \"%s\": %s", node, slurm,
                     reason, act);
            if (o->progress)
                fprintf(o->progress, "grit cluster agent: %s\n", detail);
            record(o, name, "DetectNode", jstr(n, "NodeId"), detail);
            /* the NodeId judged here: a node replaced meanwhile (provide-spare for grit
             * launch, a person) is not replaced again */
            const char *id = jstr(n, "NodeId");
            rc = !strcmp(act, "reboot") ? cluster_reboot_node(o, name, node, id)
                                        : cluster_replace_node(o, name, node, id);
            if (rc != GRIT_OK && o->progress)
                fprintf(o->progress, "grit cluster agent: %s %s: %s\n", act, node, grit_errmsg());
            down_since[slot] = 0;
        }
        json_decref(j);
        for (double t0 = mono(); !stop_flag && mono() - t0 < poll_s;)
            usleep(50000);
    }
    if (o->progress)
        fprintf(o->progress, "grit cluster agent: stopped\n");
    return GRIT_OK;
}

/* Is pid this cluster's agent? (its command line holds "cluster", "agent" and name) */
static int is_agent(int pid, const char *name)
{
    char p[64], buf[4096];
    snprintf(p, sizeof p, "/proc/%d/cmdline", pid);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    int saw_cluster = 0, saw_agent = 0, saw_name = 0;
    for (ssize_t i = 0; i < n; i += (ssize_t)strlen(buf + i) + 1) {
        buf[n] = '\0';
        saw_cluster |= !strcmp(buf + i, "cluster");
        saw_agent |= !strcmp(buf + i, "agent");
        saw_name |= !strcmp(buf + i, name);
    }
    return saw_cluster && saw_agent && saw_name;
}

grit_err cluster_agent_start(const cluster_opts *o, const char *name, const char *log)
{
    char db[PATH_MAX + 16];
    snprintf(db, sizeof db, "%s/state.db", o->state_dir);
    cluster_state *st;
    grit_err rc = cluster_state_open(&st, db);
    if (rc != GRIT_OK)
        return rc;
    cluster_row row;
    if ((rc = cluster_state_get(st, name, &row, NULL)) != GRIT_OK)
        goto out;
    if (row.agent_pid > 0 && is_agent(row.agent_pid, name))
        goto out; /* running already */
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = grit_errf(GRIT_EIO, "%s: %s", log, strerror(errno));
        goto out;
    }
    int pfd[2];
    if (pipe(pfd) != 0) {
        close(fd);
        rc = grit_errf(GRIT_EIO, "pipe: %s", strerror(errno));
        goto out;
    }
    pid_t pid = fork();
    if (pid == 0) {
        /* double fork: the agent is nobody's child, in its own session */
        setsid();
        pid_t p2 = fork();
        if (p2 != 0) {
            if (p2 > 0)
                (void)!write(pfd[1], &p2, sizeof p2);
            _exit(p2 > 0 ? 0 : 1);
        }
        int nul = open("/dev/null", O_RDONLY);
        dup2(nul, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        close(pfd[0]);
        close(pfd[1]);
        char grace[32], att[16];
        snprintf(grace, sizeof grace, "%g", o->down_grace);
        snprintf(att, sizeof att, "%d", o->attempts > 0 ? o->attempts : 1);
        char *argv[] = {(char *)o->grit, "cluster", "--state", (char *)o->state_dir, "--health",
                        (char *)o->health_args, "--down-grace", grace, "--attempts", att,
                        o->mpi_check ? "agent" : "--no-mpi-check", o->mpi_check ? (char *)name : "agent",
                        o->mpi_check ? NULL : (char *)name, NULL};
        execv(o->grit, argv);
        _exit(127);
    }
    close(fd);
    close(pfd[1]);
    pid_t agent = -1;
    if (pid < 0 || read(pfd[0], &agent, sizeof agent) != (ssize_t)sizeof agent || agent <= 0)
        rc = grit_errf(GRIT_EIO, "could not start the cluster agent");
    close(pfd[0]);
    if (pid > 0)
        waitpid_noeintr(pid);
    if (rc == GRIT_OK)
        rc = cluster_state_set_agent(st, name, (int)agent);
out:
    cluster_state_close(st);
    return rc;
}

grit_err cluster_agent_stop(const cluster_opts *o, const char *name)
{
    char db[PATH_MAX + 16];
    snprintf(db, sizeof db, "%s/state.db", o->state_dir);
    cluster_state *st;
    grit_err rc = cluster_state_open(&st, db);
    if (rc != GRIT_OK)
        return rc;
    cluster_row row;
    if ((rc = cluster_state_get(st, name, &row, NULL)) == GRIT_OK && row.agent_pid > 0) {
        int pid = row.agent_pid;
        if (is_agent(pid, name)) {
            kill(pid, SIGTERM);
            for (int i = 0; i < 200 && is_agent(pid, name); i++)
                usleep(50000); /* it finishes the action in hand (at most ~10 s) */
            if (is_agent(pid, name))
                kill(pid, SIGKILL);
        }
        rc = cluster_state_set_agent(st, name, 0);
    }
    cluster_state_close(st);
    return rc;
}
