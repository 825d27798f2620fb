/* test_fsutil.c - durable writes: content, replacement, no temp files left, errors; the
 * safetensors file written a tensor at a time in any order (st_stream: the final weights of
 * a model too large for one rank) equals the one written whole, and an unfinished or
 * aborted one leaves neither the file nor a temp file. */
#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include "../check.h"
#include "ckpt/safetensors.h"
#include "core/fsutil.h"

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

int main(void)
{
    char dir[] = "/tmp/grit-fsutil-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256], sub[256];
    snprintf(path, sizeof path, "%s/f.txt", dir);
    CHECK_INT(fs_write_durable(path, "hello", 5), GRIT_OK);
    CHECK_INT(fs_write_durable(path, "replaced!", 9), GRIT_OK);
    char *buf = NULL;
    size_t len = 0;
    CHECK_INT(fs_read_all(path, &buf, &len), GRIT_OK);
    CHECK_INT(len, 9);
    CHECK(buf && strcmp(buf, "replaced!") == 0);
    free(buf);
    CHECK_INT(count_entries(dir), 1); /* no temp file left behind */

    snprintf(sub, sizeof sub, "%s/a/b/c", dir);
    CHECK_INT(fs_mkdirs(sub), GRIT_OK);
    CHECK_INT(fs_mkdirs(sub), GRIT_OK); /* idempotent */
    CHECK_INT(fs_mkdirs(path), GRIT_EIO); /* a file is in the way */

    char bad[300];
    snprintf(bad, sizeof bad, "%s/missing/f.txt", dir);
    CHECK_INT(fs_write_durable(bad, "x", 1), GRIT_EIO);
    CHECK_STR_HAS(grit_errmsg(), "cannot create");

    float a[6] = {1, 2, 3, 4, 5, 6}, b[4] = {-1, -2, -3, -4}, c[2] = {0.5f, 0.25f};
    st_entry e[3] = {{.name = "a", .dtype = "F32", .ndim = 2, .shape = {2, 3}, .data = a},
                     {.name = "b", .dtype = "F32", .ndim = 1, .shape = {4}, .data = b},
                     {.name = "c", .dtype = "F32", .ndim = 2, .shape = {1, 2}, .data = c}};
    char whole[256], part[256];
    snprintf(whole, sizeof whole, "%s/whole.safetensors", dir);
    snprintf(part, sizeof part, "%s/part.safetensors", dir);
    CHECK_INT(st_write(whole, e, 3), GRIT_OK);
    st_stream w;
    CHECK_INT(st_stream_open(&w, part, e, 3), GRIT_OK);
    CHECK_INT(st_stream_put(&w, 2, c), GRIT_OK);
    CHECK_INT(st_stream_put(&w, 0, a), GRIT_OK);
    CHECK_INT(st_stream_put(&w, 0, a), GRIT_EINVAL); /* twice */
    CHECK_STR_HAS(grit_errmsg(), "written twice");
    CHECK_INT(st_stream_put(&w, 3, a), GRIT_EINVAL);
    CHECK_INT(st_stream_put(&w, 1, b), GRIT_OK);
    CHECK_INT(st_stream_commit(&w), GRIT_OK);
    char *x = NULL, *y = NULL;
    size_t lx = 0, ly = 0;
    CHECK_INT(fs_read_all(whole, &x, &lx), GRIT_OK);
    CHECK_INT(fs_read_all(part, &y, &ly), GRIT_OK);
    CHECK(lx == ly && x && y && memcmp(x, y, lx) == 0); /* byte for byte */
    free(x);
    free(y);
    int before = count_entries(dir);
    snprintf(part, sizeof part, "%s/unfinished.safetensors", dir);
    CHECK_INT(st_stream_open(&w, part, e, 3), GRIT_OK);
    CHECK_INT(st_stream_put(&w, 1, b), GRIT_OK);
    CHECK_INT(st_stream_commit(&w), GRIT_EINVAL); /* two tensors never written */
    CHECK_STR_HAS(grit_errmsg(), "never written");
    CHECK_INT(st_stream_open(&w, part, e, 3), GRIT_OK);
    st_stream_abort(&w);
    CHECK_INT(count_entries(dir), before); /* neither the file nor a temp file */

    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    CHECK(system(path) == 0);
    CHECK_DONE();
}
