/* parallel.c - the "parallel" config section, its checks and the memory plan (see parallel.h). */
#include "train/parallel.h"

#include "train/dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/grid.h"
#include "model/family.h"
#include "core/bigalloc.h"
#include "model/tp.h"

static const char *const par_keys[] = {"tensor", "pipeline", "data", "zero", "sequence", NULL};

grit_err train__parallel_load(const jcfg *j, train_cfg *c)
{
    json_t *p;
    grit_err rc = jcfg_obj(j, j->root, "", "parallel", &p);
    if (rc != GRIT_OK || !p)
        return rc;
    if ((rc = jcfg_only(j, p, "parallel", par_keys)) != GRIT_OK)
        return rc;
    long tp = c->tp, pp = c->pp, dp = c->dp,
         zero = c->optim.zero3 ? 3 : c->optim.zero2 ? 2 : c->optim.zero1 ? 1 : 0;
    if ((rc = jcfg_int(j, p, "parallel", "tensor", 1, 4096, &tp)) != GRIT_OK ||
        (rc = jcfg_int(j, p, "parallel", "pipeline", 1, 4096, &pp)) != GRIT_OK ||
        (rc = jcfg_int(j, p, "parallel", "data", 0, 1 << 20, &dp)) != GRIT_OK ||
        (rc = jcfg_int(j, p, "parallel", "zero", 0, 3, &zero)) != GRIT_OK ||
        (rc = jcfg_bool(j, p, "parallel", "sequence", &c->sp)) != GRIT_OK)
        return rc;
    c->tp = (int)tp;
    c->pp = (int)pp;
    c->dp = (int)dp;
    c->optim.zero1 = zero >= 1;
    c->optim.zero2 = zero >= 2;
    c->optim.zero3 = zero == 3;
    return GRIT_OK;
}

void train__parallel_dump(json_t *root, const train_cfg *c)
{
    json_object_set_new(root, "parallel",
                        json_pack("{s:i,s:i,s:i,s:i,s:b}", "tensor", c->tp, "pipeline", c->pp,
                                  "data", c->dp, "zero",
                                  c->optim.zero3   ? 3
                                  : c->optim.zero2 ? 2
                                  : c->optim.zero1 ? 1
                                                   : 0,
                                  "sequence", c->sp));
}

int train_parallel_dp(const train_cfg *c, int world)
{
    int tp = c->tp > 0 ? c->tp : 1, pp = c->pp > 0 ? c->pp : 1;
    return c->dp > 0 ? c->dp : world / (tp * pp);
}

grit_err train_parallel_check(const train_cfg *c, int world)
{
    const gx_config *m = &c->model;
    int tp = c->tp > 0 ? c->tp : 1, pp = c->pp > 0 ? c->pp : 1, kv = gx_kv_heads(m);
    if (c->dp == 0 && world % (tp * pp) != 0)
        return grit_errf(GRIT_ECONFIG, "parallel: the world of %d ranks is not a multiple of "
                                       "tensor %d x pipeline %d", world, tp, pp);
    grit_err rc = comm_grid_check(world, tp, pp, train_parallel_dp(c, world));
    if (rc != GRIT_OK)
        return rc;
    if (m->heads % tp != 0)
        return grit_errf(GRIT_ECONFIG, "parallel.tensor %d does not divide model.num_heads %d",
                         tp, m->heads);
    if (kv % tp != 0 && tp % kv != 0)
        return grit_errf(GRIT_ECONFIG, "parallel.tensor %d and the %d key/value heads "
                                       "(num_kv_heads): one must divide the other (kv heads "
                                       "are split over the ranks, or each shared by tensor / "
                                       "kv ranks)", tp, kv);
    if (m->intermediate % tp != 0)
        return grit_errf(GRIT_ECONFIG, "parallel.tensor %d does not divide "
                                       "model.intermediate_size %d", tp, m->intermediate);
    if (m->vocab % tp != 0)
        return grit_errf(GRIT_ECONFIG, "parallel.tensor %d does not divide the padded "
                                       "vocab_size %d (raise make_vocab_size_divisible_by)",
                         tp, m->vocab);
    if (m->layers % pp != 0)
        return grit_errf(GRIT_ECONFIG, "parallel.pipeline %d does not divide model.num_layers %d",
                         pp, m->layers);
    if (c->sp && tp == 1)
        return grit_errf(GRIT_ECONFIG, "parallel.sequence splits the token rows over the tensor-"
                                       "parallel group: it needs parallel.tensor > 1");
    long rows = (long)c->optim.micro_batch * c->optim.seq_len;
    if (c->sp && rows % tp != 0)
        return grit_errf(GRIT_ECONFIG, "parallel.sequence: optim.micro_batch %d x optim.seq_len "
                                       "%d = %ld token rows is not divisible by parallel.tensor "
                                       "%d", c->optim.micro_batch, c->optim.seq_len, rows, tp);
    if (pp > 1 && m->tied && c->optim.zero2)
        return grit_errf(GRIT_ECONFIG, "parallel.pipeline %d with tied embeddings "
                                       "(model.tie_word_embeddings) and ZeRO-%d: not supported "
                                       "yet (the last stage's copy of the embedding needs its "
                                       "whole gradient): use zero 1, or pipeline 1", pp,
                         c->optim.zero3 ? 3 : 2);
    return GRIT_OK;
}

