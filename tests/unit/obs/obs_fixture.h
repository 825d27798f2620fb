/* rapl_zone.h - a fake powercap zone for the power tests (test_power, test_power_nvml). */
#ifndef GRIT_TEST_RAPL_ZONE_H
#define GRIT_TEST_RAPL_ZONE_H
#include <string.h>
#include <sys/stat.h>

#include "../check.h"
#include "core/fsutil.h"

/* ROOT/NAME/energy_uj = uj and max_energy_range_uj = range, as /sys/class/powercap has them */
static inline void rapl_zone(const char *root, const char *name, const char *uj, const char *range)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, name);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%s/energy_uj", root, name);
    CHECK_INT(fs_write_durable(path, uj, strlen(uj)), GRIT_OK);
    snprintf(path, sizeof path, "%s/%s/max_energy_range_uj", root, name);
    CHECK_INT(fs_write_durable(path, range, strlen(range)), GRIT_OK);
}
#endif
