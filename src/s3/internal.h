/*
 * internal.h - what the S3 client's files share (client.c: the request engine and
 * the object operations; list.c: listings and multipart-upload housekeeping). Not
 * part of the client's interface (client.h).
 */
#ifndef GRIT_S3_INTERNAL_H
#define GRIT_S3_INTERNAL_H
#include <pthread.h>
#include <stdint.h>

#include <curl/curl.h>

#include "s3/client.h"
#include "s3/creds.h"
#include "s3/sigv4.h"

#define RESP_CAP (4u << 20) /* cap on a buffered (XML) response body */
#define MAX_QUERY 5

struct s3_client {
    s3_opts o;
    s3_creds cred;     /* never printed */
    char base[300];    /* scheme://host[:port] */
    char host[256];    /* Host header value */
    bool aws_default;  /* no endpoint: virtual-host style on amazonaws.com */
    CURLM *multi;
    CURL **easy;       /* pool of concurrency handles */
    uint64_t rng;
    s3_stats stats;
    s3_progress_fn progress;
    void *progress_ctx;
    size_t pdone, ptotal; /* bytes of the current put/get */
};

typedef struct growbuf {
    char *p;
    size_t n, cap;
} growbuf;

typedef enum { R_WAIT, R_FLIGHT, R_DONE, R_FAILED } rstate;

typedef struct s3_req {
    const char *method; /* GET PUT POST DELETE HEAD */
    const char *bucket;
    char key[1024];
    const char *label; /* for messages instead of the key (listings) */
    s3_kv q[MAX_QUERY];
    int nq;
    /* request body: window [boff, boff+blen) of the concatenated bufs */
    const void *const *bufs;
    const size_t *lens;
    int nbufs;
    size_t boff, blen;
    const char *ctype;
    /* response: a fixed destination (ranged GET) or the growable buffer */
    long long roff, rlen; /* Range; rlen < 0: none */
    char *dst;
    size_t dcap, got;
    growbuf resp;
    char etag[128];
    long long clen; /* HEAD: Content-Length */
    /* state */
    rstate st;
    int attempts;
    double not_before;
    long status;
    CURLcode cc;
    char cerr[CURL_ERROR_SIZE];
    char hash[65];
    int bi;       /* upload cursor: buffer index and offset inside it */
    size_t bpos, sent;
    CURL *easy;
    struct curl_slist *hdrs;
} s3_req;

/* A request with no body, no range and no query yet. */
void s3i_req_init(s3_req *r, const char *method, const char *bucket, const char *key);
void s3i_req_free(s3_req *r);
/* Runs one request with retries; ok404: a 404 counts as done (r->status says so). */
grit_err s3i_one(s3_client *c, s3_req *r, bool ok404);
/* The text of the first <tag>...</tag> in xml into out; 0 if found. */
int s3i_xml_tag(const char *xml, const char *tag, char *out, size_t cap);
/* Decodes the five predefined XML entities in place. */
void s3i_xml_unescape(char *s);
#endif
