/* s3cache.c - see s3cache.h. */
#include "train/s3cache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fsutil.h"
#ifdef GRIT_HAVE_S3
#include "s3/client.h"
#endif

#define S3CACHE_CHUNK ((size_t)64 << 20)

static void cache_root(char *buf, size_t cap)
{
    const char *e = getenv("GRIT_S3_CACHE"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    if (e && *e)
        snprintf(buf, cap, "%s", e);
    else if (x && *x)
        snprintf(buf, cap, "%s/grit/s3", x);
    else
        snprintf(buf, cap, "%s/.cache/grit/s3", h && *h ? h : "/tmp");
}

#ifndef GRIT_HAVE_S3
grit_err train_s3cache_prefix(const char *prefix, char *out, size_t cap)
{
    if (strncmp(prefix, "s3://", 5))
        return snprintf(out, cap, "%s", prefix) < (int)cap
                   ? GRIT_OK
                   : grit_errf(GRIT_EINVAL, "%s: path too long", prefix);
    return grit_errf(GRIT_EINVAL, "data.paths: %s: this grit was built without S3", prefix);
}
#else

/* CACHE/bucket/key from the object, fetched unless already there whole. */
static grit_err fetch(s3_client *c, const char *bucket, const char *key, const char *local)
{
    size_t size = 0;
    grit_err rc = s3_head(c, bucket, key, &size);
    if (rc != GRIT_OK)
        return grit_errf(rc, "data.paths: s3://%s/%s: %s", bucket, key, grit_errmsg());
    struct stat st;
    if (stat(local, &st) == 0 && (size_t)st.st_size == size)
        return GRIT_OK; /* cached */
    char dir[4200], tmp[4300];
    snprintf(dir, sizeof dir, "%s", local);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    if ((rc = fs_mkdirs(dir)) != GRIT_OK)
        return rc;
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", local, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return grit_errf(GRIT_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    size_t cap = size < S3CACHE_CHUNK ? size : S3CACHE_CHUNK;
    char *buf = malloc(cap ? cap : 1);
    if (!buf)
        rc = GRIT_ENOMEM;
    for (size_t off = 0; rc == GRIT_OK && off < size; off += cap) {
        size_t n = size - off < cap ? size - off : cap;
        if ((rc = s3_get(c, bucket, key, off, n, buf)) != GRIT_OK)
            rc = grit_errf(rc, "data.paths: s3://%s/%s: %s", bucket, key, grit_errmsg());
        else if (fwrite(buf, 1, n, f) != n)
            rc = grit_errf(GRIT_EIO, "%s: write failed: %s", tmp, strerror(errno));
    }
    free(buf);
    if (rc == GRIT_OK && (fflush(f) != 0 || fsync(fileno(f)) != 0))
        rc = grit_errf(GRIT_EIO, "%s: write failed: %s", tmp, strerror(errno));
    if (fclose(f) != 0 && rc == GRIT_OK)
        rc = grit_errf(GRIT_EIO, "%s: write failed: %s", tmp, strerror(errno));
    if (rc == GRIT_OK && rename(tmp, local) != 0)
        rc = grit_errf(GRIT_EIO, "%s: cannot rename into place: %s", local, strerror(errno));
    if (rc == GRIT_OK)
        rc = fs_sync_dir(dir);
    if (rc != GRIT_OK)
        unlink(tmp);
    return rc;
}

grit_err train_s3cache_prefix(const char *prefix, char *out, size_t cap)
{
    if (strncmp(prefix, "s3://", 5))
        return snprintf(out, cap, "%s", prefix) < (int)cap
                   ? GRIT_OK
                   : grit_errf(GRIT_EINVAL, "%s: path too long", prefix);
    char bucket[256], key[1024], root[2048];
    grit_err rc = s3_parse_url(prefix, bucket, sizeof bucket, key, sizeof key);
    if (rc != GRIT_OK)
        return grit_errf(rc, "data.paths: %s", grit_errmsg());
    cache_root(root, sizeof root);
    if (snprintf(out, cap, "%s/%s/%s", root, bucket, key) >= (int)cap)
        return grit_errf(GRIT_EINVAL, "data.paths: %s: cache path too long", prefix);
    s3_opts o;
    s3_opts_defaults(&o);
    s3_client *c = NULL;
    if ((rc = s3_client_open(&o, &c)) != GRIT_OK)
        return grit_errf(rc, "data.paths: %s: %s", prefix, grit_errmsg());
    static const char *const ext[] = {".bin", ".idx"};
    for (int i = 0; i < 2 && rc == GRIT_OK; i++) {
        char k[1100], local[4200];
        snprintf(k, sizeof k, "%s%s", key, ext[i]);
        snprintf(local, sizeof local, "%s%s", out, ext[i]);
        rc = fetch(c, bucket, k, local);
    }
    s3_client_close(c);
    return rc;
}
#endif
