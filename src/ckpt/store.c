/*
 * store.c - the POSIX directory backend and the fault-injecting wrapper
 * (see store.h for the contracts).
 */
#define _GNU_SOURCE
#include "ckpt/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fault.h"
#include "core/fsutil.h"

/* --- POSIX ------------------------------------------------------------------- */

static void full(const store *s, const char *path, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s", s->root, path);
}

/* write() until all n bytes are out (partial writes, EINTR); -1 with errno on error. */
static int write_all(int fd, const char *b, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static grit_err px_put(store *s, const char *path, const void *const *bufs, const size_t *lens,
                       int n, const store_sink *sink)
{
    char p[2048];
    full(s, path, p, sizeof p);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return grit_errf(GRIT_EIO, "%s: cannot create: %s", p, strerror(errno));
    grit_err rc = GRIT_OK;
    for (int i = 0; i < n && rc == GRIT_OK; i++) {
        /* 8 MiB at a time: the sink reads the chunk, write() copies it while cache-hot */
        for (size_t off = 0; off < lens[i]; off += 8u << 20) {
            const char *b = (const char *)bufs[i] + off;
            size_t chunk = lens[i] - off < (8u << 20) ? lens[i] - off : (8u << 20);
            if (sink)
                sink->fn(sink->ctx, b, chunk);
            if (write_all(fd, b, chunk) != 0) {
                rc = grit_errf(GRIT_EIO, "%s: write failed: %s", p, strerror(errno));
                break;
            }
        }
    }
    if (rc == GRIT_OK && fsync(fd) != 0)
        rc = grit_errf(GRIT_EIO, "%s: fsync failed: %s", p, strerror(errno));
    if (close(fd) != 0 && rc == GRIT_OK)
        rc = grit_errf(GRIT_EIO, "%s: close failed: %s", p, strerror(errno));
    return rc;
}

static grit_err px_read(store *s, const char *path, size_t off, size_t len, void *buf)
{
    char p[2048];
    full(s, path, p, sizeof p);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return grit_errf(errno == ENOENT ? GRIT_ENOTFOUND : GRIT_EIO, "%s: cannot open: %s", p,
                         strerror(errno));
    grit_err rc = GRIT_OK;
    char *b = buf;
    while (len > 0) {
        ssize_t r = pread(fd, b, len, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = grit_errf(GRIT_EFORMAT, "%s: %s at byte %zu", p,
                           r < 0 ? strerror(errno) : "unexpected end of file", off);
            break;
        }
        b += r;
        off += (size_t)r;
        len -= (size_t)r;
    }
    close(fd);
    return rc;
}

static grit_err px_size(store *s, const char *path, size_t *out)
{
    char p[2048];
    struct stat st;
    full(s, path, p, sizeof p);
    if (stat(p, &st) != 0)
        return grit_errf(errno == ENOENT ? GRIT_ENOTFOUND : GRIT_EIO, "%s: %s", p,
                         strerror(errno));
    *out = (size_t)st.st_size;
    return GRIT_OK;
}

static grit_err px_list(store *s, const char *dir, store_list_fn fn, void *ctx)
{
    char p[2048];
    full(s, dir, p, sizeof p);
    DIR *d = opendir(p);
    if (!d)
        return grit_errf(errno == ENOENT ? GRIT_ENOTFOUND : GRIT_EIO, "%s: cannot list: %s", p,
                         strerror(errno));
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            fn(ctx, e->d_name);
    closedir(d);
    return GRIT_OK;
}

static grit_err px_rename(store *s, const char *from, const char *to)
{
    char a[2048], b[2048];
    full(s, from, a, sizeof a);
    full(s, to, b, sizeof b);
    if (rename(a, b) != 0)
        return grit_errf(GRIT_EIO, "rename %s -> %s: %s", a, b, strerror(errno));
    return GRIT_OK;
}

static grit_err remove_tree(const char *p)
{
    struct stat st;
    if (lstat(p, &st) != 0)
        return errno == ENOENT ? GRIT_OK : grit_errf(GRIT_EIO, "%s: %s", p, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(p);
        if (!d)
            return grit_errf(GRIT_EIO, "%s: cannot list: %s", p, strerror(errno));
        grit_err rc = GRIT_OK;
        for (struct dirent *e; rc == GRIT_OK && (e = readdir(d));) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char c[4096];
            snprintf(c, sizeof c, "%s/%s", p, e->d_name);
            rc = remove_tree(c);
        }
        closedir(d);
        if (rc != GRIT_OK)
            return rc;
        if (rmdir(p) != 0)
            return grit_errf(GRIT_EIO, "%s: rmdir: %s", p, strerror(errno));
        return GRIT_OK;
    }
    if (unlink(p) != 0 && errno != ENOENT)
        return grit_errf(GRIT_EIO, "%s: unlink: %s", p, strerror(errno));
    return GRIT_OK;
}

