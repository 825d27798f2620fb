/*
 * store_s3.c - the s3:// checkpoint store (store.h) over src/s3/client.h.
 *
 * Location "s3://BUCKET/PREFIX": path P of the store is the object PREFIX/P; a
 * "directory" is a key prefix (mkdir and sync_dir have nothing to do). S3 has no
 * rename, so the store says so (no_rename) and ckpt.c writes a checkpoint straight
 * to its final keys, data first, manifest.json last, LATEST after it: an object
 * appears whole or not at all, and a step without a verifying manifest is never
 * trusted. remove() of a directory deletes the data objects before manifest.json.
 *
 * Reads: ckpt.c reads a file in many small pieces (a header, then each tensor), and
 * verify reads it whole first. The store fetches an object whole, with the client's
 * parallel ranged GETs, on its first read and serves the pieces from memory; the
 * cache holds one object (so a restore downloads each large file twice: once to
 * verify, once to load) and is dropped at the next put() or a remove() of it.
 */
#define _GNU_SOURCE
#include "ckpt/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef GRIT_HAVE_S3
#include "s3/client.h"

typedef struct s3_store {
    store base;
    s3_client *c;
    char bucket[256], prefix[768];
    char cached[1024]; /* key of the cached object ("" none) */
    char *cbuf;
    size_t clen;
} s3_store;

static void key_of(const s3_store *s, const char *path, char *out, size_t cap)
{
    while (path[0] == '.' && path[1] == '/')
        path += 2;
    if (!strcmp(path, ".") || !path[0])
        snprintf(out, cap, "%s", s->prefix);
    else
        snprintf(out, cap, "%s%s%s", s->prefix, s->prefix[0] ? "/" : "", path);
}

static void drop_cache(s3_store *s)
{
    free(s->cbuf);
    s->cbuf = NULL;
    s->clen = 0;
    s->cached[0] = '\0';
}

static grit_err s3s_put(store *st, const char *path, const void *const *bufs, const size_t *lens,
                        int n, const store_sink *sink)
{
    s3_store *s = (s3_store *)st;
    char key[1024];
    key_of(s, path, key, sizeof key);
    drop_cache(s); /* a save: what a restore read is not needed any more */
    if (sink)
        for (int i = 0; i < n; i++)
            sink->fn(sink->ctx, bufs[i], lens[i]);
    return s3_put(s->c, s->bucket, key, bufs, lens, n);
}

static grit_err s3s_read(store *st, const char *path, size_t off, size_t len, void *buf)
{
    s3_store *s = (s3_store *)st;
    char key[1024];
    key_of(s, path, key, sizeof key);
    if (strcmp(key, s->cached) != 0) {
        drop_cache(s);
        size_t n;
        grit_err rc = s3_head(s->c, s->bucket, key, &n);
        if (rc != GRIT_OK)
            return rc;
        char *b = malloc(n ? n : 1);
        if (!b)
            return grit_errf(GRIT_ENOMEM, "out of memory (%zu bytes for s3://%s/%s)", n,
                             s->bucket, key);
        if ((rc = s3_get(s->c, s->bucket, key, 0, n, b)) != GRIT_OK) {
            free(b);
            return rc;
        }
        s->cbuf = b;
        s->clen = n;
        snprintf(s->cached, sizeof s->cached, "%s", key);
    }
    if (off > s->clen || len > s->clen - off)
        return grit_errf(GRIT_EFORMAT, "s3://%s/%s: unexpected end of object at byte %zu "
                                       "(object has %zu)", s->bucket, key, s->clen, s->clen);
    memcpy(buf, s->cbuf + off, len);
    return GRIT_OK;
}

static grit_err s3s_size(store *st, const char *path, size_t *out)
{
    s3_store *s = (s3_store *)st;
    char key[1024];
    key_of(s, path, key, sizeof key);
    return s3_head(s->c, s->bucket, key, out);
}

typedef struct list_ctx {
    store_list_fn fn;
    void *ctx;
} list_ctx;

static void list_one(void *ctx, const char *name, size_t size)
{
    (void)size;
    list_ctx *l = ctx;
    l->fn(l->ctx, name);
}

