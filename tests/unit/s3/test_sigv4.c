/*
 * test_sigv4.c - SigV4 against the examples AWS publishes (facts, not our own output):
 *   - S3 API reference, "Examples: Signature Calculations" (header-based auth):
 *     GET Object with a Range, PUT Object, GET Bucket lifecycle (a query key without
 *     a value), GET Bucket list objects (query given unsorted), with
 *     AKIAIOSFODNN7EXAMPLE / wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY, 20130524T000000Z.
 *   - The Signature Version 4 test suite, "get-vanilla" (service "service").
 */
#include <string.h>

#include "../check.h"
#include "s3/sigv4.h"

#define EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define HOST "examplebucket.s3.amazonaws.com"
#define DATE "20130524T000000Z"

static void sign_s3(const char *method, const char *raw_path, const s3_kv *q, int nq,
                    const s3_kv *extra, int nextra, const char *payload, char sig[65],
                    char *auth, size_t cap)
{
    char path[256], query[512];
    CHECK_INT(s3_uri_encode(raw_path, 1, path, sizeof path), 0);
    CHECK_INT(s3_sigv4_query(q, nq, query, sizeof query), 0);
    s3_kv h[8] = {{"Host", HOST}, {"x-amz-date", DATE}, {"x-amz-content-sha256", payload}};
    int nh = 3;
    for (int i = 0; i < nextra; i++)
        h[nh++] = extra[i];
    s3_sigv4_req r = {.method = method, .path = path, .query = query, .headers = h,
                      .nheaders = nh, .payload_hash = payload,
                      .access_key = "AKIAIOSFODNN7EXAMPLE",
                      .secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                      .region = "us-east-1", .service = "s3", .amz_date = DATE};
    CHECK_INT(s3_sigv4_sign(&r, auth, cap, sig), 0);
}

#define CHECK_STR(a, b)                                                                  \
    do {                                                                                 \
        if (strcmp((a), (b)) != 0) {                                                     \
            fprintf(stderr, "%s:%d: got %s\n  expected %s\n", __FILE__, __LINE__, (a),   \
                    (b));                                                                \
            check_failures++;                                                            \
        }                                                                                \
    } while (0)

int main(void)
{
    char sig[65], auth[1024];

    /* GET Object, bytes 0-9 of test.txt */
    s3_kv range[] = {{"Range", "bytes=0-9"}};
    sign_s3("GET", "/test.txt", NULL, 0, range, 1, EMPTY, sig, auth, sizeof auth);
    CHECK_STR(sig, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
    CHECK_STR_HAS(auth, "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,");
    CHECK_STR_HAS(auth, "Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request");

    /* PUT Object "Welcome to Amazon S3." to test$file.text ('$' encoded once) */
    const char *body = "Welcome to Amazon S3.";
    char ph[65];
    s3_sha256_hex(body, strlen(body), ph);
    CHECK_STR(ph, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
    s3_kv put_h[] = {{"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                     {"x-amz-storage-class", "REDUCED_REDUNDANCY"}};
    sign_s3("PUT", "/test$file.text", NULL, 0, put_h, 2, ph, sig, auth, sizeof auth);
    CHECK_STR(sig, "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
    CHECK_STR_HAS(auth, "SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;"
                        "x-amz-storage-class,");

    /* GET Bucket lifecycle: a sub-resource without a value is signed as "lifecycle=" */
    s3_kv lc[] = {{"lifecycle", ""}};
    sign_s3("GET", "/", lc, 1, NULL, 0, EMPTY, sig, auth, sizeof auth);
    CHECK_STR(sig, "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");

    /* GET Bucket (list objects), parameters given out of order */
    s3_kv lq[] = {{"prefix", "J"}, {"max-keys", "2"}};
    char q[128];
    CHECK_INT(s3_sigv4_query(lq, 2, q, sizeof q), 0);
    CHECK_STR(q, "max-keys=2&prefix=J");
    sign_s3("GET", "/", lq, 2, NULL, 0, EMPTY, sig, auth, sizeof auth);
    CHECK_STR(sig, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");

    /* SigV4 test suite: get-vanilla */
    s3_kv vh[] = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}};
    s3_sigv4_req v = {.method = "GET", .path = "/", .query = "", .headers = vh, .nheaders = 2,
                      .payload_hash = EMPTY, .access_key = "AKIDEXAMPLE",
                      .secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                      .region = "us-east-1", .service = "service",
                      .amz_date = "20150830T123600Z"};
    CHECK_INT(s3_sigv4_sign(&v, auth, sizeof auth, sig), 0);
    CHECK_STR(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/"
                    "aws4_request, SignedHeaders=host;x-amz-date, "
                    "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");

    /* encoding rules: unreserved kept, '/' only in paths, space as %20, upper-case hex */
    char e[128];
    CHECK_INT(s3_uri_encode("a b/c~d_e.f-g:h", 1, e, sizeof e), 0);
    CHECK_STR(e, "a%20b/c~d_e.f-g%3Ah");
    CHECK_INT(s3_uri_encode("a/b", 0, e, sizeof e), 0);
    CHECK_STR(e, "a%2Fb");
    CHECK_INT(s3_uri_encode("abcdef", 0, e, 4), -1);
    s3_kv up[] = {{"uploads", NULL}};
    CHECK_INT(s3_sigv4_query(up, 1, q, sizeof q), 0);
    CHECK_STR(q, "uploads=");
    CHECK_DONE();
}
