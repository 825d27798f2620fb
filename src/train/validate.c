/* validate.c - held-out loss during training (see validate.h). */
#include "train/validate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/gptdataset.h"
#include "data/indexed.h"
#include "data/synthetic.h"
#include "train/s3cache.h"

#define VALIDATE_ROWS 64 /* positions per forward piece */
#define VALIDATE_TAG 4444 /* stage-to-stage activations of a validation forward */

void validate_set_pp(validator *v, comm *pp) { v->pp = pp; }

/* Fills this rank's windows from the valid split of data.paths[0]. */
static grit_err load_megatron(validator *v, const train_cfg *cfg)
{
    const char *path = cfg->data_paths[0];
    char local[4096];
    idx_reader *r = NULL;
    uint32_t *buf = NULL;
    size_t b[4];
    grit_err rc = train_s3cache_prefix(path, local, sizeof local);
    if (rc == GRIT_OK)
        rc = idx_open(&r, local);
    if (rc != GRIT_OK)
        return rc;
    size_t ndoc = idx_num_seqs(r), tokens = 0;
    if ((rc = gpt_split(cfg->data_split, ndoc, b)) != GRIT_OK)
        goto out;
    for (size_t s = b[1]; s < b[2]; s++)
        tokens += idx_seq_len(r, s);
    size_t T = (size_t)v->T, need = (size_t)v->n * T + 1;
    if (tokens < need) {
        rc = grit_errf(GRIT_EINVAL, "%s: eval.samples %d windows of %zu tokens need %zu tokens "
                                    "of the valid split (documents %zu..%zu of split \"%s\"), "
                                    "it holds %zu",
                       path, v->n, T + 1, need, b[1], b[2], cfg->data_split, tokens);
        goto out;
    }
    if (!(buf = malloc(sizeof *buf * (T + 1)))) {
        rc = grit_errf(GRIT_ENOMEM, "validation: out of memory");
        goto out;
    }
    /* walk the stream once: window w covers stream tokens [w*T, w*T + T] */
    size_t doc = b[1], off = 0; /* stream position w*T as (document, offset) */
    for (int w = 0; w < v->n; w++) {
        size_t d = doc, o = off, got = 0;
        while (got < T + 1) {
            size_t len = idx_seq_len(r, d), take = len - o < T + 1 - got ? len - o : T + 1 - got;
            if (take && (rc = idx_read(r, d, o, take, buf + got)) != GRIT_OK)
                goto out;
            got += take;
            o += take;
            if (o == len) {
                d++;
                o = 0;
            }
        }
        if (w % v->world == v->rank) {
            int32_t *dst = v->tok + (size_t)w * (T + 1);
            for (size_t t = 0; t <= T; t++) {
                if (buf[t] >= (uint32_t)cfg->model.vocab) {
                    rc = grit_errf(GRIT_EINVAL, "%s: token id %u of the valid split is outside "
                                                "the model's vocabulary of %d",
                                   path, buf[t], cfg->model.vocab);
                    goto out;
                }
                dst[t] = (int32_t)buf[t];
            }
        }
        /* the next window starts T tokens on */
        for (size_t adv = T; adv > 0;) {
            size_t left = idx_seq_len(r, doc) - off;
            if (left > adv) {
                off += adv;
                adv = 0;
            } else {
                adv -= left;
                doc++;
                off = 0;
            }
        }
    }
out:
    free(buf);
    idx_close(r);
    return rc;
}

