/* test_tb.c - TensorBoard framing: CRC32C and its mask against published values, the
 * record layout, and the first events of a written file decoded byte by byte. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "../check.h"
#include "core/fsutil.h"
#include "obs/tb.h"

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

int main(void)
{
    /* RFC 3720 B.4 / the usual check value of CRC-32C */
    CHECK_INT(tb_crc32c("123456789", 9), 0xe3069283u);
    uint8_t zeros[32] = {0};
    CHECK_INT(tb_crc32c(zeros, 32), 0x8a9136aau); /* RFC 3720 B.4: 32 bytes of zeros */
    uint32_t c = tb_crc32c("123456789", 9);
    CHECK_INT(tb_masked_crc("123456789", 9), (uint32_t)(((c >> 15) | (c << 17)) + 0xa282ead8u));

    uint8_t rec[64];
    size_t n = tb_frame("abc", 3, rec);
    CHECK_INT(n, 19);
    CHECK_INT(le(rec, 8), 3);
    CHECK_INT(le(rec + 8, 4), tb_masked_crc(rec, 8));
    CHECK(!memcmp(rec + 12, "abc", 3));
    CHECK_INT(le(rec + 15, 4), tb_masked_crc("abc", 3));

    char dir[] = "/tmp/grit-tb-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char sub[64];
    snprintf(sub, sizeof sub, "%s/tb", dir);
    tb_writer *w = NULL;
    CHECK_INT(tb_open(sub, &w), GRIT_OK);
    CHECK_INT(tb_scalar(w, "train/loss", 300, 1700000000.25, 2.5f), GRIT_OK);
    char path[1300];
    snprintf(path, sizeof path, "%s", tb_path(w));
    CHECK_INT(tb_close(w), GRIT_OK);
    char *buf = NULL;
    size_t len = 0;
    CHECK_INT(fs_read_all(path, &buf, &len), GRIT_OK);
    const uint8_t *p = (const uint8_t *)buf;
    /* record 1: Event{wall_time (09 + 8 bytes), file_version (1a 0d "brain.Event:2")} */
    uint64_t n1 = le(p, 8);
    CHECK_INT(n1, 9 + 2 + 13);
    CHECK_INT(p[12], 0x09);
    CHECK_INT(p[21], 0x1a);
    CHECK_INT(p[22], 13);
    CHECK(!memcmp(p + 23, "brain.Event:2", 13));
    CHECK_INT(le(p + 12 + n1, 4), tb_masked_crc(p + 12, n1));
    /* record 2: wall_time, step 300 (10 ac 02), summary (2a L (0a L' (0a 0a "train/loss") (15 f32))) */
    const uint8_t *r = p + 16 + n1, *d = r + 12;
    uint64_t n2 = le(r, 8);
    static const uint8_t want[] = {0x10, 0xac, 0x02, 0x2a, 19, 0x0a, 17, 0x0a, 10, 't', 'r',
                                   'a', 'i', 'n', '/', 'l', 'o', 's', 's', 0x15, 0x00, 0x00,
                                   0x20, 0x40};
    CHECK_INT(n2, 9 + sizeof want);
    CHECK_INT(d[0], 0x09);
    double wt;
    memcpy(&wt, d + 1, 8);
    CHECK_NEAR(wt, 1700000000.25, 0);
    CHECK(!memcmp(d + 9, want, sizeof want));
    CHECK_INT(le(r + 12 + n2, 4), tb_masked_crc(d, n2));
    CHECK_INT(len, 16 + n1 + 16 + n2);
    free(buf);

    /* a tag too long is refused, not truncated */
    char longtag[160];
    memset(longtag, 'x', sizeof longtag - 1);
    longtag[sizeof longtag - 1] = '\0';
    CHECK_INT(tb_open(sub, &w), GRIT_OK);
    CHECK_INT(tb_scalar(w, longtag, 1, 0, 1.0f), GRIT_EINVAL);
    CHECK_ERRMSG("longer than 100 bytes");
    CHECK_INT(tb_close(w), GRIT_OK);
    /* an unwritable directory is an error naming it */
    CHECK(tb_open("/proc/grit-no/tb", &w) != GRIT_OK);
    CHECK(w == NULL);

    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_INT(system(cmd), 0);
    CHECK_DONE();
}
