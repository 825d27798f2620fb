/* test_sup_strikes.c - per-node strikes and quarantine (src/supervise/sup_strikes.c) and
 * the repair step's hand-off to PROVISIONING (sup_repair.c), on a real supervisor struct,
 * cluster.json, events.jsonl and ledger in a temp directory:
 *   - strike counting: only rows naming the node, only within the window;
 *   - one incident on a healthy node: reused, as before strikes existed;
 *   - two within the window: quarantined (event, reason), cordoned, the spare in;
 *   - two, one of them older than the window: not quarantined;
 *   - no spare left with --on-no-spare: sup_repair asks (1, prov_node) and, once a node
 *     was added, carries on and puts it at the failed node's position;
 *   - the ledger keeps the quarantine; a restarted supervisor cordons a quarantined
 *     node that cluster.json has as a spare again. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"
#include "core/fsutil.h"
#include "core/progress.h"
#include "supervise/sup_internal.h"

static char dir[] = "/tmp/grit_strikes_XXXXXX";

static void add_incident(sup *s, const char *node, double age)
{
    CHECK_INT(sup_grow((void **)&s->inc, &s->inc_cap, s->ninc + 1, sizeof *s->inc, "t"), GRIT_OK);
    incident *in = &s->inc[s->ninc++];
    memset(in, 0, sizeof *in);
    in->kind = F_EXIT;
    snprintf(in->node, sizeof in->node, "%s", node);
    in->detect_ts = wall_seconds() - age;
}

static void verdict(sup *s, const char *node, int bad)
{
    CHECK_INT(sup_grow((void **)&s->vd, &s->vd_cap, s->nvd + 1, sizeof *s->vd, "t"), GRIT_OK);
    struct sup_verdict *v = &s->vd[s->nvd++];
    snprintf(v->node, sizeof v->node, "%s", node);
    snprintf(v->why, sizeof v->why, "%s", bad ? "grit health: gemm failed" : "healthy");
    v->bad = bad;
}

/* A supervisor on dir/NAME with `nodes` active + `spares` spare slots, in REPAIRING. */
static sup *new_sup(const sup_opts *o, const char *name, int nodes, int spares)
{
    char path[600];
    sup *s = calloc(1, sizeof *s);
    s->o = o;
    s->be = &sup_backend_local;
    s->state = S_REPAIRING;
    snprintf(s->statepath, sizeof s->statepath, "%s/%s.supervisor.json", dir, name);
    snprintf(path, sizeof path, "%s/%s.events.jsonl", dir, name);
    CHECK_INT(events_open(&s->ev, path), GRIT_OK);
    snprintf(path, sizeof path, "%s/%s.cluster.json", dir, name);
    CHECK_INT(cluster_open(&s->cl, path, nodes, spares), GRIT_OK);
    return s;
}

static char *events_of(sup *s, const char *name)
{
    char path[600], *text = NULL;
    events_close(&s->ev);
    snprintf(path, sizeof path, "%s/%s.events.jsonl", dir, name);
    CHECK_INT(fs_read_all(path, &text, NULL), GRIT_OK);
    return text;
}

static void free_sup(sup *s)
{
    cluster_free(&s->cl);
    free(s->inc), free(s->vd), free(s->quar);
    free(s);
}

static void test_count(void)
{
    incident inc[5] = {0};
    double now = 1000;
    snprintf(inc[0].node, sizeof inc[0].node, "node1");
    inc[0].detect_ts = 100;
    snprintf(inc[1].node, sizeof inc[1].node, "node1");
    inc[1].detect_ts = 990;
    snprintf(inc[2].node, sizeof inc[2].node, "node2");
    inc[2].detect_ts = 995;
    inc[3].detect_ts = 999; /* a NaN: no node */
    snprintf(inc[4].node, sizeof inc[4].node, "node10");
    inc[4].detect_ts = 999;
    CHECK_INT(sup_strike_count(inc, 5, "node1", now, 0), 2);    /* the whole run */
    CHECK_INT(sup_strike_count(inc, 5, "node1", now, 60), 1);   /* the old one is out */
    CHECK_INT(sup_strike_count(inc, 5, "node1", now, 900), 2);  /* exactly at the edge: in */
    CHECK_INT(sup_strike_count(inc, 5, "node2", now, 60), 1);
    CHECK_INT(sup_strike_count(inc, 5, "node", now, 0), 0);     /* no prefix matches */
    CHECK_INT(sup_strike_count(inc, 5, "", now, 0), 0);         /* "no node" is nobody */
    CHECK_INT(sup_strike_count(inc, 0, "node1", now, 0), 0);
}

