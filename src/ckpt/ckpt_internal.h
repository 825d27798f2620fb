/*
 * ckpt_internal.h - what ckpt.c (save, verify) and ckpt_load.c (load) share.
 */
#ifndef GRIT_CKPT_CKPT_INTERNAL_H
#define GRIT_CKPT_CKPT_INTERNAL_H

#include <jansson.h>

#include "core/error.h"

/* The per-rank optimizer shards listed in a manifest's files object: their element
 * ranges (*lo, *hi, malloc'd, one per rank) and world size, checked to tile the whole
 * parameter range; on failure why (cap bytes) says what is wrong. */
grit_err ckpt__shard_table(json_t *files, long **lo, long **hi, int *world, char *why,
                           size_t cap);

#endif
