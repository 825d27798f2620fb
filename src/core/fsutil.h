/*
 * fsutil.h - durable file writes and small file helpers.
 *
 * fs_write_durable() is the one routine that puts a file on disk so that a
 * crash leaves either the old file or the complete new one, never a partial
 * write: write PATH.tmp.<pid>, fsync it, rename over PATH, fsync the
 * directory. On any failure the temp file is unlinked and PATH is untouched.
 *
 * fs_append_line() appends one line and fsyncs nothing (used for logs such as
 * metrics.jsonl, where a torn last line is tolerated by readers).
 */
#ifndef GRIT_CORE_FSUTIL_H
#define GRIT_CORE_FSUTIL_H

#include <stddef.h>
#include <stdio.h>

#include "core/error.h"

/* Writes len bytes atomically and durably to path. */
grit_err fs_write_durable(const char *path, const void *data, size_t len);

/* Like fs_write_durable for several buffers written back to back. */
grit_err fs_write_durable_iov(const char *path, const void *const *bufs,
                              const size_t *lens, int nbufs);

/* A durable file written in pieces at any offsets (a file too large to hold in memory):
 * PATH.tmp.<pid> until fs_stream_commit (fsync, rename over PATH, fsync the directory);
 * fs_stream_abort, or a failed commit, unlinks the temp file and leaves PATH untouched. */
typedef struct fs_stream {
    int fd;
    char path[4096], tmp[4096];
} fs_stream;
grit_err fs_stream_open(fs_stream *s, const char *path);
grit_err fs_stream_write(fs_stream *s, const void *buf, size_t len, size_t off);
grit_err fs_stream_commit(fs_stream *s);
void fs_stream_abort(fs_stream *s);

/* mkdir -p; existing directories are fine. */
grit_err fs_mkdirs(const char *path);

/* fsyncs the directory that contains path (or path itself if a dir). */
grit_err fs_sync_dir(const char *dirpath);

/* Reads a whole file; *out is malloc'd and NUL-terminated (caller frees). */
grit_err fs_read_all(const char *path, char **out, size_t *len);

#endif
