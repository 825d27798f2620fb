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

/* mkdir -p; existing directories are fine. */
grit_err fs_mkdirs(const char *path);

/* fsyncs the directory that contains path (or path itself if a dir). */
grit_err fs_sync_dir(const char *dirpath);

/* Reads a whole file; *out is malloc'd and NUL-terminated (caller frees). */
grit_err fs_read_all(const char *path, char **out, size_t *len);

#endif
