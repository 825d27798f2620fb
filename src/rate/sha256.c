/*
 * sha256.c - hex SHA-256 for rate/: the prompt-set version and the stored form of rater
 * tokens. The digest is OpenSSL's (libcrypto, already linked for the S3 client's SigV4);
 * tested against the FIPS 180-4 vectors (tests/unit/rate).
 */
#include <openssl/sha.h>

#include "rate/rate.h"

grit_err rate_sha256_hex(const void *data, size_t len, char *out)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256(data, len, md);
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[2 * SHA256_DIGEST_LENGTH] = '\0';
    return GRIT_OK;
}
