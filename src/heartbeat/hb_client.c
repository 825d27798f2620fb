/*
 * hb_client.c - a worker's heartbeat client (see hb.h): a background thread that
 * sends the latest step's beat every period and, when the caller gave a sampler,
 * samples the machine's energy before each beat, outside the lock the training
 * thread takes (a sample may take milliseconds: NVML). The training thread only
 * records its step under the lock and sends that beat at once.
 *
 * Signals (hb.h): util= from the process's CPU clock at each periodic beat; with net,
 * the thread also wakes every HB_NET_SLICE_S between beats to read the interface
 * counters and keeps the peak rate until the next beat; with gpu, it samples the node's
 * GPUs (hb_gpu.h) before each periodic beat, outside mu like the energy. All are
 * computed on this thread only and published under mu.
 */
#define _GNU_SOURCE
#include "heartbeat/hb.h"
#include "heartbeat/hb_gpu.h"

#include <arpa/inet.h>
#include <dirent.h>
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
    /* signals: the last beat's values (under mu; NAN: not measured yet) */
    double util, net_rx, net_tx, gpu_util, sm_clock;
    bool gpu;                    /* sample the node's GPUs (opened on the thread) */
    /* the beat thread's own bookkeeping (no lock: only it touches these) */
    double cpu0, wall0;          /* process CPU and wall clock at the previous beat */
    bool net;                    /* sample the interfaces */
    char iface[64];              /* "" every interface but lo */
    double nrx0, ntx0, nt0;      /* counters and time at the previous slice (nt0 < 0: none) */
    double peak_rx, peak_tx;     /* peak rates since the previous beat */
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
    char line[768], energy[160] = "", sig[160] = "";
    if (c->energy.sources)
        snprintf(energy, sizeof energy, " energy_j=%.3f power_w=%.3f esrc=%d gpus=%d",
                 c->energy.joules, c->energy.watts, c->energy.sources, c->energy.gpus);
    int n = 0;
    if (isfinite(c->util))
        n += snprintf(sig, sizeof sig, " util=%.4f", c->util);
    if (isfinite(c->net_rx))
        n += snprintf(sig + n, sizeof sig - (size_t)n, " net_rx=%.0f net_tx=%.0f", c->net_rx, c->net_tx);
    if (isfinite(c->gpu_util))
        n += snprintf(sig + n, sizeof sig - (size_t)n, " gpu_util=%.4f", c->gpu_util);
    if (isfinite(c->sm_clock))
        snprintf(sig + n, sizeof sig - (size_t)n, " sm_clock=%.4f", c->sm_clock);
    snprintf(line, sizeof line,
             "HB1 %s rank=%d node=%s step=%ld loss=%.9g gnorm=%.9g step_time=%.6f "
             "comm_time=%.6f pid=%ld host=%s%s%s\n",
             c->secret, c->rank, c->node, c->step, c->loss, c->gnorm, c->step_time,
             c->comm_time, (long)getpid(), c->host[0] ? c->host : "-", energy, sig);
    send_line(c, line);
}

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One counter file; -1 when unreadable. */
static double read_counter(const char *iface, const char *which)
{
    char path[384], buf[64];
    snprintf(path, sizeof path, "/sys/class/net/%.255s/statistics/%.16s", iface, which);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    double v = fgets(buf, sizeof buf, f) ? strtod(buf, NULL) : -1;
    fclose(f);
    return v;
}

/* The node's total received and sent bytes (the named interface, or every one but
 * lo): 0, or -1 when none could be read (no sysfs: the signal is not sent). */
static int net_totals(const hb_client *c, double *rx, double *tx)
{
    *rx = *tx = 0;
    if (c->iface[0]) {
        *rx = read_counter(c->iface, "rx_bytes");
        *tx = read_counter(c->iface, "tx_bytes");
        return *rx >= 0 && *tx >= 0 ? 0 : -1;
    }
    DIR *d = opendir("/sys/class/net");
    if (!d)
        return -1;
    int got = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || !strcmp(e->d_name, "lo"))
            continue;
        double r = read_counter(e->d_name, "rx_bytes"), t = read_counter(e->d_name, "tx_bytes");
        if (r >= 0 && t >= 0) {
            *rx += r;
            *tx += t;
            got = 1;
        }
    }
    closedir(d);
    return got ? 0 : -1;
}

