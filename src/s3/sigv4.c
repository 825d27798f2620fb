/*
 * sigv4.c - AWS Signature Version 4 (see sigv4.h).
 *
 *   CanonicalRequest = METHOD \n PATH \n QUERY \n (name:value \n)* \n SIGNEDHEADERS \n PAYLOADHASH
 *   StringToSign     = "AWS4-HMAC-SHA256" \n DATE \n SCOPE \n hex(SHA256(CanonicalRequest))
 *   SigningKey       = HMAC(HMAC(HMAC(HMAC("AWS4" secret, day), region), service), "aws4_request")
 *   Signature        = hex(HMAC(SigningKey, StringToSign))
 *
 * Tested against the examples AWS publishes (tests/unit/s3/test_sigv4.c).
 */
#include "s3/sigv4.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#define MAX_HEADERS 16

static void hex(const unsigned char *b, size_t n, char *out)
{
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[b[i] >> 4];
        out[2 * i + 1] = d[b[i] & 15];
    }
    out[2 * n] = '\0';
}

void s3_sha256_hex(const void *p, size_t n, char out[65])
{
    unsigned char md[32];
    SHA256(p, n, md);
    hex(md, 32, out);
}

int s3_uri_encode(const char *in, int keep_slash, char *out, size_t cap)
{
    static const char d[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
        int keep = isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~' ||
                   (keep_slash && *p == '/');
        if (o + (keep ? 1 : 3) >= cap)
            return -1;
        if (keep)
            out[o++] = (char)*p;
        else {
            out[o++] = '%';
            out[o++] = d[*p >> 4];
            out[o++] = d[*p & 15];
        }
    }
    if (o >= cap)
        return -1;
    out[o] = '\0';
    return 0;
}

typedef struct enc_kv {
    char k[512], v[1536];
} enc_kv;

static int cmp_kv(const void *a, const void *b)
{
    const enc_kv *x = a, *y = b;
    int c = strcmp(x->k, y->k);
    return c ? c : strcmp(x->v, y->v);
}

int s3_sigv4_query(const s3_kv *q, int n, char *out, size_t cap)
{
    if (cap == 0)
        return -1;
    out[0] = '\0';
    if (n <= 0)
        return 0;
    enc_kv *e = calloc((size_t)n, sizeof *e);
    if (!e)
        return -1;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        if (s3_uri_encode(q[i].k, 0, e[i].k, sizeof e[i].k) ||
            s3_uri_encode(q[i].v ? q[i].v : "", 0, e[i].v, sizeof e[i].v))
            rc = -1;
    if (rc == 0) {
        qsort(e, (size_t)n, sizeof *e, cmp_kv);
        size_t o = 0;
        for (int i = 0; i < n && rc == 0; i++) {
            int w = snprintf(out + o, cap - o, "%s%s=%s", i ? "&" : "", e[i].k, e[i].v);
            if (w < 0 || (size_t)w >= cap - o)
                rc = -1;
            else
                o += (size_t)w;
        }
    }
    free(e);
    return rc;
}

typedef struct canon_hdr {
    char name[64];
    const char *val;
} canon_hdr;

static int cmp_hdr(const void *a, const void *b)
{
    return strcmp(((const canon_hdr *)a)->name, ((const canon_hdr *)b)->name);
}

/* appends fmt to the buffer at *o; -1 on overflow */
static int app(char *buf, size_t cap, size_t *o, const char *s, size_t n)
{
    if (*o + n >= cap)
        return -1;
    memcpy(buf + *o, s, n);
    *o += n;
    buf[*o] = '\0';
    return 0;
}

static int apps(char *buf, size_t cap, size_t *o, const char *s)
{
    return app(buf, cap, o, s, strlen(s));
}

