/*
 * http.c - the observation server: libmicrohttpd with its own polling thread.
 *
 *   GET /            the dashboard page (web/index.html), or a 503 page saying
 *                    that uPlot is not installed and how to install it
 *   GET /dash.js /dash.css          the page's script and style (web/)
 *   GET /uplot.js /uplot.css        uPlot from web/node_modules/uplot/dist
 *   GET /api/run     the run view as JSON (obs_view); the page polls it
 *   GET /metrics     Prometheus text format 0.0.4 (obs_prometheus)
 *
 * Read-only: every route is a fixed name (no path from the request reaches the
 * file system), other methods get 405. It binds 127.0.0.1 unless told
 * otherwise. Each request rebuilds the view from the run's files, so the
 * server holds no state of its own but the live registry (obs.h); in live mode
 * a second thread samples power and persists the registry once a second.
 *
 * Slow and idle clients cannot starve it. libmicrohttpd's own timeout is an
 * idle timeout, which a client that trickles one byte a second renews for ever,
 * so 64 such clients used to fill every slot. Here every connection has an
 * absolute deadline that no trickle extends: its whole request must arrive
 * within HTTP_REQUEST_S of the connection opening (or of its previous
 * response), and a response must be taken within HTTP_RESPONSE_S; the guard
 * (core/httpguard.h over core/connguard.h, shared with grit serve and grit rate) shuts down the sockets past their
 * deadline and libmicrohttpd then frees the slot. epoll lifts select's 1024-descriptor ceiling on the slot count, and a
 * server bound beyond loopback also limits connections per client address.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/httpguard.h"
#include "core/fsutil.h"
#include "obs/obs.h"

#ifndef GRIT_WEB_DIR
#define GRIT_WEB_DIR "web"
#endif

#define HTTP_SLOTS 512       /* connections at once */
#define HTTP_PER_IP 32       /* per client address, when bound beyond loopback */
#define HTTP_REQUEST_S 5.0   /* a whole request, from the connection or the previous response */
#define HTTP_RESPONSE_S 30.0 /* a response, from its request */

struct obs_server {
    struct MHD_Daemon *d;
    http_guard *guard; /* the connections' deadlines */
    char run_dir[1024], web_dir[1024];
    obs_cfg cfg;
    int port, live, uplot;
    pthread_t ticker;
    int ticking;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
};

static const struct {
    const char *url, *file, *type;
} statics[] = {
    {"/", "index.html", "text/html; charset=utf-8"},
    {"/dash.js", "dash.js", "text/javascript; charset=utf-8"},
    {"/dash.css", "dash.css", "text/css; charset=utf-8"},
    {"/uplot.js", "node_modules/uplot/dist/uPlot.iife.min.js", "text/javascript; charset=utf-8"},
    {"/uplot.css", "node_modules/uplot/dist/uPlot.min.css", "text/css; charset=utf-8"},
};

static const char no_uplot[] =
    "<!doctype html><meta charset=utf-8><title>grit dashboard: uPlot missing</title>"
    "<h1>uPlot is not installed</h1><p>The dashboard draws its charts with uPlot from npm, "
    "which is not in <code>%s/node_modules/uplot</code>. Install it with <code>make deps</code> "
    "(or <code>cd web &amp;&amp; npm install</code>) and reload. <code>/metrics</code> and "
    "<code>/api/run</code> work without it.</p>";

/* A response went out: the next request has HTTP_REQUEST_S from now. */
static void on_completed(void *cls, struct MHD_Connection *c, void **req,
                         enum MHD_RequestTerminationCode code)
{
    (void)req, (void)code;
    http_guard_response_out(((obs_server *)cls)->guard, c);
}

/* the page may load only what this server serves */
static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             void *data, size_t len, enum MHD_ResponseMemoryMode mode)
{
    return http_reply(c, status, type, "default-src 'self'; style-src 'self' 'unsafe-inline'",
                      data, len, mode);
}

