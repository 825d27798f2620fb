/*
 * indexed.h - Megatron / GPT-NeoX indexed dataset (MMIDIDX version 1):
 * a streaming, durable writer and an mmap reader.
 *
 * A dataset is two files sharing a prefix (byte-exact with Megatron's
 * MMapIndexedDataset; the spec is in docs/formats.md):
 *
 *   PREFIX.idx  offset  size    field
 *               0       9       magic "MMIDIDX\x00\x00"
 *               9       8       version, u64 little-endian, = 1
 *               17      1       dtype code, u8 (8 = uint16, 4 = int32, ...)
 *               18      8       N = number of sequences, u64
 *               26      8       M = number of doc_idx entries, u64
 *               34      4*N     sizes[N], i32: tokens in each sequence
 *               34+4N   8*N     pointers[N], i64: byte offset of each
 *                               sequence in .bin (running sum of sizes*itemsize)
 *               34+12N  8*M     doc_idx[M], i64: sequence index where each
 *                               document starts; doc_idx[0] = 0, the last
 *                               entry = N (documents = M - 1)
 *   PREFIX.bin  raw tokens, little-endian, sequence after sequence
 *
 * Writer: tokens stream to PREFIX.bin.tmp.<pid> through a buffer; sizes and
 * doc_idx grow in memory (12 bytes per sequence). idx_writer_finish() fsyncs
 * and renames the .bin, then writes the .idx with fs_write_durable(): a crash
 * leaves either no dataset, or a complete new .bin with the old .idx (a
 * reader rejects that pair, sizes no longer adding up), never a torn file.
 * Reader: maps both files, validates every field before use (bad magic,
 * version, dtype, truncated or trailing bytes, negative sizes, pointers that
 * do not follow the sizes or run past the .bin, doc_idx out of order) and
 * reports the file and field; it never reads outside the mappings.
 *
 * Ownership: idx_writer_open allocates, idx_writer_finish or
 * idx_writer_abort frees (exactly one of them). idx_open allocates,
 * idx_close frees (NULL is a no-op).
 */
#ifndef GRIT_DATA_INDEXED_H
#define GRIT_DATA_INDEXED_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

enum {
    IDX_DTYPE_U8 = 1,
    IDX_DTYPE_I8 = 2,
    IDX_DTYPE_I16 = 3,
    IDX_DTYPE_I32 = 4,
    IDX_DTYPE_I64 = 5,
    IDX_DTYPE_F64 = 6,
    IDX_DTYPE_F32 = 7,
    IDX_DTYPE_U16 = 8
};

#define IDX_HEADER_SIZE 34

/* Megatron's choice: uint16 when the vocabulary is below 65500, else int32. */
int idx_dtype_for_vocab(size_t vocab_size);

/* Bytes per token for a dtype code, 0 if unknown. */
size_t idx_dtype_size(int dtype);

typedef struct idx_writer idx_writer;

/* dtype: IDX_DTYPE_U16 or IDX_DTYPE_I32 (tokens), IDX_DTYPE_U8 (SFT loss masks). */
grit_err idx_writer_open(idx_writer **out, const char *prefix, int dtype);

/* Appends one sequence (Megatron's add_item). Tokens must fit the dtype. */
grit_err idx_writer_add(idx_writer *w, const uint32_t *tokens, size_t n);

/* Ends the current document (Megatron's end_document). */
grit_err idx_writer_end_doc(idx_writer *w);

/* Makes the dataset durable and frees w, also on error. */
grit_err idx_writer_finish(idx_writer *w);

/* Discards everything written and frees w (NULL is a no-op). */
void idx_writer_abort(idx_writer *w);

typedef struct idx_reader idx_reader;

grit_err idx_open(idx_reader **out, const char *prefix);
void idx_close(idx_reader *r);

int idx_dtype(const idx_reader *r);
size_t idx_num_seqs(const idx_reader *r);
size_t idx_num_docs(const idx_reader *r);   /* doc_idx entries - 1 */
size_t idx_num_tokens(const idx_reader *r);
size_t idx_seq_len(const idx_reader *r, size_t i);
/* doc_idx[i], i <= idx_num_docs(r). */
size_t idx_doc_start(const idx_reader *r, size_t i);

/* Copies tokens [off, off+n) of sequence i into out, widened to u32.
 * GRIT_EINVAL if the range is outside the sequence. */
grit_err idx_read(const idx_reader *r, size_t i, size_t off, size_t n, uint32_t *out);

#endif
