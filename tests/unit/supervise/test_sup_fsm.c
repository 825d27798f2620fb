/* test_sup_fsm.c - the supervisor's state machine (src/supervise/sup_fsm.h) is enforced:
 * every legal transition is applied and logged with the function behind it, every other
 * (from, to) pair is refused (an error, an "illegal_transition" event, the state kept),
 * the final states have no way out, ERROR leads only to GAVE_UP, and the failure kinds
 * keep the names events and dashboards match. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"
#include "core/fsutil.h"
#include "supervise/sup_internal.h"

static void test_table(void)
{
    int n;
    const sup_transition *t = sup_fsm_table(&n);
    CHECK(n > 0);
    for (int i = 0; i < n; i++) {
        CHECK(t[i].from != t[i].to);
        CHECK(t[i].via && strchr(t[i].via, ':')); /* "function: what it does" */
        CHECK(t[i].from != S_DONE && t[i].from != S_GAVE_UP && t[i].from != S_STOPPED); /* final */
        if (t[i].from == S_ERROR)
            CHECK_INT(t[i].to, S_GAVE_UP); /* left only on purpose, to GAVE_UP */
        for (int j = 0; j < i; j++)
            CHECK(t[j].from != t[i].from || t[j].to != t[i].to);
        CHECK(sup_fsm_find(t[i].from, t[i].to) == &t[i]);
    }
    /* every state that is not final can fail into ERROR */
    for (int st = 0; st < S_NSTATES; st++)
        if (st != S_DONE && st != S_GAVE_UP && st != S_ERROR && st != S_STOPPED)
            CHECK(sup_fsm_find((sup_state)st, S_ERROR) != NULL);
    /* the path the issue draws, with one recovery */
    const sup_state path[] = {S_PREFLIGHT, S_LAUNCHING, S_RUNNING,  S_DETECTED, S_DIAGNOSING,
                              S_REPAIRING, S_LAUNCHING, S_RUNNING,  S_DONE};
    for (size_t i = 1; i < sizeof path / sizeof *path; i++)
        CHECK(sup_fsm_find(path[i - 1], path[i]) != NULL);
    /* diagnosis before repair, never the other way round; no skipping DIAGNOSING */
    CHECK(sup_fsm_find(S_DETECTED, S_REPAIRING) == NULL);
    CHECK(sup_fsm_find(S_REPAIRING, S_DIAGNOSING) == NULL);
    CHECK(sup_fsm_find(S_RUNNING, S_LAUNCHING) == NULL);
    CHECK(sup_fsm_find(S_DONE, S_LAUNCHING) == NULL);
    CHECK(sup_fsm_find(S_GAVE_UP, S_LAUNCHING) == NULL);
    CHECK(!strcmp(sup_state_name(S_GAVE_UP), "GAVE_UP"));
    CHECK(!strcmp(sup_state_name(S_STOPPED), "STOPPED"));
    /* a stop signal is honoured where a job runs or is about to */
    CHECK(sup_fsm_find(S_RUNNING, S_STOPPED) != NULL);
    CHECK(sup_fsm_find(S_LAUNCHING, S_STOPPED) != NULL);
    CHECK(sup_fsm_find(S_STOPPED, S_LAUNCHING) == NULL);
    CHECK(!strcmp(sup_state_name((sup_state)99), "?"));
    /* --on-no-spare: PROVISIONING is a detour of REPAIRING only, and comes back to it
     * (or gives up, or a signal stops it); it never launches by itself */
    CHECK(!strcmp(sup_state_name(S_PROVISIONING), "PROVISIONING"));
    const sup_state prov[] = {S_DETECTED, S_DIAGNOSING, S_REPAIRING, S_PROVISIONING,
                              S_REPAIRING, S_PROVISIONING, S_REPAIRING, S_LAUNCHING};
    for (size_t i = 1; i < sizeof prov / sizeof *prov; i++)
        CHECK(sup_fsm_find(prov[i - 1], prov[i]) != NULL);
    for (int st = 0; st < S_NSTATES; st++) {
        if (st != S_REPAIRING)
            CHECK(sup_fsm_find((sup_state)st, S_PROVISIONING) == NULL);
        if (st != S_REPAIRING && st != S_GAVE_UP && st != S_STOPPED && st != S_ERROR)
            CHECK(sup_fsm_find(S_PROVISIONING, (sup_state)st) == NULL);
    }
    CHECK(sup_fsm_find(S_PROVISIONING, S_GAVE_UP) != NULL);
    CHECK(sup_fsm_find(S_PROVISIONING, S_STOPPED) != NULL);
    CHECK(sup_fsm_find(S_PROVISIONING, S_ERROR) != NULL);
    CHECK(sup_fsm_find(S_PROVISIONING, S_LAUNCHING) == NULL);
    CHECK(sup_fsm_find(S_PREFLIGHT, S_PROVISIONING) == NULL); /* preflight does not ask */
}

