/* hb.c - heartbeat protocol: parser, UDP client thread (with the host's energy meter
 * when asked), UDP server (see hb.h). */
#define _GNU_SOURCE
#include "heartbeat/hb.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "obs/meter.h"

/* Constant-time comparison, so response timing does not leak the secret. */
static bool same_secret(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = (unsigned char)(la != lb);
    for (size_t i = 0; i < la && i < lb; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0 && la > 0;
}

grit_err hb_parse(const char *line, const char *secret, hb_msg *m)
{
    memset(m, 0, sizeof *m);
    m->rank = -1;
    m->step = -1;
    m->loss = m->gnorm = NAN;
    m->energy_j = NAN; /* esrc= without energy_j= measures nothing */
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", line);
    buf[strcspn(buf, "\r\n")] = '\0';
    char *save = NULL, *tag = strtok_r(buf, " ", &save), *sec = strtok_r(NULL, " ", &save);
    if (!tag || (strcmp(tag, "HB1") && strcmp(tag, "EV1")))
        return grit_errf(GRIT_EINVAL, "not a heartbeat line (expected HB1 or EV1)");
    if (!sec || !same_secret(sec, secret))
        return grit_errf(GRIT_EFORMAT, "wrong or missing job secret");
    m->event = tag[0] == 'E';
    for (char *kv; (kv = strtok_r(NULL, " ", &save));) {
        char *eq = strchr(kv, '=');
        if (!eq)
            return grit_errf(GRIT_EINVAL, "field '%.32s' is not key=value", kv);
        *eq = '\0';
        const char *k = kv, *v = eq + 1;
        char *end;
        if (!strcmp(k, "rank"))
            m->rank = (int)strtol(v, &end, 10);
        else if (!strcmp(k, "node"))
            snprintf(m->node, sizeof m->node, "%s", v);
        else if (!strcmp(k, "step"))
            m->step = strtol(v, &end, 10);
        else if (!strcmp(k, "loss"))
            m->loss = strtod(v, &end);
        else if (!strcmp(k, "gnorm"))
            m->gnorm = strtod(v, &end);
        else if (!strcmp(k, "step_time"))
            m->step_time = strtod(v, &end);
        else if (!strcmp(k, "comm_time"))
            m->comm_time = strtod(v, &end);
        else if (!strcmp(k, "pid"))
            m->pid = strtol(v, &end, 10);
        else if (!strcmp(k, "host"))
            snprintf(m->host, sizeof m->host, "%s", strcmp(v, "-") ? v : "");
        else if (!strcmp(k, "energy_j"))
            m->energy_j = strtod(v, &end);
        else if (!strcmp(k, "power_w"))
            m->power_w = strtod(v, &end);
        else if (!strcmp(k, "esrc"))
            m->esrc = (int)strtol(v, &end, 10) & (OBS_SRC_RAPL | OBS_SRC_NVML);
        else if (!strcmp(k, "gpus"))
            m->gpus = (int)strtol(v, &end, 10);
        else if (!strcmp(k, "kind"))
            snprintf(m->kind, sizeof m->kind, "%s", v);
        else if (!strcmp(k, "detail"))
            snprintf(m->detail, sizeof m->detail, "%s", v);
    }
    if (m->rank < 0)
        return grit_errf(GRIT_EINVAL, "missing rank=");
    /* energy is all or nothing: a counter that is not a finite non-negative number, or
     * no counter, drops the measurement (the beat itself stands) */
    if (m->esrc && !(isfinite(m->energy_j) && m->energy_j >= 0 && m->energy_j < 1e18))
        m->esrc = 0;
    if (!isfinite(m->power_w) || m->power_w < 0)
        m->power_w = 0;
    if (m->gpus < 0 || m->gpus > 1000000)
        m->gpus = 0;
    return GRIT_OK;
}

/* --- client ------------------------------------------------------------------------- */

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
    obs_meter *meter; /* NULL: this rank does not measure its host */
    obs_energy energy; /* the meter's latest totals (under mu) */
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
    if (!c->meter)
        return;
    obs_energy e;
    obs_meter_sample(c->meter, 0, NULL);
    obs_meter_read(c->meter, &e);
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
        if (c->meter) {
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

hb_client *hb_client_start(int rank, const char *node, double period, int meter)
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
    snprintf(c->node, sizeof c->node, "%s", node && *node ? node : "local");
    c->rank = rank;
    c->period = period;
    c->step = 0;
    c->loss = c->gnorm = NAN;
    obs_host_id(c->host, sizeof c->host);
    c->meter = meter ? obs_meter_open(NULL, NULL) : NULL; /* out of memory: no energy */
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    pthread_cond_init(&c->done_cv, NULL);
    if (pthread_create(&c->th, NULL, client_loop, c) != 0) {
        obs_meter_close(c->meter);
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
    /* the meter belongs to the beat thread (meter.h): ask it for one more sample and beat,
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
    obs_meter_close(c->meter);
    close(c->fd);
    memset(c->secret, 0, sizeof c->secret);
    free(c);
}

/* --- server -------------------------------------------------------------------------- */

grit_err hb_server_open(hb_server *s, const char *bind_host)
{
    memset(s, 0, sizeof *s);
    s->fd = -1;
    unsigned char rnd[32];
    int ufd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (ufd < 0 || read(ufd, rnd, sizeof rnd) != (ssize_t)sizeof rnd) {
        if (ufd >= 0)
            close(ufd);
        return grit_errf(GRIT_EIO, "cannot read /dev/urandom for the job secret");
    }
    close(ufd);
    for (int i = 0; i < 32; i++)
        snprintf(s->secret + 2 * i, 3, "%02x", rnd[i]);
    struct sockaddr_in a = {.sin_family = AF_INET};
    if (inet_pton(AF_INET, bind_host ? bind_host : "127.0.0.1", &a.sin_addr) != 1)
        return grit_errf(GRIT_EINVAL, "bind address '%s' is not IPv4", bind_host);
    s->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    socklen_t len = sizeof a;
    if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(s->fd, (struct sockaddr *)&a, &len) != 0)
        return grit_errf(GRIT_EIO, "heartbeat socket: %s", strerror(errno));
    char host[32];
    inet_ntop(AF_INET, &a.sin_addr, host, sizeof host);
    snprintf(s->addr, sizeof s->addr, "%s:%d", host, ntohs(a.sin_port));
    return GRIT_OK;
}

int hb_server_poll(hb_server *s, hb_msg *out, void (*log)(void *ctx, const char *why), void *ctx)
{
    for (;;) {
        char buf[1024];
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(s->fd, buf, sizeof buf - 1, 0, (struct sockaddr *)&from, &fl);
        if (n < 0)
            return 0;
        buf[n] = '\0';
        if (hb_parse(buf, s->secret, out) == GRIT_OK)
            return 1;
        s->rejected++;
        if (log) {
            char why[300], host[32];
            inet_ntop(AF_INET, &from.sin_addr, host, sizeof host);
            snprintf(why, sizeof why, "rejected a heartbeat from %s:%d: %s", host,
                     ntohs(from.sin_port), grit_errmsg());
            log(ctx, why);
        }
    }
}

void hb_server_close(hb_server *s)
{
    if (s->fd >= 0)
        close(s->fd);
    memset(s, 0, sizeof *s);
    s->fd = -1;
}
