/*
 * safetensors.h - writing Hugging Face safetensors files.
 *
 * Format (docs/formats.md): u64 little-endian header length H, H bytes of
 * JSON {"__metadata__": {"format": "pt"}, name: {"dtype", "shape",
 * "data_offsets": [begin, end]}...} padded with spaces to a multiple of 8,
 * then the tensors' bytes back to back in header order. The file is written
 * durably (temp, fsync, rename, fsync dir): in one go (st_write) or a tensor at a
 * time in any order (st_stream, for data too large to hold at once).
 */
#ifndef GRIT_CKPT_SAFETENSORS_H
#define GRIT_CKPT_SAFETENSORS_H

#include <stddef.h>

#include "core/error.h"
#include "core/fsutil.h"

typedef struct st_entry {
    const char *name;
    const char *dtype; /* "F32", "I32", ... */
    int ndim;
    long shape[4];
    const void *data;  /* numel * element size bytes, borrowed */
} st_entry;

grit_err st_write(const char *path, const st_entry *entries, int n);

/* The same file written a tensor at a time, in any order (a model too large to hold whole):
 * st_stream_open writes the header for entries (their data unused) to a temp file;
 * st_stream_put writes tensor i's bytes at its place; st_stream_commit, once every tensor
 * is written (else GRIT_EINVAL), makes the file durable under path; st_stream_abort (or a
 * failed commit) leaves path untouched and no temp file. */
typedef struct st_stream {
    fs_stream f;
    int n;
    size_t *off;            /* [n + 1] file offsets of the tensors' bytes */
    unsigned char *done;    /* [n] */
} st_stream;
grit_err st_stream_open(st_stream *w, const char *path, const st_entry *entries, int n);
grit_err st_stream_put(st_stream *w, int i, const void *data);
grit_err st_stream_commit(st_stream *w);
void st_stream_abort(st_stream *w);

/* The 8-byte length and padded JSON header for entries, as st_write lays them
 * out (malloc'd, caller frees); the tensors' bytes follow in entry order. */
grit_err st_header(const st_entry *entries, int n, char **out, size_t *len);

/* --- reading ------------------------------------------------------------------ */

typedef struct st_tensor {
    char name[160];
    char dtype[8];
    int ndim;
    long shape[8];
    size_t begin, end; /* byte range relative to the data section */
} st_tensor;

typedef struct st_file {
    size_t data_off;   /* 8 + header length */
    int n;
    st_tensor *t;      /* [n], in data order (owned) */
} st_file;

/* Parses and validates a header: JSON object, known dtypes, shapes matching
 * byte ranges, ranges contiguous from 0 and ending exactly at the file's end
 * (file_size). what names the file in messages. */
grit_err st_parse(const char *what, const char *json, size_t hlen, size_t file_size,
                  st_file *out);
const st_tensor *st_find(const st_file *f, const char *name);
size_t st_dtype_size(const char *dtype); /* 0 if unknown */
void st_file_free(st_file *f);

#endif
