/* test_sft.c - SFT rows (data/sft.h sft_set): writes a token + mask dataset whose
 * token values encode (example, position), then checks, for packed and padded rows:
 * every row holds whole examples back to back (an example longer than a row is cut),
 * each example once per epoch, the mask is the stored one except 0 at every example's
 * first token and on padding, seg gives each position its example's start; the rows are
 * a pure function of the seed (reopen = same rows; another seed = another order); and
 * a mask dataset whose sizes differ from the tokens', or a token id past the vocabulary,
 * is refused naming the file and field. */
#include <stdlib.h>
#include <unistd.h>

#include "../check.h"
#include "core/fsutil.h"
#include "data/indexed.h"
#include "data/sft.h"

enum { NEX = 23, ROW = 33 };
static char dir[256];

static int ex_len(int e) { return 3 + (e * 7) % 17 + (e == 5 ? 40 : 0); } /* example 5: > ROW */

/* token = 1000 * (e + 1) + t (vocab 30000), mask = t odd or t = 0 */
static void write_ds(const char *pfx, int bad_mask)
{
    char mp[300];
    snprintf(mp, sizeof mp, "%s.mask", pfx);
    idx_writer *wt, *wm;
    CHECK_INT(idx_writer_open(&wt, pfx, IDX_DTYPE_U16), GRIT_OK);
    CHECK_INT(idx_writer_open(&wm, mp, IDX_DTYPE_U8), GRIT_OK);
    for (int e = 0; e < NEX; e++) {
        uint32_t tok[64], m[64];
        int n = ex_len(e);
        for (int t = 0; t < n; t++) {
            tok[t] = (uint32_t)(1000 * (e + 1) + t);
            m[t] = (uint32_t)(t == 0 || (t & 1)); /* stored 1 at t = 0: read as 0 */
        }
        CHECK_INT(idx_writer_add(wt, tok, (size_t)n), GRIT_OK);
        CHECK_INT(idx_writer_end_doc(wt), GRIT_OK);
        CHECK_INT(idx_writer_add(wm, m, (size_t)(bad_mask && e == 7 ? n - 1 : n)), GRIT_OK);
        CHECK_INT(idx_writer_end_doc(wm), GRIT_OK);
    }
    CHECK_INT(idx_writer_finish(wt), GRIT_OK);
    CHECK_INT(idx_writer_finish(wm), GRIT_OK);
}

static void check_rows(const char *pfx, bool pack)
{
    sft_set *s;
    const int64_t nrows = 40;
    CHECK_INT(sft_open(&s, pfx, "100,0,0", ROW, 11, nrows, pack, 30000), GRIT_OK);
    if (!s)
        return;
    int32_t tok[ROW], seg[ROW - 1];
    uint8_t mask[ROW];
    int seen[NEX] = {0}, epoch_rows = 0, packed_rows = 0;
    for (int64_t r = 0; r < nrows; r++) {
        CHECK_INT(sft_fill(s, r, tok, mask, seg), GRIT_OK);
        int t = 0, nex = 0;
        while (t < ROW && tok[t] != 0) {
            int e = tok[t] / 1000 - 1, n = ex_len(e), k = n < ROW - t ? n : ROW - t;
            nex++;
            if (epoch_rows == 0 || seen[e] == 0)
                seen[e]++;
            for (int i = 0; i < k; i++) {
                if (tok[t + i] != 1000 * (e + 1) + i) {
                    fprintf(stderr, "row %lld pos %d: token %d, expected %d\n", (long long)r,
                            t + i, tok[t + i], 1000 * (e + 1) + i);
                    check_failures++;
                    return;
                }
                CHECK_INT(mask[t + i], i > 0 && (i & 1));
                if (t + i < ROW - 1)
                    CHECK_INT(seg[t + i], t);
            }
            t += k;
            if (!pack)
                break;
        }
        for (int i = t; i < ROW; i++) { /* padding */
            CHECK_INT(tok[i], 0);
            CHECK_INT(mask[i], 0);
            if (i < ROW - 1)
                CHECK_INT(seg[i], t);
        }
        CHECK(nex >= 1);
        packed_rows += nex > 1;
        if (!pack)
            CHECK_INT(nex, 1);
        if (sft_epochs(s, r + 1) >= 1.0 && !epoch_rows)
            epoch_rows = (int)r + 1;
    }
    CHECK(epoch_rows > 0);
    for (int e = 0; e < NEX; e++)
        CHECK_INT(seen[e], 1); /* each example once in the first epoch */
    if (pack)
        CHECK(packed_rows > 0);
    /* pure function of the seed: a reopened set gives the same row; another seed differs */
    int32_t a[ROW], b[ROW], sg[ROW - 1];
    uint8_t mk[ROW];
    sft_set *s2, *s3;
    CHECK_INT(sft_open(&s2, pfx, "100,0,0", ROW, 11, nrows, pack, 30000), GRIT_OK);
    CHECK_INT(sft_open(&s3, pfx, "100,0,0", ROW, 12, nrows, pack, 30000), GRIT_OK);
    int diff_seed = 0;
    for (int64_t r = 0; r < nrows && s2 && s3; r++) {
        sft_fill(s, r, a, mk, sg);
        sft_fill(s2, r, b, mk, sg);
        CHECK(!memcmp(a, b, sizeof a));
        sft_fill(s3, r, b, mk, sg);
        diff_seed += memcmp(a, b, sizeof a) != 0;
    }
    CHECK(diff_seed > 0);
    CHECK_INT(sft_fill(s, nrows, a, mk, sg), GRIT_EINVAL);
    CHECK_ERRMSG("past the 40 rows");
    sft_close(s3);
    sft_close(s2);
    sft_close(s);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/grit_test_sft_%ld", (long)getpid());
    if (fs_mkdirs(dir) != GRIT_OK)
        return 1;
    char good[300], bad[300], cmd[400];
    snprintf(good, sizeof good, "%s/good", dir);
    snprintf(bad, sizeof bad, "%s/bad", dir);
    write_ds(good, 0);
    check_rows(good, true);
    check_rows(good, false);

    sft_set *s = NULL;
    CHECK_INT(sft_open(&s, good, "100,0,0", ROW, 1, 4, true, 5000), GRIT_EINVAL);
    CHECK_ERRMSG("good.bin: example 4: token id 5000 is outside the model's vocabulary of 5000");
    write_ds(bad, 1);
    CHECK_INT(sft_open(&s, bad, "100,0,0", ROW, 1, 4, true, 30000), GRIT_EFORMAT);
    CHECK_ERRMSG("bad.mask.idx: sizes[7]: expected");
    CHECK(s == NULL);
    sft_close(NULL);

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    CHECK_DONE();
}