grit_err validate_open(validator *v, const train_cfg *cfg, const gx_model *m, int rank,
                       int world)
{
    memset(v, 0, sizeof *v);
    if (cfg->eval_interval_steps <= 0 && !cfg->eval_at_checkpoint)
        return GRIT_OK;
    v->interval = cfg->eval_interval_steps;
    v->at_ckpt = cfg->eval_at_checkpoint;
    v->n = cfg->eval_samples;
    v->T = cfg->optim.seq_len;
    v->rank = rank;
    v->world = world > 0 ? world : 1;
    size_t len = (size_t)v->T + 1;
    int V = cfg->model.vocab;
    v->tok = calloc((size_t)v->n * len, sizeof *v->tok);
    v->loss = calloc((size_t)v->n, sizeof *v->loss);
    v->logits = malloc(sizeof *v->logits * (size_t)VALIDATE_ROWS * (size_t)V);
    if (!v->tok || !v->loss || !v->logits) {
        validate_close(v);
        return grit_errf(GRIT_ENOMEM, "validation: out of memory (%d windows of %zu tokens)",
                         cfg->eval_samples, len);
    }
    grit_err rc = GRIT_OK;
    if (!strcmp(cfg->data_source, "megatron"))
        rc = load_megatron(v, cfg);
    else
        for (int w = v->rank; w < v->n; w += v->world)
            syn_fill(cfg->seed ^ VALIDATE_SYN_SALT, cfg->synthetic_vocab, w, 1, (int)len,
                     v->tok + (size_t)w * len);
    /* the training forward, B windows at a time: under TP/PP (slices), and under ZeRO-3
     * (shards: its hooks gather each bucket's weights, as for a training forward) */
    if (m->tp > 1 || m->pp > 1 || !m->params) {
        v->m = (gx_model *)m;
        size_t nc = (size_t)m->ns * (size_t)m->cfg.hidden; /* v->T is m->T */
        if (!(v->batch = malloc(sizeof *v->batch * (size_t)m->B * len)) ||
            (m->pp > 1 && !(v->act = malloc(sizeof *v->act * nc))))
            rc = grit_errf(GRIT_ENOMEM, "validation: out of memory");
    } else if (rc == GRIT_OK &&
             (rc = gxi_init(&v->s, m, v->T, VALIDATE_ROWS, cfg->threads)) != GRIT_OK)
        rc = grit_errf(rc, "validation: %s", grit_errmsg());
    if (rc != GRIT_OK) {
        validate_close(v);
        return rc;
    }
    v->on = true;
    return GRIT_OK;
}

bool validate_due(const validator *v, long step, bool ckpt_step)
{
    return v->on && ((v->interval > 0 && step % v->interval == 0) || (v->at_ckpt && ckpt_step));
}

/* The mean of -log softmax(logits)[target] over k positions, in double. */
static double window_nll(const float *logits, const int32_t *target, int k, int V)
{
    double sum = 0;
    for (int i = 0; i < k; i++) {
        const float *l = logits + (size_t)i * (size_t)V;
        float mx = l[0];
        for (int j = 1; j < V; j++)
            mx = l[j] > mx ? l[j] : mx;
        double z = 0;
        for (int j = 0; j < V; j++)
            z += exp((double)l[j] - (double)mx);
        sum += log(z) + (double)mx - (double)l[target[i]];
    }
    return sum;
}

/* One forward of m->B windows in v->batch through this rank's stage (gx_stage_step with
 * grad_scale 0): the stage input from the previous stage, the output to the next; the last
 * stage leaves the per-position losses in m->losses. */
static grit_err stage_fwd(validator *v)
{
    gx_model *m = v->m;
    comm *pp = v->pp;
    size_t bytes = sizeof(float) * (size_t)m->ns * (size_t)m->cfg.hidden;
    bool first = m->pp_rank == 0, last = m->pp_rank == m->pp - 1;
    grit_err rc = GRIT_OK;
    if (!first && (rc = comm_recv(pp, v->act, bytes, pp->rank - 1, VALIDATE_TAG)) != GRIT_OK)
        return grit_errf(rc, "validation: stage %d: %s", m->pp_rank, grit_errmsg());
    (void)gx_stage_step(m, v->batch, NULL, v->act, NULL, 0.0f, last ? NULL : v->act, NULL, NULL);
    if (!last && (rc = comm_send(pp, v->act, bytes, pp->rank + 1, VALIDATE_TAG)) != GRIT_OK)
        return grit_errf(rc, "validation: stage %d: %s", m->pp_rank, grit_errmsg());
    return GRIT_OK;
}

