/*
 * hb_client.c - a worker's heartbeat client (see hb.h): a background thread that
 * sends the latest step's beat every period and, when the caller gave a sampler,
 * samples the machine's energy before each beat, outside the lock the training
 * thread takes (a sample may take milliseconds: NVML). The training thread only
 * records its step under the lock and sends that beat at once.
 */
#define _GNU_SOURCE
#include "heartbeat/hb.h"

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct hb_client {
    int fd;
    struct sockaddr_in to;
    char secret[80], node[64];
    int rank;
    double period;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int quit;
    long step;
    double loss, gnorm, step_time, comm_time;
    char host[64];
    hb_sample_fn sample; /* NULL: this rank does not measure its host */
    void *sample_ctx;
    hb_energy energy;  /* the sampler's latest totals (under mu) */
    int final;         /* hb_client_final asked for a sample and beat now */
    long beats;        /* periodic beats sent by the thread */
    pthread_cond_t done_cv; /* signalled after each of them */
};

static int parse_addr(const char *s, struct sockaddr_in *a)
{
    char host[64];
    const char *colon = strrchr(s, ':');
    if (!colon || colon - s >= (long)sizeof host)
        return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)atoi(colon + 1));
    return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
}

static void send_line(hb_client *c, const char *line)
{
    sendto(c->fd, line, strlen(line), MSG_DONTWAIT, (struct sockaddr *)&c->to, sizeof c->to);
}

static void send_beat(hb_client *c)
{
    char line[640], energy[160] = "";
    if (c->energy.sources)
        snprintf(energy, sizeof energy, " energy_j=%.3f power_w=%.3f esrc=%d gpus=%d",
                 c->energy.joules, c->energy.watts, c->energy.sources, c->energy.gpus);
    snprintf(line, sizeof line,
             "HB1 %s rank=%d node=%s step=%ld loss=%.9g gnorm=%.9g step_time=%.6f "
             "comm_time=%.6f pid=%ld host=%s%s\n",
             c->secret, c->rank, c->node, c->step, c->loss, c->gnorm, c->step_time,
             c->comm_time, (long)getpid(), c->host[0] ? c->host : "-", energy);
    send_line(c, line);
}

/* Samples the host's energy (c->mu not held: NVML may take milliseconds, and the
 * training thread's hb_client_step must not wait for it), then publishes the totals. */
static void meter_sample(hb_client *c)
{
    if (!c->sample)
        return;
    hb_energy e = {0};
    c->sample(c->sample_ctx, &e);
    pthread_mutex_lock(&c->mu);
    c->energy = e;
    pthread_mutex_unlock(&c->mu);
}

static void *client_loop(void *arg)
{
    hb_client *c = arg;
    meter_sample(c); /* the baseline */
    pthread_mutex_lock(&c->mu);
    while (!c->quit) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double t = ts.tv_sec + 1e-9 * ts.tv_nsec + c->period;
        ts.tv_sec = (time_t)t;
        ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
        if (!c->final)
            pthread_cond_timedwait(&c->cv, &c->mu, &ts);
        if (c->quit)
            break;
        c->final = 0;
        if (c->sample) {
            pthread_mutex_unlock(&c->mu);
            meter_sample(c);
            pthread_mutex_lock(&c->mu);
        }
        if (!c->quit)
            send_beat(c);
        c->beats++;
        pthread_cond_broadcast(&c->done_cv);
    }
    pthread_cond_broadcast(&c->done_cv);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

hb_client *hb_client_start(const hb_client_opts *o)
{
    const char *addr = getenv("GRIT_SUP_ADDR"), *secret = getenv("GRIT_SUP_SECRET");
    if (!addr || !secret || !*secret)
        return NULL;
    hb_client *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (parse_addr(addr, &c->to) != 0 || (c->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0) {
        fprintf(stderr, "grit: GRIT_SUP_ADDR '%s': expected IPv4 host:port; heartbeats off\n", addr);
        free(c);
        return NULL;
    }
    snprintf(c->secret, sizeof c->secret, "%s", secret);
    snprintf(c->node, sizeof c->node, "%s", o->node && *o->node ? o->node : "local");
    c->rank = o->rank;
    c->period = o->period;
    c->step = 0;
    c->loss = c->gnorm = NAN;
    snprintf(c->host, sizeof c->host, "%s", o->host ? o->host : "");
    c->sample = o->sample;
    c->sample_ctx = o->sample_ctx;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    pthread_cond_init(&c->done_cv, NULL);
    if (pthread_create(&c->th, NULL, client_loop, c) != 0) {
        close(c->fd);
        free(c);
        return NULL;
    }
    return c;
}

void hb_client_step(hb_client *c, long step, double loss, double gnorm, double step_time,
                    double comm_time)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->step = step;
    c->loss = loss;
    c->gnorm = gnorm;
    c->step_time = step_time;
    c->comm_time = comm_time;
    send_beat(c);
    pthread_mutex_unlock(&c->mu);
}

void hb_client_event(hb_client *c, const char *kind, long step, const char *detail)
{
    if (!c)
        return;
    char line[512];
    pthread_mutex_lock(&c->mu);
    snprintf(line, sizeof line, "EV1 %s rank=%d node=%s kind=%s step=%ld detail=%s\n",
             c->secret, c->rank, c->node, kind, step, detail && *detail ? detail : "-");
    send_line(c, line);
    pthread_mutex_unlock(&c->mu);
}

void hb_client_final(hb_client *c)
{
    if (!c)
        return;
    /* the sampler runs on the beat thread only: ask it for one more sample and beat,
     * and wait for that */
    pthread_mutex_lock(&c->mu);
    long want = c->beats + 1;
    c->final = 1;
    pthread_cond_broadcast(&c->cv);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 2; /* NVML hung: give up, the run's end must not wait for it */
    while (c->beats < want && !c->quit)
        if (pthread_cond_timedwait(&c->done_cv, &c->mu, &ts) != 0)
            break;
    pthread_mutex_unlock(&c->mu);
}

void hb_client_stop(hb_client *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->quit = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->th, NULL);
    close(c->fd);
    memset(c->secret, 0, sizeof c->secret);
    free(c);
}
