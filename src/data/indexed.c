/*
 * indexed.c - MMIDIDX v1 writer and reader (layout and contract in
 * indexed.h and docs/formats.md).
 *
 * All multi-byte fields are little-endian; they are encoded and decoded byte
 * by byte, so the code does not depend on the host's byte order or on
 * alignment (the arrays start at offset 34, which is not 8-aligned).
 */
#include "data/indexed.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fsutil.h"

static const uint8_t MAGIC[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
#define WBUF_SIZE (1u << 20)

int idx_dtype_for_vocab(size_t vocab_size)
{
    return vocab_size < 65500 ? IDX_DTYPE_U16 : IDX_DTYPE_I32;
}

size_t idx_dtype_size(int dtype)
{
    switch (dtype) {
    case IDX_DTYPE_U8: case IDX_DTYPE_I8: return 1;
    case IDX_DTYPE_I16: case IDX_DTYPE_U16: return 2;
    case IDX_DTYPE_I32: case IDX_DTYPE_F32: return 4;
    case IDX_DTYPE_I64: case IDX_DTYPE_F64: return 8;
    default: return 0;
    }
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* ---- writer ---------------------------------------------------------- */

struct idx_writer {
    char *prefix, *bin_tmp;
    int fd, dtype;
    size_t isz;
    uint8_t *buf;
    size_t nbuf;
    int32_t *sizes;
    size_t nseq, capseq;
    int64_t *doc_idx;
    size_t ndoc, capdoc;
    uint64_t bin_bytes;
};

static grit_err flush_buf(idx_writer *w)
{
    const uint8_t *p = w->buf;
    size_t n = w->nbuf;
    while (n > 0) {
        ssize_t k = write(w->fd, p, n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return grit_errf(GRIT_EIO, "%s: write failed: %s", w->bin_tmp, strerror(errno));
        }
        p += k;
        n -= (size_t)k;
    }
    w->nbuf = 0;
    return GRIT_OK;
}

static grit_err push_doc(idx_writer *w, int64_t v)
{
    if (w->ndoc == w->capdoc) {
        size_t cap = w->capdoc ? w->capdoc * 2 : 1024;
        int64_t *d = realloc(w->doc_idx, cap * sizeof *d);
        if (!d)
            return grit_errf(GRIT_ENOMEM, "%s.idx: out of memory for doc_idx", w->prefix);
        w->doc_idx = d;
        w->capdoc = cap;
    }
    w->doc_idx[w->ndoc++] = v;
    return GRIT_OK;
}

void idx_writer_abort(idx_writer *w)
{
    if (!w)
        return;
    if (w->fd >= 0) {
        close(w->fd);
        unlink(w->bin_tmp);
    }
    free(w->prefix);
    free(w->bin_tmp);
    free(w->buf);
    free(w->sizes);
    free(w->doc_idx);
    free(w);
}

grit_err idx_writer_open(idx_writer **out, const char *prefix, int dtype)
{
    *out = NULL;
    if (dtype != IDX_DTYPE_U16 && dtype != IDX_DTYPE_I32 && dtype != IDX_DTYPE_U8)
        return grit_errf(GRIT_EINVAL, "%s.idx: dtype: expected 8 (uint16), 4 (int32) or 1 (uint8, "
                                      "SFT loss masks), got %d", prefix, dtype);
    idx_writer *w = calloc(1, sizeof *w);
    if (!w)
        return grit_errf(GRIT_ENOMEM, "%s: out of memory", prefix);
    w->fd = -1;
    w->dtype = dtype;
    w->isz = idx_dtype_size(dtype);
    size_t pl = strlen(prefix);
    w->prefix = strdup(prefix);
    w->bin_tmp = malloc(pl + 40);
    w->buf = malloc(WBUF_SIZE);
    if (!w->prefix || !w->bin_tmp || !w->buf) {
        idx_writer_abort(w);
        return grit_errf(GRIT_ENOMEM, "%s: out of memory", prefix);
    }
    snprintf(w->bin_tmp, pl + 40, "%s.bin.tmp.%ld", prefix, (long)getpid());
    w->fd = open(w->bin_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        grit_err rc = grit_errf(GRIT_EIO, "%s: cannot create: %s", w->bin_tmp, strerror(errno));
        idx_writer_abort(w);
        return rc;
    }
    grit_err rc = push_doc(w, 0);
    if (rc) {
        idx_writer_abort(w);
        return rc;
    }
    *out = w;
    return GRIT_OK;
}

grit_err idx_writer_add(idx_writer *w, const uint32_t *tokens, size_t n)
{
    if (n > INT32_MAX)
        return grit_errf(GRIT_EINVAL, "%s.idx: sizes[%zu]: %zu tokens, at most %d per sequence", w->prefix, w->nseq,
                         n, INT32_MAX);
    uint32_t lim = w->dtype == IDX_DTYPE_U16 ? 0xFFFFu : w->dtype == IDX_DTYPE_U8 ? 0xFFu : 0x7FFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] > lim)
            return grit_errf(GRIT_EINVAL, "%s.bin: token %u in sequence %zu does not fit dtype %d", w->prefix,
                             tokens[i], w->nseq, w->dtype);
        if (w->nbuf + w->isz > WBUF_SIZE) {
            grit_err rc = flush_buf(w);
            if (rc)
                return rc;
        }
        put_le(w->buf + w->nbuf, tokens[i], (int)w->isz);
        w->nbuf += w->isz;
    }
    if (w->nseq == w->capseq) {
        size_t cap = w->capseq ? w->capseq * 2 : 1024;
        int32_t *s = realloc(w->sizes, cap * sizeof *s);
        if (!s)
            return grit_errf(GRIT_ENOMEM, "%s.idx: out of memory for sizes", w->prefix);
        w->sizes = s;
        w->capseq = cap;
    }
    w->sizes[w->nseq++] = (int32_t)n;
    w->bin_bytes += n * w->isz;
    return GRIT_OK;
}

