/*
 * sup_incident.c - the supervisor's accounting that must outlive one failure or one
 * supervisor:
 *
 *   sup_collect_lost   at detection, every rank whose process is gone (or a zombie) or
 *                      stopped (state T) within LOST_SETTLE_S of the first one seen, the
 *                      launcher held meanwhile: each one's node is implicated (and so
 *                      diagnosed), each is noted
 *   sup_record_more    one more incident row for every other implicated node, so a
 *                      correlated failure (a rack, a switch) shows every node it hit
 *   sup_ledger_save    RUN/supervisor.json, written with fs_write_durable (temp file,
 *                      fsync, rename, fsync the directory) at every launch, detection,
 *   sup_ledger_load    recovery and the end: restarts, attempt, when the run's first
 *                      launch was, and every incident; a supervisor restarted after a
 *                      crash (kill -9) carries on with the same table, restart count and
 *                      wall time, so goodput counts the time it was down
 *   sup_give_up_permanent  a failure the job called permanent (worker event "fatal",
 *                      exit status 3: a config error, a full disk, every checkpoint
 *                      unusable): no diagnosis, no restart, GAVE_UP with the cause
 *   sup_reject_note    rejected heartbeats (forged, malformed): every one counted, at
 *                      most one line and one event per second (a flood of 50k datagrams
 *                      a second must not fill the disk with events.jsonl)
 *   sup_ckpt_counts    checkpoint failures and fallbacks the trainer recorded in
 *                      events.jsonl, for the summary
 *
 * supervisor.json (version 2; docs/supervisor.md):
 *   {"version":2,"restarts":N,"attempt":A,"first_launch":WALL,
 *    "incidents":[{"kind":"exit","node":"node1","rank":1,"detail":"...","step":6,
 *                  "resumed_at":4,"fault":WALL,"detect":WALL,"recovered":WALL}, ...],
 *    "quarantined":[{"node":"node1","reason":"quarantined: ...","ts":WALL}, ...]}
 * ("quarantined": sup_strikes.c; absent in older files: none.)
 * Times are Unix seconds (0: not known). A version 1 file ({"restarts","attempt"}) is
 * read as one with no incidents. A file that does not parse is reported and ignored (a
 * fresh ledger), never a reason not to run.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fsutil.h"
#include "core/progress.h"
#include "supervise/sup_internal.h"

#define LOST_SETTLE_S 0.15 /* deaths this close to the first one seen belong to it */

void sup_collect_lost(sup *s)
{
    /* failures that come together are rarely in the same millisecond: the launcher is
     * held (SIGSTOP to it alone, not its ranks: it would take the survivors down) while
     * the others settle; stop_job's SIGCONT lets it go */
    if (s->job > 0 && !s->be->remote_ranks) {
        kill(s->job, SIGSTOP);
        usleep((useconds_t)(LOST_SETTLE_S * 1e6));
    }
    for (int r = 0; r < s->nranks; r++) {
        rank_info *ri = &s->rk[r];
        if (ri->pid <= 0 || ri->done || ri->lost)
            continue;
        char st = sup_proc_state(ri->pid);
        if ((st == 0 || st == 'Z' || st == 'X') && sup_done_marked(s, r)) {
            ri->done = 1; /* finished normally at the same moment: not lost */
            continue;
        }
        if (st == 0 || st == 'Z' || st == 'X')
            ri->lost = 'D';
        else if (st == 'T')
            ri->lost = 'T';
        else
            continue;
        sup_implicate(s, ri->node);
    }
}

/* "rank 3 died, rank 4 stopped" for the lost ranks of node (at most cap bytes). */
static void lost_on(const sup *s, const char *node, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (int r = 0; r < s->nranks && n + 40 < cap; r++)
        if (s->rk[r].lost && !strcmp(s->rk[r].node, node))
            n += (size_t)snprintf(out + n, cap - n, "%srank %d %s", n ? ", " : "", r,
                                  s->rk[r].lost == 'T' ? "stopped" : "died");
}

