/* test_hb_signals.c - the silent-failure signals in the heartbeat (heartbeat/hb.h):
 * util=, net_rx=, net_tx= parse, are NAN when absent and dropped when absurd; a real
 * client on loopback measures util= near one core while its process spins and near
 * zero while it sleeps; a client with net (GRIT_NET_IFACE=lo) reports the peak rate of
 * traffic this test pushes through lo, and one without net sends no net fields. */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../check.h"
#include "heartbeat/hb.h"

#define SECRET "00112233445566778899aabbccddeeff"

static void parse_signals(void)
{
    hb_msg m;
    CHECK_INT(hb_parse("HB1 " SECRET " rank=1 node=n step=3 util=0.75 net_rx=1000 net_tx=2000",
                       SECRET, &m), GRIT_OK);
    CHECK_NEAR(m.util, 0.75, 1e-12);
    CHECK_NEAR(m.net_rx, 1000, 1e-9);
    CHECK_NEAR(m.net_tx, 2000, 1e-9);
    CHECK_INT(hb_parse("HB1 " SECRET " rank=1 node=n step=3", SECRET, &m), GRIT_OK);
    CHECK(isnan(m.util) && isnan(m.net_rx) && isnan(m.net_tx)); /* an older worker */
    CHECK_INT(hb_parse("HB1 " SECRET " rank=1 step=3 util=-1 net_rx=inf net_tx=5", SECRET, &m),
              GRIT_OK); /* absurd: no measurement, the beat stands */
    CHECK(isnan(m.util) && isnan(m.net_rx) && isnan(m.net_tx));
    CHECK_INT(m.step, 3);
    CHECK_INT(hb_parse("HB1 " SECRET " rank=1 step=3 net_rx=5", SECRET, &m), GRIT_OK);
    CHECK(isnan(m.net_rx)); /* rx without tx: all or nothing */
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Polls the server for secs: the newest beat's util, the largest net peak (NAN when no
 * beat had them). */
static void drain(hb_server *s, double secs, double *util, double *net, int *nbeats)
{
    double end = now_s() + secs;
    *util = *net = NAN;
    *nbeats = 0;
    while (now_s() < end) {
        hb_msg m;
        while (hb_server_poll(s, &m, NULL, NULL)) {
            (*nbeats)++;
            if (isfinite(m.util))
                *util = m.util;
            if (isfinite(m.net_rx))
                *net = fmax(isfinite(*net) ? *net : 0, fmax(m.net_rx, m.net_tx));
        }
        usleep(10000);
    }
}

static volatile double sink;

static void util_measured(void)
{
    hb_server s;
    CHECK_INT(hb_server_open(&s, NULL), GRIT_OK);
    setenv("GRIT_SUP_ADDR", s.addr, 1);
    setenv("GRIT_SUP_SECRET", s.secret, 1);
    hb_client_opts o = {.rank = 0, .node = "n0", .period = 0.3};
    hb_client *c = hb_client_start(&o);
    CHECK(c != NULL);
    double u_idle, u_busy, net;
    int n;
    drain(&s, 1.0, &u_idle, &net, &n); /* sleeping in usleep: next to no CPU */
    CHECK(n >= 2);
    CHECK(isnan(net)); /* no net: no net fields */
    double end = now_s() + 1.2, x = 1; /* spin: one core while the scheduler lets us */
    while (now_s() < end)
        for (int i = 0; i < 100000; i++)
            x = x * 1.0000001 + 1e-9;
    sink = x;
    hb_msg m;
    u_busy = NAN;
    while (hb_server_poll(&s, &m, NULL, NULL))
        if (isfinite(m.util))
            u_busy = m.util;
    hb_client_stop(c);
    printf("util idle %.3f busy %.3f cores\n", u_idle, u_busy);
    /* a loaded host (2 cores, many builds) may give the spinning thread a fraction of a
     * core: judged against the idle measurement, not against 1.0 */
    CHECK(isfinite(u_idle) && u_idle < 0.1);
    CHECK(isfinite(u_busy) && u_busy > 0.1 && u_busy > 4 * u_idle && u_busy < 1.5);
    hb_server_close(&s);
}

static void net_measured(void)
{
    hb_server s;
    CHECK_INT(hb_server_open(&s, NULL), GRIT_OK);
    setenv("GRIT_SUP_ADDR", s.addr, 1);
    setenv("GRIT_SUP_SECRET", s.secret, 1);
    setenv("GRIT_NET_IFACE", "lo", 1);
    hb_client_opts o = {.rank = 0, .node = "n0", .period = 0.3, .net = true};
    hb_client *c = hb_client_start(&o);
    CHECK(c != NULL);
    /* about 40 MB through lo in well under a second: UDP to a socket nobody reads fills
     * its buffer and the rest is dropped after lo counted it */
    int fd = socket(AF_INET, SOCK_DGRAM, 0), rd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    CHECK(fd >= 0 && rd >= 0 && bind(rd, (struct sockaddr *)&a, sizeof a) == 0 &&
          getsockname(rd, (struct sockaddr *)&a, &al) == 0);
    static char buf[60000];
    usleep(400000); /* a beat with a slice before the traffic */
    for (int i = 0; i < 700; i++)
        sendto(fd, buf, sizeof buf, 0, (struct sockaddr *)&a, sizeof a);
    double u, net;
    int n;
    drain(&s, 1.0, &u, &net, &n);
    hb_client_stop(c);
    close(fd), close(rd);
    unsetenv("GRIT_NET_IFACE");
    printf("net peak %.3g B/s over lo\n", net);
    CHECK(isfinite(net) && net > 2e7); /* 40 MB within a 0.1 s slice or two */
    hb_server_close(&s);
}

int main(void)
{
    parse_signals();
    util_measured();
    net_measured();
    CHECK_DONE();
}
