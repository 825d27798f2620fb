/*
 * sup_scale.c - grit launch's supervisor (src/supervise) at the size of the runs it is for:
 * 4,096 ranks on 512 nodes plus spares, heartbeats from ONE sender process over real UDP
 * to the supervisor's real heartbeat server, authenticated with the job's secret.
 *
 * The backend is a test fake (backend.h): its "job" is this program run as the sender
 * (--sender). The sender reads what grit launch gives every job (GRIT_SUP_ADDR,
 * GRIT_SUP_SECRET, GRIT_NODES, GRIT_RANKS_PER_NODE), forks one sleeping process per
 * node (each node's ranks report that pid, as ranks report their own), and sends every
 * rank's HB1 beat once a second, paced over the second. A node "dies" by its process
 * being killed and its ranks falling silent; the fake cluster's hardware state is a
 * file per dead node, which the fake health check (check_node) reads, as `grit health`
 * would find a dead machine. The supervisor works only from what it observes: a rank's
 * process gone, then the health check's verdict.
 *
 *   sup_scale                 the tests: (1) 4,096 ranks, node500 dies, is diagnosed,
 *                             cordoned, node512 takes its place, the relaunch uses it;
 *                             (2) 300 incidents, all kept (summary, events, /api/run).
 *   sup_scale --bench S [--no-dashboard]
 *                             the supervisor's CPU time per second of heartbeats at
 *                             4,096 ranks for S seconds, with the live dashboard thread
 *                             as grit launch runs it, or without (bench/supervisor_scale.sh).
 *   sup_scale --sender        the fake job (started by the fake backend).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../unit/check.h"
#include "core/fsutil.h"
#include "obs/obs.h"
#include "supervise/backend.h"
#include "supervise/sup.h"

#define NODES 512
#define SPARES 2
#define RPN 8

static char self_exe[1024], fake_dir[512];

static double now_mono(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* --- the sender (the fake job) ------------------------------------------------------ */

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static void sleep_until(double t)
{
    double d = t - now_mono();
    if (d > 0) {
        struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

static int sender(void)
{
    const char *addr = getenv("GRIT_SUP_ADDR"), *secret = getenv("GRIT_SUP_SECRET");
    const char *nodes_env = getenv("GRIT_NODES"), *kill_node = getenv("FAKE_KILL_NODE");
    int R = env_int("GRIT_RANKS_PER_NODE", 0), steps = env_int("FAKE_STEPS", 3);
    int kill_step = env_int("FAKE_KILL_STEP", 0), fail_runs = env_int("FAKE_FAIL_RUNS", 0);
    if (!addr || !secret || !nodes_env || R < 1) {
        fprintf(stderr, "sender: GRIT_SUP_ADDR, GRIT_SUP_SECRET, GRIT_NODES, GRIT_RANKS_PER_NODE "
                        "expected from grit launch\n");
        return 2;
    }
    if (fail_runs) { /* the incident test: the first fail_runs attempts exit 1 at once */
        char path[700], *text = NULL;
        snprintf(path, sizeof path, "%s/runs", fake_dir);
        int runs = fs_read_all(path, &text, NULL) == GRIT_OK ? atoi(text) : 0;
        free(text);
        char num[32];
        snprintf(num, sizeof num, "%d", runs + 1);
        fs_write_durable(path, num, strlen(num));
        if (runs < fail_runs)
            return 1;
    }
    char *list = strdup(nodes_env);
    int nn = 0;
    char **names = calloc(strlen(list) / 2 + 2, sizeof *names);
    for (char *sv = NULL, *h = strtok_r(list, ",", &sv); h; h = strtok_r(NULL, ",", &sv))
        names[nn++] = h;
    int nranks = nn * R;
    pid_t *pid = calloc((size_t)nn, sizeof *pid);
    for (int n = 0; n < nn; n++) { /* a node's processes: one per node here */
        pid[n] = fork();
        if (pid[n] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            for (;;)
                pause();
        }
    }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET};
    char host[64];
    snprintf(host, sizeof host, "%.*s", (int)(strrchr(addr, ':') - addr), addr);
    inet_pton(AF_INET, host, &to.sin_addr);
    to.sin_port = htons((uint16_t)atoi(strrchr(addr, ':') + 1));
    int dead = -1;
    char line[512];
    const int batch = 64; /* datagrams sent back to back, then a pause: paced over a second */
    double t = now_mono();
    for (int step = 1; step <= steps; step++) {
        if (step == kill_step && kill_node)
            for (int n = 0; n < nn; n++)
                if (!strcmp(names[n], kill_node)) { /* the node loses power */
                    char path[700];
                    snprintf(path, sizeof path, "%s/dead_%s", fake_dir, names[n]);
                    fs_write_durable(path, "off\n", 4);
                    kill(pid[n], SIGKILL);
                    waitpid(pid[n], NULL, 0);
                    dead = n;
                }
        for (int r0 = 0; r0 < nranks; r0 += batch) {
            for (int r = r0; r < r0 + batch && r < nranks; r++) {
                if (r / R == dead)
                    continue;
                int len = snprintf(line, sizeof line,
                                   "HB1 %s rank=%d node=%s step=%d loss=%.6f gnorm=1.0 "
                                   "step_time=0.9 comm_time=0.4 pid=%d host=-\n",
                                   secret, r, names[r / R], step, 5.0 - 0.01 * step, (int)pid[r / R]);
                sendto(fd, line, (size_t)len, 0, (struct sockaddr *)&to, sizeof to);
            }
            sleep_until(t + (double)(r0 + batch < nranks ? r0 + batch : nranks) / nranks);
        }
        t += 1.0;
    }
    for (int r0 = 0; r0 < nranks; r0 += batch) { /* every rank finished normally */
        for (int r = r0; r < r0 + batch && r < nranks; r++) {
            int len = snprintf(line, sizeof line, "EV1 %s rank=%d node=%s kind=done step=%d detail=-\n",
                               secret, r, names[r / R], steps);
            sendto(fd, line, (size_t)len, 0, (struct sockaddr *)&to, sizeof to);
        }
        usleep(2000);
    }
    usleep(300000); /* the supervisor reads them before the node processes go */
    for (int n = 0; n < nn; n++)
        if (n != dead) {
            kill(pid[n], SIGKILL);
            waitpid(pid[n], NULL, 0);
        }
    close(fd);
    free(pid), free(names), free(list); /* LeakSanitizer builds exit 1 on a leak */
    return 0;
}

/* --- the fake backend ------------------------------------------------------------------ */

static int fake_job_argv(const sup_opts *o, const char *nodes, int count, int rpn, int attempt,
                         char **argv, char *buf, size_t cap);
static volatile double wall_launch; /* when the first attempt was launched (the bench) */

static int fake_job_argv(const sup_opts *o, const char *nodes, int count, int rpn, int attempt,
                         char **argv, char *buf, size_t cap)
{
    (void)o, (void)nodes, (void)count, (void)rpn, (void)attempt, (void)buf, (void)cap;
    if (attempt == 0 && wall_launch == 0) /* the bench measures from here on */
        wall_launch = now_mono();
    argv[0] = self_exe;
    argv[1] = "--sender";
    argv[2] = NULL;
    return 0;
}

/* The fake machine's health: a node whose power went off does not answer. */
static int fake_check_node(const sup_opts *o, const char *node, const char *fault, char *why,
                           size_t cap)
{
    (void)o, (void)fault;
    char path[700];
    snprintf(path, sizeof path, "%s/dead_%s", fake_dir, node);
    int dead = access(path, F_OK) == 0;
    snprintf(why, cap, "%s", dead ? "no answer from the node (fake hardware: powered off)" : "healthy");
    return dead;
}

static const sup_backend fake_backend = {
    .name = "fake",
    .job_argv = fake_job_argv,
    .check_node = fake_check_node,
};

/* --- helpers ----------------------------------------------------------------------------- */

static char *slurp(const char *dir, const char *name)
{
    char path[700], *text = NULL;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (fs_read_all(path, &text, NULL) != GRIT_OK)
        return strdup("");
    return text;
}

static int count(const char *text, const char *needle)
{
    int k = 0;
    for (const char *p = text; (p = strstr(p, needle)); p++)
        k++;
    return k;
}

static void rm_rf(const char *dir)
{
    pid_t p = fork();
    if (p == 0) {
        execlp("rm", "rm", "-rf", "--", dir, (char *)NULL);
        _exit(127);
    }
    if (p > 0)
        waitpid(p, NULL, 0);
}

static sup_opts base_opts(const char *run_dir, int nodes, int spares, int rpn)
{
    static char *cmd[] = {"fake-job", NULL};
    sup_opts o = {.nodes = nodes, .spares = spares, .ranks_per_node = rpn, .max_restarts = 5,
                  .run_dir = run_dir, .cmd = cmd, .hang_floor = 30, .hang_cap = 600,
                  .startup_timeout = 60, .grace = 2, .backoff = 0.1, .straggler_factor = 2.5,
                  .straggler_window = 5, .straggler_min_gap = 0.01, .no_spare = "give_up",
                  .grit = "/bin/false", .quiet = 1, .backend_impl = &fake_backend};
    return o;
}

/* The stderr of f() into err (the summary table is printed there). */
static int run_captured(const sup_opts *o, const char *errpath)
{
    fflush(stderr);
    int saved = dup(2), fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
    int rc = sup_run(o);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    return rc;
}

/* --- test 1: a node of 512 dies; the spare takes its place ------------------------------- */

static void test_node_dies(const char *tmp)
{
    char run[600], errp[700];
    snprintf(run, sizeof run, "%s/run", tmp);
    snprintf(errp, sizeof errp, "%s/stderr", tmp);
    setenv("FAKE_KILL_NODE", "node500", 1); /* ranks 4000..4007: far past any old 256 */
    setenv("FAKE_KILL_STEP", "3", 1);
    setenv("FAKE_STEPS", "4", 1);
    sup_opts o = base_opts(run, NODES, SPARES, RPN);
    obs_server *srv = NULL; /* the live dashboard registry, as grit launch runs it */
    obs_serve_opts so = {.run_dir = run, .live = 1};
    fs_mkdirs(run);
    CHECK_INT(obs_serve(&so, &srv), GRIT_OK);
    double t0 = now_mono();
    int rc = run_captured(&o, errp);
    obs_server_close(srv);
    printf("4096 ranks on 512 nodes: supervisor returned %d after %.1f s\n", rc, now_mono() - t0);
    CHECK_INT(rc, 0);
    char *ev = slurp(run, "events.jsonl"), *cl = slurp(run, "cluster.json");
    char *nodes = slurp(run, "nodes.json"), *err = slurp(tmp, "stderr");
    CHECK_INT(count(ev, "\"event\":\"heartbeat_rejected\""), 0);
    CHECK_INT(count(ev, "\"event\":\"illegal_transition\""), 0);
    CHECK_INT(count(ev, "\"event\":\"launch\""), 2);
    CHECK_STR_HAS(ev, "\"event\":\"launch\",\"attempt\":0,\"ranks\":4096,");
    /* detected from what it saw: rank 4000..4007's process (node500's) is gone */
    CHECK_INT(count(ev, "\"event\":\"detected\""), 1);
    CHECK_STR_HAS(ev, "\"event\":\"detected\",\"kind\":\"exit\",\"node\":\"node500\",\"detail\":\"rank 40");
    /* diagnosed: only the implicated node, found dead by its health check */
    CHECK_INT(count(ev, "\"event\":\"diagnosis\""), NODES + 1); /* preflight: all 512 */
    CHECK_STR_HAS(ev, "\"event\":\"diagnosis\",\"node\":\"node500\",\"verdict\":\"unhealthy\"");
    CHECK_INT(count(ev, "\"verdict\":\"unhealthy\""), 1);
    CHECK_INT(count(ev, "\"event\":\"cordon\""), 1);
    CHECK_STR_HAS(ev, "\"event\":\"cordon\",\"node\":\"node500\",\"reason\":\"no answer from the node "
                      "(fake hardware: powered off)\",\"replacement\":\"node512\"");
    CHECK_STR_HAS(ev, "\"event\":\"recovered\",\"kind\":\"exit\"");
    CHECK_STR_HAS(ev, "\"event\":\"done\"");
    /* the relaunch: node512 at node500's position, node500 nowhere */
    const char *l2 = strstr(ev, "\"event\":\"launch\",\"attempt\":1,");
    CHECK(l2 != NULL);
    if (l2) {
        CHECK_STR_HAS(l2, ",node499,node512,node501,");
        const char *nl = strchr(l2, '\n');
        char *line = strndup(l2, nl ? (size_t)(nl - l2) : strlen(l2));
        CHECK(strstr(line, "node500") == NULL);
        CHECK(strstr(line, ",node511\"") != NULL); /* all 512 positions, the last one too */
        free(line);
    }
    /* the states, in the order drawn in sup_fsm.h */
    const char *want[] = {"\"from\":\"PREFLIGHT\",\"to\":\"LAUNCHING\"",
                          "\"from\":\"LAUNCHING\",\"to\":\"RUNNING\"",
                          "\"from\":\"RUNNING\",\"to\":\"DETECTED\"",
                          "\"from\":\"DETECTED\",\"to\":\"DIAGNOSING\"",
                          "\"from\":\"DIAGNOSING\",\"to\":\"REPAIRING\"",
                          "\"from\":\"REPAIRING\",\"to\":\"LAUNCHING\"",
                          "\"from\":\"LAUNCHING\",\"to\":\"RUNNING\"",
                          "\"from\":\"RUNNING\",\"to\":\"DONE\""};
    const char *p = ev;
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const char *q = strstr(p, want[i]);
        if (!q)
            fprintf(stderr, "state transition %zu (%s) missing or out of order\n", i, want[i]);
        CHECK(q != NULL);
        p = q ? q + 1 : p;
    }
    /* cluster.json: node500 cordoned, node512 active in its place, node513 still spare */
    json_t *j = json_loads(cl, 0, NULL), *arr = json_object_get(j, "nodes");
    CHECK_INT(json_array_size(arr), NODES + SPARES);
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *n = json_array_get(arr, i);
        const char *name = json_string_value(json_object_get(n, "name"));
        const char *st = json_string_value(json_object_get(n, "state"));
        int pos = (int)json_integer_value(json_object_get(n, "position"));
        if (!strcmp(name, "node500"))
            CHECK(!strcmp(st, "cordoned"));
        else if (!strcmp(name, "node512"))
            CHECK(!strcmp(st, "active") && pos == 500);
        else if (!strcmp(name, "node513"))
            CHECK(!strcmp(st, "spare"));
        else
            CHECK(!strcmp(st, "active") && pos == atoi(name + 4));
    }
    json_decref(j);
    /* the dashboard's registry holds every node that beat (513: it was 64) */
    j = json_loads(nodes, 0, NULL);
    CHECK_INT(json_array_size(json_object_get(j, "nodes")), NODES + 1);
    json_decref(j);
    CHECK_STR_HAS(err, "node500 (no answer from the node (fake hardware: powered off))");
    free(ev), free(cl), free(nodes), free(err);
    unsetenv("FAKE_KILL_NODE");
}

