/*
 * tb.h - TensorBoard event files (RUN_DIR/tb/events.out.tfevents.<time>.<host>.<pid>).
 *
 * A file is a sequence of TFRecords; each record is
 *
 *   u64 little-endian  n = length of data
 *   u32 little-endian  masked CRC32C of the 8 length bytes
 *   n bytes            data: one serialized tensorflow.Event protobuf
 *   u32 little-endian  masked CRC32C of data
 *
 * masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2^32); CRC32C is the
 * Castagnoli polynomial (reflected 0x82f63b78). The first record is
 * Event{wall_time, file_version: "brain.Event:2"}; every scalar after it is
 * Event{wall_time (1, double), step (2, int64), summary (5) {value (1) {tag (1),
 * simple_value (2, float)}}}. docs/formats.md has the byte layout.
 *
 * Not thread-safe; one writer per file. A write error is sticky: later calls
 * return it and write nothing (training goes on without its TensorBoard log).
 */
#ifndef GRIT_OBS_TB_H
#define GRIT_OBS_TB_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct tb_writer tb_writer;

/* Creates dir (and parents) and a new event file in it; writes the file_version
 * record. *out is owned by the caller (tb_close). */
grit_err tb_open(const char *dir, tb_writer **out);
/* Appends one scalar (buffered; tb_flush or tb_close puts it in the file). */
grit_err tb_scalar(tb_writer *w, const char *tag, long step, double wall_time, float value);
grit_err tb_flush(tb_writer *w);
/* Flushes and closes; NULL is a no-op. */
grit_err tb_close(tb_writer *w);
/* The file's path (valid until tb_close). */
const char *tb_path(const tb_writer *w);

/* The trainer's per-step scalars: train/loss, train/grad_norm, train/lr,
 * train/tokens_per_s, each the float32 nearest to the number as metrics.jsonl
 * prints it (%.9g, and %.1f for tokens/s), so both files agree exactly; then flushes. */
grit_err tb_train_step(tb_writer *w, long step, double loss, double grad_norm, double lr,
                       double tokens_per_s);

uint32_t tb_crc32c(const void *data, size_t n);
uint32_t tb_masked_crc(const void *data, size_t n);
/* Encodes one record (framing around data) into out, which must hold n + 16 bytes. */
size_t tb_frame(const void *data, size_t n, uint8_t *out);

#endif
