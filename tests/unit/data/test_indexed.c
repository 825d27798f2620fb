/*
 * test_indexed.c - MMIDIDX writer/reader: round trip for uint16 and int32,
 * the exact bytes of a small .idx, and one corrupted copy per field, each of
 * which must fail with GRIT_EFORMAT naming the file and the field.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "data/indexed.h"

static char dir[256];

static const char *pfx(const char *name)
{
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

/* Writes docs of pseudo-random sequences; returns the token count. */
static size_t write_set(const char *prefix, int dtype, uint32_t maxtok, int ndocs)
{
    idx_writer *w;
    CHECK(idx_writer_open(&w, prefix, dtype) == GRIT_OK);
    uint32_t buf[5000];
    size_t total = 0;
    unsigned seed = 1;
    for (int d = 0; d < ndocs; d++) {
        int nseq = d % 3 + (d == 1 ? 0 : 1); /* doc 1 is empty */
        for (int s = 0; s < nseq; s++) {
            size_t n = (size_t)((d * 37 + s * 11) % 5000);
            for (size_t i = 0; i < n; i++) {
                seed = seed * 1103515245u + 12345u;
                buf[i] = seed % maxtok;
            }
            CHECK(idx_writer_add(w, buf, n) == GRIT_OK);
            total += n;
        }
        CHECK(idx_writer_end_doc(w) == GRIT_OK);
    }
    CHECK(idx_writer_finish(w) == GRIT_OK);
    return total;
}

static void check_set(const char *prefix, int dtype, uint32_t maxtok, int ndocs, size_t total)
{
    idx_reader *r;
    grit_err rc = idx_open(&r, prefix);
    CHECK(rc == GRIT_OK);
    if (rc) {
        fprintf(stderr, "open: %s\n", grit_errmsg());
        return;
    }
    CHECK_EQ_LL(idx_dtype(r), dtype);
    CHECK_EQ_LL(idx_num_docs(r), ndocs);
    CHECK_EQ_LL(idx_num_tokens(r), total);
    uint32_t buf[5000], got[5000];
    unsigned seed = 1;
    size_t seq = 0;
    for (int d = 0; d < ndocs; d++) {
        CHECK_EQ_LL(idx_doc_start(r, (size_t)d), seq);
        int nseq = d % 3 + (d == 1 ? 0 : 1);
        for (int s = 0; s < nseq; s++, seq++) {
            size_t n = (size_t)((d * 37 + s * 11) % 5000);
            for (size_t i = 0; i < n; i++) {
                seed = seed * 1103515245u + 12345u;
                buf[i] = seed % maxtok;
            }
            CHECK_EQ_LL(idx_seq_len(r, seq), n);
            CHECK(idx_read(r, seq, 0, n, got) == GRIT_OK);
            if (memcmp(buf, got, n * 4) != 0) {
                fprintf(stderr, "sequence %zu differs\n", seq);
                check_failures++;
            }
        }
    }
    CHECK_EQ_LL(idx_doc_start(r, (size_t)ndocs), idx_num_seqs(r));
    CHECK(idx_read(r, 0, 0, 100000, got) == GRIT_EINVAL);
    CHECK(idx_read(r, idx_num_seqs(r), 0, 0, got) == GRIT_EINVAL);
    idx_close(r);
}