static void test_fail_names(void)
{
    /* the strings of "detected" events before the enum: they must not change */
    CHECK(!strcmp(sup_fail_name(F_EXIT), "exit"));
    CHECK(!strcmp(sup_fail_name(F_HANG), "hang"));
    CHECK(!strcmp(sup_fail_name(F_NAN), "nan"));
    CHECK(!strcmp(sup_fail_name(F_SPIKE), "spike"));
    CHECK(!strcmp(sup_fail_name(F_STRAGGLER), "straggler"));
    CHECK(!strcmp(sup_fail_name(F_HEALTH), "health"));
    CHECK(!strcmp(sup_fail_name(F_PREFLIGHT), "preflight"));
    CHECK(sup_fail_numeric(F_NAN) && sup_fail_numeric(F_SPIKE));
    CHECK(!sup_fail_numeric(F_EXIT) && !sup_fail_numeric(F_HANG) && !sup_fail_numeric(F_STRAGGLER));
}

static int count(const char *text, const char *needle)
{
    int k = 0;
    for (const char *p = text; (p = strstr(p, needle)); p++)
        k++;
    return k;
}

/* sup_set_state on a real supervisor struct and event log: every pair of states. */
static void test_set_state(void)
{
    char dir[] = "/tmp/grit_fsm_XXXXXX", path[512];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/events.jsonl", dir);
    sup_opts o = {.quiet = 1};
    sup *s = calloc(1, sizeof *s);
    s->o = &o;
    CHECK_INT(events_open(&s->ev, path), GRIT_OK);
    int n, legal = 0, illegal = 0;
    sup_fsm_table(&n);
    for (int from = 0; from < S_NSTATES; from++)
        for (int to = 0; to < S_NSTATES; to++) {
            s->state = (sup_state)from;
            grit_err rc = sup_set_state(s, (sup_state)to);
            if (sup_fsm_find((sup_state)from, (sup_state)to)) {
                CHECK_INT(rc, GRIT_OK);
                CHECK_INT(s->state, to);
                legal++;
            } else {
                CHECK_INT(rc, GRIT_EINVAL);
                CHECK_INT(s->state, from); /* never silently applied */
                CHECK_STR_HAS(grit_errmsg(), "illegal state transition");
                illegal++;
            }
        }
    CHECK_INT(legal, n);
    CHECK_INT(legal + illegal, S_NSTATES * S_NSTATES);
    events_close(&s->ev);
    char *text = NULL;
    CHECK_INT(fs_read_all(path, &text, NULL), GRIT_OK);
    CHECK_INT(count(text, "\"event\":\"state\""), legal);
    CHECK_INT(count(text, "\"event\":\"illegal_transition\""), illegal);
    CHECK_STR_HAS(text, "\"event\":\"state\",\"from\":\"DIAGNOSING\",\"to\":\"REPAIRING\","
                        "\"via\":\"sup_diagnose:");
    CHECK_STR_HAS(text, "\"event\":\"illegal_transition\",\"from\":\"DETECTED\",\"to\":\"REPAIRING\"");
    CHECK_STR_HAS(text, "\"event\":\"illegal_transition\",\"from\":\"DONE\",\"to\":\"RUNNING\"");
    CHECK_STR_HAS(text, "\"event\":\"state\",\"from\":\"REPAIRING\",\"to\":\"PROVISIONING\","
                        "\"via\":\"sup_repair:");
    CHECK_STR_HAS(text, "\"event\":\"illegal_transition\",\"from\":\"PROVISIONING\",\"to\":"
                        "\"LAUNCHING\"");
    free(text);
    free(s);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    test_table();
    test_fail_names();
    test_set_state();
    CHECK_DONE();
}
