/*
 * disk.c - the disk check for the checkpoint directory: writable, fsync
 * works, enough free space, write bandwidth.
 *
 * A probe file DIR/.grit-health.<host>.<pid>.<random> (O_CREAT|O_EXCL) receives
 * disk_test_bytes in 1 MiB writes of a seeded pattern, is fsynced, the
 * directory is fsynced (fs_sync_dir), the file is read back and compared,
 * and it is always unlinked. Bandwidth = bytes / (write + fsync time), best of
 * two attempts when the first is below the floor.
 * Free space (statvfs f_bavail, what an unprivileged writer may use) must
 * cover need_bytes; when that is 0 and a model preset is named, need =
 * ckpt_count x 12 bytes per parameter (fp32 weights + AdamW m and v), the
 * size of a grit checkpoint; with neither, 1 GiB.
 *
 * Faults: disk_readonly (the create fails with EROFS), fsync_fail (fsync
 * reports EIO), disk_full (statvfs reports no free blocks), slow_disk (the
 * timed write is stretched 1000x).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/fsutil.h"
#include "core/progress.h"
#include "core/rng.h"
#include "health/health.h"
#include "model/gptneox.h"

/* Parameter count of a GPT-NeoX shape (embeddings untied). */
static uint64_t neox_params(const gx_config *c)
{
    uint64_t C = (uint64_t)c->hidden, I = (uint64_t)c->intermediate, V = (uint64_t)c->vocab;
    uint64_t per_layer = 4 * C + 3 * C * C + 3 * C + C * C + C + I * C + I + C * I + C;
    return 2 * V * C + (uint64_t)c->layers * per_layer + 2 * C;
}

static grit_err need_bytes(const health_opts *o, uint64_t *need, char *how, size_t cap)
{
    if (o->need_bytes) {
        *need = o->need_bytes;
        snprintf(how, cap, "--need-bytes");
        return GRIT_OK;
    }
    if (o->ckpt_model) {
        gx_config c;
        grit_err rc = gx_preset(o->ckpt_model, &c);
        if (rc != GRIT_OK)
            return grit_errf(rc, "unknown model preset '%s'", o->ckpt_model);
        uint64_t p = neox_params(&c);
        *need = p * 12u * (uint64_t)o->ckpt_count;
        snprintf(how, cap, "%d checkpoints of %s (%.1fM params x 12 bytes)", o->ckpt_count,
                 o->ckpt_model, p / 1e6);
        return GRIT_OK;
    }
    *need = (uint64_t)1 << 30;
    snprintf(how, cap, "default 1 GiB");
    return GRIT_OK;
}

static grit_err write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t k = write(fd, p, len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return GRIT_EIO;
        p += k;
        len -= (size_t)k;
    }
    return GRIT_OK;
}

