/* cli_num.c - number arguments of every subcommand (see cli.h): the whole string must be
 * a decimal number within the option's range, else one error line names the subcommand,
 * the option, the range and what was given. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"

static int bad(const char *cmd, const char *flag, const char *kind, const char *range,
               const char *s)
{
    fprintf(stderr, "grit %s: %s: expected %s in %s, got '%s'\n", cmd, flag, kind, range,
            s ? s : "(nothing)");
    return -1;
}

int cli_long(const char *cmd, const char *flag, const char *s, long lo, long hi, long *out)
{
    char *end, range[64];
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || errno || end == s || *end || v < lo || v > hi) {
        snprintf(range, sizeof range, "[%ld, %ld]", lo, hi);
        return bad(cmd, flag, "an integer", range, s);
    }
    *out = v;
    return 0;
}

int cli_int(const char *cmd, const char *flag, const char *s, int lo, int hi, int *out)
{
    long v;
    if (cli_long(cmd, flag, s, lo, hi, &v))
        return -1;
    *out = (int)v;
    return 0;
}

int cli_u64(const char *cmd, const char *flag, const char *s, uint64_t lo, uint64_t hi,
            uint64_t *out)
{
    char *end, range[64];
    errno = 0;
    unsigned long long v = s ? strtoull(s, &end, 10) : 0;
    /* strtoull accepts "-1" as ULLONG_MAX: a sign is refused outright. */
    if (!s || errno || end == s || *end || s[0] == '-' || v < lo || v > hi) {
        snprintf(range, sizeof range, "[%llu, %llu]", (unsigned long long)lo,
                 (unsigned long long)hi);
        return bad(cmd, flag, "an integer", range, s);
    }
    *out = (uint64_t)v;
    return 0;
}

int cli_num(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end, range[64];
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || errno || end == s || *end || !isfinite(v) || !(v >= lo && v <= hi)) {
        snprintf(range, sizeof range, "[%g, %g]", lo, hi);
        return bad(cmd, flag, "a number", range, s);
    }
    *out = v;
    return 0;
}
