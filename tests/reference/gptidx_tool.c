/*
 * gptidx_tool.c - writes grit's Megatron sample-order indices as raw
 * little-endian arrays, for tests/reference/gpt_index_ref.py to compare with
 * the same indices built by numpy the way Megatron builds them.
 *
 *   gptidx_tool index SIZES.i32 BEGIN END NUM_SAMPLES SEQ_LEN SEED OUTDIR
 *       -> OUTDIR/{doc_idx.i32,sample_idx.i64,shuffle_idx.i64,meta.txt}
 *   gptidx_tool split SPEC N          -> prints the four bounds
 *   gptidx_tool blend SIZE OUTDIR W...-> OUTDIR/{which.u8,at.i64,w.txt}
 *   gptidx_tool perm SEED N OUTDIR    -> OUTDIR/perm.i64 (RandomState(SEED).permutation(N))
 *   gptidx_tool perm_array N OUTDIR K... -> RandomState([K...]).permutation(N)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/gptdataset.h"
#include "data/mt19937.h"

static int dump(const char *dir, const char *name, const void *p, size_t bytes)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, bytes, f) != bytes || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        return 1;
    }
    return 0;
}

static int perm(mt19937 *m, long n, const char *dir)
{
    int64_t *x = malloc(sizeof *x * (size_t)(n > 0 ? n : 1));
    for (long i = 0; i < n; i++)
        x[i] = i;
    mt_shuffle_i64(m, x, (size_t)n);
    int rc = dump(dir, "perm.i64", x, sizeof *x * (size_t)n);
    free(x);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc >= 9 && !strcmp(argv[1], "index")) {
        FILE *f = fopen(argv[2], "rb");
        if (!f)
            return 1;
        fseek(f, 0, SEEK_END);
        long bytes = ftell(f);
        fseek(f, 0, SEEK_SET);
        int32_t *sizes = malloc((size_t)bytes + 4);
        if (fread(sizes, 1, (size_t)bytes, f) != (size_t)bytes)
            return 1;
        fclose(f);
        gpt_index g;
        grit_err rc = gpt_index_build(&g, sizes, strtoul(argv[3], NULL, 10),
                                      strtoul(argv[4], NULL, 10), strtoll(argv[5], NULL, 10),
                                      atoi(argv[6]), (uint32_t)strtoul(argv[7], NULL, 10));
        free(sizes);
        if (rc != GRIT_OK) {
            fprintf(stderr, "%s\n", grit_errmsg());
            return 1;
        }
        const char *d = argv[8];
        int bad = dump(d, "doc_idx.i32", g.doc_idx, 4 * g.n_doc) ||
                  dump(d, "sample_idx.i64", g.sample_idx, 16 * (size_t)(g.n_samples + 1)) ||
                  dump(d, "shuffle_idx.i64", g.shuffle_idx, 8 * (size_t)g.n_samples);
        char meta[256];
        int n = snprintf(meta, sizeof meta, "%d %d %lld\n", g.num_epochs,
                         g.separate_last_epoch, (long long)g.tokens_per_epoch);
        bad = bad || dump(d, "meta.txt", meta, (size_t)n);
        gpt_index_free(&g);
        return bad;
    }
    if (argc == 4 && !strcmp(argv[1], "split")) {
        size_t b[4];
        if (gpt_split(argv[2], strtoul(argv[3], NULL, 10), b) != GRIT_OK) {
            printf("error %s\n", grit_errmsg());
            return 0;
        }
        printf("%zu %zu %zu %zu\n", b[0], b[1], b[2], b[3]);
        return 0;
    }
    if (argc >= 5 && !strcmp(argv[1], "blend")) {
        long size = strtol(argv[2], NULL, 10);
        int k = argc - 4;
        double raw[256], w1[256], w2[256];
        for (int i = 0; i < k; i++)
            raw[i] = strtod(argv[4 + i], NULL);
        if (gpt_blend_weights(raw, k, w1, w2) != GRIT_OK)
            return 1;
        uint8_t *which = malloc((size_t)size + 1);
        int64_t *at = malloc(8 * (size_t)size + 8);
        gpt_blend_build(w2, k, size, which, at);
        FILE *f;
        char path[4096];
        snprintf(path, sizeof path, "%s/w.txt", argv[3]);
        if (!(f = fopen(path, "w")))
            return 1;
        for (int i = 0; i < k; i++)
            fprintf(f, "%.17g %lld\n", w2[i], (long long)gpt_blend_samples(w1[i], size));
        fclose(f);
        int bad = dump(argv[3], "which.u8", which, (size_t)size) ||
                  dump(argv[3], "at.i64", at, 8 * (size_t)size);
        free(which);
        free(at);
        return bad;
    }
    if (argc == 5 && !strcmp(argv[1], "perm")) {
        mt19937 m;
        mt_seed(&m, (uint32_t)strtoul(argv[2], NULL, 10));
        return perm(&m, strtol(argv[3], NULL, 10), argv[4]);
    }
    if (argc >= 5 && !strcmp(argv[1], "perm_array")) {
        uint32_t key[64];
        int n = argc - 4;
        for (int i = 0; i < n && i < 64; i++)
            key[i] = (uint32_t)strtoul(argv[4 + i], NULL, 10);
        mt19937 m;
        mt_seed_array(&m, key, (size_t)n);
        return perm(&m, strtol(argv[2], NULL, 10), argv[3]);
    }
    fprintf(stderr, "usage: see the comment atop gptidx_tool.c\n");
    return 2;
}
