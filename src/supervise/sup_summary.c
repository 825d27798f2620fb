/*
 * sup_summary.c - the end of a supervised job: the incident table (detection and
 * recovery times, steps lost), restarts, cordoned nodes, wall time and goodput.
 * Every incident of the run is a row (the table grows; sup_internal.h), those of earlier
 * supervisors on the same run directory included (sup_incident.c's ledger); wall time
 * runs from the run's first launch, so goodput counts the time a supervisor was down.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fsutil.h"
#include "core/progress.h"
#include "supervise/sup_internal.h"

static double productive_seconds(const char *run_dir)
{
    char path[1200], *text = NULL;
    snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
    if (fs_read_all(path, &text, NULL) != GRIT_OK)
        return -1;
    double sum = 0;
    for (char *p = text; (p = strstr(p, "\"step_time_s\":")); p++)
        sum += atof(p + 14);
    free(text);
    return sum;
}

void sup_summary(sup *s, int ok)
{
    double wall = wall_seconds() - s->first_launch_ts;
    double prod = productive_seconds(s->o->run_dir);
    FILE *f = stderr;
    fprintf(f, "\n  %-10s %-8s %-6s %-12s %-12s %-10s %s\n", "incident", "node", "step",
            "detect (s)", "recover (s)", "steps lost", "detail");
    for (int i = 0; i < s->ninc; i++) {
        incident *in = &s->inc[i];
        char det[16] = "-", rec[16] = "-", lost[16] = "-";
        if (in->fault_ts > 0)
            snprintf(det, sizeof det, "%.2f", in->detect_ts - in->fault_ts);
        if (in->recovered_ts > 0) {
            snprintf(rec, sizeof rec, "%.2f",
                     in->recovered_ts - (in->fault_ts > 0 ? in->fault_ts : in->detect_ts));
            snprintf(lost, sizeof lost, "%ld", in->step_seen - in->resumed_at);
        }
        fprintf(f, "  %-10s %-8s %-6ld %-12s %-12s %-10s %s%s%s\n", sup_fail_name(in->kind),
                in->node[0] ? in->node : "-", in->step_seen, det, rec, lost, in->detail,
                in->health[0] ? "; health check: " : "", in->health);
    }
    if (!s->ninc)
        fprintf(f, "  (no incidents)\n");
    fprintf(f, "\n  %-20s %s\n", "result", ok ? "DONE" : sup_state_name(s->state));
    if (!ok && s->end_reason[0])
        fprintf(f, "  %-20s %s\n", "reason", s->end_reason);
    fprintf(f, "  %-20s %d\n", "restarts", s->restarts);
    fprintf(f, "  %-20s ", "cordoned"); /* every one of them, however many */
    int nc = 0;
    for (int i = 0; i < s->cl.count; i++)
        if (s->cl.n[i].state == NODE_CORDONED)
            fprintf(f, "%s%s (%s)", nc++ ? ", " : "", s->cl.n[i].name, s->cl.n[i].reason);
    fprintf(f, "%s\n", nc ? "" : "none");
    if (s->nquar) { /* sup_strikes.c: out for the rest of the run */
        fprintf(f, "  %-20s ", "quarantined");
        for (int i = 0; i < s->nquar; i++)
            fprintf(f, "%s%s (%s)", i ? ", " : "", s->quar[i].node, s->quar[i].why);
        fprintf(f, "\n");
    }
    if (s->nprov) /* sup_provision.c */
        fprintf(f, "  %-20s %d by --on-no-spare (events spare_requested, spare_provided)\n",
                "nodes asked for", s->nprov);
    int ck_failed, ck_rejected;
    sup_ckpt_counts(s, &ck_failed, &ck_rejected);
    fprintf(f, "  %-20s %d saves failed, %d rejected at resume (an older one loaded)\n",
            "checkpoints", ck_failed, ck_rejected);
    if (s->hb.rejected)
        fprintf(f, "  %-20s %ld (forged or malformed; events.jsonl has them at most 1/s)\n",
                "heartbeats rejected", s->hb.rejected);
    sup_hb_summary(s, f); /* ranks elsewhere never heard (sup_hbwatch.c) */
    if (s->val_spikes)
        fprintf(f, "  %-20s %d flagged, the latest at step %ld (events validation_spike)\n",
                "validation spikes", s->val_spikes, s->val_spike_step);
    fprintf(f, "  %-20s %.1f s (since the first launch, supervisor restarts included)\n",
            "wall time", wall);
    if (prod >= 0)
        fprintf(f, "  %-20s %.1f s of training kept, goodput %.1f%%\n", "productive", prod,
                100.0 * prod / wall);
    fprintf(f, "  %-20s %s/events.jsonl, %s/cluster.json\n\n", "record", s->o->run_dir,
            s->o->run_dir);
    sup_event(s, ok ? "done" : s->state == S_STOPPED ? "stopped_summary" : "gave_up_summary",
          json_pack("{s:i,s:f,s:f,s:f,s:i,s:i,s:i,s:i,s:i}", "restarts", s->restarts, "wall_s", wall,
                    "productive_s", prod, "goodput", prod > 0 ? prod / wall : 0.0, "incidents",
                    s->ninc, "ckpt_failed", ck_failed, "ckpt_rejected", ck_rejected,
                    "heartbeats_missing", s->hbm_warnings, "validation_spikes", s->val_spikes));
    sup_ledger_save(s);
}

