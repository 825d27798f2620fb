/* test_slurm.c - drain on failure, resume only a node grit drained, with a fake
 * scontrol (a shell script that logs its arguments and prints a canned node). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../check.h"
#include "core/fsutil.h"
#include "health/health.h"
#include "health/slurm.h"

static char dir[] = "/tmp/grit-test-slurm-XXXXXX";
static char logp[128], reasonp[128];

static void set_reason(const char *reason)
{
    FILE *f = fopen(reasonp, "w");
    fputs(reason, f);
    fclose(f);
}

static char *read_log(void)
{
    char *s = NULL;
    size_t n;
    if (fs_read_all(logp, &s, &n) != GRIT_OK)
        return strdup("");
    return s;
}

int main(void)
{
    CHECK(mkdtemp(dir) != NULL);
    char script[128];
    snprintf(script, sizeof script, "%s/scontrol", dir);
    snprintf(logp, sizeof logp, "%s/log", dir);
    snprintf(reasonp, sizeof reasonp, "%s/reason", dir);
    FILE *f = fopen(script, "w");
    fprintf(f, "#!/bin/sh\nprintf '%%s|' \"$@\" >> %s\necho >> %s\n"
               "if [ \"$1\" = show ]; then\n"
               "  echo \"NodeName=$3 Arch=x86_64 CoresPerSocket=1\"\n"
               "  echo \"   State=IDLE+DRAIN ThreadsPerCore=1\"\n"
               "  echo \"   Reason=$(cat %s) [root@2026-01-01T00:00:00]\"\nfi\n",
            logp, logp, reasonp);
    fclose(f);
    chmod(script, 0755);
    setenv("GRIT_SCONTROL", script, 1);
    setenv("SLURMD_NODENAME", "node07", 1);

    health_report r;
    health_report_init(&r, HEALTH_QUICK);
    health_result *x = health_add(&r, "compute.gemm_kat");
    health_set(x, HEALTH_FAIL, "bad");
    health_slurm_result sr;
    CHECK_INT(health_slurm_apply(&r, &sr), GRIT_OK);
    CHECK_INT(sr.action, HEALTH_SLURM_DRAINED);
    char *log = read_log();
    CHECK_STR_HAS(log, "update|NodeName=node07|State=DRAIN|Reason=grit: compute.gemm_kat|");
    free(log);

    /* Healthy again, drained by grit: resume. */
    unlink(logp);
    set_reason("grit: compute.gemm_kat");
    health_set(x, HEALTH_PASS, "ok");
    CHECK_INT(health_slurm_apply(&r, &sr), GRIT_OK);
    CHECK_INT(sr.action, HEALTH_SLURM_RESUMED);
    log = read_log();
    CHECK_STR_HAS(log, "show|node|node07|");
    CHECK_STR_HAS(log, "update|NodeName=node07|State=RESUME|");
    free(log);

    /* Healthy, drained by an admin: leave it. */
    unlink(logp);
    set_reason("bad DIMM, ticket 123");
    CHECK_INT(health_slurm_apply(&r, &sr), GRIT_OK);
    CHECK_INT(sr.action, HEALTH_SLURM_NONE);
    CHECK_STR_HAS(sr.detail, "not drained by grit");
    log = read_log();
    CHECK(strstr(log, "RESUME") == NULL);
    free(log);

    /* Could not run: no action at all. */
    unlink(logp);
    health_set(x, HEALTH_ERROR, "no memory");
    CHECK_INT(health_slurm_apply(&r, &sr), GRIT_OK);
    CHECK_INT(sr.action, HEALTH_SLURM_NONE);
    CHECK(access(logp, F_OK) != 0);

    /* scontrol missing: an error, not a crash. */
    health_set(x, HEALTH_FAIL, "bad");
    setenv("GRIT_SCONTROL", "/nonexistent/scontrol", 1);
    CHECK_INT(health_slurm_apply(&r, &sr), GRIT_EIO);
    CHECK_STR_HAS(grit_errmsg(), "/nonexistent/scontrol");

    unsetenv("SLURMD_NODENAME");
    char node[128];
    health_slurm_node(node, sizeof node);
    CHECK(node[0] != '\0' && strchr(node, '.') == NULL);

    unlink(script);
    unlink(reasonp);
    unlink(logp);
    CHECK_INT(rmdir(dir), 0);
    CHECK_DONE();
}
