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
 * a resume reads every file twice: whole, to verify it, then in pieces, to load it.
 * The store fetches an object whole, with the client's parallel ranged GETs, on its
 * first read and serves the pieces from memory. Its cache holds several objects, least
 * recently used out first, up to s3_opts.read_cache bytes (default 4 GiB), so a resume
 * downloads each file once when the checkpoint fits; release() (after the restore), a
 * put() (a save) or a remove() drops what it holds.
 *
 * cleanup() aborts the multipart uploads in progress under the prefix: a writer
 * killed mid-upload (or whose server died) leaves its parts stored, and billed, until
 * they are aborted. The trainer calls it once at start, before any save.
 */
#define _GNU_SOURCE
#include "ckpt/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef GRIT_HAVE_S3
#include "s3/client.h"

#define CACHE_SLOTS 16

typedef struct cached_obj {
    char key[1024]; /* "" free */
    char *buf;
    size_t len;
    unsigned long used; /* LRU clock */
} cached_obj;

typedef struct s3_store {
    store base;
    s3_client *c;
    char bucket[256], prefix[768];
    cached_obj cache[CACHE_SLOTS];
    size_t cached_bytes, cache_cap;
    unsigned long clock;
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

static void evict(s3_store *s, cached_obj *o)
{
    s->cached_bytes -= o->len;
    free(o->buf);
    memset(o, 0, sizeof *o);
}

/* Drops every cached object whose key starts with prefix ("" = all). */
static void drop_cache(s3_store *s, const char *prefix)
{
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (s->cache[i].key[0] && !strncmp(s->cache[i].key, prefix, strlen(prefix)))
            evict(s, &s->cache[i]);
}

/* The cached object key, fetched whole first if needed; NULL with the error set. */
static cached_obj *fetch(s3_store *s, const char *key, grit_err *rc)
{
    cached_obj *o = NULL;
    for (int i = 0; i < CACHE_SLOTS && !o; i++)
        if (!strcmp(s->cache[i].key, key))
            o = &s->cache[i];
    if (o) {
        o->used = ++s->clock;
        return o;
    }
    size_t n;
    if ((*rc = s3_head(s->c, s->bucket, key, &n)) != GRIT_OK)
        return NULL;
    /* room: least recently used out until n fits (or the cache is empty: one object
     * larger than the budget is still held while it is read) */
    for (;;) {
        cached_obj *lru = NULL, *free_slot = NULL;
        for (int i = 0; i < CACHE_SLOTS; i++) {
            if (!s->cache[i].key[0])
                free_slot = free_slot ? free_slot : &s->cache[i];
            else if (!lru || s->cache[i].used < lru->used)
                lru = &s->cache[i];
        }
        if (!lru || (free_slot && s->cached_bytes + n <= s->cache_cap)) {
            o = free_slot;
            break;
        }
        evict(s, lru);
    }
    char *b = malloc(n ? n : 1);
    if (!b) {
        *rc = grit_errf(GRIT_ENOMEM, "out of memory (%zu bytes for s3://%s/%s)", n, s->bucket,
                        key);
        return NULL;
    }
    if ((*rc = s3_get(s->c, s->bucket, key, 0, n, b)) != GRIT_OK) {
        free(b);
        return NULL;
    }
    snprintf(o->key, sizeof o->key, "%s", key);
    o->buf = b;
    o->len = n;
    o->used = ++s->clock;
    s->cached_bytes += n;
    return o;
}

static grit_err s3s_put(store *st, const char *path, const void *const *bufs, const size_t *lens,
                        int n, const store_sink *sink)
{
    s3_store *s = (s3_store *)st;
    char key[1024];
    key_of(s, path, key, sizeof key);
    drop_cache(s, ""); /* a save: what a restore read is not needed any more */
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
    grit_err rc = GRIT_OK;
    cached_obj *o = fetch(s, key, &rc);
    if (!o)
        return rc;
    if (off > o->len || len > o->len - off)
        return grit_errf(GRIT_EFORMAT, "s3://%s/%s: unexpected end of object at byte %zu "
                                       "(object has %zu)", s->bucket, key, o->len, o->len);
    memcpy(buf, o->buf + off, len);
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
    drop_cache(s, key);
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

typedef struct abort_ctx {
    s3_store *s;
    int n;
    grit_err rc;
} abort_ctx;

static void abort_one(void *ctx, const char *key, const char *id, const char *initiated)
{
    (void)initiated;
    abort_ctx *a = ctx;
    if (a->rc != GRIT_OK)
        return;
    if ((a->rc = s3_abort_upload(a->s->c, a->s->bucket, key, id)) == GRIT_OK)
        a->n++;
}

static grit_err s3s_cleanup(store *st, int *count)
{
    s3_store *s = (s3_store *)st;
    char key[1024];
    key_of(s, ".", key, sizeof key);
    if (key[0])
        strncat(key, "/", sizeof key - strlen(key) - 1);
    abort_ctx a = {s, 0, GRIT_OK};
    grit_err rc = s3_list_uploads(s->c, s->bucket, key, abort_one, &a);
    *count = a.n;
    return rc != GRIT_OK ? rc : a.rc;
}

static void s3s_release(store *st) { drop_cache((s3_store *)st, ""); }

static void s3s_close(store *st)
{
    s3_store *s = (s3_store *)st;
    drop_cache(s, "");
    s3_client_close(s->c);
    free(s);
}

static const store_ops s3_ops = {.put = s3s_put,
                                 .read = s3s_read,
                                 .size = s3s_size,
                                 .list = s3s_list,
                                 .rename = s3s_rename,
                                 .remove = s3s_remove,
                                 .mkdir = s3s_nothing,
                                 .sync_dir = s3s_nothing,
                                 .close = s3s_close,
                                 .cleanup = s3s_cleanup,
                                 .release = s3s_release};

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
    s->cache_cap = o && o->read_cache ? o->read_cache : d.read_cache;
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