grit_err idx_writer_end_doc(idx_writer *w)
{
    return push_doc(w, (int64_t)w->nseq);
}

grit_err idx_writer_finish(idx_writer *w)
{
    grit_err rc = flush_buf(w);
    char bin[4096], idx[4096];
    snprintf(bin, sizeof bin, "%s.bin", w->prefix);
    snprintf(idx, sizeof idx, "%s.idx", w->prefix);
    if (!rc && fsync(w->fd) != 0)
        rc = grit_errf(GRIT_EIO, "%s: fsync failed: %s", w->bin_tmp, strerror(errno));
    if (close(w->fd) != 0 && !rc)
        rc = grit_errf(GRIT_EIO, "%s: close failed: %s", w->bin_tmp, strerror(errno));
    w->fd = -1;
    if (!rc && rename(w->bin_tmp, bin) != 0)
        rc = grit_errf(GRIT_EIO, "%s: rename to %s failed: %s", w->bin_tmp, bin, strerror(errno));
    if (rc) {
        unlink(w->bin_tmp);
        idx_writer_abort(w);
        return rc;
    }
    size_t n = w->nseq, m = w->ndoc;
    size_t len = IDX_HEADER_SIZE + 12 * n + 8 * m;
    uint8_t *b = malloc(len);
    if (!b) {
        idx_writer_abort(w);
        return grit_errf(GRIT_ENOMEM, "%s: out of memory for the index", idx);
    }
    memcpy(b, MAGIC, 9);
    put_le(b + 9, 1, 8);
    b[17] = (uint8_t)w->dtype;
    put_le(b + 18, n, 8);
    put_le(b + 26, m, 8);
    uint8_t *p = b + IDX_HEADER_SIZE;
    for (size_t i = 0; i < n; i++, p += 4)
        put_le(p, (uint32_t)w->sizes[i], 4);
    uint64_t ptr = 0;
    for (size_t i = 0; i < n; i++, p += 8) {
        put_le(p, ptr, 8);
        ptr += (uint64_t)w->sizes[i] * w->isz;
    }
    for (size_t i = 0; i < m; i++, p += 8)
        put_le(p, (uint64_t)w->doc_idx[i], 8);
    rc = fs_write_durable(idx, b, len);
    free(b);
    idx_writer_abort(w); /* frees; fd already closed, temp already renamed */
    return rc;
}

/* ---- reader ---------------------------------------------------------- */

