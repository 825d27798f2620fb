/* test_hb_bind.c - heartbeats across hosts (src/supervise/hb_bind.c, sup_hbwatch.c):
 *   - the bind address from the allocation's host addresses, by each rule of hb_bind.h,
 *     on a fake network (which addresses are this machine's, which route leaves from
 *     where), and the real one's answers for loopback and a TEST-NET address;
 *   - on a real supervisor struct with a fake backend whose ranks are remote: --bind
 *     still wins, each rank marked local or elsewhere by its host, and the watch: no
 *     warning before --heartbeat-wait, none when every rank elsewhere was heard, a
 *     heartbeats_missing event naming only the silent host once it is due (by time or by
 *     step SUP_HBM_STEPS), and the summary line; the local backend is never watched. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"
#include "core/fsutil.h"
#include "core/progress.h"
#include "supervise/hb_bind.h"
#include "supervise/sup_internal.h"

/* --- hb_bind_choose on a fake network ---------------------------------------------- */

typedef struct fake_net {
    const char *mine;  /* this machine's one non-loopback address ("" none) */
    const char *route; /* the source address of every route (NULL: no route) */
    char asked[16];    /* the destination route was last asked for */
} fake_net;

static int fake_is_local(void *ctx, const char *addr)
{
    const fake_net *f = ctx;
    return f->mine[0] && !strcmp(addr, f->mine);
}

static int fake_route(void *ctx, const char *dst, char src[HB_BIND_ADDR_MAX])
{
    fake_net *f = ctx;
    snprintf(f->asked, sizeof f->asked, "%s", dst);
    if (!f->route)
        return -1;
    snprintf(src, HB_BIND_ADDR_MAX, "%s", f->route);
    return 0;
}

static const char names[4][32] = {"n1", "n2", "n3", "n4"};

static int choose(fake_net *f, const char (*addrs)[16], int n, char *bind, char *why,
                  unsigned char *local)
{
    hb_bind_net net = {.is_local = fake_is_local, .route = fake_route, .ctx = f};
    f->asked[0] = '\0';
    return hb_bind_choose(&net, names, addrs, n, bind, why, 300, local);
}

static void test_choose(void)
{
    char bind[HB_BIND_ADDR_MAX], why[300];
    unsigned char local[4];
    /* rule 1: a one-machine cluster (every NodeAddr 127.0.0.1): loopback, all local */
    fake_net f = {.mine = "10.9.0.5", .route = "10.9.0.5"};
    const char lo[3][16] = {"127.0.0.1", "127.0.0.1", "127.0.0.1"};
    CHECK_INT(choose(&f, lo, 3, bind, why, local), 0);
    CHECK(!strcmp(bind, "127.0.0.1"));
    CHECK(local[0] && local[1] && local[2]);
    CHECK_STR_HAS(why, "every host of the allocation (3) is this machine");
    /* rule 2: the batch host n2 is this machine: its allocation address, not a route */
    const char net2[3][16] = {"10.9.0.4", "10.9.0.5", "10.9.0.6"};
    f.route = "10.1.1.1";
    CHECK_INT(choose(&f, net2, 3, bind, why, local), 0);
    CHECK(!strcmp(bind, "10.9.0.5"));
    CHECK(!local[0] && local[1] && !local[2]);
    CHECK_STR_HAS(why, "this machine is n2 of the allocation, at 10.9.0.5; 2 host(s) elsewhere");
    CHECK(f.asked[0] == '\0');
    /* rule 3: a login node (salloc) outside the allocation: the route's source */
    f.mine = "192.168.7.2";
    f.route = "10.9.0.1";
    CHECK_INT(choose(&f, net2, 3, bind, why, local), 0);
    CHECK(!strcmp(bind, "10.9.0.1"));
    CHECK(!local[0] && !local[1] && !local[2]);
    CHECK(!strcmp(f.asked, "10.9.0.4"));
    CHECK_STR_HAS(why, "not in the allocation; it reaches n1 (10.9.0.4) from 10.9.0.1");
    /* its own name resolved to 127.0.1.1 (Debian's hosts file): local, but no address
     * others reach; the route to the first other host decides */
    const char quirk[2][16] = {"127.0.1.1", "10.9.0.6"};
    CHECK_INT(choose(&f, quirk, 2, bind, why, local), 0);
    CHECK(!strcmp(bind, "10.9.0.1"));
    CHECK(local[0] && !local[1]);
    CHECK(!strcmp(f.asked, "10.9.0.6"));
    /* a route that leaves from loopback is no address for other hosts */
    f.route = "127.0.0.1";
    CHECK_INT(choose(&f, quirk, 2, bind, why, local), 1);
    CHECK(!strcmp(bind, "127.0.0.1"));
    /* rule 4: no route: loopback, said, with what to do */
    f.route = NULL;
    CHECK_INT(choose(&f, net2, 3, bind, why, local), 1);
    CHECK(!strcmp(bind, "127.0.0.1"));
    CHECK_STR_HAS(why, "no route from this machine to n1 (10.9.0.4)");
    CHECK_STR_HAS(why, "--bind ADDR");
    /* hosts whose address nobody knows are elsewhere; known ones still route */
    const char unk[3][16] = {"127.0.0.1", "", "10.9.0.6"};
    f.route = "10.9.0.1";
    CHECK_INT(choose(&f, unk, 3, bind, why, local), 0);
    CHECK(!strcmp(bind, "10.9.0.1") && !strcmp(f.asked, "10.9.0.6"));
    CHECK(local[0] && !local[1] && !local[2]);
    const char none[3][16] = {"127.0.0.1", "", ""};
    CHECK_INT(choose(&f, none, 3, bind, why, local), 1);
    CHECK(!strcmp(bind, "127.0.0.1"));
    CHECK_STR_HAS(why, "the address of none of the 2 other host(s) is known (n2, ...)");
}

