/*
 * spank_grit.c - SPANK plugin: `srun --auto-resume[=N]` runs the step under grit's
 * supervisor (`grit launch --backend slurm`), which retries it inside the same
 * allocation after draining a failed node and swapping in a spare.
 *
 *   srun (local context, init_post_opt): when --auto-resume is on (given to srun, or
 *       GRIT_AUTO_RESUME in the environment from `sbatch --auto-resume`) and the step is
 *       not supervised yet (GRIT_SPANK_SUPERVISED unset), srun re-executes itself as
 *         grit launch --backend slurm [--max-restarts N] [$GRIT_LAUNCH_OPTS]
 *                     [--run grit-launch-$SLURM_JOB_ID, unless the options give --run]
 *                     [--srun-arg OPT ...] -- CMD ARGS...
 *       with GRIT_SPANK_SUPERVISED=1, so the sruns that grit launch starts pass through.
 *       srun's own node/task/placement options are dropped (grit launch places one rank
 *       per node on the healthy hosts); its other options go to every step.
 *   sbatch/salloc (allocator) and the batch step (remote): the option is exported to
 *       the job's tasks as GRIT_AUTO_RESUME=N, so each srun of the job is supervised.
 *
 * N: 0 off; 1 (or no value) on, with grit launch's restart limit (10, or --max-restarts in
 * GRIT_LAUNCH_OPTS), as HyperPod's --auto-resume=1; N in 2..1000 on with at most N
 * restarts.
 * A bad value is rejected with a message (the callback returns an error; srun/sbatch
 * print it and stop). The plugin never calls exit(), writes only through slurm_error /
 * slurm_info, and without the option srun is untouched.
 *
 * plugstack.conf:   optional /usr/lib/grit/spank_grit.so grit=/usr/local/bin/grit
 *   grit=PATH   the grit binary (default: "grit" from PATH)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(grit, 1);

#define ENV_CHOICE "GRIT_AUTO_RESUME"
#define ENV_MARK "GRIT_SPANK_SUPERVISED"
#define ENV_OPTS "GRIT_LAUNCH_OPTS"
#define MAX_ARGS 1024

static int auto_resume = -1; /* -1: not given on this command line */
static char grit_path[PATH_MAX] = "grit";

static int opt_cb(int val, const char *optarg, int remote);

/* registered in slurm_spank_init: a static spank_options[] table is not seen by
 * sbatch/salloc (allocator context) */
static struct spank_option auto_resume_opt = {
    "auto-resume", "N",
     "grit: on a node failure, drain the node and retry the step on a spare inside "
     "the allocation, resuming from the last checkpoint. 1 (or no value): on; 0: off; "
     "N > 1: on, at most N restarts. sbatch exports it to every srun of the job.",
     2, 0, opt_cb};

/* 0..1000 into *out (no value: 1); -1 otherwise. */
static int parse_n(const char *s, int *out)
{
    if (!s || !*s) {
        *out = 1;
        return 0;
    }
    if (*s < '0' || *s > '9') /* strtol would take blanks and a sign */
        return -1;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || !end || *end || v < 0 || v > 1000)
        return -1;
    *out = (int)v;
    return 0;
}

static int opt_cb(int val, const char *optarg, int remote)
{
    (void)val;
    (void)remote;
    int n;
    if (parse_n(optarg, &n) != 0) {
        slurm_error("grit: --auto-resume=%s: expected an integer 0..1000 (1 on, 0 off, N > 1 "
                    "on with at most N restarts)", optarg ? optarg : "");
        return ESPANK_BAD_ARG;
    }
    auto_resume = n;
    return ESPANK_SUCCESS;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    for (int i = 0; i < ac; i++) {
        if (!strncmp(av[i], "grit=", 5) && av[i][5] && strlen(av[i] + 5) < sizeof grit_path)
            snprintf(grit_path, sizeof grit_path, "%s", av[i] + 5);
        else
            slurm_error("grit: plugstack.conf: unknown argument '%s' (expected grit=PATH)",
                        av[i]);
    }
    if (spank_option_register(sp, &auto_resume_opt) != ESPANK_SUCCESS)
        slurm_error("grit: cannot register --auto-resume");
    return ESPANK_SUCCESS;
}

