/* prep_s3.c - see prep_s3.h. */
#include "prep/prep_s3.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef GRIT_HAVE_S3
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "s3/client.h"
#endif

int prep_s3_is_url(const char *path)
{
    return strncmp(path, "s3://", 5) == 0;
}

#ifndef GRIT_HAVE_S3

grit_err prep_s3_open(prep_s3 **out)
{
    *out = NULL;
    return grit_errf(GRIT_EINVAL, "s3:// inputs: this grit was built without S3 (install "
                     "libcurl4-openssl-dev and libssl-dev, then rebuild)");
}
void prep_s3_close(prep_s3 *s) { (void)s; }
grit_err prep_s3_list(prep_s3 *s, const char *url, prep_s3_add_fn add, void *ctx)
{
    (void)s, (void)add, (void)ctx;
    return grit_errf(GRIT_EINVAL, "%s: this grit was built without S3", url);
}
grit_err prep_s3_fetch(prep_s3 *s, const char *url, uint64_t size, const char *dest)
{
    (void)s, (void)size, (void)dest;
    return grit_errf(GRIT_EINVAL, "%s: this grit was built without S3", url);
}
grit_err prep_s3_put_file(prep_s3 *s, const char *local, const char *url)
{
    (void)s, (void)local;
    return grit_errf(GRIT_EINVAL, "%s: this grit was built without S3", url);
}
grit_err prep_s3_delete(prep_s3 *s, const char *url)
{
    (void)s;
    return grit_errf(GRIT_EINVAL, "%s: this grit was built without S3", url);
}

#else

struct prep_s3 {
    s3_client *c;
};

grit_err prep_s3_open(prep_s3 **out)
{
    *out = NULL;
    prep_s3 *s = calloc(1, sizeof *s);
    if (!s)
        return GRIT_ENOMEM;
    s3_opts o;
    s3_opts_defaults(&o);
    const char *lp = getenv("GRIT_PREP_S3_LIST_PAGE"); /* tests: small pages */
    if (lp && atoi(lp) > 0)
        o.list_page = atoi(lp);
    grit_err rc = s3_client_open(&o, &s->c);
    if (rc != GRIT_OK) {
        free(s);
        return rc;
    }
    *out = s;
    return GRIT_OK;
}

void prep_s3_close(prep_s3 *s)
{
    if (!s)
        return;
    s3_client_close(s->c);
    free(s);
}

typedef struct lst {
    char **keys;
    uint64_t *sizes;
    size_t n, cap;
    int nomem;
} lst;

static void on_key(void *ctx, const char *name, size_t size)
{
    lst *l = ctx;
    if (l->nomem)
        return;
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 256;
        char **k = realloc(l->keys, nc * sizeof *k);
        uint64_t *s = k ? realloc(l->sizes, nc * sizeof *s) : NULL;
        if (k)
            l->keys = k;
        if (!k || !s) {
            l->nomem = 1;
            return;
        }
        l->sizes = s;
        l->cap = nc;
    }
    if (!(l->keys[l->n] = strdup(name))) {
        l->nomem = 1;
        return;
    }
    l->sizes[l->n++] = size;
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp(**(char *const *const *)a, **(char *const *const *)b);
}

grit_err prep_s3_list(prep_s3 *s, const char *url, prep_s3_add_fn add, void *ctx)
{
    char bucket[256], prefix[1024];
    grit_err rc = s3_parse_url(url, bucket, sizeof bucket, prefix, sizeof prefix);
    if (rc != GRIT_OK)
        return rc;
    lst l = {0};
    /* a prefix "a/b" lists "a/b/..." (a folder); an object named exactly a/b too */
    size_t pl = strlen(prefix);
    char *folder = malloc(pl + 2);
    if (!folder)
        return GRIT_ENOMEM;
    snprintf(folder, pl + 2, "%s%s", prefix, pl ? "/" : "");
    int single = 0;
    rc = s3_list(s->c, bucket, folder, 0, on_key, &l);
    if (rc != GRIT_OK)
        rc = grit_errf(rc, "%s: %s", url, grit_errmsg());
    if (rc == GRIT_OK && l.n == 0 && pl) {
        size_t sz = 0;
        rc = s3_head(s->c, bucket, prefix, &sz);
        single = rc == GRIT_OK;
        if (rc == GRIT_OK)
            on_key(&l, prefix, sz);
        else if (rc == GRIT_ENOTFOUND)
            rc = grit_errf(GRIT_ENOTFOUND, "%s: no objects under this prefix", url);
    }
    if (rc == GRIT_OK && l.nomem)
        rc = GRIT_ENOMEM;
    char ***idx = rc == GRIT_OK ? malloc((l.n + 1) * sizeof *idx) : NULL;
    if (rc == GRIT_OK && !idx)
        rc = GRIT_ENOMEM;
    for (size_t i = 0; rc == GRIT_OK && i < l.n; i++)
        idx[i] = &l.keys[i];
    if (rc == GRIT_OK)
        qsort(idx, l.n, sizeof *idx, cmp_key);
    for (size_t i = 0; rc == GRIT_OK && i < l.n; i++) {
        const char *key = *idx[i];
        /* s3_list gives keys with the listed prefix removed */
        size_t need = 5 + strlen(bucket) + 1 + strlen(folder) + strlen(key) + 1;
        char *u = malloc(need);
        if (!u) {
            rc = GRIT_ENOMEM;
            break;
        }
        snprintf(u, need, "s3://%s/%s%s", bucket, single ? "" : folder, key);
        rc = add(ctx, u, l.sizes[idx[i] - l.keys]);
        free(u);
    }
    for (size_t i = 0; i < l.n; i++)
        free(l.keys[i]);
    free(l.keys);
    free(l.sizes);
    free(idx);
    free(folder);
    return rc;
}