grit_err train_plan_make(const train_cfg *c, int world, int ranks_here, train_plan *p)
{
    memset(p, 0, sizeof *p);
    grit_err rc = train_parallel_check(c, world);
    if (rc != GRIT_OK)
        return rc;
    const gx_config *m = &c->model;
    p->tp = c->tp > 0 ? c->tp : 1;
    p->pp = c->pp > 0 ? c->pp : 1;
    p->dp = train_parallel_dp(c, world);
    p->params = gx_tp_param_count(m, p->tp);
    gx_config sc = *m; /* a pipeline stage's layers */
    sc.layers = m->layers / p->pp;
    for (int s = 0; p->pp > 1 && s < p->pp; s++) { /* the largest stage: embedding or head */
        gx_tensor *t = NULL;
        int nt;
        size_t np;
        if ((rc = gx_stage_layout(m, p->tp, 0, p->pp, s, &t, &nt, &np)) != GRIT_OK)
            return rc;
        free(t);
        p->params = s == 0 || np > p->params ? np : p->params;
    }
    double n = (double)p->params, N = (double)c->optim.micro_batch * c->optim.seq_len, zwin = 0;
    double chunk = N < 512 ? N : 512;
    p->param_b = 4 * n;
    p->grad_b = 4 * n;
    p->optim_b = 8 * n / (c->optim.zero1 && p->dp > 1 ? p->dp : 1);
    if (c->optim.zero1 && p->dp > 1) /* ZeRO-1: the reduced gradients' shard beside the block */
        p->grad_b += 4 * n / p->dp;
    if (c->optim.zero2 && p->dp > 1) { /* a shard, and the bucket windows (train/dp.h) */
        double V = (double)m->vocab / p->tp, C = m->hidden, L = m->layers;
        double whole = (double)gx_tp_param_count(m, p->tp);
        double layer = (whole - V * C * (m->tied ? 1 : 2)) / L, head = V * C + 2 * C;
        if (p->tp == 1) /* vocabulary pieces no larger than a layer (dp.c) */
            head = ceil(V / gx_vocab_pieces((size_t)V, m->hidden, (size_t)layer)) * C;
        double win = 4 * (layer > head ? layer : head);
        /* ZeRO-2: the gradient window and the reduce-scatter's; ZeRO-3: the gradient window
         * and the weights' (which takes the reduce-scatter's part too) */
        p->grad_b = 4 * n / p->dp + win * (c->optim.zero3 ? 1 : 2);
        if (c->optim.zero3)
            p->param_b = 4 * n / p->dp + win;
        zwin = win;
    }
    if (p->dp > 1 && !c->optim.zero2) {
        /* backward's nonblocking reductions, DP_IN_FLIGHT at once (dp.c): Open MPI's
         * nonblocking reduce (libnbc, a binomial tree) holds two copies of a bucket for each,
         * written on the ranks that receive (rank 0 every round): the largest bucket (the
         * vocabulary's, on the first and last stages) and DP_IN_FLIGHT - 1 layers' */
        double V = (double)m->vocab / p->tp, C = m->hidden, L = m->layers;
        double whole = (double)gx_tp_param_count(m, p->tp);
        double layer = (whole - V * C * (m->tied ? 1 : 2)) / L, big = V * C + 2 * C;
        p->comm_b = 8.0 * ((big > layer ? big : layer) + (DP_IN_FLIGHT - 1) * layer);
    }
    /* bf16: the GEMM weights' bf16 copy (ZeRO-3: of the window) beside the fp32 ones;
     * without AVX512-BF16 a copy of bf16-rounded floats, as large as the weights */
    bool bf = c->precision == GX_BF16, rounds = bf && gx_bf16_rounds();
    double bf_w = !bf ? 0 : (c->optim.zero3 && p->dp > 1 ? zwin / 4 : n) * (rounds ? 4 : 2);
    p->param_b += bf_w;
    /* the checkpoint writer's copy (ckpt/async.h), on the rank that holds the most: model
     * parallelism's replica-0 ranks their slices and moments; data parallelism's rank 0 the
     * weights and its moment range; one rank everything */
    p->snapshot_b = !train_cfg_ckpt_enabled(c) ? 0
                    : p->tp > 1 || p->pp > 1   ? 12 * n
                                               : 4 * n + 8 * n / p->dp;
    /* a stage: its layers' activations for one micro-batch, and the 1F1B schedule's inputs of
     * micro-batches in flight (at most P on stage 0) and its three boundary buffers */
    p->act_b = (double)gx_act_bytes_sp(&sc, p->tp, c->recompute, c->sp) * N +
               4.0 * chunk * ((double)m->vocab / p->tp + 3) +
               (p->pp > 1 ? 4.0 * N * m->hidden * (p->pp + 3) / (c->sp ? p->tp : 1) : 0.0);
    if (bf) /* the GEMMs' operand buffers */
        p->act_b += gx_bf16_buffer_bytes(m, p->tp, (size_t)N, rounds);
    p->total_b = p->param_b + p->grad_b + p->optim_b + p->snapshot_b + p->act_b + p->comm_b;
    bool mp = p->tp > 1 || p->pp > 1, z3 = c->optim.zero3 && p->dp > 1;
    if (mp || z3) { /* rank 0 writes the final weights a whole tensor at a time (saver.c,
                      * after gx_release_step): the tensor, under TP its slices, under ZeRO-3
                      * its own slice gathered from the shards */
        gx_tensor *t = NULL;
        int nt = 0;
        size_t np;
        if ((rc = gx_stage_layout(m, 1, 0, 1, 0, &t, &nt, &np)) != GRIT_OK)
            return rc;
        double big = 0;
        for (int i = 0; i < nt; i++)
            big = fmax(big, 4.0 * (double)t[i].numel);
        free(t);
        double bufs = mp ? 2 * big + (z3 ? big / p->tp : 0) : big;
        p->end_b = p->total_b - p->act_b - p->comm_b - bf_w -
                   (c->optim.zero2 && p->dp > 1 ? 0 : 4 * n) + bufs;
    }
    p->avail_b = (double)big_mem_available();
    p->ranks_here = ranks_here > 0 ? ranks_here : 1;
    return GRIT_OK;
}

