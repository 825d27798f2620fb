/*
 * httpguard.c - libmicrohttpd wiring of the connection deadline guard (see
 * httpguard.h): each connection's socket is registered with core/connguard.h when MHD
 * opens it and forgotten when MHD closes it; the request and response deadlines move
 * it along. The guard thread and its list are connguard's. Also the one way grit's
 * page servers (the dashboard, grit rate) queue a response with their headers.
 */
#include "core/httpguard.h"

#include <stdlib.h>

#include "core/connguard.h"

struct http_guard {
    conn_guard *g;
    double request_s, response_s;
};

grit_err http_guard_start(http_guard **out, double request_s, double response_s)
{
    http_guard *h = calloc(1, sizeof *h);
    *out = NULL;
    if (!h)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    h->request_s = request_s, h->response_s = response_s;
    grit_err rc = conn_guard_start(&h->g);
    if (rc != GRIT_OK) {
        free(h);
        return rc;
    }
    *out = h;
    return GRIT_OK;
}

void http_guard_stop(http_guard *h)
{
    if (!h)
        return;
    conn_guard_stop(h->g);
    free(h);
}

void http_guard_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode code)
{
    http_guard *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        /* without memory the connection goes unguarded: MHD's idle timeout remains */
        *socket_context = ci ? conn_guard_add(h->g, ci->connect_fd, h->request_s) : NULL;
    } else { /* closed: before its socket is, so no descriptor is reused under the guard */
        conn_guard_remove(h->g, *socket_context);
        *socket_context = NULL;
    }
}

static void rearm(http_guard *h, struct MHD_Connection *c, double seconds)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (ci)
        conn_guard_set(h->g, ci->socket_context, seconds);
}

void http_guard_request_in(http_guard *h, struct MHD_Connection *c) { rearm(h, c, h->response_s); }
void http_guard_response_out(http_guard *h, struct MHD_Connection *c) { rearm(h, c, h->request_s); }

enum MHD_Result http_reply(struct MHD_Connection *c, unsigned status, const char *type,
                           const char *csp, void *data, size_t len,
                           enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, data, mode);
    if (!r) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(data);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Content-Security-Policy", csp);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}
