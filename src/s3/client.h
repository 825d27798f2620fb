/*
 * client.h - a small S3 client: libcurl's multi interface with SigV4 signing.
 *
 * What it does: PUT (one request up to part_size, multipart above it with up to
 * `concurrency` parts in flight), ranged parallel GET, HEAD, ListObjectsV2 with
 * pagination, DELETE. Every request is retried on transport errors, 5xx, 429 and
 * 408 with exponential backoff and full jitter, up to `retries` times; any other
 * answer (403 for a wrong secret, 404, ...) fails at once with the S3 error code and
 * message. A multipart upload that fails is aborted (no orphaned parts left to pay
 * for), best effort: when the server itself is gone, s3_list_uploads and
 * s3_abort_upload let the next run clean up (the checkpoint store's cleanup()). Payloads are signed with their real SHA-256 (the server checks
 * the body against it) unless unsigned_payload.
 *
 * What it is not: a general SDK. No virtual-host style against custom endpoints (an
 * endpoint means path style, which every S3-compatible server takes), no redirects,
 * no STS/IMDS credentials.
 *
 * Credentials (s3_client_open): AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
 * AWS_SESSION_TOKEN; else the profile AWS_PROFILE (default "default") of the shared
 * credentials file AWS_SHARED_CREDENTIALS_FILE (default ~/.aws/credentials). Region:
 * opts, AWS_REGION, AWS_DEFAULT_REGION, "us-east-1". Endpoint: opts, AWS_ENDPOINT_URL,
 * else https://s3.REGION.amazonaws.com. The secret is never printed or logged.
 *
 * A client is used by one thread at a time.
 */
#ifndef GRIT_S3_CLIENT_H
#define GRIT_S3_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

typedef struct s3_opts {
    char endpoint[256];    /* "" = environment / AWS default */
    char region[64];       /* "" = environment / us-east-1 */
    size_t part_size;      /* bytes; 0 = 8 MiB */
    int concurrency;       /* requests in flight; 0 = 16 */
    int retries;           /* per request; <0 = 5 */
    int list_page;         /* ListObjectsV2 max-keys; 0 = 1000 */
    bool unsigned_payload; /* x-amz-content-sha256: UNSIGNED-PAYLOAD instead of the hash */
    size_t read_cache;     /* bytes of whole objects the s3:// checkpoint store keeps while
                              a restore reads them (store_s3.c); 0 = 4 GiB */
} s3_opts;

/* Defaults: 8 MiB parts (the AWS CRT client's), 16 in flight, 5 retries, endpoint
 * and region from the environment. Inline: the config parser uses it in builds
 * without S3 too. */
static inline void s3_opts_defaults(s3_opts *o)
{
    *o = (s3_opts){.part_size = 8u << 20, .concurrency = 16, .retries = 5,
                   .read_cache = (size_t)4 << 30};
}

typedef struct s3_client s3_client;

/* Reads credentials, region and endpoint (see above). GRIT_EINVAL with what is missing. */
grit_err s3_client_open(const s3_opts *o, s3_client **out);
void s3_client_close(s3_client *c); /* NULL is a no-op */

/* Splits "s3://bucket/prefix/..." into bucket and prefix (no leading/trailing '/'). */
grit_err s3_parse_url(const char *url, char *bucket, size_t bcap, char *prefix, size_t pcap);

/* Creates or replaces key with the concatenation of n buffers. */
grit_err s3_put(s3_client *c, const char *bucket, const char *key, const void *const *bufs,
                const size_t *lens, int n);

/* Exactly len bytes of key from off into buf (parallel ranged GETs of part_size). */
grit_err s3_get(s3_client *c, const char *bucket, const char *key, size_t off, size_t len,
                void *buf);

/* Size of key; GRIT_ENOTFOUND when absent. */
grit_err s3_head(s3_client *c, const char *bucket, const char *key, size_t *size);

/* Calls fn for each key under prefix (delim 0) or each name directly under it (delim
 * '/': objects and "sub-directories", with the prefix removed and no trailing '/'). */
typedef void (*s3_list_fn)(void *ctx, const char *name, size_t size);
grit_err s3_list(s3_client *c, const char *bucket, const char *prefix, char delim, s3_list_fn fn,
                 void *ctx);

/* Calls fn for each multipart upload in progress (initiated, neither completed nor
 * aborted) under prefix: its key, upload id and initiation time (ISO 8601, as the
 * server wrote it; "" if absent). Their parts are stored, and billed, until aborted. */
typedef void (*s3_upload_fn)(void *ctx, const char *key, const char *upload_id,
                             const char *initiated);
grit_err s3_list_uploads(s3_client *c, const char *bucket, const char *prefix, s3_upload_fn fn,
                         void *ctx);
/* Aborts a multipart upload, freeing its parts (already gone is fine). */
grit_err s3_abort_upload(s3_client *c, const char *bucket, const char *key, const char *upload_id);
/* Deletes key (absent is fine). */
grit_err s3_delete(s3_client *c, const char *bucket, const char *key);

/* Called after each finished part/range of a put or get with the bytes done so far
 * and the total (NULL: off). */
typedef void (*s3_progress_fn)(void *ctx, size_t done, size_t total);
void s3_client_set_progress(s3_client *c, s3_progress_fn fn, void *ctx);

/* Counters since open, for tests and benchmarks. */
typedef struct s3_stats {
    long requests, retries, aborted_uploads;
} s3_stats;
s3_stats s3_client_stats(const s3_client *c);

#endif
