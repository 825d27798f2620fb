/* test_gptdataset.c - MT19937 known answers, Megatron split parsing, and the
 * sample index's contract: samples in index order tile the shuffled document
 * stream with one token of overlap. (Exact equality with numpy-built indices
 * is tests/reference/gpt_index_ref.py.) */
#include <stdlib.h>
#include <unistd.h>

#include "../check.h"
#include "data/gptdataset.h"
#include "data/mt19937.h"

static void test_mt(void)
{
    mt19937 m;
    mt_seed(&m, 5489u); /* the reference implementation's default seed */
    CHECK_INT(mt_next32(&m), 3499211612u);
    uint32_t key[4] = {0x123, 0x234, 0x345, 0x456};
    mt_seed_array(&m, key, 4); /* mt19937ar.out's first outputs */
    CHECK_INT(mt_next32(&m), 1067595299u);
    CHECK_INT(mt_next32(&m), 955945823u);
    for (int i = 0; i < 1000; i++)
        CHECK(mt_interval(&m, 6) <= 6);
    CHECK_INT(mt_interval(&m, 0), 0);
}

static void test_split(void)
{
    size_t b[4];
    CHECK_INT(gpt_split("969,30,1", 1000, b), GRIT_OK);
    CHECK_INT(b[1], 969);
    CHECK_INT(b[2], 999);
    CHECK_INT(b[3], 1000);
    CHECK_INT(gpt_split("1", 10, b), GRIT_OK);
    CHECK_INT(b[1], 10);
    CHECK_INT(b[2], 10);
    CHECK_INT(gpt_split("a,b", 10, b), GRIT_EINVAL);
    CHECK_ERRMSG("expected numbers");
    CHECK_INT(gpt_split("0,0,0", 10, b), GRIT_EINVAL);
    CHECK_INT(gpt_split("1,,2", 10, b), GRIT_EINVAL);
    CHECK_INT(gpt_split("-1,2", 10, b), GRIT_EINVAL);
}

static void test_samples(void)
{
    char dir[] = "/tmp/grit-gptds-XXXXXX", prefix[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(prefix, sizeof prefix, "%s/d", dir);
    idx_writer *w;
    int32_t sizes[30];
    uint32_t tok[64];
    CHECK_INT(idx_writer_open(&w, prefix, IDX_DTYPE_U16), GRIT_OK);
    for (int d = 0; d < 30; d++) {
        sizes[d] = 1 + (d * 7) % 23;
        for (int t = 0; t < sizes[d]; t++)
            tok[t] = (uint32_t)(d * 100 + t);
        CHECK_INT(idx_writer_add(w, tok, (size_t)sizes[d]), GRIT_OK);
        CHECK_INT(idx_writer_end_doc(w), GRIT_OK);
    }
    CHECK_INT(idx_writer_finish(w), GRIT_OK);
    idx_reader *r;
    CHECK_INT(idx_open(&r, prefix), GRIT_OK);
    gpt_index g;
    const int T = 16;
    CHECK_INT(gpt_index_build(&g, sizes, 0, 30, 100, T, 1234), GRIT_OK);
    CHECK(g.n_samples >= 100);
    /* the document stream in doc_idx order */
    size_t ntok = 0;
    for (size_t k = 0; k < g.n_doc; k++)
        ntok += (size_t)sizes[g.doc_idx[k]];
    uint32_t *stream = malloc(4 * ntok);
    size_t at = 0;
    for (size_t k = 0; k < g.n_doc; k++)
        for (int t = 0; t < sizes[g.doc_idx[k]]; t++)
            stream[at++] = (uint32_t)(g.doc_idx[k] * 100 + t);
    int32_t out[17];
    int64_t *inv = malloc(8 * (size_t)g.n_samples);
    for (int64_t i = 0; i < g.n_samples; i++)
        inv[g.shuffle_idx[i]] = i;
    int bad = 0;
    for (int64_t s = 0; s < g.n_samples && !bad; s++) {
        CHECK_INT(gpt_sample(r, &g, inv[s], out), GRIT_OK);
        for (int t = 0; t <= T; t++)
            if ((uint32_t)out[t] != stream[(size_t)s * T + (size_t)t])
                bad = 1;
    }
    CHECK_INT(bad, 0);
    CHECK_INT(gpt_sample(r, &g, g.n_samples, out), GRIT_EINVAL);
    free(inv);
    free(stream);
    gpt_index_free(&g);
    gpt_index_free(&g); /* a freed index frees again as a no-op */
    idx_close(r);
    char path[96];
    snprintf(path, sizeof path, "%s.bin", prefix);
    unlink(path);
    snprintf(path, sizeof path, "%s.idx", prefix);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    test_mt();
    test_split();
    test_samples();
    CHECK_DONE();
}
