/*
 * ckpt.h - checkpoints that are never lost and never wrong.
 *
 * Layout (docs/formats.md), inside a store (store.h):
 *   step_00001200/model.safetensors      parameters, HF names, F32
 *   step_00001200/optimizer.safetensors  AdamW moments: exp_avg.<name>, exp_avg_sq.<name>
 *   step_00001200/config.json            Hugging Face GPTNeoX config
 *   step_00001200/trainer_state.json     step, tokens, data position, fingerprint, world
 *   step_00001200/manifest.json          every file above with its size and xxh3-64
 *   LATEST                               "step_00001200\n"
 *
 * A run of N > 1 data-parallel ranks writes, instead of optimizer.safetensors,
 * one shard per rank, in parallel: optim-rank<R>-of-<N>.safetensors holds the
 * tensors exp_avg and exp_avg_sq, F32 [hi - lo], elements [lo, hi) of the flat
 * moment block (the model's tensors back to back, as gx_model lays them out);
 * the manifest records lo and hi of each shard. Loading at any world size reads
 * only the byte ranges a rank needs (ckpt_load_moments_range).
 *
 * Commit protocol (ckpt_save), with the phase names the fault store can crash at:
 *
 *   remove stale step_N.tmp/ ; mkdir step_N.tmp/
 *   put each file (each put fsyncs)                     -> phase "files"
 *   put manifest.json (fsynced)                         -> phase "manifest"
 *   rename step_N.tmp -> step_N ; fsync the parent      -> phase "rename"
 *   write LATEST atomically (tmp, rename, fsync dir)    -> phase "latest"
 *
 * Sharded (train.c drives it; every rank has its own writer thread):
 *   rank 0: ckpt_begin (mkdir step_N.tmp/)  ; barrier
 *   every rank r: ckpt_put_shard (fsynced)              -> phase "shard"
 *   rank 0 also: ckpt_put_model (model, config, state)
 *   gather of each rank's (name, size, hash, range, error) to rank 0: it
 *   completes only after every rank's shard is durable (it is the barrier)
 *   rank 0: ckpt_commit (manifest, rename, LATEST) as above; or, when any
 *   rank failed, ckpt_abandon. A rank that dies before the gather leaves
 *   step_N.tmp/ without a manifest: never trusted.
 *
 * Model-parallel (tensor and/or pipeline parallelism; train/saver.c drives it): instead
 * of model.safetensors and the optimiser files, each rank of data-parallel replica 0
 * writes its own slices, weights and AdamW moments, in parallel:
 *   model-tp<t>-of-<T>-pp<p>-of-<P>.safetensors   tensors <name>, exp_avg.<name>,
 *                                                  exp_avg_sq.<name>, F32, the rank's shapes
 * Replicated tensors (norms, row-parallel biases) are written by TP rank 0 only, the
 * last stage's copy of a tied embedding not at all. The manifest's entry of each such
 * file has "tensors": {HF name: {"shape": whole shape, "dim": split dimension (-1: the
 * whole tensor), "segs": [[global start, local start, count], ...] along it}} (the
 * moments are sliced as the weights), so a reader assembles every whole tensor without
 * knowing the layout that wrote it (ckpt_load and friends do, for any reader's layout).
 * The same protocol as the sharded one: rank 0 begins, every writer puts its file
 * (phase "shard"), rank 0 also config.json and trainer_state.json (ckpt_put_meta), the
 * entries are gathered to rank 0, which commits.
 *
 * A crash anywhere leaves the previous checkpoints intact and at most a
 * step_N.tmp/ (ignored by readers, removed by the next save or prune) or a
 * complete, verifiable step_N/.
 *
 * A store without rename (S3, store->no_rename) commits by order instead:
 *   remove any older step_N/ (data first, manifest last)
 *   put each file under step_N/                          -> phase "files"
 *   put step_N/manifest.json                             -> phase "manifest", "rename"
 *   put LATEST (one atomic object write)                 -> phase "latest"
 * A step without manifest.json is an unfinished write there: never a candidate,
 * removed by prune (which also deletes data before manifest).
 *
 * Reading trusts only directories whose manifest verifies (sizes and
 * hashes of every file). ckpt_find() walks the step directories newest
 * first and reports each one it rejects through the callback, so a corrupt
 * newest checkpoint falls back to the previous one instead of looping.
 */
#ifndef GRIT_CKPT_CKPT_H
#define GRIT_CKPT_CKPT_H

#include <stdbool.h>
#include <stdint.h>

#include "ckpt/store.h"
#include "model/gptneox.h"

#define CKPT_FORMAT_VERSION 1

typedef struct ckpt_state {
    long step;          /* optimiser steps completed */
    double tokens;      /* tokens consumed */
    long next_sample;   /* data position: global index of the next sample */
    double loss;        /* loss of the last step */
    char fingerprint[17]; /* config fingerprint (hex xxh3-64 of the training-relevant config) */
    int threads;
    int world_size;
} ckpt_state;

/* Formats "step_%08ld" into buf. */
void ckpt_dirname(char *buf, size_t cap, long step);

/* Writes checkpoint `st->step` from the given arrays (each m->num_params floats,
 * laid out as m->tensors). *bytes receives the bytes written. */
grit_err ckpt_save(store *s, const gx_model *m, const float *params, const float *adam_m,
                   const float *adam_v, const ckpt_state *st, double *bytes);

/* One file of a checkpoint as the manifest lists it; lo/hi: an optimiser shard's
 * element range, -1 for other files. */
typedef struct ckpt_file {
    char name[64];
    size_t size;
    uint64_t hash;
    long lo, hi;
} ckpt_file;

