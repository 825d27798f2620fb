/* hb_bind.c - the heartbeat socket's address from the allocation's hosts (hb_bind.h). */
#define _GNU_SOURCE
#include "supervise/hb_bind.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int is_loopback(const char *addr)
{
    struct in_addr a;
    return inet_pton(AF_INET, addr, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

static int sys_is_local(void *ctx, const char *addr)
{
    (void)ctx;
    struct in_addr want;
    if (inet_pton(AF_INET, addr, &want) != 1)
        return 0;
    if (is_loopback(addr))
        return 1;
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0)
        return 0;
    int found = 0;
    for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next)
        found = i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
                ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == want.s_addr;
    freeifaddrs(ifs);
    return found;
}

/* connect() on a UDP socket only picks the route and the source address: nothing is sent */
static int sys_route(void *ctx, const char *dst, char src[HB_BIND_ADDR_MAX])
{
    (void)ctx;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(9)};
    if (inet_pton(AF_INET, dst, &a.sin_addr) != 1)
        return -1;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    socklen_t len = sizeof a;
    int rc = connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
                     getsockname(fd, (struct sockaddr *)&a, &len) == 0 &&
                     inet_ntop(AF_INET, &a.sin_addr, src, HB_BIND_ADDR_MAX)
                 ? 0
                 : -1;
    close(fd);
    return rc;
}

const hb_bind_net hb_bind_sys = {.is_local = sys_is_local, .route = sys_route, .ctx = NULL};

int hb_bind_choose(const hb_bind_net *net, const char (*names)[32], const char (*addrs)[16],
                   int n, char bind[HB_BIND_ADDR_MAX], char *why, size_t wcap,
                   unsigned char *local)
{
    int self = -1, other = -1, first_unknown = -1, unknown = 0, remote = 0;
    for (int i = 0; i < n; i++) {
        local[i] = addrs[i][0] && (is_loopback(addrs[i]) || net->is_local(net->ctx, addrs[i]));
        if (!local[i]) {
            remote++;
            unknown += !addrs[i][0];
            if (first_unknown < 0 && !addrs[i][0])
                first_unknown = i;
            if (other < 0 && addrs[i][0])
                other = i;
        } else if (self < 0 && !is_loopback(addrs[i]))
            self = i;
    }
    snprintf(bind, HB_BIND_ADDR_MAX, "127.0.0.1");
    if (!remote) { /* rule 1 */
        snprintf(why, wcap, "every host of the allocation (%d) is this machine: loopback", n);
        return 0;
    }
    if (self >= 0) { /* rule 2 */
        snprintf(bind, HB_BIND_ADDR_MAX, "%s", addrs[self]);
        snprintf(why, wcap, "this machine is %s of the allocation, at %s; %d host(s) elsewhere",
                 names[self], addrs[self], remote);
        return 0;
    }
    char src[HB_BIND_ADDR_MAX];
    if (other >= 0 && net->route(net->ctx, addrs[other], src) == 0 && !is_loopback(src)) {
        snprintf(bind, HB_BIND_ADDR_MAX, "%s", src); /* rule 3 */
        snprintf(why, wcap, "this machine is not in the allocation; it reaches %s (%s) from %s",
                 names[other], addrs[other], src);
        return 0;
    }
    if (other >= 0) /* rule 4 */
        snprintf(why, wcap, "no route from this machine to %s (%s): loopback; ranks on other "
                            "hosts cannot send heartbeats (give --bind ADDR)",
                 names[other], addrs[other]);
    else
        snprintf(why, wcap, "the address of none of the %d other host(s) is known (%s%s): "
                            "loopback; ranks on other hosts cannot send heartbeats (give "
                            "--bind ADDR)",
                 unknown, names[first_unknown], unknown > 1 ? ", ..." : "");
    return 1;
}
