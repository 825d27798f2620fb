/*
 * store.h - where checkpoints live: a small storage interface.
 *
 * The checkpoint logic (ckpt.c) speaks only to this interface, so a new
 * backend (S3) slots in without touching it. Paths are relative to the
 * store's root and use '/'. Contract of each operation:
 *
 *   put(path, bufs, sink) create or replace path with the concatenated buffers and
 *                        make its bytes durable (fsync) before returning; sink (if
 *                        any) sees the bytes as they go out. Not atomic by itself:
 *                        callers get atomicity from rename.
 *   read(path, off, len) exactly len bytes at off, or an error (short = error).
 *   size(path)           byte size; GRIT_ENOTFOUND when absent.
 *   list(dir)            names directly inside dir (no "." / ".."), any order.
 *   rename(from, to)     atomic replace of to (a file or an empty/absent dir).
 *                        A store with no_rename set has none (S3): there put() is
 *                        itself atomic (an object appears whole or not at all), and
 *                        ckpt.c commits by order instead (see ckpt.h).
 *   remove(path)         a file, or a directory tree; absent is fine.
 *   mkdir(path)          one level; existing is fine.
 *   sync_dir(dir)        make the directory's entries durable.
 *   fallback(dir)        optional: serve dir from the next tier (two-tier stores).
 *   cleanup(&n)          optional: remove what writers that died left behind (S3: abort
 *                        the multipart uploads in progress under the root); n = how
 *                        many. Only while no writer is active (the trainer at start).
 *   release()            optional: drop read caches (the restore is over).
 *
 * store_write_atomic() is the one durable-write routine built on these:
 * put PATH.tmp, rename over PATH, sync the directory.
 *
 * The fault backend wraps another store and fails on demand (tests):
 * GRIT_CKPT_FAULT is a comma list of
 *   crash:PHASE[@N]    SIGKILL the process the N-th time (default 1st) ckpt.c
 *                      reaches PHASE (files, manifest, rename, latest)
 *   crash_byte:N       SIGKILL after N more bytes were written by put()
 *   enospc:N           the N-th put() (1-based, counted over the process) fails
 *                      with ENOSPC after writing half its bytes
 *   enospc_from:N      every put() from the N-th on fails with ENOSPC
 *   short:N            the N-th put() silently writes only half (the manifest
 *                      hash check must catch it)
 */
#ifndef GRIT_CKPT_STORE_H
#define GRIT_CKPT_STORE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

typedef struct store store;

typedef void (*store_list_fn)(void *ctx, const char *name);

/* Sees every byte put() writes, in order, just before it is written (the
 * checkpoint hash is computed as bytes pass, while they are cache-hot). */
typedef struct store_sink {
    void (*fn)(void *ctx, const void *p, size_t n);
    void *ctx;
} store_sink;

typedef struct store_ops {
    grit_err (*put)(store *s, const char *path, const void *const *bufs, const size_t *lens,
                    int n, const store_sink *sink /* may be NULL */);
    grit_err (*read)(store *s, const char *path, size_t off, size_t len, void *buf);
    grit_err (*size)(store *s, const char *path, size_t *out);
    grit_err (*list)(store *s, const char *dir, store_list_fn fn, void *ctx);
    grit_err (*rename)(store *s, const char *from, const char *to);
    grit_err (*remove)(store *s, const char *path);
    grit_err (*mkdir)(store *s, const char *path);
    grit_err (*sync_dir)(store *s, const char *dir);
    void (*close)(store *s);
    /* optional (NULL): read dir from the next tier from now on (store_tier.c); GRIT_OK
     * when there is another copy to try, else GRIT_ENOTFOUND */
    grit_err (*fallback)(store *s, const char *dir);
    /* optional (NULL): see the contract above */
    grit_err (*cleanup)(store *s, int *count);
    void (*release)(store *s);
} store_ops;

struct store {
    const store_ops *ops;
    char root[1024]; /* for messages: the store's location */
    bool no_rename;  /* no atomic rename; each put() is atomic instead (S3) */
};

struct s3_opts; /* s3/client.h */

/* The s3:// store (store_s3.c): "s3://BUCKET/PREFIX"; o may be NULL (environment
 * defaults, see s3/client.h). *out owned by caller. */
grit_err store_open_s3(const char *url, const struct s3_opts *o, store **out);

/* Two tiers (store_tier.c): the local directory cache_dir first, remote (s3:// or a
 * directory) second; commits locally, then uploads; reads the local copy unless
 * fallback() moved a step to the remote. *out owned by caller. */
grit_err store_open_tiered(const char *cache_dir, const char *remote, const struct s3_opts *o,
                           store **out);

/* Opens a POSIX directory or an s3:// location (with o for S3, may be NULL), wrapped
 * with GRIT_CKPT_FAULT if set. */
grit_err store_open_ex(const char *location, const struct s3_opts *o, store **out);
/* The same with a local cache tier in front when cache_dir is set (store_open_tiered). */
grit_err store_open_ex2(const char *location, const char *cache_dir, const struct s3_opts *o,
                        store **out);

/* A POSIX directory store rooted at root (created if missing). *out owned by caller. */
grit_err store_open_posix(const char *root, store **out);

/* Wraps inner with the faults named in spec (GRIT_CKPT_FAULT syntax); takes ownership
 * of inner. With spec NULL or "" returns inner unchanged. */
grit_err store_wrap_faults(store *inner, const char *spec, store **out);

/* Opens the store for a checkpoint location, wrapped with GRIT_CKPT_FAULT if set. */
grit_err store_open(const char *location, store **out);

void store_close(store *s); /* NULL is a no-op */
/* The optional operations; GRIT_OK / nothing where the store has none. */
grit_err store_cleanup(store *s, int *count);
void store_release(store *s);

/* Durable atomic write of one file: put PATH.tmp, rename, sync the directory
 * (a no_rename store: one put, which is atomic there). */
grit_err store_write_atomic(store *s, const char *path, const void *data, size_t len);

/* Reads a whole (small) file; *out is malloc'd and NUL-terminated. */
grit_err store_read_all(store *s, const char *path, char **out, size_t *len);

/* Called by ckpt.c at each commit phase; the fault backend may crash here. */
void store_phase(store *s, const char *phase);

#endif