grit_err health_check_disk(health_report *r, const health_opts *o)
{
    health_result *wr = health_add(r, "disk.writable");
    health_result *fr = health_add(r, "disk.fsync");
    health_result *bw = health_add(r, "disk.write_bandwidth");
    health_result *sp = health_add(r, "disk.free_space");
    if (!wr || !fr || !bw || !sp)
        return grit_errf(GRIT_ENOMEM, "health report full");
    const char *dir = o->dir ? o->dir : ".";
    char path[4096];
    /* host, PID and a random word: checks of several nodes on one shared directory may
     * run at once, with the same PID when each node has its own PID namespace */
    char host[64] = "host";
    unsigned int salt = 0;
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    if (getentropy(&salt, sizeof salt) != 0)
        salt = (unsigned int)(now_seconds() * 1e9);
    snprintf(path, sizeof path, "%s/.grit-health.%.40s.%ld.%08x", dir, host, (long)getpid(), salt);

    /* Free space. */
    uint64_t need = 0;
    char how[160];
    grit_err rc = need_bytes(o, &need, how, sizeof how);
    struct statvfs sv;
    if (rc != GRIT_OK) {
        health_set(sp, HEALTH_ERROR, "%s", grit_errmsg());
    } else if (statvfs(dir, &sv) != 0) {
        health_set(sp, HEALTH_FAIL, "%s: statvfs failed: %s", dir, strerror(errno));
    } else {
        uint64_t avail = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
        if (health_fault_on(o, HF_DISK_FULL))
            avail = 0;
        health_judge(sp, (double)avail, HEALTH_CMP_GE, (double)need, "bytes");
        snprintf(sp->reason, sizeof sp->reason, "%s: %.2f GiB free, need %.2f GiB (%s)%s", dir,
                 avail / 1073741824.0, need / 1073741824.0, how,
                 sp->verdict == HEALTH_FAIL ? ": not enough free space" : "");
    }

    /* Writable. */
    int fd = health_fault_on(o, HF_DISK_READONLY)
                 ? (errno = EROFS, -1)
                 : open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        health_set(wr, HEALTH_FAIL, "%s: cannot create a file: %s", dir, strerror(errno));
        health_set(fr, HEALTH_SKIP, "not run: directory not writable");
        health_set(bw, HEALTH_SKIP, "not run: directory not writable");
        return GRIT_OK;
    }
    health_set(wr, HEALTH_PASS, "%s: created and removed a probe file", dir);

    size_t chunk = (size_t)1 << 20, total = o->disk_test_bytes ? o->disk_test_bytes : chunk;
    total = (total + chunk - 1) / chunk * chunk;
    uint64_t *buf = malloc(chunk), *rbuf = malloc(chunk);
    if (!buf || !rbuf) {
        health_set(fr, HEALTH_ERROR, "cannot allocate the I/O buffer");
        health_set(bw, HEALTH_ERROR, "not measured: no buffer");
        goto out;
    }
    rng_t rg;
    rng_seed(&rg, o->seed, 7);
    for (size_t i = 0; i < chunk / 8; i++)
        buf[i] = rng_next(&rg);
    /* write + fsync, timed; a second attempt when the first is below the
     * bandwidth floor, since one slow journal flush on a shared disk can
     * stall a single fsync (the better attempt counts). */
    double dt = 0.0, slow = health_fault_on(o, HF_SLOW_DISK) ? 1000.0 : 1.0;
    int attempts = 0;
    for (; attempts < 2; attempts++) {
        if (attempts && lseek(fd, 0, SEEK_SET) != 0)
            break;
        double t0 = now_seconds();
        grit_err werr = GRIT_OK;
        for (size_t off = 0; off < total && werr == GRIT_OK; off += chunk) {
            buf[0] = off; /* every chunk distinct */
            werr = write_all(fd, buf, chunk);
        }
        if (werr != GRIT_OK) {
            health_set(fr, HEALTH_FAIL, "%s: write of %zu bytes failed: %s", dir, total,
                       strerror(errno));
            health_set(bw, HEALTH_SKIP, "not measured: write failed");
            goto out;
        }
        int frc = health_fault_on(o, HF_FSYNC_FAIL) ? (errno = EIO, -1) : fsync(fd);
        double d = (now_seconds() - t0) * slow;
        if (frc != 0) {
            health_set(fr, HEALTH_FAIL, "%s: fsync failed: %s", dir, strerror(errno));
            health_set(bw, HEALTH_SKIP, "not measured: fsync failed");
            goto out;
        }
        dt = attempts == 0 || d < dt ? d : dt;
        if ((double)total / 1e6 / dt >= o->min_disk_mbps)
            break;
    }
    if (fs_sync_dir(dir) != GRIT_OK) {
        health_set(fr, HEALTH_FAIL, "%s", grit_errmsg());
        health_set(bw, HEALTH_SKIP, "not measured: directory fsync failed");
        goto out;
    }
    /* Read back (from the page cache, mostly: this checks the file system
     * path, not the platters) and compare. */
    size_t badchunk = (size_t)-1;
    if (lseek(fd, 0, SEEK_SET) != 0)
        badchunk = 0;
    for (size_t off = 0; off < total && badchunk == (size_t)-1; off += chunk) {
        buf[0] = off;
        size_t got = 0;
        while (got < chunk) {
            ssize_t k = read(fd, (char *)rbuf + got, chunk - got);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                break;
            got += (size_t)k;
        }
        if (got != chunk || memcmp(buf, rbuf, chunk))
            badchunk = off;
    }
    if (badchunk != (size_t)-1)
        health_set(fr, HEALTH_FAIL, "%s: data read back differs from what was written at "
                   "offset %zu", dir, badchunk);
    else
        health_set(fr, HEALTH_PASS, "%.0f MiB written, fsynced (file and directory), read back",
                   total / 1048576.0);

    double mbps = (double)total / 1e6 / dt;
    health_judge(bw, mbps, HEALTH_CMP_GE, o->min_disk_mbps, "MB/s");
    if (bw->verdict == HEALTH_FAIL)
        snprintf(bw->reason, sizeof bw->reason, "%s: write+fsync %.1f MB/s below %.1f MB/s "
                 "(best of 2 attempts)", dir, mbps, o->min_disk_mbps);
    else
        snprintf(bw->reason, sizeof bw->reason, "write+fsync of %.0f MiB", total / 1048576.0);
out:
    free(buf);
    free(rbuf);
    close(fd);
    unlink(path);
    return GRIT_OK;
}
