/*
 * sup_inject.c - grit launch --inject: faults for tests and demos, launched into the
 * processes they break and nowhere else.
 *
 * The spec is parsed once, at start. From then on it is used only to set the
 * environment of processes the supervisor starts, the way real hardware is broken
 * whoever looks at it:
 *   - the job (each attempt): trainer faults kill/hang/slow/nan/spike/val_spike as GRIT_FAULTS,
 *     ckpt_crash as GRIT_CKPT_FAULT, and GRIT_FAULT_NODE_DOWN, the marker a node-wide
 *     kill (kill:node=X) creates for node X under RUN/fault-state/ (core/fault.h);
 *   - a health check "on" node X: GRIT_HEALTH_FAULT=gemm_bitflip when
 *     health_fail:node=X, and GRIT_FAULT_NODE_DOWN naming X's marker, so the check
 *     fails once X was killed;
 *   - the first periodic health check under periodic_health_fail: GRIT_HEALTH_FAULT
 *     (a node that goes bad for a while).
 * Detection and diagnosis never read this module's state: they see exits,
 * heartbeats and health-check verdicts. The job's GRIT_FAULTS and GRIT_CKPT_FAULT
 * are cleared when this attempt injects none; health checks inherit the supervisor's
 * environment otherwise (GRIT_HEALTH_FAULT=... grit launch: a broken machine).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fault.h"
#include "supervise/sup_internal.h"

#define INJ_MAX 64

struct sup_inject {
    struct item {
        char kind[32], node[64], phase[64], spec[256]; /* spec: the trainer's form */
        int attempt;
    } it[INJ_MAX];
    int n;
    char markers[1100]; /* RUN/fault-state, "" when no node-wide kill is injected */
    int periodic_used;
};

static const char *const kinds[] = {"kill",       "hang",        "slow",
                                    "nan",        "spike",       "val_spike",
                                    "ckpt_crash", "health_fail", "periodic_health_fail",
                                    "disk_full",  NULL};

grit_err sup_inject_open(const char *spec, const char *run_dir, sup_inject **out)
{
    *out = NULL;
    if (!spec || !*spec)
        return GRIT_OK;
    sup_inject *in = calloc(1, sizeof *in);
    if (!in)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *sv = NULL, *tok = strtok_r(buf, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
        if (in->n == INJ_MAX) {
            free(in);
            return grit_errf(GRIT_EINVAL, "--inject: more than %d faults", INJ_MAX);
        }
        struct item *t = &in->it[in->n];
        char item[256];
        snprintf(item, sizeof item, "%s", tok);
        char *sv2 = NULL, *kind = strtok_r(item, ":", &sv2);
        int known = 0;
        for (int k = 0; kind && kinds[k]; k++)
            known |= !strcmp(kind, kinds[k]);
        if (!known) {
            grit_err rc = grit_errf(GRIT_EINVAL, "--inject: unknown fault '%s' in '%s' (see "
                                                 "grit launch --help)", kind ? kind : "", tok);
            free(in);
            return rc;
        }
        snprintf(t->kind, sizeof t->kind, "%s", kind);
        snprintf(t->spec, sizeof t->spec, "%s", kind);
        for (char *kv; (kv = strtok_r(NULL, ":", &sv2));) {
            if (!strncmp(kv, "attempt=", 8)) {
                t->attempt = atoi(kv + 8);
                continue;
            }
            if (!strncmp(kv, "node=", 5))
                snprintf(t->node, sizeof t->node, "%s", kv + 5);
            if (!strncmp(kv, "phase=", 6))
                snprintf(t->phase, sizeof t->phase, "%s", kv + 6);
            size_t l = strlen(t->spec);
            snprintf(t->spec + l, sizeof t->spec - l, ":%s", kv);
        }
        if (!strcmp(kind, "kill") && t->node[0] && !in->markers[0]) {
            snprintf(in->markers, sizeof in->markers, "%s/fault-state", run_dir);
            if (mkdir(in->markers, 0755) != 0 && errno != EEXIST) {
                grit_err rc = grit_errf(GRIT_EIO, "%s: %s", in->markers, strerror(errno));
                free(in);
                return rc;
            }
        }
        in->n++;
    }
    *out = in;
    return GRIT_OK;
}

