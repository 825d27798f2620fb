/*
 * store_tier.c - two-tier checkpoint storage: a local directory first, a remote store
 * (S3) second ("checkpoint.cache_dir" with an s3:// "checkpoint.dir").
 *
 * Writes go to the local tier with its atomic-rename protocol, so a save is committed
 * locally first; the commit (rename of step_N.tmp to step_N) then uploads step_N to the
 * remote tier in the remote's own commit order (data, manifest.json last), and the
 * rename of LATEST uploads LATEST. Saves already run on the background checkpoint
 * thread (ckpt/async.h), so the upload does not stall training. A failed upload fails
 * the save (reported, retried at the next save); the local copy stays committed.
 *
 * Reads: list() is the union of both tiers (a remote-only step without its manifest, an
 * upload that never finished, is left out; an unreachable remote leaves the local list).
 * A file is read from the local tier when it is there, from the remote otherwise, and a
 * step whose local copy failed verification is switched to the remote for good with
 * fallback() (ckpt_find calls it): resume uses the local copy when it verifies, else the
 * remote one. remove() removes from both tiers (prune).
 */
#define _GNU_SOURCE
#include "ckpt/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEMOTED 64

typedef struct tier_store {
    store base;
    store *local, *remote;
    char demoted[MAX_DEMOTED][64]; /* step dirs read from the remote */
    int ndemoted;
} tier_store;

/* first path component into d */
static void dir_of(const char *path, char *d, size_t cap)
{
    size_t n = strcspn(path, "/");
    snprintf(d, cap, "%.*s", (int)n, path);
}

static int is_demoted(const tier_store *t, const char *path)
{
    char d[64];
    dir_of(path, d, sizeof d);
    for (int i = 0; i < t->ndemoted; i++)
        if (!strcmp(t->demoted[i], d))
            return 1;
    return 0;
}

/* the tier that serves reads of path */
static store *reader(tier_store *t, const char *path)
{
    size_t n;
    if (is_demoted(t, path))
        return t->remote;
    return t->local->ops->size(t->local, path, &n) == GRIT_OK ? t->local : t->remote;
}

static grit_err tr_put(store *s, const char *path, const void *const *bufs, const size_t *lens,
                       int n, const store_sink *sink)
{
    tier_store *t = (tier_store *)s;
    return t->local->ops->put(t->local, path, bufs, lens, n, sink);
}

static grit_err tr_read(store *s, const char *path, size_t off, size_t len, void *buf)
{
    store *r = reader((tier_store *)s, path);
    return r->ops->read(r, path, off, len, buf);
}

static grit_err tr_size(store *s, const char *path, size_t *out)
{
    store *r = reader((tier_store *)s, path);
    return r->ops->size(r, path, out);
}

typedef struct names {
    char (*v)[256];
    int n, cap;
} names;

static void add_name(void *ctx, const char *name)
{
    names *a = ctx;
    for (int i = 0; i < a->n; i++)
        if (!strcmp(a->v[i], name))
            return;
    if (a->n == a->cap) {
        int nc = a->cap ? 2 * a->cap : 32;
        char(*nv)[256] = realloc(a->v, sizeof *nv * (size_t)nc);
        if (!nv)
            return;
        a->v = nv;
        a->cap = nc;
    }
    snprintf(a->v[a->n++], 256, "%s", name);
}

static grit_err tr_list(store *s, const char *dir, store_list_fn fn, void *ctx)
{
    tier_store *t = (tier_store *)s;
    names loc = {0}, rem = {0};
    grit_err rc = t->local->ops->list(t->local, dir, add_name, &loc);
    if (rc != GRIT_OK && rc != GRIT_ENOTFOUND) {
        free(loc.v);
        return rc;
    }
    /* an unreachable remote leaves the local tier usable */
    grit_err rr = t->remote->ops->list(t->remote, dir, add_name, &rem);
    for (int i = 0; i < loc.n; i++)
        fn(ctx, loc.v[i]);
    for (int i = 0; rr == GRIT_OK && i < rem.n; i++) {
        int dup = 0;
        for (int k = 0; k < loc.n && !dup; k++)
            dup = !strcmp(loc.v[k], rem.v[i]);
        if (dup)
            continue;
        if (!strcmp(dir, ".") && !strncmp(rem.v[i], "step_", 5)) {
            char m[300];
            size_t n;
            snprintf(m, sizeof m, "%s/manifest.json", rem.v[i]);
            if (t->remote->ops->size(t->remote, m, &n) == GRIT_ENOTFOUND)
                continue; /* an upload that never finished */
        }
        fn(ctx, rem.v[i]);
    }
    free(loc.v);
    free(rem.v);
    return rc == GRIT_ENOTFOUND && rr != GRIT_OK ? rc : GRIT_OK;
}

