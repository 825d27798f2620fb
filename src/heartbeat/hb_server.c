/* hb_server.c - the supervisor's end of the heartbeat protocol (see hb.h): a
 * non-blocking UDP socket, a fresh job secret per run, every line parsed by hb_parse
 * and every rejected one counted and reported without the secret. */
#define _GNU_SOURCE
#include "heartbeat/hb.h"

#include "core/randhex.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/randhex.h"

grit_err hb_server_open(hb_server *s, const char *bind_host)
{
    memset(s, 0, sizeof *s);
    s->fd = -1;
    grit_err rc = rand_hex(s->secret, 32, "the job secret");
    if (rc != GRIT_OK)
        return rc;
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
    /* a flood of rejected datagrams must not hold the caller here: after this many in
     * one call it gets 0 and comes back at its next poll */
    for (int bad = 0; bad < HB_POLL_REJECT_MAX; bad++) {
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
    return 0;
}

void hb_server_close(hb_server *s)
{
    if (s->fd >= 0)
        close(s->fd);
    memset(s, 0, sizeof *s);
    s->fd = -1;
}