/* One slice: the rates since the previous sample, kept when they are a new peak. */
static void net_slice(hb_client *c)
{
    double rx, tx, t = clock_s(CLOCK_MONOTONIC);
    if (net_totals(c, &rx, &tx) != 0)
        return;
    if (c->nt0 >= 0 && t - c->nt0 > 1e-3 && rx >= c->nrx0 && tx >= c->ntx0) {
        c->peak_rx = fmax(c->peak_rx, (rx - c->nrx0) / (t - c->nt0));
        c->peak_tx = fmax(c->peak_tx, (tx - c->ntx0) / (t - c->nt0));
    }
    c->nrx0 = rx;
    c->ntx0 = tx;
    c->nt0 = t;
}

/* At a periodic beat (c->mu held): util since the previous beat, the net peaks. */
static void signals_publish(hb_client *c)
{
    double cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID), wall = clock_s(CLOCK_MONOTONIC);
    if (c->wall0 > 0 && wall - c->wall0 > 0.05)
        c->util = (cpu - c->cpu0) / (wall - c->wall0);
    c->cpu0 = cpu;
    c->wall0 = wall;
    if (c->net && c->peak_rx >= 0) {
        c->net_rx = c->peak_rx;
        c->net_tx = c->peak_tx;
    }
    c->peak_rx = c->peak_tx = c->net && c->nt0 >= 0 ? 0 : -1;
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

/* Samples the node's GPUs (c->mu not held: NVML calls), then publishes them. */
static void gpu_sample(hb_client *c, hb_gpu *g)
{
    if (!g)
        return;
    double u, k;
    hb_gpu_sample(g, &u, &k);
    pthread_mutex_lock(&c->mu);
    c->gpu_util = u;
    c->sm_clock = k;
    pthread_mutex_unlock(&c->mu);
}

static void *client_loop(void *arg)
{
    hb_client *c = arg;
    hb_gpu *g = c->gpu ? hb_gpu_open() : NULL; /* NVML's init may take a while: here */
    meter_sample(c); /* the baseline */
    pthread_mutex_lock(&c->mu);
    c->cpu0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    c->wall0 = clock_s(CLOCK_MONOTONIC);
    if (c->net)
        net_slice(c);
    double next_beat = c->wall0 + c->period;
    while (!c->quit) {
        /* wake at the next beat, or at the next net slice before it */
        double now = clock_s(CLOCK_MONOTONIC);
        double wake = c->net ? fmin(next_beat, now + HB_NET_SLICE_S) : next_beat;
        double t = clock_s(CLOCK_REALTIME) + fmax(0.0, wake - now);
        struct timespec ts;
        ts.tv_sec = (time_t)t;
        ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
        if (!c->final)
            pthread_cond_timedwait(&c->cv, &c->mu, &ts);
        if (c->quit)
            break;
        if (c->net)
            net_slice(c); /* sysfs reads: microseconds, fine under mu */
        if (!c->final && clock_s(CLOCK_MONOTONIC) < next_beat)
            continue;
        next_beat = clock_s(CLOCK_MONOTONIC) + c->period;
        c->final = 0;
        signals_publish(c);
        if (c->sample || g) {
            pthread_mutex_unlock(&c->mu);
            meter_sample(c);
            gpu_sample(c, g);
            pthread_mutex_lock(&c->mu);
        }
        if (!c->quit)
            send_beat(c);
        c->beats++;
        pthread_cond_broadcast(&c->done_cv);
    }
    pthread_cond_broadcast(&c->done_cv);
    pthread_mutex_unlock(&c->mu);
    hb_gpu_close(g);
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
    c->util = c->net_rx = c->net_tx = c->gpu_util = c->sm_clock = NAN;
    c->net = o->net;
    c->gpu = o->gpu;
    c->nt0 = -1;
    c->peak_rx = c->peak_tx = -1;
    const char *ifn = getenv("GRIT_NET_IFACE");
    snprintf(c->iface, sizeof c->iface, "%s", ifn && *ifn && !strchr(ifn, '/') ? ifn : "");
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
    const char *dir = getenv("GRIT_SUP_DONE_DIR");
    if (!strcmp(kind, "done") && dir && *dir) {
        /* the datagram can be lost (a flood fills the supervisor's socket); a local
         * supervisor also looks for this file when the process is gone */
        char path[4200];
        snprintf(path, sizeof path, "%s/rank_%d", dir, c->rank);
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0)
            close(fd);
    }
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