grit_err sup_record_more(sup *s, const incident *first)
{
    for (int i = 1; i < s->nimplicated; i++) {
        grit_err rc = sup_grow((void **)&s->inc, &s->inc_cap, s->ninc + 2, sizeof *s->inc,
                               "incidents");
        if (rc != GRIT_OK)
            return rc;
        incident *in = &s->inc[s->ninc];
        *in = *first;
        in->rank = -1;
        for (int r = 0; r < s->nranks; r++)
            if (s->rk[r].lost && !strcmp(s->rk[r].node, s->implicated[i])) {
                in->rank = r;
                break;
            }
        snprintf(in->node, sizeof in->node, "%s", s->implicated[i]);
        char what[160];
        lost_on(s, in->node, what, sizeof what);
        /* 100 + 22 + 63 + 2 fits detail[200]: a longer list is cut, never overflows */
        snprintf(in->detail, sizeof in->detail, "%.100s (at the same time as %.63s)",
                 what[0] ? what : "implicated", first->node);
        s->ninc++;
    }
    memset(&s->inc[s->ninc], 0, sizeof *s->inc); /* the next incident's row, clean */
    return GRIT_OK;
}

void sup_ledger_save(sup *s)
{
    json_t *inc = json_array();
    for (int i = 0; i < s->ninc; i++) {
        const incident *in = &s->inc[i];
        json_array_append_new(
            inc, json_pack("{s:s,s:s,s:i,s:s,s:I,s:I,s:f,s:f,s:f}", "kind", sup_fail_name(in->kind),
                           "node", in->node, "rank", in->rank, "detail", in->detail, "step",
                           (json_int_t)in->step_seen, "resumed_at", (json_int_t)in->resumed_at,
                           "fault", in->fault_ts, "detect", in->detect_ts, "recovered",
                           in->recovered_ts));
        if (in->health[0]) /* sup_diagnose: the evidence of a measured incident */
            json_object_set_new(json_array_get(inc, json_array_size(inc) - 1), "health",
                                json_string(in->health));
        if (in->pair[0])
            json_object_set_new(json_array_get(inc, json_array_size(inc) - 1), "pair_check",
                                json_string(in->pair));
    }
    json_t *quar = json_array();
    for (int i = 0; i < s->nquar; i++)
        json_array_append_new(quar, json_pack("{s:s,s:s,s:f}", "node", s->quar[i].node, "reason",
                                              s->quar[i].why, "ts", s->quar[i].ts));
    json_t *j = json_pack("{s:i,s:i,s:i,s:f,s:o,s:o}", "version", 2, "restarts", s->restarts,
                          "attempt", s->attempt, "first_launch", s->first_launch_ts,
                          "incidents", inc, "quarantined", quar);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!text || fs_write_durable(s->statepath, text, strlen(text)) != GRIT_OK)
        sup_say(s, "WARNING: cannot write %s: %s (a restarted supervisor would lose the "
                   "incident history)", s->statepath, text ? grit_errmsg() : "out of memory");
    free(text);
}

static sup_fail kind_of(const char *name)
{
    for (int k = 0; k < F_NKINDS; k++)
        if (name && !strcmp(sup_fail_name((sup_fail)k), name))
            return (sup_fail)k;
    return F_NONE;
}

