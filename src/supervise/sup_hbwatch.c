/*
 * sup_hbwatch.c - heartbeats across hosts (docs/heartbeat.md "across hosts").
 *
 *   sup_hb_plan      at start, before the socket opens: the backend's host addresses
 *                    (Slurm: NodeAddr) -> the address to listen on (hb_bind.h) unless
 *                    --bind gave one, and which hosts are this machine
 *   sup_hb_announce  the address and why: a line on stderr and a heartbeat_bind event
 *   sup_hb_launched  at each launch: which ranks run on other machines
 *   sup_hb_watch     while running: ranks elsewhere that sent no heartbeat at all by
 *                    --heartbeat-wait seconds after the launch (or by the job's step
 *                    SUP_HBM_STEPS, which they cannot have missed in a synchronous job)
 *                    are named in a warning on stderr (even with --quiet) and a
 *                    heartbeats_missing event; the summary repeats it. Without their
 *                    beats, hang, NaN and straggler detection for them falls back to
 *                    process exits, which nobody would notice otherwise. Once every
 *                    rank elsewhere was heard: a heartbeats_heard event (the evidence).
 *
 * A backend without addresses (local: mpirun on this machine) has no ranks elsewhere:
 * nothing here applies to it. The job's secret is never logged.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/progress.h"
#include "supervise/hb_bind.h"
#include "supervise/sup_internal.h"

#define HBM_LOOK_S 0.5 /* ranks elsewhere are looked at this often until all were heard */

grit_err sup_hb_plan(sup *s, const char (*hosts)[32], int n)
{
    if (!s->be->addrs || n <= 0)
        return GRIT_OK;
    char (*addrs)[16] = calloc((size_t)n, sizeof *addrs);
    unsigned char *local = calloc((size_t)n, 1);
    s->local_hosts = calloc((size_t)n, sizeof *s->local_hosts);
    if (!addrs || !local || !s->local_hosts) {
        free(addrs), free(local);
        return grit_errf(GRIT_ENOMEM, "heartbeat address: out of memory for %d hosts", n);
    }
    s->be->addrs(s->o, hosts, n, addrs);
    char bind[HB_BIND_ADDR_MAX];
    s->hb_fallback = hb_bind_choose(&hb_bind_sys, hosts, (const char (*)[16])addrs, n, bind,
                                    s->hb_why, sizeof s->hb_why, local);
    if (!s->o->bind) /* --bind wins; the hosts' locality is still needed */
        snprintf(s->hb_bind, sizeof s->hb_bind, "%s", bind);
    for (int i = 0; i < n; i++)
        if (local[i])
            snprintf(s->local_hosts[s->nlocal++], sizeof *s->local_hosts, "%s", hosts[i]);
    free(addrs), free(local);
    return GRIT_OK;
}

/* Whether node is one of the allocation's hosts found to be this machine. */
static int is_here(const sup *s, const char *node)
{
    for (int k = 0; k < s->nlocal; k++)
        if (!strcmp(s->local_hosts[k], node))
            return 1;
    return 0;
}

/* The hosts of the allocation that are elsewhere, comma list into out. */
static void remote_hosts(const sup *s, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < s->cl.count; i++) {
        if (!is_here(s, s->cl.n[i].name) && o + strlen(s->cl.n[i].name) + 5 < cap)
            o += (size_t)snprintf(out + o, cap - o, "%s%s", o ? "," : "", s->cl.n[i].name);
    }
}

void sup_hb_announce(sup *s)
{
    if (!s->hb_why[0])
        return; /* the backend knows no addresses: 127.0.0.1 or --bind, as ever */
    const char *how = s->o->bind ? "--bind" : "allocation";
    char remote[512];
    remote_hosts(s, remote, sizeof remote);
    if (s->o->bind)
        sup_say(s, "heartbeats on %s (--bind; from the allocation it would be %s: %s)",
                s->hb.addr, s->hb_fallback ? "loopback" : "chosen", s->hb_why);
    else if (s->hb_fallback) /* rule 4: nobody else can reach it; said even with --quiet */
        fprintf(stderr, "grit launch: WARNING: heartbeats on %s: %s\n", s->hb.addr, s->hb_why);
    else
        sup_say(s, "heartbeats on %s: %s", s->hb.addr, s->hb_why);
    sup_event(s, "heartbeat_bind", json_pack("{s:s,s:s,s:s,s:s}", "address", s->hb.addr, "by",
                                             how, "reason", s->hb_why, "remote_hosts",
                                             remote[0] ? remote : "-"));
}