/* --- srun's command line ---------------------------------------------------------- */

/* srun short options that take a value (srun 22.05). */
static const char SHORT_WITH_ARG[] = "ABcCdDeFGiJLmMnNopqrSTtWwx";
/* srun long options that take no value unless written --opt=value. */
static const char *const LONG_FLAGS[] = {
    "contiguous", "disable-status", "exact", "exclusive", "help", "hold", "immediate",
    "kill-on-bad-exit", "label", "multi-prog", "no-allocate", "no-kill", "overcommit",
    "overlap", "oversubscribe", "preserve-env", "pty", "quiet", "quit-on-interrupt",
    "reboot", "spread-job", "test-only", "unbuffered", "usage", "verbose", "version",
    "whole", "x11", "auto-resume", "send-libs", "use-min-nodes", NULL};
/* srun options grit launch decides itself (dropped); short ones by letter. */
static const char *const LONG_DROP[] = {
    "nodes", "ntasks", "nodelist", "ntasks-per-node", "mpi", "distribution", "overlap",
    "kill-on-bad-exit", "auto-resume", "exclude", NULL};
static const char SHORT_DROP[] = "NnwmKx";

static int in_list(const char *const *l, const char *name, size_t len)
{
    for (; *l; l++)
        if (strlen(*l) == len && !strncmp(*l, name, len))
            return 1;
    return 0;
}

/* Reads /proc/self/cmdline into buf; fills argv (NULL-terminated). Returns argc or -1. */
static int read_cmdline(char *buf, size_t cap, char **argv, int max)
{
    FILE *f = fopen("/proc/self/cmdline", "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    int full = feof(f);
    fclose(f);
    if (!full || n == 0)
        return -1;
    buf[n] = '\0';
    int argc = 0;
    for (size_t i = 0; i < n && argc < max - 1; i += strlen(buf + i) + 1)
        argv[argc++] = buf + i;
    argv[argc] = NULL;
    return argc;
}

static int add(char **out, int *k, char *s)
{
    if (*k >= MAX_ARGS - 1)
        return -1;
    out[(*k)++] = s;
    return 0;
}

/* Builds grit launch's argv from srun's (argv[0] is srun). Returns 0, or -1 with a
 * message in err. Strings point into argv, opts (a writable copy of GRIT_LAUNCH_OPTS)
 * or nbuf. */
static int build_argv(int argc, char **argv, int restarts, char *opts, char *nbuf,
                      size_t ncap, char *rbuf, char **out, char *err, size_t ecap)
{
    int k = 0, i;
    char *srun_opts[MAX_ARGS];
    int ns = 0;
    for (i = 1; i < argc; i++) {
        char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[0] != '-' || !a[1])
            break; /* the command */
        int drop, takes_next = 0;
        if (a[1] == '-') {
            const char *name = a + 2, *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            drop = in_list(LONG_DROP, name, len);
            takes_next = !eq && !in_list(LONG_FLAGS, name, len);
        } else {
            drop = strchr(SHORT_DROP, a[1]) != NULL;
            takes_next = strchr(SHORT_WITH_ARG, a[1]) && !a[2];
        }
        if (takes_next && i + 1 >= argc) {
            snprintf(err, ecap, "srun option %s has no value", a);
            return -1;
        }
        if (!drop) {
            if (ns + 2 >= MAX_ARGS) {
                snprintf(err, ecap, "too many srun options");
                return -1;
            }
            srun_opts[ns++] = a;
            if (takes_next)
                srun_opts[ns++] = argv[i + 1];
        }
        i += takes_next;
    }
    if (i >= argc) {
        snprintf(err, ecap, "no command to run after srun's options");
        return -1;
    }
    snprintf(nbuf, ncap, "%d", restarts);
    if (add(out, &k, grit_path) || add(out, &k, "launch") || add(out, &k, "--backend") ||
        add(out, &k, "slurm"))
        goto full;
    if (restarts > 1 && (add(out, &k, "--max-restarts") || add(out, &k, nbuf)))
        goto full;
    int has_run = 0;
    for (char *sv = NULL, *w = opts ? strtok_r(opts, " \t\n", &sv) : NULL; w;
         w = strtok_r(NULL, " \t\n", &sv)) {
        has_run |= !strcmp(w, "--run");
        if (add(out, &k, w))
            goto full;
    }
    if (!has_run && (add(out, &k, "--run") || add(out, &k, rbuf)))
        goto full;
    for (int j = 0; j < ns; j++)
        if (add(out, &k, "--srun-arg") || add(out, &k, srun_opts[j]))
            goto full;
    if (add(out, &k, "--"))
        goto full;
    for (; i < argc; i++)
        if (add(out, &k, argv[i]))
            goto full;
    out[k] = NULL;
    return 0;
full:
    snprintf(err, ecap, "command line longer than %d words", MAX_ARGS);
    return -1;
}

