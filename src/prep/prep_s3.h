/*
 * prep_s3.h - grit prep's inputs in S3: s3://bucket/prefix/ listed (with
 * pagination, keys in byte order, only document names: .warc[.gz],
 * .jsonl[.gz], .html, ...) and each object fetched, when its shard runs,
 * into a local spool file that the ordinary reader then reads.
 *
 * Fetching: parallel ranged GETs (s3_get: part_size ranges, `concurrency`
 * in flight) of PREP_S3_CHUNK bytes at a time appended to the spool file, so
 * memory stays bounded whatever the object's size. The object's size is
 * checked against the listing before and after: an object that was replaced
 * or changed size while being read is an error naming it (the plan, and
 * what was already read, describe the old object), as are 403/404 and a
 * short read. The spool file is the caller's to delete.
 *
 * Credentials, region and endpoint: the S3 client's (s3/client.h:
 * AWS_ACCESS_KEY_ID..., AWS_ENDPOINT_URL). Builds without S3 (no libcurl)
 * answer every s3:// input with an error saying so.
 *
 * Outputs (prep_s3_put_file): a finished local file uploaded as one object;
 * the caller orders them (data first, manifest last).
 *
 * Ownership: prep_s3_open allocates a handle (one per thread: the client is
 * single-threaded), prep_s3_close frees it (NULL is a no-op).
 */
#ifndef GRIT_PREP_S3_H
#define GRIT_PREP_S3_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"

#define PREP_S3_CHUNK ((size_t)64 << 20)

typedef struct prep_s3 prep_s3;

/* 1 when path is an s3:// URL. */
int prep_s3_is_url(const char *path);
grit_err prep_s3_open(prep_s3 **out);
void prep_s3_close(prep_s3 *s);
/* Calls add(ctx, "s3://bucket/key", size) for each object under the URL's
 * prefix, keys in byte order (a URL naming one object lists that object). */
typedef grit_err (*prep_s3_add_fn)(void *ctx, const char *url, uint64_t size);
grit_err prep_s3_list(prep_s3 *s, const char *url, prep_s3_add_fn add, void *ctx);
/* Copies the object (expected: size bytes) into the local file dest
 * (created or truncated; not durable: a spool). */
grit_err prep_s3_fetch(prep_s3 *s, const char *url, uint64_t size, const char *dest);

/* Uploads the local file to url (multipart above the part size; the file is
 * mapped, not copied): the object appears whole or not at all. */
grit_err prep_s3_put_file(prep_s3 *s, const char *local, const char *url);
/* Deletes url (absent is fine). */
grit_err prep_s3_delete(prep_s3 *s, const char *url);

#endif
