/*
 * httpguard.c - absolute connection deadlines for libmicrohttpd servers (see
 * httpguard.h): a list of open connections under a mutex, and a thread that
 * shuts down the sockets past their deadline every 250 ms.
 */
#define _GNU_SOURCE
#include "core/httpguard.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

typedef struct gconn {
    int fd;
    double deadline; /* CLOCK_MONOTONIC seconds; 0: shut down already */
    struct gconn *prev, *next;
} gconn;

struct http_guard {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    gconn *conns;
    double request_s, response_s;
    int stop;
};

static double mono(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void *run(void *arg)
{
    http_guard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        double now = mono();
        for (gconn *h = g->conns; h; h = h->next)
            if (h->deadline > 0 && now > h->deadline) {
                shutdown(h->fd, SHUT_RDWR); /* MHD reads the end of the stream and closes */
                h->deadline = 0;
            }
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 250000000L;
        if (t.tv_nsec >= 1000000000L)
            t.tv_sec++, t.tv_nsec -= 1000000000L;
        if (!g->stop)
            pthread_cond_timedwait(&g->cv, &g->mu, &t);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

grit_err http_guard_start(http_guard **out, double request_s, double response_s)
{
    http_guard *g = calloc(1, sizeof *g);
    *out = NULL;
    if (!g)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    g->request_s = request_s, g->response_s = response_s;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    if (pthread_create(&g->thread, NULL, run, g) != 0) {
        pthread_mutex_destroy(&g->mu);
        pthread_cond_destroy(&g->cv);
        free(g);
        return grit_errf(GRIT_EIO, "cannot start the connection deadline thread");
    }
    *out = g;
    return GRIT_OK;
}

void http_guard_stop(http_guard *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    g->stop = 1;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->thread, NULL);
    while (g->conns) {
        gconn *h = g->conns;
        g->conns = h->next;
        free(h);
    }
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g);
}

void http_guard_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode code)
{
    http_guard *g = cls;
    pthread_mutex_lock(&g->mu);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        gconn *h = ci ? calloc(1, sizeof *h) : NULL;
        if (h) { /* without memory the connection goes unguarded: MHD's idle timeout remains */
            h->fd = ci->connect_fd;
            h->deadline = mono() + g->request_s;
            h->next = g->conns;
            if (g->conns)
                g->conns->prev = h;
            g->conns = h;
        }
        *socket_context = h;
    } else if (*socket_context) { /* closed: before its socket is, so no fd is reused */
        gconn *h = *socket_context;
        if (h->prev)
            h->prev->next = h->next;
        else
            g->conns = h->next;
        if (h->next)
            h->next->prev = h->prev;
        free(h);
        *socket_context = NULL;
    }
    pthread_mutex_unlock(&g->mu);
}

static void rearm(http_guard *g, struct MHD_Connection *c, double seconds)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (!ci || !ci->socket_context)
        return;
    pthread_mutex_lock(&g->mu);
    gconn *h = ci->socket_context;
    if (h->deadline > 0)
        h->deadline = mono() + seconds;
    pthread_mutex_unlock(&g->mu);
}

void http_guard_request_in(http_guard *g, struct MHD_Connection *c) { rearm(g, c, g->response_s); }
void http_guard_response_out(http_guard *g, struct MHD_Connection *c) { rearm(g, c, g->request_s); }
