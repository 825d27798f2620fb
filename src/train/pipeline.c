/*
 * pipeline.c - the 1F1B schedule (pipeline.h).
 */
#include "train/pipeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/bigalloc.h"
#include "core/progress.h"

enum { PP_TAG = 4242 }; /* one direction carries one kind: activations forward, gradients back */

grit_err pp_init(pp_sched *s, comm *pp, gx_model *m, int micro)
{
    memset(s, 0, sizeof *s);
    if (micro < 1)
        return grit_errf(GRIT_EINVAL, "pipeline: %d micro-batches per step, expected >= 1",
                         micro);
    if (pp->size != m->pp || pp->rank != m->pp_rank)
        return grit_errf(GRIT_EINVAL, "pipeline: group rank %d of %d holds stage %d of %d",
                         pp->rank, pp->size, m->pp_rank, m->pp);
    s->pp = pp;
    s->m = m;
    s->stages = pp->size;
    s->stage = pp->rank;
    s->micro = micro;
    int warm = s->stages - s->stage - 1;
    s->slots = (warm < micro ? warm : micro) + 1;
    size_t nc = (size_t)m->ns * (size_t)m->cfg.hidden; /* a stage boundary: its rows */
    s->ring = big_alloc(sizeof(float) * nc * (size_t)s->slots);
    s->out = big_alloc(sizeof(float) * nc);
    s->grad = big_alloc(sizeof(float) * nc);
    s->dsend = big_alloc(sizeof(float) * nc);
    if (!s->ring || !s->out || !s->grad || !s->dsend) {
        pp_free(s);
        return grit_errf(GRIT_ENOMEM, "pipeline: out of memory for %d stage inputs of %zu floats",
                         s->slots + 3, nc);
    }
    return GRIT_OK;
}

void pp_free(pp_sched *s)
{
    if (!s)
        return;
    free(s->ring);
    free(s->out);
    free(s->grad);
    free(s->dsend);
    memset(s, 0, sizeof *s);
}

double pp_bubble(int stages, int micro)
{
    return (double)(stages - 1) / (double)(micro + stages - 1);
}

typedef struct run {
    pp_sched *s;
    const int32_t *const *tok;
    const gx_batch *sft;
    float gs;
    size_t bytes;          /* one boundary tensor */
    int prev, next;        /* neighbours in the group, -1 at the ends */
    int fwd, bwd;          /* next micro-batch to run forward / backward */
    double loss;
    grit_err rc;
} run;

static float *slot(const run *r, int i)
{
    const pp_sched *s = r->s;
    size_t nc = r->bytes / sizeof(float);
    return s->ring + nc * (size_t)(i % s->slots);
}

/* One exchange: sbuf to `to`, rbuf from `from` (either -1: none), timed. */
static grit_err xchg(run *r, const float *sbuf, int to, float *rbuf, int from)
{
    if (to < 0 && from < 0)
        return GRIT_OK;
    double t0 = now_seconds();
    grit_err rc = comm_sendrecv(r->s->pp, sbuf, to >= 0 ? r->bytes : 0, to, rbuf,
                                from >= 0 ? r->bytes : 0, from, PP_TAG);
    r->s->wait_s += now_seconds() - t0;
    if (to >= 0)
        r->s->bytes += r->bytes;
    if (rc != GRIT_OK)
        return grit_errf(rc, "pipeline stage %d of %d: exchange with stage %d failed: %s",
                         r->s->stage, r->s->stages, to >= 0 ? to : from, grit_errmsg());
    return GRIT_OK;
}

static const gx_batch *sft_of(const run *r, int i) { return r->sft ? &r->sft[i] : NULL; }

/* Forward of micro-batch r->fwd (its input already in its slot); the output in s->out. */
static grit_err forward(run *r)
{
    pp_sched *s = r->s;
    int i = r->fwd++;
    float v = gx_stage_step(s->m, r->tok[i], sft_of(r, i), slot(r, i), NULL, r->gs, s->out,
                            NULL, NULL);
    return isnan(v) ? grit_errf(GRIT_EINVAL, "pipeline stage %d: micro-batch %d's forward "
                                             "failed (a tensor-parallel reduction)", s->stage, i)
                    : GRIT_OK;
}

