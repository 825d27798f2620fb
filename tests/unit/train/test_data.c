/* test_data.c - the "megatron" data source: resume from any sample position
 * yields the same samples (fill in one go == fill in pieces), blending,
 * epochs, and clear errors (missing files, samples past the end, ids past
 * the vocabulary). */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "../check.h"
#include "data/indexed.h"
#include "train/config.h"
#include "train/data.h"

static char dir[] = "/tmp/grit-data-XXXXXX";

static void make_dataset(const char *name, int ndocs, int seed, uint32_t maxid)
{
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s/%s", dir, name);
    idx_writer *w;
    uint32_t tok[200];
    CHECK_INT(idx_writer_open(&w, prefix, IDX_DTYPE_U16), GRIT_OK);
    for (int d = 0; d < ndocs; d++) {
        int n = 1 + (d * 37 + seed * 11) % 97;
        for (int t = 0; t < n; t++)
            tok[t] = (uint32_t)((d * 31 + t * 7 + seed) % maxid);
        CHECK_INT(idx_writer_add(w, tok, (size_t)n), GRIT_OK);
        CHECK_INT(idx_writer_end_doc(w), GRIT_OK);
    }
    CHECK_INT(idx_writer_finish(w), GRIT_OK);
}

static grit_err load(train_cfg *c, const char *data)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"model\": {\"hidden_size\": 32, \"num_layers\": 1, \"num_heads\": 2,"
             " \"intermediate_size\": 64, \"vocab_size\": 500, \"max_positions\": 64},"
             " \"optim\": {\"micro_batch\": 2, \"grad_accum\": 3, \"seq_len\": 24,"
             " \"total_steps\": 50}, \"seed\": 77, \"data\": %s}", data);
    train_cfg_defaults(c);
    return train_cfg_load_string(c, "test.json", text);
}

/* Fill [0, K) at once, then again in pieces of varying size from varying
 * positions (as a resumed run would), and compare. */
static void check_resume(const char *data)
{
    train_cfg c;
    CHECK_INT(load(&c, data), GRIT_OK);
    train_data d;
    CHECK_INT(train_data_open(&d, &c), GRIT_OK);
    const int L = 25, K = 300;
    int32_t *all = malloc(sizeof(int32_t) * K * L), *part = malloc(sizeof(int32_t) * K * L);
    CHECK_INT(train_data_fill(&d, 0, K, L, all), GRIT_OK);
    train_data_close(&d);
    /* a fresh open (a restarted process) from several resume points */
    for (int start = 0; start < K; start += 97) {
        CHECK_INT(train_data_open(&d, &c), GRIT_OK);
        int at = start, piece = 1;
        while (at < K) {
            int n = piece < K - at ? piece : K - at;
            CHECK_INT(train_data_fill(&d, at, n, L, part + (size_t)at * L), GRIT_OK);
            at += n;
            piece = piece * 3 % 17 + 1;
        }
        CHECK(memcmp(all + (size_t)start * L, part + (size_t)start * L,
                     sizeof(int32_t) * (size_t)(K - start) * L) == 0);
        train_data_close(&d);
    }
    /* samples differ from each other (not one sample repeated) */
    CHECK(memcmp(all, all + L, sizeof(int32_t) * L) != 0);
    CHECK_INT(train_data_open(&d, &c), GRIT_OK);
    double e = train_data_epochs(&d, K);
    CHECK(e > 0.0);
    CHECK(train_data_epochs(&d, 2 * K) > e);
    CHECK_INT(train_data_fill(&d, 1L << 40, 1, L, part), GRIT_EINVAL);
    CHECK_ERRMSG("past the");
    CHECK_INT(train_data_fill(&d, 0, 1, L + 1, part), GRIT_EINVAL);
    train_data_close(&d);
    free(all);
    free(part);
}

int main(void)
{
    CHECK(mkdtemp(dir) != NULL);
    make_dataset("a", 120, 1, 500);
    make_dataset("b", 40, 2, 500);
    make_dataset("big", 10, 3, 5000);
    char data[1024];
    snprintf(data, sizeof data, "{\"source\": \"megatron\", \"paths\": [\"%s/a\"]}", dir);
    check_resume(data);
    snprintf(data, sizeof data,
             "{\"source\": \"megatron\", \"paths\": [\"%s/a\", \"%s/b\"], \"weights\": [0.3, "
             "0.7], \"split\": \"90,5,5\"}", dir, dir);
    check_resume(data);

    train_cfg c;
    train_data d;
    snprintf(data, sizeof data, "{\"source\": \"megatron\", \"paths\": [\"%s/nope\"]}", dir);
    CHECK_INT(load(&c, data), GRIT_OK);
    CHECK(train_data_open(&d, &c) != GRIT_OK);
    CHECK_ERRMSG("nope");
    train_data_close(&d);
    /* token ids past the model's vocabulary are refused with the file named */
    snprintf(data, sizeof data, "{\"source\": \"megatron\", \"paths\": [\"%s/big\"]}", dir);
    CHECK_INT(load(&c, data), GRIT_OK);
    CHECK_INT(train_data_open(&d, &c), GRIT_OK);
    int32_t buf[25 * 50];
    CHECK_INT(train_data_fill(&d, 0, 50, 25, buf), GRIT_EINVAL);
    CHECK_ERRMSG("vocabulary");
    train_data_close(&d);
    /* a split that leaves no training documents */
    snprintf(data, sizeof data,
             "{\"source\": \"megatron\", \"paths\": [\"%s/a\"], \"split\": \"0,1,0\"}", dir);
    CHECK_INT(load(&c, data), GRIT_OK);
    CHECK(train_data_open(&d, &c) != GRIT_OK);
    CHECK_ERRMSG("training split");
    train_data_close(&d);

    const char *names[] = {"a", "b", "big"};
    for (int i = 0; i < 3; i++) {
        char p[128];
        snprintf(p, sizeof p, "%s/%s.bin", dir, names[i]);
        unlink(p);
        snprintf(p, sizeof p, "%s/%s.idx", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
    CHECK_DONE();
}