static double mib(double b) { return b / 1048576.0; }

void train_plan_print(const train_plan *p, const train_cfg *c, FILE *f)
{
    fprintf(f, "memory plan: tensor %d x pipeline %d x data %d%s%s, %s, micro batch %d x %d "
               "tokens\n", p->tp, p->pp, p->dp, c->sp ? " (sequence parallel)" : "",
            c->optim.zero3 ? ", ZeRO-3" : c->optim.zero2 ? ", ZeRO-2" : c->optim.zero1 ? ", ZeRO-1" : "",
            c->preset[0] ? c->preset : "custom model", c->optim.micro_batch, c->optim.seq_len);
    fprintf(f, "  %-22s %.3fM (of %.3fM in the model)\n", "parameters per rank",
            (double)p->params / 1e6, (double)gx_param_count(&c->model) / 1e6);
    fprintf(f, "  %-22s %10.1f MiB%s%s\n", "parameters", mib(p->param_b),
            c->optim.zero3 && p->dp > 1 ? " (sharded over data parallel, one bucket's window)" : "",
            c->precision != GX_BF16 ? "" : c->optim.zero3 && p->dp > 1 ? ", and its bf16 copy"
                                                                     : " (and their bf16 copy)");
    fprintf(f, "  %-22s %10.1f MiB%s\n", "gradients", mib(p->grad_b),
            !(c->optim.zero1 && p->dp > 1) ? ""
            : c->optim.zero3               ? " (sharded over data parallel, one bucket's window)"
            : c->optim.zero2 ? " (sharded over data parallel, two bucket windows)"
                             : " (and the reduced gradients' shard)");
    fprintf(f, "  %-22s %10.1f MiB%s\n", "optimiser (AdamW)", mib(p->optim_b),
            c->optim.zero1 && p->dp > 1 ? " (sharded over data parallel)" : "");
    if (p->snapshot_b > 0)
        fprintf(f, "  %-22s %10.1f MiB\n", "checkpoint snapshot", mib(p->snapshot_b));
    if (p->comm_b > 0)
        fprintf(f, "  %-22s %10.1f MiB (MPI's temporaries, %d gradient reductions in flight)\n",
                "reduction buffers", mib(p->comm_b), DP_IN_FLIGHT);
    fprintf(f, "  %-22s %10.1f MiB%s%s\n", "activations", mib(p->act_b),
            c->recompute ? " (full recomputation: one layer's, plus each layer's input)"
            : c->sp      ? " (norm and residual rows split over the tensor group)"
                         : "",
            c->precision == GX_BF16 ? " (with the bf16 GEMM operands)" : "");
    fprintf(f, "  %-22s %10.1f MiB per rank, x %d rank%s on this machine = %.1f MiB; "
               "%.1f MiB available\n", "total", mib(p->total_b), p->ranks_here,
            p->ranks_here > 1 ? "s" : "", mib(p->total_b * p->ranks_here), mib(p->avail_b));
    if (p->end_b > 0)
        fprintf(f, "  %-22s %10.1f MiB on rank 0 (model.safetensors written a whole tensor "
                   "at a time, activations and gradients freed)\n", "run's end",
                mib(p->end_b));
}