static enum MHD_Result text(struct MHD_Connection *c, unsigned status, const char *msg)
{
    return reply(c, status, "text/plain; charset=utf-8", (void *)msg, strlen(msg),
                 MHD_RESPMEM_PERSISTENT);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **req)
{
    (void)version, (void)upload, (void)req;
    obs_server *s = cls;
    http_guard_request_in(s->guard, c); /* the request is in: now its response has a deadline */
    if (strcmp(method, "GET") && strcmp(method, "HEAD"))
        return text(c, 405, "grit dashboard: read-only (GET only)\n");
    if (*upload_size)
        return text(c, 400, "grit dashboard: no request body expected\n");
    if (!strcmp(url, "/metrics") || !strcmp(url, "/api/run")) {
        int prom = !strcmp(url, "/metrics");
        json_t *v = obs_view(s->run_dir, &s->cfg, prom ? 1 : 4000);
        if (!v) {
            char msg[1400];
            snprintf(msg, sizeof msg, "%s\n", grit_errmsg());
            char *m = strdup(msg);
            return m ? reply(c, 404, "text/plain; charset=utf-8", m, strlen(m), MHD_RESPMEM_MUST_FREE)
                     : MHD_NO;
        }
        char *body = prom ? obs_prometheus(v) : json_dumps(v, JSON_COMPACT | JSON_REAL_PRECISION(15));
        json_decref(v);
        if (!body)
            return text(c, 500, "grit dashboard: out of memory\n");
        return reply(c, 200, prom ? "text/plain; version=0.0.4; charset=utf-8" : "application/json",
                     body, strlen(body), MHD_RESPMEM_MUST_FREE);
    }
    for (size_t i = 0; i < sizeof statics / sizeof statics[0]; i++) {
        if (strcmp(url, statics[i].url))
            continue;
        if (!s->uplot && i == 0) {
            char *page = NULL;
            if (asprintf(&page, no_uplot, s->web_dir) < 0)
                return MHD_NO;
            return reply(c, 503, "text/html; charset=utf-8", page, strlen(page), MHD_RESPMEM_MUST_FREE);
        }
        char path[1200], *data = NULL;
        size_t len = 0;
        snprintf(path, sizeof path, "%s/%s", s->web_dir, statics[i].file);
        if (fs_read_all(path, &data, &len) != GRIT_OK) {
            char *m = NULL;
            if (asprintf(&m, "grit dashboard: cannot read %s\n", path) < 0)
                return MHD_NO;
            return reply(c, 404, "text/plain; charset=utf-8", m, strlen(m), MHD_RESPMEM_MUST_FREE);
        }
        return reply(c, 200, statics[i].type, data, len, MHD_RESPMEM_MUST_FREE);
    }
    return text(c, 404, "grit dashboard: no such page (/, /metrics, /api/run)\n");
}

static void *tick(void *arg)
{
    obs_server *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        pthread_mutex_unlock(&s->mu);
        obs_power_sample();
        obs_registry_save(s->run_dir); /* best effort: the next tick tries again */
        pthread_mutex_lock(&s->mu);
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_sec += 1;
        if (!s->stop)
            pthread_cond_timedwait(&s->cv, &s->mu, &t);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

grit_err obs_serve(const obs_serve_opts *o, obs_server **out)
{
    *out = NULL;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    const char *bind = o->bind && strcmp(o->bind, "localhost") ? o->bind : "127.0.0.1";
    if (o->port < 0 || o->port > 65535)
        return grit_errf(GRIT_EINVAL, "dashboard port %d: expected 0..65535", o->port);
    if (inet_pton(AF_INET, bind, &sa.sin_addr) != 1)
        return grit_errf(GRIT_EINVAL, "dashboard bind address '%s': expected an IPv4 address "
                                      "such as 127.0.0.1", bind);
    obs_server *s = calloc(1, sizeof *s);
    if (!s)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    snprintf(s->run_dir, sizeof s->run_dir, "%s", o->run_dir);
    const char *web = o->web_dir ? o->web_dir : getenv("GRIT_WEB_DIR");
    snprintf(s->web_dir, sizeof s->web_dir, "%s", web && *web ? web : GRIT_WEB_DIR);
    s->cfg = o->cfg;
    s->live = o->live;
    char probe[1200];
    snprintf(probe, sizeof probe, "%s/node_modules/uplot/dist/uPlot.iife.min.js", s->web_dir);
    s->uplot = access(probe, R_OK) == 0;
    if (!s->uplot)
        fprintf(stderr, "grit dashboard: uPlot is not installed (%s missing): the page will say "
                        "so; run make deps (or npm install in %s)\n", probe, s->web_dir);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (http_guard_start(&s->guard, HTTP_REQUEST_S, HTTP_RESPONSE_S) != GRIT_OK) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
        free(s);
        return grit_errf(GRIT_EIO, "dashboard: cannot start the deadline thread");
    }
    int loopback = (ntohl(sa.sin_addr.s_addr) >> 24) == 127;
    s->d = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD, 0, NULL, NULL, handle, s,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_SLOTS,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, loopback ? 0u : (unsigned)HTTP_PER_IP,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_RESPONSE_S,
                            MHD_OPTION_NOTIFY_CONNECTION, http_guard_notify, s->guard,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_END);
    if (!s->d) {
        grit_err rc = grit_errf(GRIT_EIO, "cannot serve the dashboard on %s:%d (port in use, or not an "
                                          "address of this machine?)", bind, o->port);
        http_guard_stop(s->guard);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
        free(s);
        return rc;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : o->port;
    if (s->live && pthread_create(&s->ticker, NULL, tick, s) == 0)
        s->ticking = 1;
    *out = s;
    return GRIT_OK;
}

int obs_server_port(const obs_server *s)
{
    return s->port;
}

void obs_server_close(obs_server *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->ticking)
        pthread_join(s->ticker, NULL);
    MHD_stop_daemon(s->d); /* closes the remaining connections (the guard forgets them) */
    http_guard_stop(s->guard);
    if (s->live) {
        obs_registry_save(s->run_dir);
        obs_power_close(); /* the ticker has stopped: nothing samples any more */
    }
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}