grit_err sup_ledger_load(sup *s)
{
    char *text = NULL;
    if (fs_read_all(s->statepath, &text, NULL) != GRIT_OK)
        return GRIT_OK; /* a first run */
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    free(text);
    if (!json_is_object(j)) {
        sup_say(s, "WARNING: %s:%d:%d: %s: starting a fresh incident history", s->statepath,
                e.line, e.column, e.text);
        json_decref(j);
        return GRIT_OK;
    }
    s->restarts = (int)json_integer_value(json_object_get(j, "restarts"));
    s->attempt = (int)json_integer_value(json_object_get(j, "attempt")) + 1;
    s->first_launch_ts = json_number_value(json_object_get(j, "first_launch"));
    json_t *arr = json_object_get(j, "incidents"), *x;
    size_t i;
    grit_err rc = GRIT_OK;
    json_array_foreach(arr, i, x) {
        if ((rc = sup_grow((void **)&s->inc, &s->inc_cap, s->ninc + 2, sizeof *s->inc,
                           "incidents")) != GRIT_OK)
            break;
        incident *in = &s->inc[s->ninc++];
        memset(in, 0, sizeof *in);
        in->kind = kind_of(json_string_value(json_object_get(x, "kind")));
        snprintf(in->node, sizeof in->node, "%s", json_string_value(json_object_get(x, "node")) ?
                 json_string_value(json_object_get(x, "node")) : "");
        snprintf(in->detail, sizeof in->detail, "%s",
                 json_string_value(json_object_get(x, "detail")) ?
                 json_string_value(json_object_get(x, "detail")) : "");
        snprintf(in->health, sizeof in->health, "%s",
                 json_string_value(json_object_get(x, "health")) ?
                 json_string_value(json_object_get(x, "health")) : "");
        snprintf(in->pair, sizeof in->pair, "%s",
                 json_string_value(json_object_get(x, "pair_check")) ?
                 json_string_value(json_object_get(x, "pair_check")) : "");
        in->rank = (int)json_integer_value(json_object_get(x, "rank"));
        in->step_seen = (long)json_integer_value(json_object_get(x, "step"));
        in->resumed_at = (long)json_integer_value(json_object_get(x, "resumed_at"));
        in->fault_ts = json_number_value(json_object_get(x, "fault"));
        in->detect_ts = json_number_value(json_object_get(x, "detect"));
        in->recovered_ts = json_number_value(json_object_get(x, "recovered"));
    }
    if (rc == GRIT_OK && s->ninc < s->inc_cap)
        memset(&s->inc[s->ninc], 0, sizeof *s->inc);
    json_array_foreach(json_object_get(j, "quarantined"), i, x) { /* sup_strikes.c */
        const char *node = json_string_value(json_object_get(x, "node"));
        const char *why = json_string_value(json_object_get(x, "reason"));
        if (rc == GRIT_OK && node && node[0])
            rc = sup_quarantine_add(s, node, why ? why : "quarantined",
                                    json_number_value(json_object_get(x, "ts")));
    }
    json_decref(j);
    return rc;
}

void sup_ckpt_counts(const sup *s, int *failed, int *rejected)
{
    char path[1200], *text = NULL;
    *failed = *rejected = 0;
    snprintf(path, sizeof path, "%s/events.jsonl", s->o->run_dir);
    if (fs_read_all(path, &text, NULL) != GRIT_OK)
        return;
    for (const char *p = text; (p = strstr(p, "\"event\":\"ckpt_")); p++) {
        if (!strncmp(p + 14, "failed\"", 7))
            (*failed)++;
        else if (!strncmp(p + 14, "rejected\"", 9) || !strncmp(p + 14, "local_rejected\"", 15))
            (*rejected)++;
    }
    free(text);
}

int sup_give_up_permanent(sup *s)
{
    char reason[400];
    snprintf(reason, sizeof reason, "a failure that a retry would repeat (%s): %s; fix the "
             "cause (logs/attempt_%02d.log) and rerun", s->fatal, s->f_detail, s->attempt);
    sup_event(s, "gave_up", json_pack("{s:s,s:s,s:b}", "reason", reason, "cause", s->fatal,
                                      "retry", 0));
    sup_say(s, "giving up: %s", reason);
    if (s->ninc > 0 && !strstr(s->inc[s->ninc - 1].detail, "will not retry")) {
        incident *in = &s->inc[s->ninc - 1]; /* the table names the cause too */
        char d[sizeof in->detail];
        snprintf(d, sizeof d, "%.120s: will not retry: %.60s", in->detail, s->fatal);
        memcpy(in->detail, d, sizeof d);
    }
    if (sup_set_state(s, S_GAVE_UP) == GRIT_OK)
        sup_summary(s, 0);
    return SUP_EXIT_PERMANENT;
}

void sup_reject_note(sup *s, const char *why)
{
    double now = now_seconds();
    if (s->rej_ts > 0 && now - s->rej_ts < SUP_REJECT_LOG_S) {
        s->rej_suppressed++;
        return;
    }
    if (s->rej_suppressed)
        sup_say(s, "%s (and %ld more rejected in the last %.1f s)", why, s->rej_suppressed,
                now - s->rej_ts);
    else
        sup_say(s, "%s", why);
    sup_event(s, "heartbeat_rejected", json_pack("{s:s,s:I,s:I}", "reason", why, "suppressed",
                                                 (json_int_t)s->rej_suppressed, "total",
                                                 (json_int_t)s->hb.rejected));
    s->rej_ts = now;
    s->rej_suppressed = 0;
}
