/*
 * tb.c - TensorBoard event-file writer (format in tb.h and docs/formats.md).
 *
 * The protobuf encoding is written by hand: an Event uses five wire forms only
 * (varint, 64-bit, 32-bit, length-delimited), so a 200-byte stack buffer holds
 * one scalar event and no protobuf library is needed. Records go through stdio
 * and are flushed by tb_flush, which the trainer calls after every step.
 */
#define _GNU_SOURCE
#include "obs/tb.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "core/fsutil.h"

struct tb_writer {
    FILE *f;
    grit_err err; /* sticky */
    char path[1200];
};

static uint32_t crc_table[256];

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t tb_crc32c(const void *data, size_t n)
{
    if (!crc_table[1])
        crc_init(); /* idempotent: racing threads write the same values */
    const uint8_t *p = data;
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++)
        c = crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

uint32_t tb_masked_crc(const void *data, size_t n)
{
    uint32_t c = tb_crc32c(data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

size_t tb_frame(const void *data, size_t n, uint8_t *out)
{
    put_le(out, n, 8);
    put_le(out + 8, tb_masked_crc(out, 8), 4);
    memcpy(out + 12, data, n);
    put_le(out + 12 + n, tb_masked_crc(data, n), 4);
    return n + 16;
}

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

static size_t put_double(uint8_t *p, int field, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, 8);
    p[0] = (uint8_t)(field << 3 | 1);
    put_le(p + 1, bits, 8);
    return 9;
}

static grit_err write_record(tb_writer *w, const uint8_t *data, size_t n)
{
    uint8_t rec[300];
    if (w->err)
        return w->err;
    size_t len = tb_frame(data, n, rec);
    if (fwrite(rec, 1, len, w->f) != len)
        w->err = grit_errf(GRIT_EIO, "%s: write failed: %s", w->path, strerror(errno));
    return w->err;
}

grit_err tb_open(const char *dir, tb_writer **out)
{
    *out = NULL;
    grit_err rc = fs_mkdirs(dir);
    if (rc)
        return rc;
    tb_writer *w = calloc(1, sizeof *w);
    if (!w)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    char host[64] = "localhost";
    gethostname(host, sizeof host - 1);
    struct timeval tv;
    gettimeofday(&tv, NULL);
    /* TensorBoard reads a folder's files in name order and, when a later file goes back
     * in steps (a resumed run), drops the earlier file's steps from there on: so a new
     * file's name must sort after every existing one, even within the same second */
    long t = (long)tv.tv_sec;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        long seen;
        if (sscanf(e->d_name, "events.out.tfevents.%ld.", &seen) == 1 && seen >= t)
            t = seen + 1;
    }
    if (d)
        closedir(d);
    snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%ld.%s.%ld", dir, t, host,
             (long)getpid());
    if (!(w->f = fopen(w->path, "wb"))) {
        rc = grit_errf(GRIT_EIO, "%s: cannot create: %s", w->path, strerror(errno));
        free(w);
        return rc;
    }
    static const char version[] = "brain.Event:2";
    uint8_t ev[64];
    size_t n = put_double(ev, 1, (double)tv.tv_sec + tv.tv_usec / 1e6);
    ev[n++] = 3 << 3 | 2;
    ev[n++] = sizeof version - 1;
    memcpy(ev + n, version, sizeof version - 1);
    n += sizeof version - 1;
    if ((rc = write_record(w, ev, n)) == GRIT_OK)
        rc = tb_flush(w);
    if (rc) {
        fclose(w->f);
        unlink(w->path);
        free(w);
        return rc;
    }
    *out = w;
    return GRIT_OK;
}

grit_err tb_scalar(tb_writer *w, const char *tag, long step, double wall_time, float value)
{
    size_t tl = strlen(tag);
    if (tl > 100)
        return grit_errf(GRIT_EINVAL, "TensorBoard tag '%.40s...': longer than 100 bytes", tag);
    uint8_t val[128], ev[256];
    size_t vn = 0, n;
    val[vn++] = 1 << 3 | 2; /* Summary.Value.tag */
    vn += put_varint(val + vn, tl);
    memcpy(val + vn, tag, tl);
    vn += tl;
    val[vn++] = 2 << 3 | 5; /* Summary.Value.simple_value (float) */
    uint32_t bits;
    memcpy(&bits, &value, 4);
    put_le(val + vn, bits, 4);
    vn += 4;
    n = put_double(ev, 1, wall_time); /* Event.wall_time */
    ev[n++] = 2 << 3 | 0;             /* Event.step */
    n += put_varint(ev + n, (uint64_t)(int64_t)step);
    ev[n++] = 5 << 3 | 2; /* Event.summary */
    n += put_varint(ev + n, vn + 2);
    ev[n++] = 1 << 3 | 2; /* Summary.value */
    ev[n++] = (uint8_t)vn; /* < 128 */
    memcpy(ev + n, val, vn);
    n += vn;
    return write_record(w, ev, n);
}

static float as_printed(const char *fmt, double v)
{
    char text[64];
    snprintf(text, sizeof text, fmt, v);
    return (float)strtod(text, NULL); /* as a reader does: decimal -> double -> float */
}

grit_err tb_train_step(tb_writer *w, long step, double loss, double grad_norm, double lr,
                       double tokens_per_s)
{
    if (!w)
        return GRIT_OK;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    double now = (double)tv.tv_sec + tv.tv_usec / 1e6;
    tb_scalar(w, "train/loss", step, now, as_printed("%.9g", loss));
    tb_scalar(w, "train/grad_norm", step, now, as_printed("%.9g", grad_norm));
    tb_scalar(w, "train/lr", step, now, as_printed("%.9g", lr));
    tb_scalar(w, "train/tokens_per_s", step, now, as_printed("%.1f", tokens_per_s));
    return tb_flush(w);
}

grit_err tb_flush(tb_writer *w)
{
    if (!w)
        return GRIT_OK;
    if (!w->err && fflush(w->f) != 0)
        w->err = grit_errf(GRIT_EIO, "%s: write failed: %s", w->path, strerror(errno));
    return w->err;
}

grit_err tb_close(tb_writer *w)
{
    if (!w)
        return GRIT_OK;
    grit_err rc = tb_flush(w);
    if (fclose(w->f) != 0 && !rc)
        rc = grit_errf(GRIT_EIO, "%s: close failed: %s", w->path, strerror(errno));
    free(w);
    return rc;
}

const char *tb_path(const tb_writer *w)
{
    return w->path;
}