/* value with leading/trailing spaces removed and inner runs of spaces folded to one */
static int app_trimmed(char *buf, size_t cap, size_t *o, const char *v)
{
    while (*v == ' ' || *v == '\t')
        v++;
    size_t n = strlen(v);
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    int sp = 0;
    for (size_t i = 0; i < n; i++) {
        int is_sp = v[i] == ' ' || v[i] == '\t';
        if (is_sp && sp)
            continue;
        sp = is_sp;
        if (app(buf, cap, o, is_sp ? " " : &v[i], 1))
            return -1;
    }
    return 0;
}

static void hmac(const void *key, size_t klen, const char *msg, unsigned char out[32])
{
    unsigned int olen = 32;
    HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, strlen(msg), out, &olen);
}

int s3_sigv4_sign(const s3_sigv4_req *r, char *auth, size_t cap, char sig[65])
{
    if (r->nheaders > MAX_HEADERS || strlen(r->amz_date) != 16)
        return -1;
    canon_hdr h[MAX_HEADERS];
    for (int i = 0; i < r->nheaders; i++) {
        size_t n = strlen(r->headers[i].k);
        if (n >= sizeof h[i].name)
            return -1;
        for (size_t k = 0; k <= n; k++)
            h[i].name[k] = (char)tolower((unsigned char)r->headers[i].k[k]);
        h[i].val = r->headers[i].v;
    }
    qsort(h, (size_t)r->nheaders, sizeof h[0], cmp_hdr);

    enum { CR_CAP = 16384 };
    char *cr = malloc(CR_CAP), signed_h[1024] = "";
    if (!cr)
        return -1;
    size_t o = 0, so = 0;
    int bad = apps(cr, CR_CAP, &o, r->method) || apps(cr, CR_CAP, &o, "\n") ||
              apps(cr, CR_CAP, &o, r->path) || apps(cr, CR_CAP, &o, "\n") ||
              apps(cr, CR_CAP, &o, r->query ? r->query : "") || apps(cr, CR_CAP, &o, "\n");
    for (int i = 0; i < r->nheaders && !bad; i++) {
        bad = apps(cr, CR_CAP, &o, h[i].name) || apps(cr, CR_CAP, &o, ":") ||
              app_trimmed(cr, CR_CAP, &o, h[i].val) || apps(cr, CR_CAP, &o, "\n") ||
              (i && apps(signed_h, sizeof signed_h, &so, ";")) ||
              apps(signed_h, sizeof signed_h, &so, h[i].name);
    }
    bad = bad || apps(cr, CR_CAP, &o, "\n") || apps(cr, CR_CAP, &o, signed_h) ||
          apps(cr, CR_CAP, &o, "\n") || apps(cr, CR_CAP, &o, r->payload_hash);
    if (bad) {
        free(cr);
        return -1;
    }
    char cr_hash[65], day[9], scope[256], sts[512];
    s3_sha256_hex(cr, o, cr_hash);
    free(cr);
    memcpy(day, r->amz_date, 8);
    day[8] = '\0';
    snprintf(scope, sizeof scope, "%s/%s/%s/aws4_request", day, r->region, r->service);
    snprintf(sts, sizeof sts, "AWS4-HMAC-SHA256\n%s\n%s\n%s", r->amz_date, scope, cr_hash);

    char k0[600];
    unsigned char k[32];
    int kn = snprintf(k0, sizeof k0, "AWS4%s", r->secret);
    if (kn < 0 || (size_t)kn >= sizeof k0)
        return -1;
    hmac(k0, (size_t)kn, day, k);
    hmac(k, 32, r->region, k);
    hmac(k, 32, r->service, k);
    hmac(k, 32, "aws4_request", k);
    unsigned char s[32];
    hmac(k, 32, sts, s);
    char sh[65];
    hex(s, 32, sh);
    memset(k0, 0, sizeof k0);
    memset(k, 0, sizeof k);
    if (sig)
        memcpy(sig, sh, 65);
    int w = snprintf(auth, cap, "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s",
                     r->access_key, scope, signed_h, sh);
    return w < 0 || (size_t)w >= cap ? -1 : 0;
}
