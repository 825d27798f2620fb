/* test_ompenv.c - grit's OpenMP wait policy (core/ompenv.h): set only when the user set
 * neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT; applying twice does nothing the second time
 * (main re-executes once, not forever); revert restores the unset state; describe says
 * whose policy is in force. */
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "core/ompenv.h"

static int has(const char *s, const char *sub) { return s && strstr(s, sub) != NULL; }

int main(void)
{
    char buf[256];
    CHECK(ompenv_wanted(NULL, NULL) == 1);
    CHECK(ompenv_wanted("", "") == 1);
    CHECK(ompenv_wanted("active", NULL) == 0);
    CHECK(ompenv_wanted("PASSIVE", "") == 0);
    CHECK(ompenv_wanted(NULL, "0") == 0);
    CHECK(ompenv_wanted(NULL, "300000") == 0);

    unsetenv("OMP_WAIT_POLICY");
    unsetenv("GOMP_SPINCOUNT");
    unsetenv("GRIT_OMP_POLICY");
    CHECK(has(ompenv_describe(buf, sizeof buf), "libgomp default"));
    CHECK(ompenv_apply() == 1);
    CHECK(getenv("GOMP_SPINCOUNT") && !strcmp(getenv("GOMP_SPINCOUNT"), OMPENV_SPINCOUNT));
    CHECK(getenv("GRIT_OMP_POLICY") && !strcmp(getenv("GRIT_OMP_POLICY"), "1"));
    CHECK(getenv("OMP_WAIT_POLICY") == NULL);
    CHECK(has(ompenv_describe(buf, sizeof buf), "GOMP_SPINCOUNT=" OMPENV_SPINCOUNT " (grit"));
    CHECK(ompenv_apply() == 0); /* the re-executed program keeps it: no second exec */
    ompenv_revert();
    CHECK(getenv("GOMP_SPINCOUNT") == NULL && getenv("GRIT_OMP_POLICY") == NULL);

    setenv("OMP_WAIT_POLICY", "active", 1); /* the user's choice stands */
    CHECK(ompenv_apply() == 0);
    CHECK(getenv("GOMP_SPINCOUNT") == NULL);
    CHECK(has(ompenv_describe(buf, sizeof buf), "OMP_WAIT_POLICY=active (from the environment)"));
    unsetenv("OMP_WAIT_POLICY");

    setenv("GOMP_SPINCOUNT", "300000", 1);
    CHECK(ompenv_apply() == 0);
    CHECK(!strcmp(getenv("GOMP_SPINCOUNT"), "300000"));
    CHECK(has(ompenv_describe(buf, sizeof buf), "GOMP_SPINCOUNT=300000 (from the environment)"));
    /* a marker inherited beside a value the user changed is not grit's policy */
    setenv("GRIT_OMP_POLICY", "1", 1);
    CHECK(has(ompenv_describe(buf, sizeof buf), "(from the environment)"));
    return check_failures != 0;
}