struct idx_reader {
    const uint8_t *idx, *bin;
    size_t idx_len, bin_len;
    int dtype;
    size_t isz, nseq, ndoc_entries, ntok;
    const uint8_t *sizes, *pointers, *doc_idx;
};

void idx_close(idx_reader *r)
{
    if (!r)
        return;
    if (r->idx && r->idx_len)
        munmap((void *)r->idx, r->idx_len);
    if (r->bin && r->bin_len)
        munmap((void *)r->bin, r->bin_len);
    free(r);
}

static grit_err map_file(const char *path, const uint8_t **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return grit_errf(errno == ENOENT ? GRIT_ENOTFOUND : GRIT_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return grit_errf(GRIT_EIO, "%s: stat failed: %s", path, strerror(errno));
    }
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            close(fd);
            return grit_errf(GRIT_EIO, "%s: mmap failed: %s", path, strerror(errno));
        }
        *out = p;
        *len = (size_t)st.st_size;
    }
    close(fd);
    return GRIT_OK;
}

static grit_err validate(idx_reader *r, const char *idx, const char *bin)
{
    if (r->idx_len < IDX_HEADER_SIZE)
        return grit_errf(GRIT_EFORMAT, "%s: header: file is %zu bytes, expected at least %d", idx, r->idx_len,
                         IDX_HEADER_SIZE);
    if (memcmp(r->idx, MAGIC, 9) != 0)
        return grit_errf(GRIT_EFORMAT, "%s: magic: expected \"MMIDIDX\\x00\\x00\" (a Megatron indexed dataset)", idx);
    uint64_t ver = get_le(r->idx + 9, 8);
    if (ver != 1)
        return grit_errf(GRIT_EFORMAT, "%s: version: expected 1, got %llu (re-create the dataset with a tool that writes MMIDIDX version 1)",
                         idx, (unsigned long long)ver);
    r->dtype = r->idx[17];
    r->isz = idx_dtype_size(r->dtype);
    if (r->isz == 0 || r->dtype == IDX_DTYPE_F32 || r->dtype == IDX_DTYPE_F64)
        return grit_errf(GRIT_EFORMAT, "%s: dtype: expected an integer code (1, 2, 3, 4, 5 or 8), got %d", idx,
                         r->dtype);
    uint64_t n = get_le(r->idx + 18, 8), m = get_le(r->idx + 26, 8);
    uint64_t body = r->idx_len - IDX_HEADER_SIZE;
    if (n > body / 12 || m > (body - 12 * n) / 8)
        return grit_errf(GRIT_EFORMAT,
                         "%s: arrays truncated: header says %llu sequences and %llu doc_idx entries (%llu bytes), file has %llu bytes after the header",
                         idx, (unsigned long long)n, (unsigned long long)m,
                         (unsigned long long)(n > body ? 0 : 12 * n + 8 * m), (unsigned long long)body);
    if (12 * n + 8 * m != body)
        return grit_errf(GRIT_EFORMAT, "%s: file size: expected %llu bytes for %llu sequences and %llu doc_idx entries, got %zu",
                         idx, (unsigned long long)(IDX_HEADER_SIZE + 12 * n + 8 * m), (unsigned long long)n,
                         (unsigned long long)m, r->idx_len);
    r->nseq = (size_t)n;
    r->ndoc_entries = (size_t)m;
    r->sizes = r->idx + IDX_HEADER_SIZE;
    r->pointers = r->sizes + 4 * n;
    r->doc_idx = r->pointers + 8 * n;
    uint64_t expect = 0;
    for (size_t i = 0; i < r->nseq; i++) {
        int32_t sz = (int32_t)(uint32_t)get_le(r->sizes + 4 * i, 4);
        uint64_t ptr = get_le(r->pointers + 8 * i, 8);
        if (sz < 0)
            return grit_errf(GRIT_EFORMAT, "%s: sizes[%zu]: expected >= 0, got %d", idx, i, sz);
        if (ptr != expect)
            return grit_errf(GRIT_EFORMAT, "%s: pointers[%zu]: expected %llu (the sum of the sizes before it times %zu), got %lld",
                             idx, i, (unsigned long long)expect, r->isz, (long long)ptr);
        expect += (uint64_t)sz * r->isz;
        if (expect > r->bin_len)
            return grit_errf(GRIT_EFORMAT, "%s: pointers[%zu] + sizes[%zu]: sequence ends at byte %llu, past the end of %s (%zu bytes)",
                             idx, i, i, (unsigned long long)expect, bin, r->bin_len);
    }
    if (expect != r->bin_len)
        return grit_errf(GRIT_EFORMAT, "%s: sizes: add up to %llu bytes of tokens, but %s has %zu bytes", idx,
                         (unsigned long long)expect, bin, r->bin_len);
    r->ntok = (size_t)(expect / r->isz);
    if (m == 0)
        return grit_errf(GRIT_EFORMAT, "%s: doc_idx: expected at least one entry (0)", idx);
    uint64_t prev = 0;
    for (size_t i = 0; i < r->ndoc_entries; i++) {
        uint64_t d = get_le(r->doc_idx + 8 * i, 8);
        if ((i == 0 && d != 0) || d < prev || d > n)
            return grit_errf(GRIT_EFORMAT, "%s: doc_idx[%zu]: expected %s, got %lld", idx, i,
                             i == 0 ? "0" : "non-decreasing values up to the sequence count", (long long)d);
        prev = d;
    }
    return GRIT_OK;
}