static grit_err s3s_list(store *st, const char *dir, store_list_fn fn, void *ctx)
{
    s3_store *s = (s3_store *)st;
    char key[1024];
    key_of(s, dir, key, sizeof key);
    if (key[0])
        strncat(key, "/", sizeof key - strlen(key) - 1);
    list_ctx l = {fn, ctx};
    return s3_list(s->c, s->bucket, key, '/', list_one, &l);
}

static grit_err s3s_rename(store *st, const char *from, const char *to)
{
    return grit_errf(GRIT_EINVAL, "%s: S3 has no rename (%s -> %s)", st->root, from, to);
}

typedef struct keys {
    char (*k)[1024];
    int n, cap;
} keys;

static void collect_key(void *ctx, const char *name, size_t size)
{
    (void)size;
    keys *k = ctx;
    if (k->n == k->cap) {
        int nc = k->cap ? 2 * k->cap : 16;
        char(*nk)[1024] = realloc(k->k, sizeof *nk * (size_t)nc);
        if (!nk)
            return;
        k->k = nk;
        k->cap = nc;
    }
    snprintf(k->k[k->n++], 1024, "%s", name);
}

static grit_err s3s_remove(store *st, const char *path)
{
    s3_store *s = (s3_store *)st;
    char key[1024], sub[1100];
    key_of(s, path, key, sizeof key);
    if (!strcmp(key, s->cached) || !strncmp(s->cached, key, strlen(key)))
        drop_cache(s);
    grit_err rc = s3_delete(s->c, s->bucket, key);
    if (rc != GRIT_OK)
        return rc;
    /* everything under key/, manifest.json last */
    snprintf(sub, sizeof sub, "%s/", key);
    keys k = {0};
    if ((rc = s3_list(s->c, s->bucket, sub, 0, collect_key, &k)) != GRIT_OK) {
        free(k.k);
        return rc;
    }
    int manifest = -1;
    for (int i = 0; i < k.n && rc == GRIT_OK; i++) {
        if (!strcmp(k.k[i], "manifest.json")) {
            manifest = i;
            continue;
        }
        char full[2200];
        snprintf(full, sizeof full, "%s%s", sub, k.k[i]);
        rc = s3_delete(s->c, s->bucket, full);
    }
    if (rc == GRIT_OK && manifest >= 0) {
        char full[2200];
        snprintf(full, sizeof full, "%smanifest.json", sub);
        rc = s3_delete(s->c, s->bucket, full);
    }
    free(k.k);
    return rc;
}

static grit_err s3s_nothing(store *st, const char *path)
{
    (void)st;
    (void)path;
    return GRIT_OK;
}

static void s3s_close(store *st)
{
    s3_store *s = (s3_store *)st;
    drop_cache(s);
    s3_client_close(s->c);
    free(s);
}

static const store_ops s3_ops = {s3s_put,    s3s_read,    s3s_size,    s3s_list, s3s_rename,
                                 s3s_remove, s3s_nothing, s3s_nothing, s3s_close, NULL};

grit_err store_open_s3(const char *url, const s3_opts *o, store **out)
{
    *out = NULL;
    s3_store *s = calloc(1, sizeof *s);
    if (!s)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    grit_err rc = s3_parse_url(url, s->bucket, sizeof s->bucket, s->prefix, sizeof s->prefix);
    s3_opts d;
    s3_opts_defaults(&d);
    if (rc == GRIT_OK)
        rc = s3_client_open(o ? o : &d, &s->c);
    if (rc != GRIT_OK) {
        free(s);
        return rc;
    }
    s->base.ops = &s3_ops;
    s->base.no_rename = true;
    snprintf(s->base.root, sizeof s->base.root, "%s", url);
    *out = &s->base;
    return GRIT_OK;
}

#else /* !GRIT_HAVE_S3 */

grit_err store_open_s3(const char *url, const struct s3_opts *o, store **out)
{
    (void)o;
    *out = NULL;
    return grit_errf(GRIT_EINVAL, "%s: this grit was built without S3 support (install "
                                  "libcurl4-openssl-dev and libssl-dev, then rebuild)", url);
}

#endif
