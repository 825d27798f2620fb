/*
 * httpguard.h - absolute deadlines for libmicrohttpd connections, so that no
 * slow or trickling client holds a connection slot for long.
 *
 * libmicrohttpd's own timeout is an idle timeout, which a client that sends one
 * byte a second renews for ever. Here every connection has an absolute
 * deadline: its whole request must arrive within request_s of the connection
 * opening (or of its previous response), and the response must be taken within
 * response_s of the request. A guard thread shuts down the sockets past their
 * deadline four times a second; libmicrohttpd then sees the end of the stream
 * and frees the slot. The guard itself is core/connguard.h (which obs/http.c and
 * serve/serve.c use directly, with their own per-route deadlines); this is its
 * wiring into MHD for a server with one request and one response deadline
 * (grit rate's).
 *
 * Use: http_guard_start; pass MHD_OPTION_NOTIFY_CONNECTION, http_guard_notify,
 * guard to MHD_start_daemon; call http_guard_request_in when a request's last
 * byte is in (response deadline) and http_guard_response_out from the
 * MHD_OPTION_NOTIFY_COMPLETED callback (next request's deadline); stop the
 * daemon before http_guard_stop.
 */
#ifndef GRIT_CORE_HTTPGUARD_H
#define GRIT_CORE_HTTPGUARD_H

#include <microhttpd.h>

#include "core/error.h"

typedef struct http_guard http_guard;

grit_err http_guard_start(http_guard **out, double request_s, double response_s);
void http_guard_stop(http_guard *g); /* NULL: no-op */

void http_guard_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode code);
void http_guard_request_in(http_guard *g, struct MHD_Connection *c);
void http_guard_response_out(http_guard *g, struct MHD_Connection *c);

/* Queues a response of len bytes of data (mode: MHD's memory mode; MUST_FREE data is
 * freed even when no response can be made) with the headers every grit page server
 * sends: Content-Type type, no caching, nosniff, and Content-Security-Policy csp. */
enum MHD_Result http_reply(struct MHD_Connection *c, unsigned status, const char *type,
                           const char *csp, void *data, size_t len,
                           enum MHD_ResponseMemoryMode mode);

#endif