static grit_err px_remove(store *s, const char *path)
{
    char p[2048];
    full(s, path, p, sizeof p);
    return remove_tree(p);
}

static grit_err px_mkdir(store *s, const char *path)
{
    char p[2048];
    full(s, path, p, sizeof p);
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
        return grit_errf(GRIT_EIO, "%s: mkdir: %s", p, strerror(errno));
    return GRIT_OK;
}

static grit_err px_sync_dir(store *s, const char *dir)
{
    char p[2048];
    full(s, dir, p, sizeof p);
    return fs_sync_dir(p);
}

static void px_close(store *s) { free(s); }

static const store_ops posix_ops = {.put = px_put,
                                    .read = px_read,
                                    .size = px_size,
                                    .list = px_list,
                                    .rename = px_rename,
                                    .remove = px_remove,
                                    .mkdir = px_mkdir,
                                    .sync_dir = px_sync_dir,
                                    .close = px_close};

grit_err store_open_posix(const char *root, store **out)
{
    *out = NULL;
    grit_err rc = fs_mkdirs(root);
    if (rc != GRIT_OK)
        return rc;
    store *s = calloc(1, sizeof *s);
    if (!s)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    s->ops = &posix_ops;
    snprintf(s->root, sizeof s->root, "%s", root);
    *out = s;
    return GRIT_OK;
}

/* --- fault injection ------------------------------------------------------------ */

typedef struct fault_store {
    store base;
    store *inner;
    char crash_phase[32];
    long crash_nth;        /* crash the nth time crash_phase is reached (1-based) */
    long phase_hits;
    long long crash_byte;  /* -1: off */
    long enospc_at, enospc_from, short_at;
    long puts;             /* put() calls so far */
} fault_store;

static void die_now(const char *why)
{
    fprintf(stderr, "grit: fault injection: crashing (%s)\n", why);
    fflush(stderr);
    kill(getpid(), SIGKILL);
    for (;;)
        pause();
}

static grit_err ft_put(store *s, const char *path, const void *const *bufs, const size_t *lens,
                       int n, const store_sink *sink)
{
    fault_store *f = (fault_store *)s;
    long k = ++f->puts;
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += lens[i];
    int enospc = k == f->enospc_at || (f->enospc_from > 0 && k >= f->enospc_from);
    int shortw = k == f->short_at;
    int crash = f->crash_byte >= 0 && (long long)total >= f->crash_byte;
    if (!enospc && !shortw && !crash) {
        if (f->crash_byte >= 0)
            f->crash_byte -= (long long)total;
        return f->inner->ops->put(f->inner, path, bufs, lens, n, sink);
    }
    /* write a prefix for real, then fail, lie or die */
    size_t keep = crash ? (size_t)f->crash_byte : total / 2;
    const void **pb = calloc((size_t)n, sizeof *pb);
    size_t *pl = calloc((size_t)n, sizeof *pl);
    if (!pb || !pl) {
        free(pb);
        free(pl);
        return grit_errf(GRIT_ENOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        pb[i] = bufs[i];
        pl[i] = keep < lens[i] ? keep : lens[i];
        keep -= pl[i];
    }
    grit_err rc = f->inner->ops->put(f->inner, path, pb, pl, n, sink);
    free(pb);
    free(pl);
    if (crash) {
        char why[128];
        snprintf(why, sizeof why, "inside %s", path);
        die_now(why);
    }
    if (enospc)
        return grit_errf(GRIT_EIO, "%s/%s: write failed: %s (injected)", s->root, path,
                         strerror(ENOSPC));
    return rc; /* short write reported as success */
}

#define FWD(name, sig, args)                                                             \
    static grit_err ft_##name sig                                                        \
    {                                                                                    \
        store *in = ((fault_store *)s)->inner;                                           \
        return in->ops->name args;                                                       \
    }
FWD(read, (store * s, const char *p, size_t o, size_t l, void *b), (in, p, o, l, b))
FWD(size, (store * s, const char *p, size_t *o), (in, p, o))
FWD(list, (store * s, const char *d, store_list_fn fn, void *c), (in, d, fn, c))
FWD(rename, (store * s, const char *a, const char *b), (in, a, b))
FWD(remove, (store * s, const char *p), (in, p))
FWD(mkdir, (store * s, const char *p), (in, p))
FWD(sync_dir, (store * s, const char *d), (in, d))
#undef FWD

static grit_err ft_fallback(store *s, const char *d)
{
    store *in = ((fault_store *)s)->inner;
    return in->ops->fallback ? in->ops->fallback(in, d) : GRIT_ENOTFOUND;
}

static grit_err ft_cleanup(store *s, int *count)
{
    return store_cleanup(((fault_store *)s)->inner, count);
}

static void ft_release(store *s) { store_release(((fault_store *)s)->inner); }

static void ft_close(store *s)
{
    store_close(((fault_store *)s)->inner);
    free(s);
}

static const store_ops fault_ops = {ft_put,    ft_read,  ft_size,     ft_list,
                                    ft_rename, ft_remove, ft_mkdir,   ft_sync_dir,
                                    ft_close,  ft_fallback, ft_cleanup, ft_release};

grit_err store_wrap_faults(store *inner, const char *spec, store **out)
{
    *out = inner;
    if (!spec || !*spec)
        return GRIT_OK;
    fault_store *f = calloc(1, sizeof *f);
    if (!f)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    f->base.ops = &fault_ops;
    snprintf(f->base.root, sizeof f->base.root, "%s", inner->root);
    f->base.no_rename = inner->no_rename;
    f->inner = inner;
    f->crash_byte = -1;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        if (!colon)
            goto bad;
        *colon = '\0';
        const char *v = colon + 1;
        char *end;
        long long x = strtoll(v, &end, 10);
        int num_ok = *v && !*end && x >= 0;
        if (!strcmp(tok, "crash")) {
            /* crash:PHASE or crash:PHASE@N */
            const char *at = strchr(v, '@');
            size_t plen = at ? (size_t)(at - v) : strlen(v);
            if (!plen || plen >= sizeof f->crash_phase)
                goto bad;
            memcpy(f->crash_phase, v, plen);
            f->crash_phase[plen] = '\0';
            f->crash_nth = at ? strtol(at + 1, &end, 10) : 1;
            if (f->crash_nth < 1 || (at && *end))
                goto bad;
        }
        else if (!strcmp(tok, "crash_byte") && num_ok)
            f->crash_byte = x;
        else if (!strcmp(tok, "enospc") && num_ok)
            f->enospc_at = (long)x;
        else if (!strcmp(tok, "enospc_from") && num_ok)
            f->enospc_from = (long)x;
        else if (!strcmp(tok, "short") && num_ok)
            f->short_at = (long)x;
        else
            goto bad;
    }
    *out = &f->base;
    return GRIT_OK;
bad:
    free(f);
    return grit_errf(GRIT_EINVAL,
                     "GRIT_CKPT_FAULT='%s': expected a comma list of crash:PHASE[@N], "
                     "crash_byte:N, enospc:N, enospc_from:N, short:N",
                     spec);
}

