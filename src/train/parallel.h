/*
 * parallel.h - the run config's "parallel" section and what it demands of the model.
 *
 *   "parallel": {"tensor": T, "pipeline": P, "data": D, "zero": Z, "sequence": S}
 *
 * T tensor-parallel ranks (Megatron: heads, MLP columns and vocabulary split,
 * model/tp.h), P pipeline stages, D data-parallel replicas (0 or absent: the
 * world size / (T x P)), Z the ZeRO stage over the data-parallel group (0 off,
 * 1 optimiser state sharded: the same switch as optim.zero1), S true for sequence
 * parallelism (model/tp.h: the norm and residual regions' token rows split over the T
 * ranks; needs T > 1 and micro_batch x seq_len divisible by T). The process grid
 * itself (rank order, groups) is comm/grid.h.
 *
 * Checked before anything is allocated, each error naming the numbers:
 * the world is T x P x D; num_heads, intermediate_size and vocab_size are
 * divisible by T (each rank holds whole heads and whole vocabulary rows), and T
 * divides num_kv_heads or they divide T (kv heads split, or replicated: model/tp.h);
 * num_layers divisible by P; sequence parallelism needs T > 1 and micro_batch x
 * seq_len divisible by T. Refused for now, with the reason (docs/parallel.md): ZeRO-3
 * in bf16, ZeRO-2/3 with tied embeddings, tied embeddings with
 * P > 1 and ZeRO.
 */
#ifndef GRIT_TRAIN_PARALLEL_H
#define GRIT_TRAIN_PARALLEL_H

#include <stddef.h>
#include <stdio.h>

#include "train/config.h"

/* The layout's checks for a world of `world` ranks (GRIT_ECONFIG naming the
 * numbers). With c->dp == 0 the data-parallel size is derived. */
grit_err train_parallel_check(const train_cfg *c, int world);
/* Data-parallel size for a world (c->dp or world / (tp * pp)). */
int train_parallel_dp(const train_cfg *c, int world);

/* Memory per rank for the layout, in bytes (train --plan; train.c's first lines). */
typedef struct train_plan {
    int tp, pp, dp;
    size_t params;              /* parameters held by one rank */
    double param_b, grad_b, optim_b, snapshot_b, act_b, total_b;
    double comm_b;              /* the MPI library's temporaries of reductions in flight */
    /* the run's end on rank 0 when it gathers the whole model (model parallelism, ZeRO-3):
     * what stays once the activations and gradient block are freed, plus the buffers of the
     * tensor-at-a-time write (a whole tensor, its TP slices, its ZeRO-3 slice; 0: no gather) */
    double end_b;
    double avail_b;             /* this machine's available memory (0 unknown) */
    int ranks_here;             /* ranks sharing this machine (the plan divides avail_b) */
} train_plan;

grit_err train_plan_make(const train_cfg *c, int world, int ranks_here, train_plan *p);
/* Prints the plan table to f. */
void train_plan_print(const train_plan *p, const train_cfg *c, FILE *f);
/* GRIT_ENOMEM naming the numbers when ranks_here ranks of the plan do not fit this
 * machine's available memory. */
grit_err train_plan_fits(const train_plan *p);
/* Ranks of a world of `world` on this machine: GRIT_RANKS_PER_NODE, else Open MPI's
 * local size, else all of them. */
int train_ranks_here(int world);

/* --- internal to train/ (config.c) ---------------------------------------------- */
#include <jansson.h>

#include "core/jcfg.h"
/* Reads "parallel" (absent: 1 x 1 x derived, ZeRO from optim.zero1). */
grit_err train__parallel_load(const jcfg *j, train_cfg *c);
/* Adds "parallel" to the resolved config. */
void train__parallel_dump(json_t *root, const train_cfg *c);

#endif
