/* test_inject.c - grit launch --inject (supervise/sup_inject.c): the spec is parsed
 * once (an unknown fault is an error naming it); each attempt's job gets only its
 * own trainer and checkpoint faults (the rest cleared); a node-wide kill gives the
 * job a marker pattern and that node's health checks their marker, health_fail a
 * GRIT_HEALTH_FAULT for that node only, and periodic_health_fail one periodic check. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../check.h"
#include "supervise/sup_internal.h"

static const char *env(const char *k)
{
    const char *v = getenv(k);
    return v ? v : "(unset)";
}

int main(void)
{
    char dir[] = "/tmp/grit-inject-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    sup_inject *in = NULL;
    CHECK_INT(sup_inject_open("kill:node=n1:step=6,bogus:step=1", dir, &in), GRIT_EINVAL);
    CHECK_ERRMSG("unknown fault 'bogus'");
    CHECK(in == NULL);

    CHECK_INT(sup_inject_open(NULL, dir, &in), GRIT_OK);
    CHECK(in == NULL);
    setenv("GRIT_FAULTS", "stale", 1);
    sup_inject_export_job(in, 0); /* nothing injected: the job gets no faults */
    CHECK(!strcmp(env("GRIT_FAULTS"), "(unset)"));
    CHECK(sup_inject_node_fault(in, "n0") == NULL);

    CHECK_INT(sup_inject_open("kill:node=n1:step=6,hang:rank=0:step=14:attempt=1,"
                              "ckpt_crash:phase=rename:attempt=1,health_fail:node=n0,"
                              "periodic_health_fail", dir, &in), GRIT_OK);
    char trainer[256];
    sup_inject_job_faults(in, 0, trainer, sizeof trainer);
    CHECK(!strcmp(trainer, "kill:node=n1:step=6"));
    sup_inject_export_job(in, 0);
    CHECK(!strcmp(env("GRIT_FAULTS"), "kill:node=n1:step=6"));
    CHECK(!strcmp(env("GRIT_CKPT_FAULT"), "(unset)"));
    char pattern[600];
    snprintf(pattern, sizeof pattern, "%s/fault-state/{node}.down", dir);
    CHECK(!strcmp(env("GRIT_FAULT_NODE_DOWN"), pattern));
    sup_inject_export_job(in, 1);
    CHECK(!strcmp(env("GRIT_FAULTS"), "hang:rank=0:step=14"));
    CHECK(!strcmp(env("GRIT_CKPT_FAULT"), "crash:rename"));

    /* health checks: the node's own faults, nothing of the others' */
    CHECK(!strcmp(sup_inject_node_fault(in, "n0"), "gemm_bitflip"));
    CHECK(sup_inject_node_fault(in, "n1") == NULL);
    unsetenv("GRIT_HEALTH_FAULT");
    sup_inject_export_health(in, "n1", 0);
    CHECK(!strcmp(env("GRIT_HEALTH_FAULT"), "(unset)"));
    char marker[600];
    snprintf(marker, sizeof marker, "%s/fault-state/n1.down", dir);
    CHECK(!strcmp(env("GRIT_FAULT_NODE_DOWN"), marker));
    sup_inject_export_health(in, "n0", 0);
    CHECK(!strcmp(env("GRIT_HEALTH_FAULT"), "gemm_bitflip"));
    unsetenv("GRIT_HEALTH_FAULT");
    sup_inject_export_health(in, NULL, 1); /* the first periodic check goes bad */
    CHECK(!strcmp(env("GRIT_HEALTH_FAULT"), "gemm_bitflip"));
    sup_inject_periodic_started(in);
    unsetenv("GRIT_HEALTH_FAULT");
    sup_inject_export_health(in, NULL, 1); /* and only that one */
    CHECK(!strcmp(env("GRIT_HEALTH_FAULT"), "(unset)"));
    struct stat st;
    CHECK(stat(marker, &st) != 0); /* nobody is down until the kill fires */
    sup_inject_close(in);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return check_failures != 0;
}
