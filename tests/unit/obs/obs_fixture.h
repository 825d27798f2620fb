/* obs_fixture.h - what the obs power tests share: a fake powercap zone, the registry as
 * saved to nodes.json, and removal of the test's temporary folder. */
#ifndef GRIT_TEST_OBS_FIXTURE_H
#define GRIT_TEST_OBS_FIXTURE_H
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../check.h"
#include "core/fsutil.h"
#include "obs/obs.h"

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

/* obs_registry_save(root), then ROOT/nodes.json parsed (the caller decrefs) */
static inline json_t *saved_registry(const char *root)
{
    char path[512], *text = NULL;
    CHECK_INT(obs_registry_save(root), GRIT_OK);
    snprintf(path, sizeof path, "%s/nodes.json", root);
    CHECK_INT(fs_read_all(path, &text, NULL), GRIT_OK);
    json_t *j = json_loads(text ? text : "", 0, NULL);
    free(text);
    CHECK(j != NULL);
    return j;
}

/* rm -rf root (a mkdtemp folder of the test) */
static inline void remove_tree(const char *root)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    CHECK_INT(system(cmd), 0);
}
#endif