/* Copies the local file or directory `to` to the remote tier, manifest.json last. */
static grit_err upload(tier_store *t, const char *to)
{
    names files = {0};
    grit_err rc = GRIT_OK;
    int is_dir = t->local->ops->list(t->local, to, add_name, &files) == GRIT_OK;
    if (!is_dir) {
        free(files.v);
        files = (names){0};
        add_name(&files, "");
    } else if ((rc = t->remote->ops->remove(t->remote, to)) != GRIT_OK) {
        free(files.v);
        return rc; /* an older remote copy of this step goes first */
    }
    for (int pass = 0; pass < 2 && rc == GRIT_OK; pass++)
        for (int i = 0; i < files.n && rc == GRIT_OK; i++) {
            int is_m = !strcmp(files.v[i], "manifest.json");
            if (is_m != pass) /* pass 0: data, pass 1: the manifest */
                continue;
            char p[600], *data = NULL;
            size_t len = 0;
            snprintf(p, sizeof p, "%s%s%s", to, files.v[i][0] ? "/" : "", files.v[i]);
            if ((rc = store_read_all(t->local, p, &data, &len)) == GRIT_OK) {
                const void *b = data;
                rc = t->remote->ops->put(t->remote, p, &b, &len, 1, NULL);
            }
            free(data);
        }
    if (rc != GRIT_OK && is_dir)
        t->remote->ops->remove(t->remote, to); /* no partial step left behind, best effort */
    free(files.v);
    return rc;
}

static grit_err tr_rename(store *s, const char *from, const char *to)
{
    tier_store *t = (tier_store *)s;
    grit_err rc = t->local->ops->rename(t->local, from, to);
    if (rc != GRIT_OK)
        return rc;
    /* upload once the local copy is durable: the caller syncs the directory after the
     * rename, so sync it here first */
    char d[600];
    snprintf(d, sizeof d, "%s", to);
    char *slash = strrchr(d, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(d, sizeof d, ".");
    if ((rc = t->local->ops->sync_dir(t->local, d)) != GRIT_OK)
        return rc;
    return upload(t, to);
}

static grit_err tr_remove(store *s, const char *path)
{
    tier_store *t = (tier_store *)s;
    grit_err rc = t->remote->ops->remove(t->remote, path);
    if (rc != GRIT_OK)
        return rc;
    return t->local->ops->remove(t->local, path);
}

static grit_err tr_mkdir(store *s, const char *path)
{
    tier_store *t = (tier_store *)s;
    return t->local->ops->mkdir(t->local, path);
}

static grit_err tr_sync_dir(store *s, const char *dir)
{
    tier_store *t = (tier_store *)s;
    return t->local->ops->sync_dir(t->local, dir);
}

static grit_err tr_fallback(store *s, const char *dir)
{
    tier_store *t = (tier_store *)s;
    char m[300];
    size_t n;
    snprintf(m, sizeof m, "%s/manifest.json", dir);
    if (is_demoted(t, dir) || t->ndemoted == MAX_DEMOTED || strlen(dir) >= 64 ||
        t->remote->ops->size(t->remote, m, &n) != GRIT_OK)
        return GRIT_ENOTFOUND; /* no other copy to try */
    snprintf(t->demoted[t->ndemoted++], 64, "%s", dir);
    return GRIT_OK;
}

/* what died mid-write on either tier: the local .tmp folders are ckpt_prune's, the
 * remote's unfinished uploads the remote's */
static grit_err tr_cleanup(store *s, int *count)
{
    tier_store *t = (tier_store *)s;
    return store_cleanup(t->remote, count);
}

static void tr_release(store *s)
{
    tier_store *t = (tier_store *)s;
    store_release(t->local);
    store_release(t->remote);
}

static void tr_close(store *s)
{
    tier_store *t = (tier_store *)s;
    store_close(t->local);
    store_close(t->remote);
    free(t);
}

static const store_ops tier_ops = {tr_put,    tr_read,     tr_size,    tr_list,
                                   tr_rename, tr_remove,   tr_mkdir,   tr_sync_dir,
                                   tr_close,  tr_fallback, tr_cleanup, tr_release};

grit_err store_open_tiered(const char *cache_dir, const char *remote, const struct s3_opts *o,
                           store **out)
{
    *out = NULL;
    store *l = NULL, *r = NULL;
    grit_err rc = store_open_posix(cache_dir, &l);
    if (rc == GRIT_OK)
        rc = !strncmp(remote, "s3://", 5) ? store_open_s3(remote, o, &r)
                                          : store_open_posix(remote, &r);
    tier_store *t = rc == GRIT_OK ? calloc(1, sizeof *t) : NULL;
    if (rc == GRIT_OK && !t)
        rc = grit_errf(GRIT_ENOMEM, "out of memory");
    if (rc != GRIT_OK) {
        store_close(l);
        store_close(r);
        return rc;
    }
    t->base.ops = &tier_ops;
    t->local = l;
    t->remote = r;
    snprintf(t->base.root, sizeof t->base.root, "%s (cache of %s)", cache_dir, remote);
    *out = &t->base;
    return GRIT_OK;
}
