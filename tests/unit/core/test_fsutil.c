/* test_fsutil.c - durable writes: content, replacement, no temp files left, errors. */
#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include "../check.h"
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

    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    CHECK(system(path) == 0);
    CHECK_DONE();
}
