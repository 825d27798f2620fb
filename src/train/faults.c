/* faults.c - in-process fault injection (see faults.h). */
#include "train/faults.h"

#include <fcntl.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/fault.h"

grit_err faults_init(faults *fs, int rank, const char *node)
{
    memset(fs, 0, sizeof *fs);
    const char *spec = fault_spec(FAULT_TRAIN);
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", spec);
    snprintf(fs->down, sizeof fs->down, "%s", fault_spec(FAULT_NODE_DOWN));
    for (char *s1 = NULL, *item = strtok_r(buf, ",", &s1); item; item = strtok_r(NULL, ",", &s1)) {
        fault f = {.step = -1, .factor = 1.0};
        int mine = 1;
        char *s2 = NULL, *kind = strtok_r(item, ":", &s2);
        if (!kind || (strcmp(kind, "kill") && strcmp(kind, "hang") && strcmp(kind, "slow") &&
                      strcmp(kind, "nan") && strcmp(kind, "spike") && strcmp(kind, "val_spike")))
            return grit_errf(GRIT_EINVAL, "GRIT_FAULTS: unknown fault '%s' (expected kill, hang, "
                                          "slow, nan, spike or val_spike)", kind ? kind : "");
        snprintf(f.kind, sizeof f.kind, "%s", kind);
        for (char *kv; (kv = strtok_r(NULL, ":", &s2));) {
            char *eq = strchr(kv, '=');
            if (!eq)
                return grit_errf(GRIT_EINVAL, "GRIT_FAULTS: '%s' is not key=value", kv);
            *eq = '\0';
            const char *v = eq + 1;
            if (!strcmp(kv, "step"))
                f.step = atol(v);
            else if (!strcmp(kv, "factor"))
                f.factor = atof(v);
            else if (!strcmp(kv, "rank"))
                mine &= atoi(v) == rank;
            else if (!strcmp(kv, "node")) {
                mine &= node && !strcmp(v, node);
                snprintf(f.node, sizeof f.node, "%s", v);
            }
            else
                return grit_errf(GRIT_EINVAL, "GRIT_FAULTS: unknown key '%s'", kv);
        }
        if (mine && fs->n < FAULTS_MAX)
            fs->f[fs->n++] = f;
    }
    return GRIT_OK;
}

bool faults_nan_at(const faults *fs, long step)
{
    for (int i = 0; i < fs->n; i++)
        if (!strcmp(fs->f[i].kind, "nan") && fs->f[i].step == step)
            return true;
    return false;
}

double faults_spike(const faults *fs, const char *kind, long step)
{
    for (int i = 0; i < fs->n; i++)
        if (!strcmp(fs->f[i].kind, kind) && fs->f[i].step == step)
            return 100.0;
    return 1.0;
}

void faults_slow_compute(const faults *fs, double compute_time)
{
    for (int i = 0; i < fs->n; i++) {
        const fault *f = &fs->f[i];
        if (!strcmp(f->kind, "slow") && f->factor > 1.0) {
            double extra = (f->factor - 1.0) * compute_time;
            struct timespec ts = {(time_t)extra, (long)((extra - (double)(time_t)extra) * 1e9)};
            nanosleep(&ts, NULL);
        }
    }
}

/* The node is going down: its marker (pattern with {node}) exists from now on. */
static void mark_down(const char *pattern, const char *node)
{
    char path[1200] = "";
    const char *at = strstr(pattern, "{node}");
    if (at)
        snprintf(path, sizeof path, "%.*s%s%s", (int)(at - pattern), pattern, node, at + 6);
    else
        snprintf(path, sizeof path, "%s", pattern);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0)
        close(fd);
    else
        fprintf(stderr, "grit: fault injection: cannot create %s: %s\n", path, strerror(errno));
}

void faults_after_step(const faults *fs, hb_client *hb, long step, double step_time)
{
    (void)step_time;
    for (int i = 0; i < fs->n; i++) {
        const fault *f = &fs->f[i];
        if (f->step == step && (!strcmp(f->kind, "kill") || !strcmp(f->kind, "hang"))) {
            char kind[32];
            snprintf(kind, sizeof kind, "fault_%s", f->kind);
            hb_client_event(hb, kind, step, "injected");
            fprintf(stderr, "grit: fault injection: %s after step %ld\n", f->kind, step);
            fflush(stderr);
            if (!strcmp(f->kind, "kill") && f->node[0] && fs->down[0])
                mark_down(fs->down, f->node);
            raise(!strcmp(f->kind, "kill") ? SIGKILL : SIGSTOP);
        }
    }
}
