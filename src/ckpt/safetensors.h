/*
 * safetensors.h - writing Hugging Face safetensors files.
 *
 * Format (docs/formats.md): u64 little-endian header length H, H bytes of
 * JSON {"__metadata__": {"format": "pt"}, name: {"dtype", "shape",
 * "data_offsets": [begin, end]}...} padded with spaces to a multiple of 8,
 * then the tensors' bytes back to back in header order. The file is written
 * durably (temp, fsync, rename, fsync dir) in one go.
 */
#ifndef GRIT_CKPT_SAFETENSORS_H
#define GRIT_CKPT_SAFETENSORS_H

#include <stddef.h>

#include "core/error.h"

typedef struct st_entry {
    const char *name;
    const char *dtype; /* "F32", "I32", ... */
    int ndim;
    long shape[4];
    const void *data;  /* numel * element size bytes, borrowed */
} st_entry;

grit_err st_write(const char *path, const st_entry *entries, int n);

#endif
