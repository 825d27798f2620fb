/* test_shards.c - per-rank optimiser shards: written by ckpt_put_shard, committed by
 * ckpt_commit, read back resliced at other world sizes (any element range), and a
 * manifest whose shards do not tile the block (a rank missing, a gap, two worlds)
 * refused with a message that names the problem. */
#include <stdlib.h>
#include <unistd.h>

#include "../check.h"
#include "ckpt/ckpt.h"
#include "core/error.h"

enum { NP = 1000 };

static float mval(size_t i) { return (float)i * 0.5f + 1.0f; }
static float vval(size_t i) { return (float)i * 0.25f + 3.0f; }

/* Writes step `step` as `world` shards of [0, NP) cut at cuts[0..world]; files[] gets
 * their entries; keep selects which of them the manifest lists (bit r: rank r). */
static grit_err save_shards(store *s, long step, int world, const size_t *cuts, unsigned keep)
{
    static float m[NP], v[NP];
    for (size_t i = 0; i < NP; i++) {
        m[i] = mval(i);
        v[i] = vval(i);
    }
    ckpt_file files[8];
    int n = 0;
    grit_err rc = ckpt_begin(s, step);
    for (int r = 0; r < world && rc == GRIT_OK; r++) {
        ckpt_file f;
        rc = ckpt_put_shard(s, step, r, world, cuts[r], cuts[r + 1], m + cuts[r], v + cuts[r], &f);
        if (keep >> r & 1)
            files[n++] = f;
    }
    return rc == GRIT_OK ? ckpt_commit(s, step, files, n, NULL, NULL) : rc;
}

/* Reads [lo, hi) and checks every element. */
static int read_range(store *s, const char *dir, const gx_model *m, size_t lo, size_t hi)
{
    float *mm = malloc(sizeof(float) * (hi - lo + 1)), *vv = malloc(sizeof(float) * (hi - lo + 1));
    int bad = 0;
    grit_err rc = ckpt_load_moments_range(s, dir, m, lo, hi, mm, vv);
    if (rc != GRIT_OK) {
        fprintf(stderr, "load [%zu, %zu): %s\n", lo, hi, grit_errmsg());
        bad = 1;
    }
    for (size_t i = lo; rc == GRIT_OK && i < hi; i++)
        bad += mm[i - lo] != mval(i) || vv[i - lo] != vval(i);
    free(mm);
    free(vv);
    return bad;
}

int main(void)
{
    char root[] = "/tmp/grit-shards-XXXXXX";
    CHECK(mkdtemp(root) != NULL);
    store *s = NULL;
    CHECK_INT(store_open_posix(root, &s), GRIT_OK);
    gx_model m;
    memset(&m, 0, sizeof m);
    m.num_params = NP; /* the reslicing needs only the block's length */

    /* written by 3 ranks (uneven shards), read back as 1, 2 and 4 ranks and odd ranges */
    size_t cuts3[] = {0, 336, 672, NP};
    CHECK_INT(save_shards(s, 3, 3, cuts3, 7), GRIT_OK);
    CHECK_INT(read_range(s, "step_00000003", &m, 0, NP), 0);
    CHECK_INT(read_range(s, "step_00000003", &m, 0, 500), 0);
    CHECK_INT(read_range(s, "step_00000003", &m, 500, NP), 0);
    for (int r = 0; r < 4; r++)
        CHECK_INT(read_range(s, "step_00000003", &m, 250 * (size_t)r, 250 * (size_t)r + 250), 0);
    CHECK_INT(read_range(s, "step_00000003", &m, 335, 337), 0); /* across a shard boundary */
    CHECK_INT(read_range(s, "step_00000003", &m, 999, NP), 0);
    char path[512];
    snprintf(path, sizeof path, "%s/step_00000003/optim-rank2-of-3.safetensors", root);
    CHECK(access(path, F_OK) == 0);

    /* an empty shard (more ranks than elements would give) is fine */
    size_t cuts2[] = {0, NP, NP};
    CHECK_INT(save_shards(s, 4, 2, cuts2, 3), GRIT_OK);
    CHECK_INT(read_range(s, "step_00000004", &m, 10, 990), 0);

    /* the manifest leaves rank 1 out: refused, and the message says so */
    CHECK_INT(save_shards(s, 5, 3, cuts3, 5), GRIT_OK);
    float buf[NP], buf2[NP];
    CHECK_INT(ckpt_load_moments_range(s, "step_00000005", &m, 0, NP, buf, buf2), GRIT_EFORMAT);
    CHECK_STR_HAS(grit_errmsg(), "rank 1 is missing");

    /* the block is longer than the model's: refused (a checkpoint of another model) */
    m.num_params = NP + 16;
    CHECK_INT(ckpt_load_moments_range(s, "step_00000003", &m, 0, 16, buf, buf2), GRIT_EFORMAT);
    CHECK_STR_HAS(grit_errmsg(), "optimiser shards hold 1000 elements, the model has 1016");
    m.num_params = NP;

    /* a shard file cut short: the read fails instead of returning garbage */
    snprintf(path, sizeof path, "%s/step_00000003/optim-rank1-of-3.safetensors", root);
    CHECK(truncate(path, 100) == 0);
    CHECK(ckpt_load_moments_range(s, "step_00000003", &m, 0, NP, buf, buf2) != GRIT_OK);

    const char *const made[] = {"LATEST", "step_00000003", "step_00000004", "step_00000005", NULL};
    for (const char *const *e = made; *e; e++)
        CHECK_INT(s->ops->remove(s, *e), GRIT_OK);
    store_close(s);
    CHECK(rmdir(root) == 0);
    CHECK_DONE();
}
