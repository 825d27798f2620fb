/* fsutil.c - durable writes (temp, fsync, rename, fsync dir) and helpers. */
#include "core/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

grit_err fs_sync_dir(const char *dirpath)
{
    int fd = open(dirpath, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return grit_errf(GRIT_EIO, "%s: cannot open directory: %s", dirpath, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    if (rc != 0)
        return grit_errf(GRIT_EIO, "%s: fsync of directory failed: %s", dirpath, strerror(e));
    return GRIT_OK;
}

/* len bytes at offset off (pwrite, restarted after EINTR and short writes). */
static grit_err write_at(int fd, const char *path, const void *buf, size_t len, size_t off)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return grit_errf(GRIT_EIO, "%s: write failed: %s", path, strerror(errno));
        }
        p += n;
        len -= (size_t)n;
        off += (size_t)n;
    }
    return GRIT_OK;
}

grit_err fs_stream_open(fs_stream *s, const char *path)
{
    s->fd = -1;
    if (snprintf(s->path, sizeof s->path, "%s", path) >= (int)sizeof s->path ||
        snprintf(s->tmp, sizeof s->tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof s->tmp)
        return grit_errf(GRIT_EINVAL, "%s: path too long", path);
    s->fd = open(s->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (s->fd < 0)
        return grit_errf(GRIT_EIO, "%s: cannot create: %s", s->tmp, strerror(errno));
    return GRIT_OK;
}

grit_err fs_stream_write(fs_stream *s, const void *buf, size_t len, size_t off)
{
    return write_at(s->fd, s->tmp, buf, len, off);
}

void fs_stream_abort(fs_stream *s)
{
    if (s->fd < 0)
        return;
    close(s->fd);
    unlink(s->tmp);
    s->fd = -1;
}

grit_err fs_stream_commit(fs_stream *s)
{
    grit_err rc = GRIT_OK;
    if (fsync(s->fd) != 0)
        rc = grit_errf(GRIT_EIO, "%s: fsync failed: %s", s->tmp, strerror(errno));
    if (close(s->fd) != 0 && rc == GRIT_OK)
        rc = grit_errf(GRIT_EIO, "%s: close failed: %s", s->tmp, strerror(errno));
    s->fd = -1;
    if (rc == GRIT_OK && rename(s->tmp, s->path) != 0)
        rc = grit_errf(GRIT_EIO, "%s: rename to %s failed: %s", s->tmp, s->path,
                       strerror(errno));
    if (rc != GRIT_OK) {
        unlink(s->tmp);
        return rc;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", s->path);
    return fs_sync_dir(dirname(dir));
}

grit_err fs_write_durable_iov(const char *path, const void *const *bufs,
                              const size_t *lens, int nbufs)
{
    fs_stream s;
    grit_err rc = fs_stream_open(&s, path);
    for (size_t i = 0, off = 0; rc == GRIT_OK && i < (size_t)nbufs; off += lens[i++])
        rc = fs_stream_write(&s, bufs[i], lens[i], off);
    if (rc != GRIT_OK) {
        fs_stream_abort(&s);
        return rc;
    }
    return fs_stream_commit(&s);
}

grit_err fs_write_durable(const char *path, const void *data, size_t len)
{
    const void *bufs[1] = {data};
    return fs_write_durable_iov(path, bufs, &len, 1);
}

grit_err fs_mkdirs(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf)
        return grit_errf(GRIT_EINVAL, "'%s': bad directory path", path);
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return grit_errf(GRIT_EIO, "%s: cannot create directory: %s", buf, strerror(errno));
            *p = c;
            if (c == '\0')
                break;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return grit_errf(GRIT_EIO, "%s: exists and is not a directory", path);
    return GRIT_OK;
}

grit_err fs_read_all(const char *path, char **out, size_t *len)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return grit_errf(GRIT_EIO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    grit_err rc = GRIT_OK;
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *nb = realloc(buf, cap * 2 + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    if (!buf)
        rc = grit_errf(GRIT_ENOMEM, "%s: out of memory reading file", path);
    else if (ferror(f)) {
        rc = grit_errf(GRIT_EIO, "%s: read failed", path);
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        *out = buf;
        if (len)
            *len = n;
    }
    return rc;
}