static void test_sys(void)
{
    char src[HB_BIND_ADDR_MAX];
    CHECK_INT(hb_bind_sys.is_local(NULL, "127.0.0.1"), 1);
    CHECK_INT(hb_bind_sys.is_local(NULL, "127.3.4.5"), 1);
    CHECK_INT(hb_bind_sys.is_local(NULL, "192.0.2.77"), 0); /* TEST-NET-1: nobody's */
    CHECK_INT(hb_bind_sys.is_local(NULL, "not-an-address"), 0);
    CHECK_INT(hb_bind_sys.route(NULL, "127.0.0.1", src), 0); /* connect only: nothing sent */
    CHECK(!strcmp(src, "127.0.0.1"));
    CHECK_INT(hb_bind_sys.route(NULL, "n1", src), -1);
}

/* --- the supervisor's side -------------------------------------------------------- */

static char dir[] = "/tmp/grit_hbbind_XXXXXX";

/* n1 is this machine, n2 elsewhere, n3 unknown */
static void fake_addrs(const sup_opts *o, const char (*hn)[32], int n, char (*addrs)[16])
{
    (void)o;
    for (int i = 0; i < n; i++)
        snprintf(addrs[i], 16, "%s", !strcmp(hn[i], "n1") ? "127.0.0.1"
                                     : !strcmp(hn[i], "n2") ? "192.0.2.12"
                                                             : "");
}

static sup_backend remote_be; /* sup_backend_slurm's shape, fake addresses */

static sup *new_sup(const sup_opts *o, const char *name)
{
    char path[600];
    sup *s = calloc(1, sizeof *s);
    s->o = o;
    remote_be.name = "fake";
    remote_be.remote_ranks = 1;
    remote_be.addrs = fake_addrs;
    s->be = &remote_be;
    s->state = S_RUNNING;
    snprintf(path, sizeof path, "%s/%s.events.jsonl", dir, name);
    CHECK_INT(events_open(&s->ev, path), GRIT_OK);
    snprintf(path, sizeof path, "%s/%s.cluster.json", dir, name);
    char hn[3][32];
    memcpy(hn, names, sizeof hn);
    CHECK_INT(cluster_open_hosts(&s->cl, path, hn, 3, 0), GRIT_OK);
    snprintf(s->hb.addr, sizeof s->hb.addr, "127.0.0.1:4242");
    return s;
}

static char *events_of(const char *name)
{
    char path[600], *text = NULL;
    snprintf(path, sizeof path, "%s/%s.events.jsonl", dir, name);
    fs_read_all(path, &text, NULL);
    return text ? text : strdup("");
}

/* 2 ranks per node on n1, n2, n3 */
static void launch(sup *s)
{
    s->nranks = 6;
    CHECK_INT(sup_grow((void **)&s->rk, &s->rk_cap, 6, sizeof *s->rk, "t"), GRIT_OK);
    memset(s->rk, 0, 6 * sizeof *s->rk);
    for (int r = 0; r < 6; r++)
        snprintf(s->rk[r].node, sizeof s->rk[r].node, "%s", names[r / 2]);
    s->max_step = -1;
    s->launch_ts = now_seconds();
    sup_hb_launched(s);
}

static void free_sup(sup *s)
{
    events_close(&s->ev);
    cluster_free(&s->cl);
    free(s->rk), free(s->local_hosts);
    free(s);
}