/* --- test 2: hundreds of incidents, every one kept -------------------------------------- */

static void test_many_incidents(const char *tmp)
{
    const int N = 300;
    char run[600], errp[700], num[16];
    snprintf(run, sizeof run, "%s/many", tmp);
    snprintf(errp, sizeof errp, "%s/many_stderr", tmp);
    snprintf(num, sizeof num, "%d", N);
    setenv("FAKE_FAIL_RUNS", num, 1);
    setenv("FAKE_STEPS", "1", 1);
    sup_opts o = base_opts(run, 2, 0, 1);
    o.max_restarts = N;
    o.backoff = 0;
    double t0 = now_mono();
    int rc = run_captured(&o, errp);
    printf("%d incidents: supervisor returned %d after %.1f s\n", N, rc, now_mono() - t0);
    CHECK_INT(rc, 0);
    char *ev = slurp(run, "events.jsonl"), *err = slurp(tmp, "many_stderr");
    CHECK_INT(count(ev, "\"event\":\"detected\",\"kind\":\"exit\""), N);
    char want[64];
    snprintf(want, sizeof want, "\"incidents\":%d", N);
    CHECK_STR_HAS(ev, want); /* the final "done" event counts them all */
    CHECK_INT(count(err, "\n  exit "), N); /* the summary: one row each, none overwritten */
    CHECK_STR_HAS(err, "job exited with 1");
    obs_cfg cfg = {0};
    json_t *view = obs_view(run, &cfg, 100); /* what GET /api/run serves */
    CHECK_INT(json_array_size(json_object_get(view, "incidents")), N);
    json_decref(view);
    free(ev), free(err);
    unsetenv("FAKE_FAIL_RUNS");
}