/* Backward of micro-batch r->bwd from the gradient in s->grad (the last stage: forward,
 * loss and backward); the input's gradient in s->dsend. */
static grit_err backward(run *r)
{
    pp_sched *s = r->s;
    int i = r->bwd++;
    if (i == s->micro - 1 && s->before_last_bwd)
        s->before_last_bwd(s->ctx);
    bool last = s->stage == s->stages - 1;
    float v = gx_stage_step(s->m, r->tok[i], sft_of(r, i), slot(r, i), last ? NULL : s->grad,
                            r->gs, NULL, s->dsend, NULL);
    if (isnan(v))
        return grit_errf(GRIT_EINVAL, "pipeline stage %d: micro-batch %d's %s failed (loss "
                                      "NaN or a tensor-parallel reduction)",
                         s->stage, i, last ? "step" : "backward");
    if (last)
        r->loss += v;
    return GRIT_OK;
}

grit_err pp_step(pp_sched *s, const int32_t *const *tok, const gx_batch *sft, float grad_scale,
                 double *loss_sum)
{
    double t0 = now_seconds();
    s->wait_s = 0;
    s->bytes = 0;
    run r = {.s = s, .tok = tok, .sft = sft, .gs = grad_scale,
             .bytes = sizeof(float) * (size_t)s->m->ns * (size_t)s->m->cfg.hidden,
             .prev = s->stage > 0 ? s->stage - 1 : -1,
             .next = s->stage < s->stages - 1 ? s->stage + 1 : -1};
    int M = s->micro, warm = s->stages - s->stage - 1;
    if (warm > M)
        warm = M;
    grit_err rc = GRIT_OK;
    /* warm-up: forwards only */
    for (int k = 0; k < warm && rc == GRIT_OK; k++) {
        int i = r.fwd;
        if ((rc = xchg(&r, NULL, -1, slot(&r, i), r.prev)) == GRIT_OK &&
            (rc = forward(&r)) == GRIT_OK)
            rc = xchg(&r, s->out, r.next, NULL, -1);
    }
    /* steady state: one forward, one backward */
    int steady = M - warm;
    if (rc == GRIT_OK && steady > 0)
        rc = xchg(&r, NULL, -1, slot(&r, r.fwd), r.prev);
    for (int k = 0; k < steady && rc == GRIT_OK; k++) {
        bool final = k == steady - 1;
        if (r.next >= 0) { /* the output forward, the oldest one's gradient back */
            if ((rc = forward(&r)) != GRIT_OK ||
                (rc = xchg(&r, s->out, r.next, s->grad, r.next)) != GRIT_OK)
                break;
        } else
            r.fwd++; /* the last stage's forward is part of its backward call */
        if ((rc = backward(&r)) != GRIT_OK)
            break;
        /* the input's gradient back, the next micro-batch's input in (into the slot the
         * backward just freed) */
        rc = xchg(&r, s->dsend, r.prev, final ? NULL : slot(&r, r.fwd), final ? -1 : r.prev);
    }
    /* cool-down: the backwards of the micro-batches still in flight */
    for (int k = 0; k < warm && rc == GRIT_OK; k++) {
        if ((rc = xchg(&r, NULL, -1, s->grad, r.next)) == GRIT_OK &&
            (rc = backward(&r)) == GRIT_OK)
            rc = xchg(&r, s->dsend, r.prev, NULL, -1);
    }
    if (rc == GRIT_OK) { /* the loss is the last stage's: every stage reports it */
        double t1 = now_seconds();
        double v = r.loss;
        if ((rc = comm_bcast(s->pp, &v, sizeof v, s->stages - 1)) != GRIT_OK)
            rc = grit_errf(rc, "pipeline stage %d: the loss broadcast failed: %s", s->stage,
                           grit_errmsg());
        s->wait_s += now_seconds() - t1;
        *loss_sum = v;
    }
    s->step_s = now_seconds() - t0;
    return rc;
}
