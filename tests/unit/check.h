/*
 * check.h - minimal assertions for grit's unit tests. Each test is its own
 * executable (CTest runs it in its own process with a timeout); a failed
 * check prints both sides and the location, and main returns non-zero.
 */
#ifndef GRIT_TEST_CHECK_H
#define GRIT_TEST_CHECK_H

#include <math.h>
#include <stdio.h>
#include <string.h>

static int check_failures;

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);     \
            check_failures++;                                                            \
        }                                                                                \
    } while (0)

#define CHECK_INT(a, b)                                                                  \
    do {                                                                                 \
        long long a_ = (long long)(a), b_ = (long long)(b);                              \
        if (a_ != b_) {                                                                  \
            fprintf(stderr, "%s:%d: %s == %s failed: %lld vs %lld\n", __FILE__, __LINE__, \
                    #a, #b, a_, b_);                                                     \
            check_failures++;                                                            \
        }                                                                                \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                            \
    do {                                                                                 \
        double a_ = (double)(a), b_ = (double)(b);                                       \
        if (!(fabs(a_ - b_) <= (tol))) {                                                 \
            fprintf(stderr, "%s:%d: |%s - %s| <= %g failed: %.9g vs %.9g\n", __FILE__,   \
                    __LINE__, #a, #b, (double)(tol), a_, b_);                            \
            check_failures++;                                                            \
        }                                                                                \
    } while (0)

#define CHECK_STR_HAS(hay, needle)                                                       \
    do {                                                                                 \
        const char *h_ = (hay), *n_ = (needle);                                          \
        if (!h_ || !strstr(h_, n_)) {                                                    \
            fprintf(stderr, "%s:%d: expected \"%s\" in \"%s\"\n", __FILE__, __LINE__, n_, \
                    h_ ? h_ : "(null)");                                                 \
            check_failures++;                                                            \
        }                                                                                \
    } while (0)

#define CHECK_DONE()                                                                     \
    do {                                                                                 \
        if (check_failures)                                                              \
            fprintf(stderr, "%d check(s) failed\n", check_failures);                     \
        else                                                                             \
            printf("all checks passed\n");                                               \
        return check_failures ? 1 : 0;                                                   \
    } while (0)

/* Aliases used by the data tests. */
#define CHECK_EQ_LL(a, b) CHECK_INT(a, b)

/* Checks that the thread's error context mentions `needle`. */
#define CHECK_ERRMSG(needle) CHECK_STR_HAS(grit_errmsg(), (needle))

/* The index of the first largest of v[0..n): the tests' own greedy choice, independent of
 * the sampling code they check. */
static inline int check_argmax(const float *v, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b])
            b = i;
    return b;
}

/* Expression form of CHECK_DONE: `return CHECK_RESULT();` */
#define CHECK_RESULT()                                                                   \
    (check_failures ? (fprintf(stderr, "%d check(s) failed\n", check_failures), 1)       \
                    : (printf("all checks passed\n"), 0))

#endif