grit_err train_plan_fits(const train_plan *p)
{
    double need = p->total_b * p->ranks_here + (p->end_b > p->total_b ? p->end_b - p->total_b : 0);
    if (p->avail_b <= 0 || need <= p->avail_b)
        return GRIT_OK;
    return grit_errf(GRIT_ENOMEM, "the layout tensor %d x pipeline %d x data %d needs %.1f MiB "
                                  "per rank (parameters %.1f, gradients %.1f, optimiser %.1f, "
                                  "snapshot %.1f, activations %.1f, reduction buffers %.1f "
                                  "MiB) x %d rank%s on this "
                                  "machine = %.1f MiB, but %.1f MiB is available",
                     p->tp, p->pp, p->dp, mib(p->total_b), mib(p->param_b), mib(p->grad_b),
                     mib(p->optim_b), mib(p->snapshot_b), mib(p->act_b), mib(p->comm_b), p->ranks_here,
                     p->ranks_here > 1 ? "s" : "", mib(need), mib(p->avail_b));
}

int train_ranks_here(int world)
{
    const char *s = getenv("GRIT_RANKS_PER_NODE");
    if (!s || atoi(s) <= 0)
        s = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    int n = s ? atoi(s) : 0;
    return n > 0 && n < world ? n : world;
}
