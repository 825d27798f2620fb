/* test_fault.c - the fault registry (core/fault.h): every point names its variable,
 * reader and effect; fault_spec reads the variable ("" when unset); a rank-scoped
 * checkpoint fault applies on its rank only, and everywhere while the rank is unknown. */
#include <stdlib.h>

#include "../check.h"
#include "core/fault.h"

int main(void)
{
    for (int i = 0; i < FAULT_COUNT; i++) {
        CHECK(fault_points[i].env && !strncmp(fault_points[i].env, "GRIT_", 5));
        CHECK(fault_points[i].reader && fault_points[i].reader[0]);
        CHECK(fault_points[i].effect && fault_points[i].effect[0]);
        for (int k = 0; k < i; k++)
            CHECK(strcmp(fault_points[i].env, fault_points[k].env) != 0);
    }
    unsetenv("GRIT_FAULTS");
    CHECK(!strcmp(fault_spec(FAULT_TRAIN), ""));
    setenv("GRIT_FAULTS", "kill:step=3", 1);
    CHECK(!strcmp(fault_spec(FAULT_TRAIN), "kill:step=3"));
    CHECK(!strcmp(fault_spec(FAULT_COUNT), ""));

    setenv("GRIT_CKPT_FAULT", "crash:manifest", 1);
    setenv("GRIT_CKPT_FAULT_RANK", "1", 1);
    CHECK(!strcmp(fault_spec(FAULT_CKPT), "crash:manifest")); /* rank unknown: applies */
    fault_set_rank(0);
    CHECK(!strcmp(fault_spec(FAULT_CKPT), ""));
    fault_set_rank(1);
    CHECK(!strcmp(fault_spec(FAULT_CKPT), "crash:manifest"));
    unsetenv("GRIT_CKPT_FAULT_RANK");
    fault_set_rank(0);
    CHECK(!strcmp(fault_spec(FAULT_CKPT), "crash:manifest")); /* no scope: every rank */
    return check_failures != 0;
}