static void test_exact_bytes(void)
{
    idx_writer *w;
    CHECK(idx_writer_open(&w, pfx("tiny"), IDX_DTYPE_U16) == GRIT_OK);
    const uint32_t a[] = {1, 2, 3}, b[] = {0xFFFF};
    CHECK(idx_writer_add(w, a, 3) == GRIT_OK);
    CHECK(idx_writer_end_doc(w) == GRIT_OK);
    CHECK(idx_writer_add(w, b, 1) == GRIT_OK);
    CHECK(idx_writer_end_doc(w) == GRIT_OK);
    CHECK(idx_writer_finish(w) == GRIT_OK);
    static const uint8_t want_idx[] = {
        'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 8, /* magic, version, dtype */
        2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0,                    /* N = 2, M = 3 */
        3, 0, 0, 0, 1, 0, 0, 0,                                            /* sizes */
        0, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0,                    /* pointers */
        0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}; /* doc_idx */
    static const uint8_t want_bin[] = {1, 0, 2, 0, 3, 0, 0xFF, 0xFF};
    char *got;
    size_t n;
    char path[512];
    snprintf(path, sizeof path, "%s.idx", pfx("tiny"));
    CHECK(fs_read_all(path, &got, &n) == GRIT_OK);
    CHECK_EQ_LL(n, sizeof want_idx);
    for (size_t i = 0; i < n && i < sizeof want_idx; i++)
        if ((uint8_t)got[i] != want_idx[i]) {
            fprintf(stderr, "tiny.idx byte %zu: got %u, want %u\n", i, (uint8_t)got[i], want_idx[i]);
            check_failures++;
        }
    free(got);
    snprintf(path, sizeof path, "%s.bin", pfx("tiny"));
    CHECK(fs_read_all(path, &got, &n) == GRIT_OK);
    CHECK(n == sizeof want_bin && memcmp(got, want_bin, n) == 0);
    free(got);
    /* Tokens that do not fit, and a bad dtype, are refused. */
    CHECK(idx_writer_open(&w, pfx("nofit"), IDX_DTYPE_U16) == GRIT_OK);
    const uint32_t big[] = {70000};
    CHECK(idx_writer_add(w, big, 1) == GRIT_EINVAL);
    idx_writer_abort(w);
    CHECK(access(pfx("nofit.bin"), F_OK) != 0);
    CHECK(idx_writer_open(&w, pfx("x"), 7) == GRIT_EINVAL);
    CHECK_EQ_LL(idx_dtype_for_vocab(50257), IDX_DTYPE_U16);
    CHECK_EQ_LL(idx_dtype_for_vocab(65500), IDX_DTYPE_I32);
}

/* Copies tiny.{idx,bin} to bad.{idx,bin}, applies an edit, expects failure. */
typedef void (*edit_fn)(uint8_t *idx, size_t *idx_len, uint8_t *bin, size_t *bin_len);

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void e_magic(uint8_t *i, size_t *il, uint8_t *b, size_t *bl) { (void)il, (void)b, (void)bl; i[0] = 'X'; }
static void e_version(uint8_t *i, size_t *il, uint8_t *b, size_t *bl) { (void)il, (void)b, (void)bl; i[9] = 2; }
static void e_dtype(uint8_t *i, size_t *il, uint8_t *b, size_t *bl) { (void)il, (void)b, (void)bl; i[17] = 9; }
static void e_dtype_float(uint8_t *i, size_t *il, uint8_t *b, size_t *bl) { (void)il, (void)b, (void)bl; i[17] = 7; }
static void e_header(uint8_t *i, size_t *il, uint8_t *b, size_t *bl) { (void)i, (void)b, (void)bl; *il = 20; }
static void e_trunc(uint8_t *i, size_t *il, uint8_t *b, size_t *bl) { (void)i, (void)b, (void)bl; *il -= 3; }
static void e_trailing(uint8_t *i, size_t *il, uint8_t *b, size_t *bl) { (void)b, (void)bl; i[(*il)++] = 0; }
static void e_count(uint8_t *i, size_t *il, uint8_t *b, size_t *bl) { (void)il, (void)b, (void)bl; put64(i + 18, 1ull << 62); }
static void e_doccount(uint8_t *i, size_t *il, uint8_t *b, size_t *bl) { (void)il, (void)b, (void)bl; put64(i + 26, 4); }
static void e_size(uint8_t *i, size_t *il, uint8_t *b, size_t *bl) { (void)il, (void)b, (void)bl; i[34] = 4; }
static void e_negsize(uint8_t *i, size_t *il, uint8_t *b, size_t *bl) { (void)il, (void)b, (void)bl; i[37] = 0x80; }
static void e_pointer(uint8_t *i, size_t *il, uint8_t *b, size_t *bl) { (void)il, (void)b, (void)bl; i[50] = 8; }
static void e_bin_short(uint8_t *i, size_t *il, uint8_t *b, size_t *bl) { (void)i, (void)il, (void)b; *bl -= 2; }
static void e_bin_long(uint8_t *i, size_t *il, uint8_t *b, size_t *bl) { (void)i, (void)il; b[(*bl)++] = 0; }
static void e_doc0(uint8_t *i, size_t *il, uint8_t *b, size_t *bl) { (void)il, (void)b, (void)bl; i[58] = 1; }
static void e_docorder(uint8_t *i, size_t *il, uint8_t *b, size_t *bl) { (void)il, (void)b, (void)bl; i[66] = 2, i[74] = 1; }
static void e_docpast(uint8_t *i, size_t *il, uint8_t *b, size_t *bl) { (void)il, (void)b, (void)bl; i[74] = 9; }