void sup_inject_close(sup_inject *in)
{
    free(in);
}

static int is_trainer_fault(const char *kind)
{
    return !strcmp(kind, "kill") || !strcmp(kind, "hang") || !strcmp(kind, "slow") ||
           !strcmp(kind, "nan") || !strcmp(kind, "spike") || !strcmp(kind, "val_spike");
}

void sup_inject_job_faults(const sup_inject *in, int attempt, char *trainer, size_t cap)
{
    trainer[0] = '\0';
    for (int i = 0; in && i < in->n; i++)
        if (in->it[i].attempt == attempt && is_trainer_fault(in->it[i].kind)) {
            size_t l = strlen(trainer);
            snprintf(trainer + l, cap - l, "%s%s", l ? "," : "", in->it[i].spec);
        }
}

void sup_inject_export_job(const sup_inject *in, int attempt)
{
    char trainer[2048], ckpt[128] = "";
    sup_inject_job_faults(in, attempt, trainer, sizeof trainer);
    for (int i = 0; in && i < in->n; i++)
        if (in->it[i].attempt == attempt && !strcmp(in->it[i].kind, "ckpt_crash"))
            snprintf(ckpt, sizeof ckpt, "crash:%s", in->it[i].phase[0] ? in->it[i].phase
                                                                       : "manifest");
        else if (attempt >= in->it[i].attempt && !strcmp(in->it[i].kind, "disk_full")) {
            /* the checkpoint store fails every put from the N-th with ENOSPC, on this
             * attempt and every later one: the disk stays full */
            const char *put = strstr(in->it[i].spec, ":put=");
            snprintf(ckpt, sizeof ckpt, "enospc_from:%d", put ? atoi(put + 5) : 1);
        }
    const char *down = fault_points[FAULT_NODE_DOWN].env;
    if (trainer[0])
        setenv(fault_points[FAULT_TRAIN].env, trainer, 1);
    else
        unsetenv(fault_points[FAULT_TRAIN].env);
    if (ckpt[0])
        setenv(fault_points[FAULT_CKPT].env, ckpt, 1);
    else
        unsetenv(fault_points[FAULT_CKPT].env);
    if (in && in->markers[0]) {
        char pattern[1200];
        snprintf(pattern, sizeof pattern, "%s/{node}.down", in->markers);
        setenv(down, pattern, 1);
    }
}

const char *sup_inject_node_fault(const sup_inject *in, const char *node)
{
    for (int i = 0; in && node && i < in->n; i++)
        if (!strcmp(in->it[i].kind, "health_fail") && !strcmp(in->it[i].node, node))
            return "gemm_bitflip"; /* silent data corruption in the node's GEMM */
    return NULL;
}

int sup_inject_node_env(const sup_inject *in, const char *node)
{
    return sup_inject_node_fault(in, node) != NULL || (in && in->markers[0] && node);
}

void sup_inject_export_health(sup_inject *in, const char *node, int periodic)
{
    const char *fault = sup_inject_node_fault(in, node);
    if (periodic && in && !in->periodic_used)
        for (int i = 0; i < in->n; i++)
            if (!strcmp(in->it[i].kind, "periodic_health_fail"))
                fault = "gemm_bitflip";
    if (fault)
        setenv(fault_points[FAULT_HEALTH].env, fault, 1);
    if (in && in->markers[0] && node) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s.down", in->markers, node);
        setenv(fault_points[FAULT_NODE_DOWN].env, path, 1);
    }
}

void sup_inject_periodic_started(sup_inject *in)
{
    for (int i = 0; in && i < in->n; i++)
        if (!strcmp(in->it[i].kind, "periodic_health_fail"))
            in->periodic_used = 1;
}