/* The pieces of ckpt_save, for a save spread over ranks (see the protocol above).
 * begin: fresh step_N.tmp/. put_model: model.safetensors, config.json and
 * trainer_state.json into it (out[3]). put_shard: this rank's moments mm/vv
 * (elements [lo, hi)) as optim-rank<rank>-of-<world>.safetensors. commit: the
 * manifest listing files[n], rename, LATEST; *bytes: all bytes written.
 * abandon: removes step_N.tmp/. */
grit_err ckpt_begin(store *s, long step);
grit_err ckpt_put_model(store *s, const gx_model *m, const float *params, const ckpt_state *st,
                        ckpt_file out[3]);
grit_err ckpt_put_shard(store *s, long step, int rank, int world, size_t lo, size_t hi,
                        const float *mm, const float *vv, ckpt_file *out);
/* cfg: the model's configuration (describes model-parallel slices in the manifest). */
grit_err ckpt_commit(store *s, long step, const ckpt_file *files, int n, const gx_config *cfg,
                     double *bytes);
void ckpt_abandon(store *s, long step);
void ckpt_shard_name(char *buf, size_t cap, int rank, int world);
/* Model-parallel pieces (see the layout above). put_mp: m is this rank's model (its
 * slices; m->tp, tp_rank, pp, pp_rank name the file); params, mm, vv laid out as
 * m->tensors. put_meta: config.json and trainer_state.json (out[2]). */
grit_err ckpt_put_mp(store *s, long step, const gx_model *m, const float *params,
                     const float *mm, const float *vv, ckpt_file *out);
grit_err ckpt_put_meta(store *s, const gx_config *cfg, const ckpt_state *st, ckpt_file out[2]);
void ckpt_mp_name(char *buf, size_t cap, int tp_rank, int tp, int pp_rank, int pp);

/* Verifies dir's manifest: every listed file present with its size and hash,
 * and the four required files listed. On failure why says what (file, field). */
grit_err ckpt_verify(store *s, const char *dir, char *why, size_t cap);

/* remote_next: the local copy of a two-tier store failed and its remote copy is tried
 * next (not a rejection of the step); otherwise the step is rejected. */
typedef void (*ckpt_reject_fn)(void *ctx, const char *dir, const char *why, int remote_next);

/* The newest step directory that verifies, into dir (cap bytes); each rejected
 * newer one, and each local copy given up for its remote copy, is reported through
 * reject (may be NULL). GRIT_ENOTFOUND when there
 * is no checkpoint at all; GRIT_EFORMAT when some exist but none verifies. */
grit_err ckpt_find(store *s, char *dir, size_t cap, ckpt_reject_fn reject, void *ctx);

/* Loads dir into m: parameters always; AdamW moments and *st unless weights_only.
 * Tensors are matched by HF name and shape; F16/BF16 are widened to F32. Names
 * listed in skip (NULL-terminated suffixes, e.g. "attention.bias") are ignored;
 * any other unknown or missing tensor is an error. */
grit_err ckpt_load(store *s, const char *dir, gx_model *m, ckpt_state *st, bool weights_only);

/* Loads only the AdamW moments of dir into mm and vv (num_params floats each,
 * laid out as m->tensors). */
grit_err ckpt_load_moments(store *s, const char *dir, const gx_model *m, float *mm, float *vv);

/* Before allocating a model from a folder's config.json: GRIT_EFORMAT naming the file
 * when the config describes a model of 1 GiB or more in F32 (2^28 parameters) and its
 * weight files (model.safetensors, or the shards its index names) hold fewer than 2 bytes
 * per parameter (a tiny file must not make a caller allocate tens of GB). GRIT_OK when
 * they may fit, for smaller models, or when there is nothing to judge. */
grit_err ckpt_weights_fit(store *s, const char *dir, const gx_config *cfg);

/* A tensor of dir handed to ckpt_load_each's caller: block 0 the weights, 1 exp_avg,
 * 2 exp_avg_sq; tensor an index of the model's table; data F32 [numel], valid during
 * the call. A non-GRIT_OK return (with its message set) stops the load. */
typedef grit_err (*ckpt_tensor_fn)(void *ctx, int block, int tensor, const float *data);

/* dir's weights and, with moments, its AdamW moments, one tensor at a time: fn gets
 * every tensor of m (m's tensor table is used; its params/moments are not written) in a
 * buffer of the largest tensor's size, so a caller that keeps a slice of each (tensor
 * parallelism) never holds the whole model. The sources and checks are ckpt_load's:
 * model.safetensors or Hugging Face index shards, F16/BF16 widened, names and shapes
 * checked; moments from optimizer.safetensors or the byte ranges of each tensor in the
 * optimiser shards of any world size. */
grit_err ckpt_load_each(store *s, const char *dir, const gx_model *m, int moments,
                        ckpt_tensor_fn fn, void *ctx);

/* Elements [lo, hi) of the flat AdamW moments of dir into mm and vv (hi - lo floats
 * each), from optimizer.safetensors or resliced from the shards of any world size. */
grit_err ckpt_load_moments_range(store *s, const char *dir, const gx_model *m, size_t lo,
                                 size_t hi, float *mm, float *vv);

/* Reads only trainer_state.json of dir. */
grit_err ckpt_read_state(store *s, const char *dir, ckpt_state *st);

/* Steps of the complete step directories (not .tmp), ascending; *steps malloc'd. */
grit_err ckpt_list(store *s, long **steps, int *n);

/* Retention: keeps the newest keep_last and every step that is a multiple of
 * keep_every (0: none), and always keep_step (the one just written); removes
 * the rest and every stale step_*.tmp. *removed counts directories removed. */
grit_err ckpt_prune(store *s, int keep_last, long keep_every, long keep_step, int *removed);

#endif