static void test_one_incident_unchanged(void)
{
    sup_opts o = {.quiet = 1, .strikes = 2, .strike_window = 3600};
    sup *s = new_sup(&o, "one", 2, 1);
    add_incident(s, "node1", 1);
    verdict(s, "node1", 0);
    CHECK_INT(sup_repair(s), 0);
    CHECK_INT(cluster_find(&s->cl, "node1")->state, NODE_ACTIVE); /* reused at once */
    CHECK_INT(cluster_spares(&s->cl), 1);
    CHECK_INT(s->nquar, 0);
    char *ev = events_of(s, "one");
    CHECK(!strstr(ev, "quarantined") && !strstr(ev, "cordon"));
    free(ev);
    free_sup(s);
}

static void test_two_quarantined(void)
{
    sup_opts o = {.quiet = 1, .strikes = 2, .strike_window = 3600};
    sup *s = new_sup(&o, "two", 2, 1);
    add_incident(s, "node1", 50);
    add_incident(s, "node0", 20);
    add_incident(s, "node1", 1);
    verdict(s, "node1", 0); /* its health check passes: the strikes decide */
    CHECK_INT(sup_repair(s), 0);
    node_slot *n1 = cluster_find(&s->cl, "node1");
    CHECK_INT(n1->state, NODE_CORDONED);
    CHECK_STR_HAS(n1->reason, "quarantined: 2 incidents within 3600 s (--strikes 2)");
    CHECK_INT(cluster_find(&s->cl, "node2")->state, NODE_ACTIVE);
    CHECK_INT(cluster_find(&s->cl, "node2")->position, 1);
    CHECK_INT(cluster_find(&s->cl, "node0")->state, NODE_ACTIVE); /* one strike only */
    CHECK_INT(s->nquar, 1);
    CHECK(sup_quarantined(s, "node1") && !sup_quarantined(s, "node0"));
    char *ev = events_of(s, "two");
    CHECK_STR_HAS(ev, "\"event\":\"quarantined\",\"node\":\"node1\",\"incidents\":2,\"strikes\":2");
    CHECK_STR_HAS(ev, "\"health\":\"healthy\"");
    CHECK_STR_HAS(ev, "\"event\":\"cordon\",\"node\":\"node1\"");
    free(ev);
    /* the ledger has it; a restarted supervisor reads it back */
    char *led = NULL;
    CHECK_INT(fs_read_all(s->statepath, &led, NULL), GRIT_OK);
    CHECK_STR_HAS(led, "\"quarantined\":[{\"node\":\"node1\"");
    free(led);
    free_sup(s);

    /* restarted: an operator set node1 back to "spare" in cluster.json meanwhile */
    sup *r = new_sup(&o, "two", 2, 1); /* same files: cluster.json is loaded */
    CHECK_INT(sup_ledger_load(r), GRIT_OK);
    CHECK_INT(r->nquar, 1);
    CHECK(sup_quarantined(r, "node1"));
    CHECK_INT(r->ninc, 3);
    cluster_find(&r->cl, "node1")->state = NODE_SPARE;
    r->state = S_PREFLIGHT;
    sup_quarantine_enforce(r);
    CHECK_INT(cluster_find(&r->cl, "node1")->state, NODE_CORDONED);
    CHECK_INT(cluster_spares(&r->cl), 0);
    char *ev2 = events_of(r, "two");
    CHECK_STR_HAS(ev2, "\"event\":\"quarantine_kept\",\"node\":\"node1\",\"was\":\"spare\"");
    free(ev2);
    free_sup(r);
}

