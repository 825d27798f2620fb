/*
 * ompenv.c - grit's OpenMP wait policy (see ompenv.h): decide, set, undo, describe.
 * Pure environment work: the re-execution that makes libgomp read it is main's.
 */
#include "core/ompenv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int set(const char *v) { return v && *v; }

int ompenv_wanted(const char *wait_policy, const char *spincount)
{
    return !set(wait_policy) && !set(spincount);
}

int ompenv_apply(void)
{
    if (!ompenv_wanted(getenv("OMP_WAIT_POLICY"), getenv("GOMP_SPINCOUNT")))
        return 0;
    if (setenv("GOMP_SPINCOUNT", OMPENV_SPINCOUNT, 1) != 0)
        return -1;
    if (setenv("GRIT_OMP_POLICY", "1", 1) != 0) {
        unsetenv("GOMP_SPINCOUNT");
        return -1;
    }
    return 1;
}

void ompenv_revert(void)
{
    unsetenv("GOMP_SPINCOUNT");
    unsetenv("GRIT_OMP_POLICY");
}

const char *ompenv_describe(char *buf, size_t cap)
{
    const char *wp = getenv("OMP_WAIT_POLICY"), *sc = getenv("GOMP_SPINCOUNT");
    const char *mark = getenv("GRIT_OMP_POLICY");
    if (!set(wp) && set(sc) && mark && !strcmp(mark, "1") && !strcmp(sc, OMPENV_SPINCOUNT))
        snprintf(buf, cap, "GOMP_SPINCOUNT=%s (grit: short spin, then sleep)", sc);
    else if (set(wp) || set(sc))
        snprintf(buf, cap, "%s%s%s%s%s (from the environment)", set(wp) ? "OMP_WAIT_POLICY=" : "",
                 set(wp) ? wp : "", set(wp) && set(sc) ? " " : "",
                 set(sc) ? "GOMP_SPINCOUNT=" : "", set(sc) ? sc : "");
    else
        snprintf(buf, cap, "libgomp default (spin 300000, then sleep)");
    return buf;
}
