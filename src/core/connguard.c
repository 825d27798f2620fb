/*
 * connguard.c - see connguard.h. A doubly linked list of open connections
 * under one mutex, and a thread that wakes four times a second (or at stop)
 * and shuts down every socket past its deadline. A deadline of 0 marks one
 * shut down already (it is never moved again); INFINITY is none.
 */
#define _GNU_SOURCE
#include "core/connguard.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

struct conn_guard_entry {
    int fd;
    double deadline; /* CLOCK_MONOTONIC seconds; 0: shut down already; INFINITY: none */
    conn_guard_entry *prev, *next;
};

struct conn_guard {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int stop;
    conn_guard_entry *head;
};

static double mono_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void *run(void *arg)
{
    conn_guard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        double now = mono_now();
        for (conn_guard_entry *e = g->head; e; e = e->next)
            if (e->deadline > 0 && now > e->deadline) {
                shutdown(e->fd, SHUT_RDWR); /* the server reads the end of the stream */
                e->deadline = 0;
            }
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 250000000L;
        if (t.tv_nsec >= 1000000000L) {
            t.tv_sec++;
            t.tv_nsec -= 1000000000L;
        }
        if (!g->stop)
            pthread_cond_timedwait(&g->cv, &g->mu, &t);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

grit_err conn_guard_start(conn_guard **out)
{
    *out = NULL;
    conn_guard *g = calloc(1, sizeof *g);
    if (!g)
        return grit_errf(GRIT_ENOMEM, "out of memory");
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

conn_guard_entry *conn_guard_add(conn_guard *g, int fd, double seconds)
{
    conn_guard_entry *e = g ? calloc(1, sizeof *e) : NULL;
    if (!e)
        return NULL;
    e->fd = fd;
    e->deadline = isinf(seconds) ? INFINITY : mono_now() + seconds;
    pthread_mutex_lock(&g->mu);
    e->next = g->head;
    if (g->head)
        g->head->prev = e;
    g->head = e;
    pthread_mutex_unlock(&g->mu);
    return e;
}

void conn_guard_set(conn_guard *g, conn_guard_entry *e, double seconds)
{
    if (!g || !e)
        return;
    pthread_mutex_lock(&g->mu);
    if (e->deadline > 0)
        e->deadline = isinf(seconds) ? INFINITY : mono_now() + seconds;
    pthread_mutex_unlock(&g->mu);
}

void conn_guard_remove(conn_guard *g, conn_guard_entry *e)
{
    if (!g || !e)
        return;
    pthread_mutex_lock(&g->mu);
    if (e->prev)
        e->prev->next = e->next;
    else
        g->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    pthread_mutex_unlock(&g->mu);
    free(e);
}

void conn_guard_stop(conn_guard *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    g->stop = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->thread, NULL);
    for (conn_guard_entry *e = g->head, *n; e; e = n) {
        n = e->next;
        free(e);
    }
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g);
}
