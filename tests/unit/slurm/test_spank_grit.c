/* test_spank_grit.c - the SPANK plugin's own logic (value parsing, srun's command line
 * turned into grit launch's), compiled in with stand-ins for the functions srun provides.
 * Where slurm/spank.h is missing (no plugin is built) the test says so and passes. */
#if defined(__has_include)
#if __has_include(<slurm/spank.h>)
#define HAVE_SPANK 1
#endif
#endif

#ifndef HAVE_SPANK
#include <stdio.h>
int main(void)
{
    printf("skipped: no slurm/spank.h, so no SPANK plugin\n");
    return 0;
}
#else
#include <stdarg.h>

#include "../../../plugins/slurm/spank_grit.c"
#include "../check.h"

/* stand-ins for srun's side */
static char last_error[512];
void slurm_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
}
void slurm_verbose(const char *fmt, ...)
{
    (void)fmt;
}
spank_err_t spank_option_register(spank_t sp, struct spank_option *opt)
{
    (void)sp;
    (void)opt;
    return ESPANK_SUCCESS;
}
spank_context_t spank_context(void)
{
    return S_CTX_LOCAL;
}
int spank_remote(spank_t sp)
{
    (void)sp;
    return 0;
}
spank_err_t spank_setenv(spank_t sp, const char *var, const char *val, int overwrite)
{
    (void)sp;
    (void)var;
    (void)val;
    (void)overwrite;
    return ESPANK_SUCCESS;
}

static void join(char **v, char *out, size_t cap)
{
    out[0] = '\0';
    for (int i = 0; v[i]; i++) {
        size_t l = strlen(out);
        snprintf(out + l, cap - l, "%s%s", i ? " " : "", v[i]);
    }
}

/* srun's argv (space separated) -> grit launch's, joined; or "ERR: message" */
static const char *convert(const char *srun, int restarts, const char *opts)
{
    static char buf[4096], joined[4096], optbuf[512], nbuf[16], err[200];
    static char *argv[64], *out[MAX_ARGS];
    snprintf(buf, sizeof buf, "%s", srun);
    int argc = 0;
    for (char *sv = NULL, *w = strtok_r(buf, " ", &sv); w; w = strtok_r(NULL, " ", &sv))
        argv[argc++] = w;
    argv[argc] = NULL;
    snprintf(optbuf, sizeof optbuf, "%s", opts ? opts : "");
    if (build_argv(argc, argv, restarts, opts ? optbuf : NULL, nbuf, sizeof nbuf,
                   "grit-launch-7", out, err, sizeof err)) {
        snprintf(joined, sizeof joined, "ERR: %s", err);
        return joined;
    }
    join(out, joined, sizeof joined);
    return joined;
}

int main(void)
{
    int n = -1;
    CHECK_INT(parse_n(NULL, &n), 0);
    CHECK_INT(n, 1); /* --auto-resume alone: on */
    CHECK_INT(parse_n("0", &n), 0);
    CHECK_INT(n, 0);
    CHECK_INT(parse_n("1000", &n), 0);
    CHECK_INT(n, 1000);
    const char *bad[] = {"abc", "-1", "+2", "1001", "2x", " 3", "99999999999999999999", NULL};
    for (int i = 0; bad[i]; i++)
        CHECK_INT(parse_n(bad[i], &n), -1);
    CHECK_INT(opt_cb(0, "x", 0), ESPANK_BAD_ARG);
    CHECK_STR_HAS(last_error, "--auto-resume=x: expected an integer 0..1000");
    CHECK_INT(opt_cb(0, "3", 0), ESPANK_SUCCESS);
    CHECK_INT(auto_resume, 3);

    grit_path[0] = '\0';
    snprintf(grit_path, sizeof grit_path, "/opt/grit");
    /* placement options are dropped, others become --srun-arg, the command is kept whole */
    CHECK(!strcmp(convert("srun -N 3 --ntasks=3 -w n[1-3] --time=5 -J name --auto-resume=1 "
                          "grit train c.json --run-dir r -N 9",
                          1, "--run /r --spares 1"),
                  "/opt/grit launch --backend slurm --run /r --spares 1 --srun-arg --time=5 "
                  "--srun-arg -J --srun-arg name -- grit train c.json --run-dir r -N 9"));
    /* N > 1 sets the restart limit; no --run in the options: one directory per job */
    CHECK(!strcmp(convert("srun --label --mpi pmix -K --overlap cmd", 4, NULL),
                  "/opt/grit launch --backend slurm --max-restarts 4 --run grit-launch-7 "
                  "--srun-arg --label -- cmd"));
    /* "--" ends srun's options; a long option without "=" takes the next word */
    CHECK(!strcmp(convert("srun --partition debug -- -weird-cmd", 1, ""),
                  "/opt/grit launch --backend slurm --run grit-launch-7 --srun-arg --partition "
                  "--srun-arg debug -- -weird-cmd"));
    CHECK_STR_HAS(convert("srun -N 2", 1, NULL), "ERR: no command to run");
    CHECK_STR_HAS(convert("srun -N", 1, NULL), "ERR: srun option -N has no value");
    CHECK_DONE();
}
#endif
