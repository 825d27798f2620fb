/*
 * sup_stop.c - grit launch on SIGTERM/SIGINT (Slurm preemption, Ctrl-C): a graceful
 * stop of the job, a summary and an event, then exit 128 + the signal.
 *
 *   LAUNCHING | RUNNING --[sup_stop: SIGTERM/SIGINT]--> STOPPED (final)
 *
 * The job's ranks get SIGTERM directly (their PIDs from the heartbeats; a job whose
 * ranks are remote or unknown: its process group, so the launcher forwards it). A grit
 * trainer then stops every rank after the same step and saves a checkpoint when one can
 * finish within GRIT_STOP_GRACE, which the supervisor sets to --stop-grace less 2 s
 * (train.h). The supervisor waits --stop-grace seconds for the job to exit, then kills
 * it as any stop does (SIGKILL to the group and every rank). A second signal to the
 * supervisor ends it at once (core/stopsig.h); its job follows by the parent-death
 * signal. The trainer's "stopped" worker event says whether the step was saved.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/progress.h"
#include "core/stopsig.h"
#include "supervise/sup_internal.h"

int sup_stop_pending(void)
{
    return stopsig_pending();
}

/* The job's last words while it stops: its "stopped" event (step, saved or not). */
static void drain_beats(sup *s, long *step, char *saved, size_t cap)
{
    hb_msg m;
    for (int k = 0; k < 4096 && hb_server_poll(&s->hb, &m, NULL, NULL); k++)
        if (m.event && !strcmp(m.kind, "stopped") && m.rank == 0) {
            *step = m.step;
            snprintf(saved, cap, "%s", m.detail);
        }
}

int sup_stop(sup *s)
{
    int sig = stopsig_pending();
    const char *name = sig == SIGINT ? "SIGINT" : "SIGTERM";
    double t0 = now_seconds();
    sup_event(s, "stop_requested", json_pack("{s:s,s:f}", "signal", name, "grace_s",
                                             s->o->stop_grace));
    sup_say(s, "%s: stopping the job gracefully (up to %.0f s; a second signal stops at once)",
            name, s->o->stop_grace);
    long step = -1;
    char saved[64] = "";
    int status = -1, exited = 0;
    if (s->job > 0) {
        int direct = 0;
        for (int r = 0; !s->be->remote_ranks && r < s->nranks; r++)
            if (s->rk[r].pid > 0 && kill((pid_t)s->rk[r].pid, SIGTERM) == 0)
                direct++;
        if (!direct) /* nothing known to signal one by one: the launcher forwards it */
            kill(-s->job, SIGTERM);
        while (now_seconds() - t0 < s->o->stop_grace) {
            drain_beats(s, &step, saved, sizeof saved);
            if (waitpid(s->job, &status, WNOHANG) == s->job) {
                exited = 1;
                s->job = 0;
                break;
            }
            usleep(20000);
        }
        drain_beats(s, &step, saved, sizeof saved);
        if (!exited) {
            sup_say(s, "the job did not stop within %.0f s: killing it", s->o->stop_grace);
            status = sup_stop_job(s);
        } else if (s->be->job_stopped)
            s->be->job_stopped(s->o);
    }
    sup_set_state(s, S_STOPPED);
    sup_event(s, "stopped", json_pack("{s:s,s:i,s:b,s:I,s:s,s:f}", "signal", name, "status",
                                      status, "graceful", exited, "step",
                                      (json_int_t)(step >= 0 ? step : s->max_step),
                                      "checkpoint", saved[0] ? saved : "unknown",
                                      "seconds", now_seconds() - t0));
    sup_say(s, "stopped by %s after step %ld (%s, checkpoint %s)", name,
            step >= 0 ? step : s->max_step, exited ? "the job stopped by itself" : "killed",
            saved[0] ? saved : "unknown");
    sup_summary(s, 0);
    return 128 + sig;
}