void sup_hb_launched(sup *s)
{
    for (int r = 0; r < s->nranks; r++)
        s->rk[r].remote = (char)(s->be->remote_ranks && !is_here(s, s->rk[r].node));
    s->hbm_checked = !s->be->remote_ranks || s->o->heartbeat_wait <= 0;
    s->hbm_ts = 0;
}

void sup_hb_watch(sup *s)
{
    if (s->hbm_checked)
        return;
    double now = now_seconds(), after = now - s->launch_ts;
    int due = after >= s->o->heartbeat_wait || s->max_step >= SUP_HBM_STEPS;
    if (!due && now - s->hbm_ts < HBM_LOOK_S)
        return; /* a large job's ranks are not walked on every poll */
    s->hbm_ts = now;
    char nodes[256] = "";
    size_t o = 0;
    int nsilent = 0, cut = 0;
    for (int r = 0; r < s->nranks; r++) {
        const rank_info *ri = &s->rk[r];
        if (!ri->remote || ri->last_beat > 0)
            continue;
        nsilent++;
        /* ranks of a node are adjacent (rank r on node r / R): a node is named once */
        if (r > 0 && !strcmp(s->rk[r - 1].node, ri->node) && s->rk[r - 1].remote &&
            s->rk[r - 1].last_beat <= 0)
            continue;
        if (o + strlen(ri->node) + 8 < sizeof nodes)
            o += (size_t)snprintf(nodes + o, sizeof nodes - o, "%s%s", o ? "," : "", ri->node);
        else
            cut = 1;
    }
    if (cut) /* room for it was kept above */
        snprintf(nodes + o, sizeof nodes - o, ",...");
    if (!nsilent) { /* every rank elsewhere was heard: the evidence, once per launch */
        s->hbm_checked = 1;
        int nremote = 0;
        for (int r = 0; r < s->nranks; r++)
            nremote += s->rk[r].remote;
        if (nremote) {
            sup_say(s, "heartbeats from all %d rank(s) on other hosts, %.1f s after the launch",
                    nremote, after);
            sup_event(s, "heartbeats_heard", json_pack("{s:i,s:i,s:s,s:f}", "attempt",
                                                       s->attempt, "ranks", nremote, "address",
                                                       s->hb.addr, "after_s", after));
        }
        return;
    }
    if (!due)
        return;
    s->hbm_checked = 1;
    s->hbm_warnings++;
    snprintf(s->hbm_nodes, sizeof s->hbm_nodes, "%s", nodes);
    const char *port = strrchr(s->hb.addr, ':');
    int loop = !strncmp(s->hb.addr, "127.", 4);
    char when[96];
    if (s->max_step >= SUP_HBM_STEPS)
        snprintf(when, sizeof when, "while the job reached step %ld", s->max_step);
    else
        snprintf(when, sizeof when, "within %.0f s of the launch", after);
    fprintf(stderr,
            "grit launch: WARNING: no heartbeat from %d rank(s) on other hosts (%s) %s "
            "(attempt %d). The supervisor listens on %s%s. Without their heartbeats, hangs, "
            "NaN and stragglers on those hosts are caught only when a process exits. Check "
            "that those hosts can send UDP to this address (routes, a firewall letting port "
            "%s through), or give grit launch --bind ADDR with an address of this machine "
            "that they reach (docs/heartbeat.md); a program that sends no heartbeats at all: "
            "--heartbeat-wait 0.\n",
            nsilent, nodes, when, s->attempt, s->hb.addr,
            loop ? " (loopback: no other host can reach it)" : "", port ? port + 1 : "?");
    sup_event(s, "heartbeats_missing",
              json_pack("{s:i,s:s,s:i,s:s,s:b,s:f,s:I}", "attempt", s->attempt, "nodes", nodes,
                        "ranks", nsilent, "address", s->hb.addr, "loopback", loop, "after_s",
                        after, "step", (json_int_t)s->max_step));
}

void sup_hb_summary(const sup *s, FILE *f)
{
    if (s->hbm_warnings)
        fprintf(f, "  %-20s none from %s on %d launch(es): detection there by process exits "
                   "only (event heartbeats_missing; listened on %s)\n",
                "heartbeats", s->hbm_nodes, s->hbm_warnings, s->hb.addr);
}