/* srun, before the step exists: re-execute as grit launch. Returns only on error (then
 * srun reports it and stops) or when nothing is to be done. */
static int hand_over(int restarts)
{
    if (!getenv("SLURM_JOB_ID")) {
        /* srun goes on after a failed init_post_opt; say plainly what happens */
        slurm_error("grit: --auto-resume needs an allocation (run srun inside sbatch or "
                    "salloc: spare nodes come from it); this step runs unsupervised");
        return ESPANK_SUCCESS;
    }
    static char cmdline[256 * 1024], nbuf[16], rbuf[96];
    static char *sargv[MAX_ARGS], *gargv[MAX_ARGS];
    char err[200], *opts = NULL;
    int argc = read_cmdline(cmdline, sizeof cmdline, sargv, MAX_ARGS);
    if (argc < 1) {
        slurm_error("grit: --auto-resume: cannot read srun's command line");
        return ESPANK_ERROR;
    }
    const char *o = getenv(ENV_OPTS);
    if (o && !(opts = strdup(o))) {
        slurm_error("grit: --auto-resume: out of memory");
        return ESPANK_ERROR;
    }
    /* without --run in GRIT_LAUNCH_OPTS: one directory per job, the same after a requeue */
    snprintf(rbuf, sizeof rbuf, "grit-launch-%.60s", getenv("SLURM_JOB_ID"));
    if (build_argv(argc, sargv, restarts, opts, nbuf, sizeof nbuf, rbuf, gargv, err,
                   sizeof err)) {
        slurm_error("grit: --auto-resume: %s", err);
        free(opts);
        return ESPANK_ERROR;
    }
    setenv(ENV_MARK, "1", 1);
    slurm_verbose("grit: --auto-resume=%d: handing the step to %s launch", restarts, grit_path);
    /* srun blocks SIGTERM, SIGINT and others here, and a blocked mask survives exec: grit
     * launch would never see Slurm's SIGTERM (preemption, scancel) nor Ctrl-C */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execvp(gargv[0], gargv);
    int e = errno;
    unsetenv(ENV_MARK);
    slurm_error("grit: --auto-resume: cannot run %s: %s (set grit=PATH in plugstack.conf)",
                gargv[0], strerror(e));
    free(opts);
    return ESPANK_ERROR;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    int n = auto_resume;
    if (spank_context() == S_CTX_LOCAL) {
        if (getenv(ENV_MARK))
            return ESPANK_SUCCESS; /* a step grit launch started: pass through */
        if (n < 0) {
            const char *e = getenv(ENV_CHOICE); /* sbatch --auto-resume */
            if (!e || parse_n(e, &n) != 0)
                return ESPANK_SUCCESS;
        }
        return n > 0 ? hand_over(n) : ESPANK_SUCCESS;
    }
    (void)sp;
    return ESPANK_SUCCESS;
}

/* In the job's tasks (the batch script included): GRIT_AUTO_RESUME=N. */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (auto_resume < 0 || spank_remote(sp) != 1)
        return ESPANK_SUCCESS;
    char v[16];
    snprintf(v, sizeof v, "%d", auto_resume);
    if (spank_setenv(sp, ENV_CHOICE, v, 1) != ESPANK_SUCCESS)
        slurm_error("grit: cannot set %s in the task's environment", ENV_CHOICE);
    return ESPANK_SUCCESS;
}
