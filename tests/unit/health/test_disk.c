/* test_disk.c - the disk check in a temp dir: healthy, then each fault (read-only,
 * fsync failure, full, slow), a missing directory, and free space derived from a
 * model preset. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"
#include "health/health.h"

static const health_result *find(const health_report *r, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->results[i].name, name))
            return &r->results[i];
    return NULL;
}

static health_verdict run(health_opts *o, uint32_t faults, const char *name, const char *want)
{
    health_report r;
    health_report_init(&r, HEALTH_QUICK);
    o->faults = faults;
    health_check_disk(&r, o);
    const health_result *x = find(&r, name);
    CHECK(x != NULL);
    if (!x)
        return HEALTH_ERROR;
    if (want)
        CHECK_STR_HAS(x->reason, want);
    return x->verdict;
}

int main(void)
{
    char dir[] = "/tmp/grit-test-disk-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    health_opts o;
    health_opts_defaults(&o, HEALTH_QUICK);
    o.dir = dir;
    o.disk_test_bytes = (size_t)2 << 20;
    o.need_bytes = 4096;
    CHECK_INT(run(&o, 0, "disk.writable", NULL), HEALTH_PASS);
    CHECK_INT(run(&o, 0, "disk.fsync", "written, fsynced"), HEALTH_PASS);
    CHECK_INT(run(&o, 0, "disk.write_bandwidth", NULL), HEALTH_PASS);
    CHECK_INT(run(&o, 0, "disk.free_space", NULL), HEALTH_PASS);
    CHECK_INT(run(&o, 1u << HF_DISK_READONLY, "disk.writable", "Read-only file system"),
              HEALTH_FAIL);
    CHECK_INT(run(&o, 1u << HF_DISK_READONLY, "disk.fsync", "not writable"), HEALTH_SKIP);
    CHECK_INT(run(&o, 1u << HF_FSYNC_FAIL, "disk.fsync", "fsync failed"), HEALTH_FAIL);
    CHECK_INT(run(&o, 1u << HF_DISK_FULL, "disk.free_space", "not enough free space"),
              HEALTH_FAIL);
    CHECK_INT(run(&o, 1u << HF_SLOW_DISK, "disk.write_bandwidth", "below"), HEALTH_FAIL);
    o.need_bytes = 0;
    o.ckpt_model = "pythia-14m";
    o.ckpt_count = 2;
    CHECK_INT(run(&o, 0, "disk.free_space", "2 checkpoints of pythia-14m"), HEALTH_PASS);
    o.ckpt_model = "no-such-model";
    CHECK_INT(run(&o, 0, "disk.free_space", "unknown model preset"), HEALTH_ERROR);
    o.ckpt_model = NULL;
    o.need_bytes = (uint64_t)1 << 62;
    CHECK_INT(run(&o, 0, "disk.free_space", "not enough"), HEALTH_FAIL);
    o.need_bytes = 4096;
    /* No probe file left behind. */
    CHECK_INT(rmdir(dir), 0);
    o.dir = "/tmp/grit-test-disk-does-not-exist/x";
    CHECK_INT(run(&o, 0, "disk.writable", "No such file or directory"), HEALTH_FAIL);
    CHECK_DONE();
}