static void expect_corrupt(const char *what, edit_fn edit, const char *file_ext, const char *field)
{
    char *idx, *bin, p[512];
    size_t il, bl;
    snprintf(p, sizeof p, "%s.idx", pfx("tiny"));
    CHECK(fs_read_all(p, &idx, &il) == GRIT_OK);
    snprintf(p, sizeof p, "%s.bin", pfx("tiny"));
    CHECK(fs_read_all(p, &bin, &bl) == GRIT_OK);
    uint8_t ib[256], bb[64];
    memcpy(ib, idx, il);
    memcpy(bb, bin, bl);
    free(idx);
    free(bin);
    edit(ib, &il, bb, &bl);
    snprintf(p, sizeof p, "%s.idx", pfx("bad"));
    CHECK(fs_write_durable(p, ib, il) == GRIT_OK);
    snprintf(p, sizeof p, "%s.bin", pfx("bad"));
    CHECK(fs_write_durable(p, bb, bl) == GRIT_OK);
    idx_reader *r = NULL;
    grit_err rc = idx_open(&r, pfx("bad"));
    if (rc != GRIT_EFORMAT || r != NULL) {
        fprintf(stderr, "corruption '%s': expected GRIT_EFORMAT, got %d\n", what, rc);
        check_failures++;
    }
    char file[64];
    snprintf(file, sizeof file, "bad.%s", file_ext);
    if (!strstr(grit_errmsg(), file) || !strstr(grit_errmsg(), field)) {
        fprintf(stderr, "corruption '%s': message should name '%s' and '%s': got '%s'\n", what, file, field,
                grit_errmsg());
        check_failures++;
    }
    idx_close(r);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/grit_test_indexed_%ld", (long)getpid());
    if (fs_mkdirs(dir) != GRIT_OK)
        return 1;
    size_t t16 = write_set(pfx("u16"), IDX_DTYPE_U16, 50277, 40);
    check_set(pfx("u16"), IDX_DTYPE_U16, 50277, 40, t16);
    size_t t32 = write_set(pfx("i32"), IDX_DTYPE_I32, 128000, 25);
    check_set(pfx("i32"), IDX_DTYPE_I32, 128000, 25, t32);
    test_exact_bytes();

    expect_corrupt("bad magic", e_magic, "idx", "magic");
    expect_corrupt("unknown version", e_version, "idx", "version");
    expect_corrupt("unknown dtype", e_dtype, "idx", "dtype");
    expect_corrupt("float dtype", e_dtype_float, "idx", "dtype");
    expect_corrupt("short header", e_header, "idx", "header");
    expect_corrupt("truncated arrays", e_trunc, "idx", "truncated");
    expect_corrupt("trailing bytes", e_trailing, "idx", "file size");
    expect_corrupt("huge sequence count", e_count, "idx", "truncated");
    expect_corrupt("doc_idx count", e_doccount, "idx", "truncated");
    expect_corrupt("size changed", e_size, "idx", "pointers[1]");
    expect_corrupt("negative size", e_negsize, "idx", "sizes[0]");
    expect_corrupt("pointer changed", e_pointer, "idx", "pointers[1]");
    expect_corrupt("bin truncated", e_bin_short, "bin", "past the end");
    expect_corrupt("bin too long", e_bin_long, "bin", "add up");
    expect_corrupt("doc_idx[0] != 0", e_doc0, "idx", "doc_idx[0]");
    expect_corrupt("doc_idx decreasing", e_docorder, "idx", "doc_idx[2]");
    expect_corrupt("doc_idx past count", e_docpast, "idx", "doc_idx[2]");

    idx_reader *r = NULL;
    CHECK(idx_open(&r, pfx("missing")) == GRIT_ENOTFOUND && r == NULL);
    CHECK_ERRMSG("missing.idx");
    idx_close(NULL);
    idx_writer_abort(NULL);

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not remove %s\n", dir);
    return CHECK_RESULT();
}