/* Under tensor and/or pipeline parallelism: this rank's windows through the training
 * forward (grad_scale 0: vocabulary-parallel loss, no backward, weights and gradients
 * untouched), m->B windows per call; a short last group repeats its first window and
 * ignores it. Every rank of a TP group and every stage of a replica holds the same
 * windows, so they make the same calls in the same order; the last stage's losses are
 * broadcast over the pipeline group. */
static grit_err run_forward(validator *v)
{
    gx_model *m = v->m;
    int T = v->T, B = m->B, W = v->world;
    size_t len = (size_t)T + 1;
    /* every rank makes the same number of calls (ZeRO-3's gathers are collectives over the
     * data-parallel group): a rank whose windows ran out scores window 0's slot (zeros unless
     * it is this rank's: only a rank's own windows are filled) and keeps nothing */
    int calls = (v->n + B * W - 1) / (B * W);
    for (int c = 0, w0 = v->rank; c < calls; c++, w0 += B * W) { /* windows w0, w0 + W, ... */
        int k = 0;
        for (int b = 0; b < B; b++) {
            int w = w0 + b * W;
            k = w < v->n ? b + 1 : k;
            memcpy(v->batch + (size_t)b * len,
                   v->tok + (size_t)(w < v->n ? w : w0 < v->n ? w0 : 0) * len,
                   sizeof *v->batch * len);
        }
        grit_err rc = m->pp > 1 ? stage_fwd(v) : GRIT_OK;
        if (rc != GRIT_OK)
            return rc;
        if (m->pp == 1)
            (void)gx_step(m, v->batch, 0.0f, NULL);
        if (m->tp_failed)
            return grit_errf(GRIT_EIO, "validation: a tensor-parallel reduction failed");
        for (int b = 0; m->pp_rank == m->pp - 1 && b < k; b++) {
            double sum = 0;
            for (int t = 0; t < T; t++)
                sum += m->losses[(size_t)b * T + t];
            v->loss[w0 + b * W] = sum / T;
        }
    }
    if (m->pp > 1) {
        grit_err rc = comm_bcast(v->pp, v->loss, sizeof *v->loss * (size_t)v->n, m->pp - 1);
        if (rc != GRIT_OK)
            return grit_errf(rc, "validation: the losses' broadcast: %s", grit_errmsg());
    }
    return GRIT_OK;
}

grit_err validate_run(validator *v, comm *d, double *loss, double *ppl)
{
    int T = v->T, V = v->m ? v->m->cfg.vocab : v->s.m->cfg.vocab;
    size_t len = (size_t)T + 1;
    memset(v->loss, 0, sizeof *v->loss * (size_t)v->n);
    grit_err trc = v->m ? run_forward(v) : GRIT_OK;
    if (trc != GRIT_OK)
        return trc;
    for (int w = v->rank; !v->m && w < v->n; w += v->world) {
        const int32_t *tok = v->tok + (size_t)w * len;
        double sum = 0;
        gxi_reset(&v->s);
        for (int p = 0; p < T; p += VALIDATE_ROWS) {
            int k = T - p < VALIDATE_ROWS ? T - p : VALIDATE_ROWS;
            grit_err rc = gxi_forward(&v->s, tok + p, k, NULL, v->logits);
            if (rc != GRIT_OK)
                return grit_errf(rc, "validation: %s", grit_errmsg());
            sum += window_nll(v->logits, tok + p + 1, k, V);
        }
        v->loss[w] = sum / T;
    }
    if (v->world > 1) {
        grit_err rc = comm_allreduce_sum_f64(d, v->loss, (size_t)v->n);
        if (rc != GRIT_OK)
            return rc;
    }
    double total = 0;
    for (int w = 0; w < v->n; w++)
        total += v->loss[w];
    *loss = total / v->n;
    *ppl = exp(*loss);
    return GRIT_OK;
}

void validate_close(validator *v)
{
    if (!v)
        return;
    gxi_free(&v->s);
    free(v->batch);
    free(v->act);
    free(v->tok);
    free(v->loss);
    free(v->logits);
    memset(v, 0, sizeof *v);
}
