/*
 * check.h - tiny assertion helpers for unit tests: each failed check prints
 * the location and both sides, counts the failure, and the test's main
 * returns CHECK_RESULT() (non-zero if anything failed).
 */
#ifndef GRIT_TESTS_CHECK_H
#define GRIT_TESTS_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_failures;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            check_failures++;                                                       \
        }                                                                           \
    } while (0)

#define CHECK_EQ_LL(a, b)                                                                             \
    do {                                                                                              \
        long long a_ = (long long)(a), b_ = (long long)(b);                                           \
        if (a_ != b_) {                                                                               \
            fprintf(stderr, "%s:%d: %s == %s failed: %lld vs %lld\n", __FILE__, __LINE__, #a, #b, a_, b_); \
            check_failures++;                                                                         \
        }                                                                                             \
    } while (0)

/* Checks that the thread's error context mentions `needle`. */
#define CHECK_ERRMSG(needle)                                                                        \
    do {                                                                                            \
        if (!strstr(grit_errmsg(), (needle))) {                                                     \
            fprintf(stderr, "%s:%d: error message lacks '%s': got '%s'\n", __FILE__, __LINE__, (needle), \
                    grit_errmsg());                                                                 \
            check_failures++;                                                                       \
        }                                                                                           \
    } while (0)

#define CHECK_RESULT()                                                      \
    (check_failures ? (fprintf(stderr, "%d check(s) failed\n", check_failures), 1) \
                    : (printf("all checks passed\n"), 0))

#endif