grit_err idx_open(idx_reader **out, const char *prefix)
{
    *out = NULL;
    char idx[4096], bin[4096];
    if (snprintf(idx, sizeof idx, "%s.idx", prefix) >= (int)sizeof idx ||
        snprintf(bin, sizeof bin, "%s.bin", prefix) >= (int)sizeof bin)
        return grit_errf(GRIT_EINVAL, "%s: path too long", prefix);
    idx_reader *r = calloc(1, sizeof *r);
    if (!r)
        return grit_errf(GRIT_ENOMEM, "%s: out of memory", prefix);
    grit_err rc = map_file(idx, &r->idx, &r->idx_len);
    if (!rc)
        rc = map_file(bin, &r->bin, &r->bin_len);
    if (!rc)
        rc = validate(r, idx, bin);
    if (rc) {
        idx_close(r);
        return rc;
    }
    *out = r;
    return GRIT_OK;
}

int idx_dtype(const idx_reader *r) { return r->dtype; }
size_t idx_num_seqs(const idx_reader *r) { return r->nseq; }
size_t idx_num_docs(const idx_reader *r) { return r->ndoc_entries - 1; }
size_t idx_num_tokens(const idx_reader *r) { return r->ntok; }

size_t idx_seq_len(const idx_reader *r, size_t i)
{
    return i < r->nseq ? (size_t)get_le(r->sizes + 4 * i, 4) : 0;
}

size_t idx_doc_start(const idx_reader *r, size_t i)
{
    return i < r->ndoc_entries ? (size_t)get_le(r->doc_idx + 8 * i, 8) : r->nseq;
}

grit_err idx_read(const idx_reader *r, size_t i, size_t off, size_t n, uint32_t *out)
{
    if (i >= r->nseq)
        return grit_errf(GRIT_EINVAL, "indexed read: sequence %zu: expected below %zu", i, r->nseq);
    size_t len = idx_seq_len(r, i);
    if (off > len || n > len - off)
        return grit_errf(GRIT_EINVAL, "indexed read: sequence %zu: tokens [%zu, %zu) outside its %zu tokens", i, off,
                         off + n, len);
    if (n == 0)
        return GRIT_OK;
    const uint8_t *p = r->bin + get_le(r->pointers + 8 * i, 8) + off * r->isz;
    switch (r->dtype) {
    case IDX_DTYPE_U16:
        for (size_t k = 0; k < n; k++)
            out[k] = (uint32_t)p[2 * k] | (uint32_t)p[2 * k + 1] << 8;
        break;
    case IDX_DTYPE_U8:
        for (size_t k = 0; k < n; k++)
            out[k] = p[k];
        break;
    default:
        for (size_t k = 0; k < n; k++)
            out[k] = (uint32_t)get_le(p + r->isz * k, (int)r->isz);
        break;
    }
    return GRIT_OK;
}