void store_phase(store *s, const char *phase)
{
    if (s->ops != &fault_ops)
        return;
    fault_store *f = (fault_store *)s;
    if (f->crash_phase[0] && !strcmp(f->crash_phase, phase) && ++f->phase_hits == f->crash_nth) {
        char why[64];
        snprintf(why, sizeof why, "at checkpoint phase '%s'", phase);
        die_now(why);
    }
}

grit_err store_open(const char *location, store **out)
{
    return store_open_ex(location, NULL, out);
}

grit_err store_open_ex(const char *location, const struct s3_opts *o, store **out)
{
    return store_open_ex2(location, NULL, o, out);
}

grit_err store_open_ex2(const char *location, const char *cache_dir, const struct s3_opts *o,
                        store **out)
{
    *out = NULL;
    store *s;
    grit_err rc = cache_dir && *cache_dir ? store_open_tiered(cache_dir, location, o, &s)
                  : !strncmp(location, "s3://", 5) ? store_open_s3(location, o, &s)
                                                   : store_open_posix(location, &s);
    if (rc != GRIT_OK)
        return rc;
    rc = store_wrap_faults(s, fault_spec(FAULT_CKPT), out);
    if (rc != GRIT_OK)
        store_close(s);
    return rc;
}

void store_close(store *s)
{
    if (s)
        s->ops->close(s);
}

grit_err store_cleanup(store *s, int *count)
{
    *count = 0;
    return s->ops->cleanup ? s->ops->cleanup(s, count) : GRIT_OK;
}

void store_release(store *s)
{
    if (s->ops->release)
        s->ops->release(s);
}

grit_err store_write_atomic(store *s, const char *path, const void *data, size_t len)
{
    char tmp[1100], dir[1100];
    if (s->no_rename)
        return s->ops->put(s, path, &data, &len, 1, NULL);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    grit_err rc = s->ops->put(s, tmp, &data, &len, 1, NULL);
    if (rc == GRIT_OK)
        rc = s->ops->rename(s, tmp, path);
    if (rc != GRIT_OK) {
        s->ops->remove(s, tmp);
        return rc;
    }
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    return s->ops->sync_dir(s, dir);
}

grit_err store_read_all(store *s, const char *path, char **out, size_t *len)
{
    size_t n;
    *out = NULL;
    grit_err rc = s->ops->size(s, path, &n);
    if (rc != GRIT_OK)
        return rc;
    char *b = malloc(n + 1);
    if (!b)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    rc = s->ops->read(s, path, 0, n, b);
    if (rc != GRIT_OK) {
        free(b);
        return rc;
    }
    b[n] = '\0';
    *out = b;
    if (len)
        *len = n;
    return GRIT_OK;
}
