/* test_hb.c - the heartbeat line protocol (heartbeat/hb.h): a beat with and without the
 * energy fields (host=, energy_j=, power_w=, esrc=, gpus=), an older worker's beat
 * without them, a malformed or absurd counter dropping the measurement but not the
 * beat, the job secret; and a real client on loopback: the line it sends parses, names
 * this machine's boot_id, and carries energy only when its meter measured something;
 * hb_client_final sends a beat at once; GRIT_HOST_ID names a simulated machine. */
#include <math.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../check.h"
#include "obs/meter.h"
#include "heartbeat/hb.h"

#define SECRET "00112233445566778899aabbccddeeff"

/* The trainer's sampler (train/emit.c) in miniature: this machine's meter. */
static void sample(void *ctx, hb_energy *out)
{
    obs_energy e;
    obs_meter_sample(ctx, 0, NULL);
    obs_meter_read(ctx, &e);
    *out = (hb_energy){e.joules, e.watts, e.sources, e.gpus};
}

static obs_meter *meter_of[2];

/* A client as the trainer starts one: host= this machine, a meter when asked. */
static hb_client *start(int rank, const char *node, double period, int meter)
{
    char host[64];
    obs_host_id(host, sizeof host);
    obs_meter *m = meter ? obs_meter_open(NULL, NULL) : NULL;
    hb_client_opts o = {.rank = rank, .node = node, .period = period, .host = host,
                        .sample = m ? sample : NULL, .sample_ctx = m};
    hb_client *c = hb_client_start(&o);
    meter_of[meter != 0] = m;
    return c;
}

static void stop(hb_client *c, int meter)
{
    hb_client_stop(c);
    obs_meter_close(meter_of[meter != 0]);
    meter_of[meter != 0] = NULL;
}

static void parse_energy(void)
{
    hb_msg m;
    CHECK_INT(hb_parse("HB1 " SECRET " rank=3 node=node1 step=7 loss=2.5 gnorm=1 step_time=0.5 "
                       "comm_time=0.1 pid=4242 host=6f1c-77 energy_j=1234.5 power_w=250.25 "
                       "esrc=3 gpus=4\n", SECRET, &m), GRIT_OK);
    CHECK_INT(m.rank, 3);
    CHECK_INT(m.step, 7);
    CHECK_INT(m.pid, 4242);
    CHECK(!strcmp(m.node, "node1"));
    CHECK(!strcmp(m.host, "6f1c-77"));
    CHECK_NEAR(m.energy_j, 1234.5, 0);
    CHECK_NEAR(m.power_w, 250.25, 0);
    CHECK_INT(m.esrc, OBS_SRC_RAPL | OBS_SRC_NVML);
    CHECK_INT(m.gpus, 4);

    /* an older worker: no host, no energy; still a valid beat */
    CHECK_INT(hb_parse("HB1 " SECRET " rank=0 node=node0 step=1 pid=9", SECRET, &m), GRIT_OK);
    CHECK(!strcmp(m.host, ""));
    CHECK_INT(m.esrc, 0);
    CHECK_INT(m.gpus, 0);

    /* a rank that does not measure: host only; "-" is no host */
    CHECK_INT(hb_parse("HB1 " SECRET " rank=1 node=node0 step=1 host=abc", SECRET, &m), GRIT_OK);
    CHECK(!strcmp(m.host, "abc"));
    CHECK_INT(m.esrc, 0);
    CHECK_INT(hb_parse("HB1 " SECRET " rank=1 node=node0 step=1 host=-", SECRET, &m), GRIT_OK);
    CHECK(!strcmp(m.host, ""));

    /* a counter that is not a finite non-negative number, or missing: no measurement */
    const char *bad[] = {"energy_j=nan esrc=1", "energy_j=-5 esrc=1", "energy_j=inf esrc=2",
                         "esrc=1", "energy_j=1e300 esrc=1"};
    for (int i = 0; i < 5; i++) {
        char line[256];
        snprintf(line, sizeof line, "HB1 " SECRET " rank=2 node=n step=3 host=h %s", bad[i]);
        CHECK_INT(hb_parse(line, SECRET, &m), GRIT_OK);
        if (m.esrc)
            fprintf(stderr, "'%s' kept esrc %d\n", bad[i], m.esrc);
        CHECK_INT(m.esrc, 0);
        CHECK_INT(m.step, 3);
    }
    /* unknown source bits are dropped; a negative power or GPU count reads as 0 */
    CHECK_INT(hb_parse("HB1 " SECRET " rank=2 node=n step=3 host=h energy_j=5 esrc=6 "
                       "power_w=-3 gpus=-1", SECRET, &m), GRIT_OK);
    CHECK_INT(m.esrc, OBS_SRC_NVML);
    CHECK_NEAR(m.power_w, 0, 0);
    CHECK_INT(m.gpus, 0);
    /* new fields never weaken the secret check */
    CHECK_INT(hb_parse("HB1 wrong rank=0 host=h energy_j=5 esrc=1", SECRET, &m), GRIT_EFORMAT);
    grit_errclear();
}

