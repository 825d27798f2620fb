/*
 * ckpt_internal.h - what ckpt.c (save, verify) and ckpt_load.c (load) share.
 */
#ifndef GRIT_CKPT_CKPT_INTERNAL_H
#define GRIT_CKPT_CKPT_INTERNAL_H

#include <jansson.h>

#include <stdbool.h>

#include "ckpt/safetensors.h"
#include "ckpt/store.h"
#include "core/error.h"
#include "model/gptneox.h"

/* The per-rank optimizer shards listed in a manifest's files object: their element
 * ranges (*lo, *hi, malloc'd, one per rank) and world size, checked to tile the whole
 * parameter range; on failure why (cap bytes) says what is wrong. */
grit_err ckpt__shard_table(json_t *files, long **lo, long **hi, int *world, char *why,
                           size_t cap);

/* Reads and parses the safetensors header of path (what names it in messages). */
grit_err ckpt__open_st(store *s, const char *path, const char *what, st_file *f);

/* Model-parallel shards (ckpt_mp.c). parse: is name
 * model-tp<t>-of-<T>-pp<p>-of-<P>.safetensors. keeps: whether TP rank tp_rank writes
 * tensor t (replicated tensors: TP rank 0 only; a tied copy: never). slices: the
 * manifest's "tensors" object of coordinate (t, p): each written tensor's whole shape,
 * split dimension (-1 whole) and segments {global start, local start, count}. check:
 * the manifest's files hold none (*found 0) or a complete set of one layout. */
int ckpt__mp_parse(const char *name, int *t, int *T, int *p, int *P);
bool ckpt__mp_keeps(const gx_tensor *t, int tp_rank);
json_t *ckpt__mp_slices(const gx_config *cfg, int t, int T, int p, int P);
grit_err ckpt__mp_check(json_t *files, int *found, char *why, size_t cap);

/* A model-parallel checkpoint opened for reading: *out NULL when dir is not one. read:
 * whole tensor w (prefix "" for weights, "exp_avg." / "exp_avg_sq." for moments) into
 * out, assembled from every shard holding a slice of it; each index along the split
 * dimension must come from exactly one shard. */
typedef struct ckpt_mp ckpt_mp;
grit_err ckpt__mp_open(store *s, const char *dir, ckpt_mp **out);
grit_err ckpt__mp_read(store *s, const char *dir, ckpt_mp *t, const gx_tensor *w,
                       const char *prefix, float *out);
void ckpt__mp_free(ckpt_mp *t);

#endif
