/*
 * ranks.c - one verdict for an MPI job of health checks (health_merge_ranks).
 *
 * Under mpirun every rank checks its own node (compute, memory, disk, GPU,
 * system) and all of them measure the network together. Rank 0 prints the
 * report, so it must carry the other ranks' failures: each rank sends rank 0
 * a fixed-size summary (its exit code, host and up to RANK_MAX_BAD bad
 * results) and rank 0 appends them as "rank<N>.<check>" results. Network
 * results are judged identically on every rank from all-gathered numbers, so
 * they are not sent twice (but a rank's network ERROR, e.g. a missed deadline,
 * is its own and is sent). Rank 0 then computes the exit code over the merged
 * report and broadcasts it: every rank exits with the same code.
 *
 * Buffers handed to a collective that missed its deadline may still be
 * written by MPI later, so on that error they are leaked, not freed (and
 * none lives on the stack).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "health/health.h"

#define RANK_MAX_BAD 6

typedef struct rank_summary {
    int code, nbad, more;
    char host[64];
    struct {
        int verdict;
        char name[48];
        char reason[320];
    } bad[RANK_MAX_BAD];
} rank_summary;

grit_err health_merge_ranks(health_report *r, comm *d, int *code)
{
    *code = health_exit_code(r);
    if (!d || d->size < 2)
        return GRIT_OK;
    rank_summary *me = calloc(1, sizeof *me);
    rank_summary *all = d->rank == 0 ? calloc((size_t)d->size, sizeof *all) : NULL;
    double *c = calloc(1, sizeof *c);
    if (!me || !c || (d->rank == 0 && !all)) {
        free(me);
        free(all);
        free(c);
        return grit_errf(GRIT_ENOMEM, "out of memory for %d rank summaries", d->size);
    }
    me->code = *code;
    snprintf(me->host, sizeof me->host, "%s", r->host);
    for (int i = 0; i < r->n; i++) {
        const health_result *res = &r->results[i];
        if (!health_verdict_bad(res->verdict) ||
            (!strncmp(res->name, "network.", 8) && res->verdict != HEALTH_ERROR))
            continue; /* network verdicts are the same on every rank; its errors are not */
        if (me->nbad == RANK_MAX_BAD) {
            me->more++;
            continue;
        }
        me->bad[me->nbad].verdict = res->verdict;
        snprintf(me->bad[me->nbad].name, sizeof me->bad[0].name, "%s", res->name);
        snprintf(me->bad[me->nbad].reason, sizeof me->bad[0].reason, "%s", res->reason);
        me->nbad++;
    }
    grit_err rc = comm_gather(d, me, all, sizeof *me, 0);
    if (rc != GRIT_OK)
        return rc; /* me, all, c leaked on purpose (see the top) */
    if (d->rank == 0) {
        r->nranks = d->size;
        for (int q = 1; q < d->size; q++) {
            const rank_summary *s = &all[q];
            for (int i = 0; i < s->nbad; i++) {
                health_result *res = health_add(r, "rank%d.%.36s", q, s->bad[i].name);
                if (!res)
                    break;
                health_set(res, (health_verdict)s->bad[i].verdict, "rank %d (%.60s): %.240s", q,
                           s->host, s->bad[i].reason);
            }
            if (s->more) {
                health_result *res = health_add(r, "rank%d.more", q);
                if (res)
                    health_set(res, HEALTH_FAIL, "rank %d (%.60s): %d more failed check(s)", q,
                               s->host, s->more);
            }
        }
        *code = health_exit_code(r);
    }
    *c = *code;
    if ((rc = comm_bcast(d, c, sizeof *c, 0)) != GRIT_OK)
        return rc; /* leaked on purpose */
    *code = (int)*c;
    free(me);
    free(all);
    free(c);
    return GRIT_OK;
}