static void test_watch(void)
{
    sup_opts o = {.quiet = 1, .heartbeat_wait = 0.3, .bind = "127.0.0.1"};
    sup *s = new_sup(&o, "w");
    CHECK_INT(sup_hb_plan(s, names, 3), GRIT_OK);
    CHECK(s->hb_bind[0] == '\0'); /* --bind wins */
    CHECK_INT(s->nlocal, 1);
    CHECK(!strcmp(s->local_hosts[0], "n1"));
    CHECK(s->hb_why[0] != '\0');
    sup_hb_announce(s);
    char *ev = events_of("w");
    CHECK_STR_HAS(ev, "\"event\":\"heartbeat_bind\",\"address\":\"127.0.0.1:4242\",\"by\":\"--bind\"");
    CHECK_STR_HAS(ev, "\"remote_hosts\":\"n2,n3\"");
    free(ev);
    launch(s);
    CHECK(!s->rk[0].remote && !s->rk[1].remote);
    CHECK(s->rk[2].remote && s->rk[3].remote && s->rk[4].remote && s->rk[5].remote);
    /* not yet due: nothing said, however silent they are */
    s->rk[0].last_beat = s->rk[1].last_beat = now_seconds();
    s->rk[4].last_beat = now_seconds(); /* one rank of n3 was heard, n2 not at all */
    sup_hb_watch(s);
    ev = events_of("w");
    CHECK(!strstr(ev, "heartbeats_missing"));
    free(ev);
    usleep(350000);
    sup_hb_watch(s);
    ev = events_of("w");
    CHECK_STR_HAS(ev, "\"event\":\"heartbeats_missing\",\"attempt\":0,\"nodes\":\"n2,n3\",\"ranks\":3");
    CHECK_STR_HAS(ev, "\"loopback\":true");
    free(ev);
    CHECK_INT(s->hbm_warnings, 1);
    sup_hb_watch(s); /* once per launch */
    CHECK_INT(s->hbm_warnings, 1);
    char sum[600] = "";
    FILE *f = fmemopen(sum, sizeof sum - 1, "w");
    sup_hb_summary(s, f);
    fclose(f);
    CHECK_STR_HAS(sum, "heartbeats");
    CHECK_STR_HAS(sum, "none from n2,n3 on 1 launch(es)");

    /* the next launch: due by steps, long before the time is up */
    o.heartbeat_wait = 60;
    s->attempt = 1;
    launch(s);
    for (int r = 0; r < 6; r++)
        if (r != 3)
            s->rk[r].last_beat = now_seconds();
    s->max_step = SUP_HBM_STEPS - 1;
    sup_hb_watch(s);
    CHECK_INT(s->hbm_warnings, 1);
    s->max_step = SUP_HBM_STEPS;
    sup_hb_watch(s);
    CHECK_INT(s->hbm_warnings, 2);
    ev = events_of("w");
    CHECK_STR_HAS(ev, "\"attempt\":1,\"nodes\":\"n2\",\"ranks\":1");
    free(ev);

    /* every rank elsewhere heard: judged, and nothing said */
    s->attempt = 2;
    launch(s);
    for (int r = 0; r < 6; r++)
        s->rk[r].last_beat = now_seconds();
    s->max_step = 10;
    sup_hb_watch(s);
    CHECK_INT(s->hbm_checked, 1);
    CHECK_INT(s->hbm_warnings, 2);
    ev = events_of("w");
    CHECK_STR_HAS(ev, "\"event\":\"heartbeats_heard\",\"attempt\":2,\"ranks\":4");
    CHECK(!strstr(ev, "\"heartbeats_heard\",\"attempt\":1"));
    free(ev);
    /* --heartbeat-wait 0: off */
    o.heartbeat_wait = 0;
    s->attempt = 3;
    launch(s);
    s->max_step = 10;
    sup_hb_watch(s);
    CHECK_INT(s->hbm_warnings, 2);
    free_sup(s);

    /* the local backend: every rank is here, never watched, no address plan */
    sup_opts lo = {.quiet = 1, .heartbeat_wait = 0.01};
    s = new_sup(&lo, "l");
    s->be = &sup_backend_local;
    CHECK_INT(sup_hb_plan(s, names, 3), GRIT_OK);
    CHECK(s->hb_why[0] == '\0' && s->hb_bind[0] == '\0');
    sup_hb_announce(s);
    launch(s);
    CHECK(!s->rk[2].remote);
    usleep(20000);
    sup_hb_watch(s);
    CHECK_INT(s->hbm_warnings, 0);
    ev = events_of("l");
    CHECK(!strstr(ev, "heartbeat_bind") && !strstr(ev, "heartbeats_missing"));
    free(ev);
    free_sup(s);

    /* no --bind: the plan's address is the one the socket opens on, consistent with
     * whether it fell back (n2 is TEST-NET: no local address; routed, or no route) */
    sup_opts d = {.quiet = 1, .heartbeat_wait = 30};
    s = new_sup(&d, "d");
    CHECK_INT(sup_hb_plan(s, names, 3), GRIT_OK);
    CHECK(s->hb_bind[0] != '\0');
    CHECK_INT(s->hb_fallback, !strcmp(s->hb_bind, "127.0.0.1"));
    free_sup(s);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    test_choose();
    test_sys();
    test_watch();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    CHECK_DONE();
}