grit_err prep_s3_fetch(prep_s3 *s, const char *url, uint64_t size, const char *dest)
{
    char bucket[256], key[1024];
    grit_err rc = s3_parse_url(url, bucket, sizeof bucket, key, sizeof key);
    if (rc != GRIT_OK)
        return rc;
    size_t now = 0;
    if ((rc = s3_head(s->c, bucket, key, &now)) != GRIT_OK)
        return grit_errf(rc, "%s: %s", url, grit_errmsg());
    if (now != size)
        return grit_errf(GRIT_EIO, "%s: the object changed size since it was listed (%llu "
                         "bytes, now %zu): start over in a new output directory to read the "
                         "new inputs", url, (unsigned long long)size, now);
    FILE *f = fopen(dest, "wb");
    if (!f)
        return grit_errf(GRIT_EIO, "%s: cannot create: %s", dest, strerror(errno));
    size_t cap = size < PREP_S3_CHUNK ? (size_t)size : PREP_S3_CHUNK;
    char *buf = malloc(cap ? cap : 1);
    if (!buf)
        rc = GRIT_ENOMEM;
    for (uint64_t off = 0; rc == GRIT_OK && off < size; off += cap) {
        size_t n = size - off < cap ? (size_t)(size - off) : cap;
        if ((rc = s3_get(s->c, bucket, key, (size_t)off, n, buf)) != GRIT_OK) {
            rc = grit_errf(rc, "%s: %s", url, grit_errmsg());
            break;
        }
        if (fwrite(buf, 1, n, f) != n)
            rc = grit_errf(GRIT_EIO, "%s: write failed: %s", dest, strerror(errno));
    }
    free(buf);
    if (fclose(f) != 0 && rc == GRIT_OK)
        rc = grit_errf(GRIT_EIO, "%s: write failed: %s", dest, strerror(errno));
    /* replaced while being read (a same-size replacement shows in the reader) */
    if (rc == GRIT_OK && (rc = s3_head(s->c, bucket, key, &now)) == GRIT_OK && now != size)
        rc = grit_errf(GRIT_EIO, "%s: the object changed size while being read (%llu bytes, "
                       "now %zu): start over in a new output directory to read the new "
                       "inputs", url, (unsigned long long)size, now);
    return rc;
}

grit_err prep_s3_put_file(prep_s3 *s, const char *local, const char *url)
{
    char bucket[256], key[1024];
    grit_err rc = s3_parse_url(url, bucket, sizeof bucket, key, sizeof key);
    if (rc != GRIT_OK)
        return rc;
    int fd = open(local, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        rc = grit_errf(GRIT_EIO, "%s: cannot open: %s", local, strerror(errno));
        if (fd >= 0)
            close(fd);
        return rc;
    }
    size_t n = (size_t)st.st_size;
    void *p = n ? mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0) : (void *)"";
    close(fd);
    if (p == MAP_FAILED)
        return grit_errf(GRIT_EIO, "%s: cannot map: %s", local, strerror(errno));
    const void *bufs[1] = {p};
    size_t lens[1] = {n};
    rc = s3_put(s->c, bucket, key, bufs, lens, 1);
    if (rc != GRIT_OK)
        rc = grit_errf(rc, "%s: %s", url, grit_errmsg());
    if (n)
        munmap(p, n);
    return rc;
}

grit_err prep_s3_delete(prep_s3 *s, const char *url)
{
    char bucket[256], key[1024];
    grit_err rc = s3_parse_url(url, bucket, sizeof bucket, key, sizeof key);
    if (rc == GRIT_OK && (rc = s3_delete(s->c, bucket, key)) != GRIT_OK)
        rc = grit_errf(rc, "%s: %s", url, grit_errmsg());
    return rc;
}

#endif
