/*
 * hb_bind.h - where the supervisor's heartbeat socket listens, and which node slots are
 * other machines (docs/heartbeat.md "across hosts").
 *
 * The heartbeat socket (heartbeat/hb.h) is UDP on one IPv4 address. On loopback it
 * hears only ranks on this machine; under a backend whose ranks run on other hosts
 * (Slurm) every beat of theirs would be lost without a word, and hang, NaN and
 * straggler detection would fall back to process exits. So, when the user gave no
 * --bind, the address is chosen from the allocation (the backend's addrs hook, e.g.
 * Slurm's NodeAddr of each host):
 *
 *   1. every host's address is this machine's (loopback or a local interface): every
 *      rank is local, loopback (127.0.0.1) as for the local backend;
 *   2. this machine is one of the hosts (the batch host of an sbatch job) with a
 *      non-loopback address: that address, the one the allocation knows it by;
 *   3. else (salloc from a login node): the source address of this machine's route to
 *      the first other host with a known address, i.e. the interface they reach us on;
 *   4. nothing known or no route: loopback, and a warning that says to give --bind.
 *
 * Never 0.0.0.0 (every interface) unless the user says so with --bind. The datagrams
 * stay authenticated by the job's secret whatever the address.
 *
 * The same pass marks each host local or not; a host with no known address counts as
 * another machine (its silence then gets the heartbeats_missing warning, sup.c).
 */
#ifndef GRIT_SUPERVISE_HB_BIND_H
#define GRIT_SUPERVISE_HB_BIND_H

#include <stddef.h>

#define HB_BIND_ADDR_MAX 16 /* "255.255.255.255" + NUL */

/* How this machine's network is looked at (real: hb_bind_sys; tests: fakes). */
typedef struct hb_bind_net {
    /* 1 when addr (dotted IPv4) is an address of this machine (127/8 always is) */
    int (*is_local)(void *ctx, const char *addr);
    /* the source address this machine sends from to reach dst; 0, or -1 (no route) */
    int (*route)(void *ctx, const char *dst, char src[HB_BIND_ADDR_MAX]);
    void *ctx;
} hb_bind_net;

/* The real network: getifaddrs for is_local, a connected (never used) UDP socket's
 * local address for route. */
extern const hb_bind_net hb_bind_sys;

/* Chooses the bind address for hosts names[0..n) whose addresses are addrs[i] (dotted
 * IPv4, "" unknown), by the rules above. Fills bind, why (one line for the log, naming
 * the rule and host) and local[i] (1: host i is this machine). Returns 0, or 1 when it
 * fell back to loopback although some host is another machine (rule 4: warn). */
int hb_bind_choose(const hb_bind_net *net, const char (*names)[32], const char (*addrs)[16],
                   int n, char bind[HB_BIND_ADDR_MAX], char *why, size_t wcap,
                   unsigned char *local);

#endif