static void test_window(void)
{
    sup_opts o = {.quiet = 1, .strikes = 2, .strike_window = 60};
    sup *s = new_sup(&o, "win", 2, 1);
    add_incident(s, "node1", 600); /* ten minutes ago: outside a 60 s window */
    add_incident(s, "node1", 1);
    verdict(s, "node1", 0);
    CHECK_INT(sup_repair(s), 0);
    CHECK_INT(cluster_find(&s->cl, "node1")->state, NODE_ACTIVE);
    CHECK_INT(s->nquar, 0);
    free(events_of(s, "win"));
    free_sup(s);
    /* and off: --strikes 0 never quarantines */
    sup_opts off = {.quiet = 1, .strikes = 0};
    s = new_sup(&off, "off", 2, 1);
    for (int i = 0; i < 5; i++)
        add_incident(s, "node1", 1);
    verdict(s, "node1", 0);
    CHECK_INT(sup_repair(s), 0);
    CHECK_INT(cluster_find(&s->cl, "node1")->state, NODE_ACTIVE);
    free(events_of(s, "off"));
    free_sup(s);
}

static void test_provision_handoff(void)
{
    char *cmd[] = {"true", NULL};
    sup_opts o = {.quiet = 1, .strikes = 2, .strike_window = 3600, .on_no_spare = cmd,
                  .no_spare = "give_up"};
    sup *s = new_sup(&o, "prov", 3, 0);
    add_incident(s, "node1", 1);
    verdict(s, "node0", 0);
    verdict(s, "node1", 1);
    CHECK_INT(sup_repair(s), 1); /* no spare: ask */
    CHECK(!strcmp(s->prov_node, "node1"));
    CHECK_STR_HAS(s->prov_why, "gemm failed");
    CHECK_INT(cluster_find(&s->cl, "node1")->state, NODE_ACTIVE); /* not cordoned yet */
    /* what sup_provision does with a usable name */
    CHECK_INT(cluster_add_spare(&s->cl, "node1"), GRIT_EINVAL); /* active: refused */
    CHECK_INT(cluster_add_spare(&s->cl, "fresh-7"), GRIT_OK);
    CHECK_INT(cluster_add_spare(&s->cl, "fresh-7"), GRIT_EINVAL); /* a spare already */
    CHECK_INT(cluster_add_spare(&s->cl, "a-name-longer-than-thirty-one-chars"), GRIT_EINVAL);
    CHECK_INT(s->cl.count, 4);
    s->state = S_REPAIRING;
    CHECK_INT(sup_repair(s), 0);
    CHECK_INT(cluster_find(&s->cl, "node1")->state, NODE_CORDONED);
    CHECK_INT(cluster_find(&s->cl, "fresh-7")->state, NODE_ACTIVE);
    CHECK_INT(cluster_find(&s->cl, "fresh-7")->position, 1);
    CHECK_INT(cluster_find(&s->cl, "node0")->state, NODE_ACTIVE);
    CHECK(s->prov_node[0] == '\0');
    CHECK_INT(cluster_save(&s->cl), GRIT_OK);
    /* a cordoned slot can come back as a spare (a provider's same-name replacement) */
    CHECK_INT(cluster_add_spare(&s->cl, "node1"), GRIT_OK);
    CHECK_INT(cluster_find(&s->cl, "node1")->state, NODE_SPARE);
    CHECK_INT(s->cl.count, 4);
    char *ev = events_of(s, "prov");
    CHECK_STR_HAS(ev, "\"event\":\"cordon\",\"node\":\"node1\"");
    CHECK_STR_HAS(ev, "\"replacement\":\"fresh-7\"");
    free(ev);
    free_sup(s);
    /* in PREFLIGHT nothing is asked for: the old give-up */
    s = new_sup(&o, "pre", 1, 0);
    s->state = S_PREFLIGHT;
    verdict(s, "node0", 1);
    CHECK_INT(sup_repair(s), -1);
    CHECK_STR_HAS(s->end_reason, "no spare is left");
    free(events_of(s, "pre"));
    free_sup(s);
}

int main(void)
{
    CHECK(mkdtemp(dir) != NULL);
    test_count();
    test_one_incident_unchanged();
    test_two_quarantined();
    test_window();
    test_provision_handoff();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK_INT(system(cmd), 0);
    CHECK_DONE();
}