/* --- bench: CPU per second of heartbeats ------------------------------------------------- */

static double cpu_now(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru); /* every thread of this process: the loop and the dashboard */
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
           (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

static struct {
    int seconds;
    double cpu, wall;
} meas;

/* Samples this process's CPU over `seconds` of steady heartbeats: from 3 s after the
 * launch (the sender's node processes started, every rank beating) on. */
static void *measure(void *arg)
{
    (void)arg;
    while (wall_launch == 0)
        usleep(10000);
    sleep_until(wall_launch + 3.0);
    double c0 = cpu_now(), t0 = now_mono();
    sleep_until(t0 + meas.seconds);
    meas.cpu = cpu_now() - c0;
    meas.wall = now_mono() - t0;
    return NULL;
}

static int bench(const char *tmp, int seconds, int dashboard)
{
    char run[600], errp[700], num[16];
    snprintf(run, sizeof run, "%s/bench", tmp);
    snprintf(errp, sizeof errp, "%s/bench_stderr", tmp);
    snprintf(num, sizeof num, "%d", seconds + 5);
    setenv("FAKE_STEPS", num, 1);
    sup_opts o = base_opts(run, NODES, SPARES, RPN);
    obs_server *srv = NULL;
    obs_serve_opts so = {.run_dir = run, .live = 1};
    fs_mkdirs(run);
    if (dashboard && obs_serve(&so, &srv) != GRIT_OK)
        return 2;
    meas.seconds = seconds;
    pthread_t th;
    pthread_create(&th, NULL, measure, NULL);
    int rc = run_captured(&o, errp);
    pthread_join(th, NULL);
    obs_server_close(srv);
    char *ev = slurp(run, "events.jsonl");
    int rejected = count(ev, "heartbeat_rejected"), detected = count(ev, "\"event\":\"detected\"");
    free(ev);
    printf("ranks 4096 nodes 512 beats/s 4096 dashboard %d wall_s %.2f cpu_s %.3f "
           "cpu_pct_of_core %.2f rc %d detected %d rejected %d\n", dashboard, meas.wall, meas.cpu,
           100.0 * meas.cpu / meas.wall, rc, detected, rejected);
    return rc == 0 && detected == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    self_exe[n > 0 ? n : 0] = '\0';
    const char *fd = getenv("FAKE_DIR");
    if (argc > 1 && !strcmp(argv[1], "--sender")) {
        snprintf(fake_dir, sizeof fake_dir, "%s", fd ? fd : "/nonexistent");
        return sender();
    }
    char tmp[] = "/tmp/grit_sup_scale_XXXXXX";
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(fake_dir, sizeof fake_dir, "%s", tmp);
    setenv("FAKE_DIR", tmp, 1);
    int rc;
    if (argc > 2 && !strcmp(argv[1], "--bench")) {
        rc = bench(tmp, atoi(argv[2]), !(argc > 3 && !strcmp(argv[3], "--no-dashboard")));
    } else {
        const char *only = getenv("SUP_SCALE_ONLY"); /* "node" or "incidents" */
        if (!only || !strcmp(only, "node"))
            test_node_dies(tmp);
        if (!only || !strcmp(only, "incidents"))
            test_many_incidents(tmp);
        rc = check_failures ? 1 : 0;
        if (check_failures)
            fprintf(stderr, "%d check(s) failed (run dir kept in the log above: removed)\n",
                    check_failures);
        else
            printf("all checks passed\n");
    }
    if (getenv("SUP_SCALE_KEEP"))
        fprintf(stderr, "kept %s\n", tmp);
    else
        rm_rf(tmp);
    return rc;
}
