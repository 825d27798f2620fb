/* backend_local.c - the local backend: every rank on this machine under mpirun
 * (see backend.h). Node slots are virtual names; health checks run here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervise/backend.h"

static int local_job_argv(const sup_opts *o, const char *nodes, int count, int rpn, int attempt,
                          char **argv, char *buf, size_t cap)
{
    (void)nodes;
    (void)attempt;
    int n = 0, k = 0;
    while (o->cmd[n])
        n++;
    if (n + 7 > BACKEND_ARGV_MAX || cap < 16)
        return -1;
    snprintf(buf, cap, "%d", count * rpn);
    argv[k++] = "mpirun";
    argv[k++] = "--oversubscribe";
    argv[k++] = "--bind-to";
    argv[k++] = "none";
    argv[k++] = "-np";
    argv[k++] = buf;
    for (int i = 0; i < n; i++)
        argv[k++] = o->cmd[i];
    argv[k] = NULL;
    return 0;
}

/* mpirun's "process rank N ... exited on signal" line */
static int local_failed_rank(const char *log)
{
    const char *p = strstr(log, "process rank ");
    return p ? atoi(p + 13) : -1;
}

const sup_backend sup_backend_local = {
    .name = "local",
    .job_argv = local_job_argv,
    .failed_rank = local_failed_rank,
};

const sup_backend *sup_backend_find(const char *name)
{
    if (!name || !strcmp(name, "local"))
        return &sup_backend_local;
    if (!strcmp(name, "slurm"))
        return &sup_backend_slurm;
    return NULL;
}
