/*
 * sigv4.h - AWS Signature Version 4 for S3 requests (header-based auth).
 *
 * The signer owns the canonical forms, so the request that goes out is the one
 * that was signed: s3_sigv4_query() builds the canonical (sorted, encoded, empty
 * values as "k=") query that is also put on the wire, and s3_uri_encode() the
 * encoded path. Pure functions over caller buffers; no allocation, no I/O.
 * Hashing and HMAC come from OpenSSL's libcrypto.
 *
 * Never log the secret or the signing key; the Authorization value holds only
 * the access key id and the signature.
 */
#ifndef GRIT_S3_SIGV4_H
#define GRIT_S3_SIGV4_H

#include <stddef.h>

typedef struct s3_kv {
    const char *k, *v;
} s3_kv;

typedef struct s3_sigv4_req {
    const char *method;       /* "GET", "PUT", ... */
    const char *path;         /* already URI-encoded (s3_uri_encode, keeping '/') */
    const char *query;        /* canonical query from s3_sigv4_query ("" if none) */
    const s3_kv *headers;     /* headers to sign: names in any case, values trimmed here;
                                 must include host and x-amz-date */
    int nheaders;
    const char *payload_hash; /* hex SHA-256 of the body, or "UNSIGNED-PAYLOAD" */
    const char *access_key, *secret, *region, *service;
    const char *amz_date;     /* YYYYMMDDTHHMMSSZ */
} s3_sigv4_req;

/* RFC 3986 encoding as SigV4 wants it: unreserved A-Z a-z 0-9 - _ . ~ kept, '/' kept
 * when keep_slash, everything else %XX (upper-case). -1 if it does not fit. */
int s3_uri_encode(const char *in, int keep_slash, char *out, size_t cap);

/* Canonical query string of n pairs: each key and value encoded, sorted by key
 * then value, joined "k=v&..." ("k=" for an empty or NULL value). -1 if too long. */
int s3_sigv4_query(const s3_kv *q, int n, char *out, size_t cap);

/* Hex SHA-256 of n bytes (65 bytes out, NUL-terminated). */
void s3_sha256_hex(const void *p, size_t n, char out[65]);

/* The Authorization header value ("AWS4-HMAC-SHA256 Credential=..., SignedHeaders=...,
 * Signature=..."). sig (may be NULL) receives the bare hex signature. 0 or -1 (too long,
 * too many headers). */
int s3_sigv4_sign(const s3_sigv4_req *r, char *auth, size_t cap, char sig[65]);

#endif
