/*
 * creds.h - S3 credentials, endpoint and location parsing (used by client.c).
 */
#ifndef GRIT_S3_CREDS_H
#define GRIT_S3_CREDS_H

#include <stddef.h>

#include "core/error.h"

typedef struct s3_creds {
    char access[256], secret[256], token[4096];
} s3_creds;

/* AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, else the profile
 * AWS_PROFILE (default "default") of AWS_SHARED_CREDENTIALS_FILE (default
 * ~/.aws/credentials). The error names where it looked, never a secret. */
grit_err s3_creds_load(s3_creds *c);

/* Zeroes every byte (the secret and token included). */
void s3_creds_wipe(s3_creds *c);

/* "http[s]://HOST[:PORT]" (no path) -> host ("HOST[:PORT]") and base (scheme://host). */
grit_err s3_parse_endpoint(const char *ep, char *host, size_t hcap, char *base, size_t bcap);

#endif