/* A client and a server on loopback: what a worker really sends. */
static void client_line(int meter)
{
    hb_server s;
    CHECK_INT(hb_server_open(&s, NULL), GRIT_OK);
    setenv("GRIT_SUP_ADDR", s.addr, 1);
    setenv("GRIT_SUP_SECRET", s.secret, 1);
    /* nothing readable: powercap is usually root-only and there is no GPU here; even
     * where RAPL can be read the line must parse with the fields all or nothing */
    setenv("GRIT_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    hb_client *c = start(5, "nodeX", 0.05, meter);
    CHECK(c != NULL);
    hb_client_step(c, 11, 2.0, 1.0, 0.25, 0.05);
    hb_msg m = {0};
    int got = 0;
    for (int i = 0; i < 200 && got < 3; i++) { /* the step's beat, then periodic ones */
        hb_msg x;
        while (hb_server_poll(&s, &x, NULL, NULL)) {
            m = x;
            got++;
        }
        usleep(10000);
    }
    stop(c, meter);
    CHECK(got >= 3);
    CHECK_INT(m.rank, 5);
    CHECK_INT(m.step, 11);
    char me[64];
    obs_host_id(me, sizeof me);
    CHECK(me[0] != 0);
    CHECK(!strcmp(m.host, me));
    if (!meter)
        CHECK_INT(m.esrc, 0); /* only the measuring rank reports energy */
    else if (m.esrc) {
        CHECK_INT(m.esrc, OBS_SRC_RAPL); /* no GPU library: RAPL or nothing */
        CHECK(m.energy_j >= 0);
    }
    CHECK_INT(s.rejected, 0);
    hb_server_close(&s);
}

/* hb_client_final: one more sample and beat now, even with a period far away. */
static void final_beat(void)
{
    hb_server s;
    CHECK_INT(hb_server_open(&s, NULL), GRIT_OK);
    setenv("GRIT_SUP_ADDR", s.addr, 1);
    setenv("GRIT_SUP_SECRET", s.secret, 1);
    hb_client *c = start(2, "nodeY", 60, 1);
    CHECK(c != NULL);
    usleep(50000); /* the thread has taken its baseline and waits for the period */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    hb_client_final(c);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    CHECK(took < 1.5);
    hb_msg m;
    int got = 0;
    for (int i = 0; i < 100 && !got; i++) {
        got = hb_server_poll(&s, &m, NULL, NULL);
        if (!got)
            usleep(10000);
    }
    CHECK(got);
    CHECK_INT(m.rank, 2);
    stop(c, 1);
    hb_client_final(NULL);
    hb_server_close(&s);
}

/* A beat without loss= (a program that has no loss, docs/heartbeat.md's shell example)
 * carries no loss, which the supervisor must not take for a NaN. */
static void parse_no_loss(void)
{
    hb_msg m;
    CHECK_INT(hb_parse("HB1 " SECRET " rank=0 node=n0 step=3 step_time=0.5", SECRET, &m), GRIT_OK);
    CHECK(!m.has_loss);
    CHECK_INT(hb_parse("HB1 " SECRET " rank=0 node=n0 step=3 loss=nan", SECRET, &m), GRIT_OK);
    CHECK(m.has_loss && isnan(m.loss));
}

int main(void)
{
    parse_no_loss();
    parse_energy();
    client_line(0);
    client_line(1);
    final_beat();
    char a[64], b[64];
    CHECK(!strcmp(obs_host_id(a, sizeof a), obs_host_id(b, sizeof b))); /* stable */
    CHECK(strchr(a, ' ') == NULL && strchr(a, '=') == NULL);
    setenv("GRIT_HOST_ID", "n2=x\"1 y", 1); /* a simulated node: one word of the protocol */
    CHECK(!strcmp(obs_host_id(b, sizeof b), "n2_x_1"));
    unsetenv("GRIT_HOST_ID");
    CHECK(!strcmp(obs_host_id(b, sizeof b), a));
    CHECK_DONE();
}
