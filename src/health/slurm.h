/*
 * slurm.h - Slurm HealthCheckProgram behaviour (NHC semantics) for a report.
 *
 *   unhealthy (exit 1): scontrol update NodeName=N State=DRAIN Reason="grit: <check>"
 *                       (<check> the first failing check's name)
 *   healthy   (exit 0): scontrol show node N; if its Reason starts with
 *                       "grit:" (grit drained it), scontrol update NodeName=N
 *                       State=RESUME; a node drained by anyone else is left alone
 *   could not run (2):  nothing (a broken check is not a broken node)
 *
 * N is $SLURMD_NODENAME, else the short host name. scontrol is $GRIT_SCONTROL
 * when set (tests point it at a fake that records its arguments), else
 * "scontrol" from PATH. scontrol is run directly (fork/exec, no shell).
 */
#ifndef GRIT_HEALTH_SLURM_H
#define GRIT_HEALTH_SLURM_H

#include <stddef.h>

#include "core/error.h"
#include "health/health.h"

typedef enum health_slurm_action {
    HEALTH_SLURM_NONE = 0,
    HEALTH_SLURM_DRAINED = 1,
    HEALTH_SLURM_RESUMED = 2
} health_slurm_action;

typedef struct health_slurm_result {
    health_slurm_action action;
    char node[128];
    char detail[320]; /* what was done or why nothing was */
} health_slurm_result;

/* The node name as described above. */
void health_slurm_node(char *out, size_t cap);

/* Applies the rules above. GRIT_EIO (with context) when scontrol could not
 * be run or exited non-zero; res says what was attempted. */
grit_err health_slurm_apply(const health_report *r, health_slurm_result *res);

#endif
