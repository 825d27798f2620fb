/*
 * s3cache.h - the trainer's read-through cache for datasets in S3: a
 * data.paths entry s3://bucket/key (a Megatron prefix, as `grit prep -o
 * s3://...` writes them: .../tokens/00000) is fetched once into a local
 * directory and opened from there.
 *
 * Cache: GRIT_S3_CACHE, else $XDG_CACHE_HOME/grit/s3, else ~/.cache/grit/s3;
 * an object lives at CACHE/bucket/key. A cached file is used when its size
 * equals the object's (HEAD); otherwise it is fetched again: parallel ranged
 * GETs of 64 MiB at a time into a temp file, fsync, rename, fsync the
 * directory, so a reader (another rank, a later run) sees a whole file or
 * none. The .idx is fetched after the .bin. Credentials and endpoint: the S3
 * client's (AWS_* variables).
 */
#ifndef GRIT_TRAIN_S3CACHE_H
#define GRIT_TRAIN_S3CACHE_H
#include <stddef.h>
#include "core/error.h"

/* When prefix is s3://..., makes sure PREFIX.bin and PREFIX.idx are cached
 * and writes the local prefix to out; otherwise copies prefix to out. */
grit_err train_s3cache_prefix(const char *prefix, char *out, size_t cap);

#endif
