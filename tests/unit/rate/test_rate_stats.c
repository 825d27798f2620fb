/*
 * test_rate_stats.c - the statistics of grit rate results (src/rate/stats.c)
 * against published values, and the SHA-256 of src/rate/sha256.c against the
 * FIPS 180-4 examples.
 *
 * Krippendorff's alpha: the reliability data of Krippendorff, "Computing
 * Krippendorff's Alpha-Reliability" (2011), 4 observers x 12 units with
 * missing values, whose published alphas are 0.849 (interval) and 0.815 (ordinal). Student's t: the
 * 0.975 quantiles of every textbook table (3 decimals).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../check.h"
#include "rate/rate.h"

int main(void)
{
    /* rows: observers A-D; 0 = missing */
    static const int data[4][12] = {
        {1, 2, 3, 3, 2, 1, 4, 1, 2, 0, 0, 0},
        {1, 2, 3, 3, 2, 2, 4, 1, 2, 5, 0, 3},
        {0, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, 0},
        {1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, 0},
    };
    int64_t unit[48];
    double v[48];
    int n = 0;
    for (int o = 0; o < 4; o++)
        for (int u = 0; u < 12; u++)
            if (data[o][u]) {
                unit[n] = 100 + (u * 7) % 12; /* unit ids in no particular order */
                v[n++] = data[o][u];
            }
    CHECK_INT(n, 41);
    double a = rate_alpha_interval(unit, v, n);
    printf("Krippendorff's example: interval alpha %.4f (published 0.849)\n", a);
    CHECK_NEAR(a, 0.849, 0.0005);
    double ao = rate_alpha_ordinal(unit, v, n);
    printf("Krippendorff's example: ordinal alpha %.4f (published 0.815)\n", ao);
    CHECK_NEAR(ao, 0.815, 0.0005);
    /* ordinal distances depend only on ranks: any increasing relabelling leaves it alone */
    double vr[48];
    for (int i = 0; i < n; i++)
        vr[i] = v[i] * v[i] * 10 - 3;
    CHECK_NEAR(rate_alpha_ordinal(unit, vr, n), ao, 1e-12);

    /* perfect agreement: 1; one rating per unit, or no spread at all: undefined */
    int64_t u2[6] = {1, 1, 2, 2, 3, 3};
    double v2[6] = {1, 1, 5, 5, 3, 3};
    CHECK_NEAR(rate_alpha_interval(u2, v2, 6), 1.0, 1e-12);
    CHECK_NEAR(rate_alpha_ordinal(u2, v2, 6), 1.0, 1e-12);
    int64_t u3[3] = {1, 2, 3};
    CHECK(isnan(rate_alpha_interval(u3, v2, 3)));
    double v4[6] = {2, 2, 2, 2, 2, 2};
    CHECK(isnan(rate_alpha_interval(u2, v4, 6)));
    CHECK(isnan(rate_alpha_ordinal(u3, v2, 3)));
    CHECK(isnan(rate_alpha_ordinal(u2, v4, 6)));
    /* systematic disagreement is worse than chance: alpha < 0 */
    double v5[6] = {1, 5, 5, 1, 1, 5};
    CHECK(rate_alpha_interval(u2, v5, 6) < 0);
    CHECK(rate_alpha_ordinal(u2, v5, 6) < 0);

    static const struct {
        int df;
        double t;
    } tt[] = {{1, 12.706}, {2, 4.303}, {3, 3.182}, {5, 2.571}, {10, 2.228}, {30, 2.042},
              {120, 1.980}};
    for (size_t k = 0; k < sizeof tt / sizeof *tt; k++) {
        double t = rate_t975(tt[k].df);
        printf("t(0.975, %d) = %.4f (table %.3f)\n", tt[k].df, t, tt[k].t);
        CHECK_NEAR(t, tt[k].t, 0.0006);
    }
    CHECK_NEAR(rate_t975(100000), 1.95996, 0.0001);

    char h[65];
    rate_sha256_hex("abc", 3, h);
    CHECK(!strcmp(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    rate_sha256_hex("", 0, h);
    CHECK(!strcmp(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    const char *m56 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    rate_sha256_hex(m56, strlen(m56), h);
    CHECK(!strcmp(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
    CHECK_DONE();
}
