/* test_power.c - RAPL sampling from a powercap folder laid out like /sys/class/powercap:
 * top-level zones summed, subzones ignored, a counter wrap handled with
 * max_energy_range_uj, unreadable counters leave the energy unmeasured; and the node
 * registry persisted to nodes.json and read back by the run view. NVML is pointed at a
 * library that does not exist, so a GPU machine's driver stays out of it (GPU energy:
 * test_power_nvml.c). */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../check.h"
#include "core/fsutil.h"
#include "obs/obs.h"
#include "obs_fixture.h"

#define NOLIB "/nonexistent/libnvidia-ml.so.1"

int main(void)
{
    char root[] = "/tmp/grit-rapl-XXXXXX";
    CHECK(mkdtemp(root) != NULL);
    obs_energy e;

    obs__power_sample_at("/nonexistent-powercap", NOLIB, 1); /* unreadable: nothing measured */
    obs__power_sample_at("/nonexistent-powercap", NOLIB, 2);
    obs__energy(&e);
    CHECK_INT(e.sources, 0);

    rapl_zone(root, "intel-rapl:0", "1000000\n", "10000000\n");
    rapl_zone(root, "intel-rapl:1", "5000000\n", "10000000\n");
    rapl_zone(root, "intel-rapl:0:0", "900000\n", "10000000\n"); /* a subzone: part of zone 0 */
    obs__power_sample_at(root, NOLIB, 10);
    obs__energy(&e);
    CHECK_INT(e.sources, 0); /* one sample is no interval yet */

    rapl_zone(root, "intel-rapl:0", "3000000\n", "10000000\n");  /* +2 J */
    rapl_zone(root, "intel-rapl:1", "1000000\n", "10000000\n");  /* wrapped: +6 J */
    rapl_zone(root, "intel-rapl:0:0", "9900000\n", "10000000\n"); /* ignored */
    obs__power_sample_at(root, NOLIB, 12);
    obs__energy(&e);
    CHECK_INT(e.sources, OBS_SRC_RAPL);
    CHECK_INT(e.gpus, 0);
    CHECK_NEAR(e.joules, 8.0, 1e-9);
    CHECK_NEAR(e.watts, 4.0, 1e-9);

    /* the registry: the slowest rank of a node for a step, persisted and shown */
    obs_beat("node0", 0, 5, 0.5, 0.1);
    obs_beat("node0", 1, 5, 0.75, 0.2);
    obs_beat("node1", 2, 5, 0.25, 0.05);
    obs_beat("node1", 2, 4, 9.0, 9.0); /* an older step never overwrites */
    json_t *nj = saved_registry(root);
    json_t *n0 = json_array_get(json_object_get(nj, "nodes"), 0);
    json_t *n1 = json_array_get(json_object_get(nj, "nodes"), 1);
    CHECK_NEAR(json_number_value(json_object_get(n0, "step_time_s")), 0.75, 0);
    CHECK_NEAR(json_number_value(json_object_get(n0, "comm_time_s")), 0.2, 0);
    CHECK_NEAR(json_number_value(json_object_get(n1, "step_time_s")), 0.25, 0);
    CHECK(json_is_true(json_object_get(nj, "energy_measured")));
    CHECK_NEAR(json_number_value(json_object_get(nj, "energy_j")), 8.0, 1e-9);
    json_decref(nj);

    /* the view takes the measured energy over the configured power */
    char path[512];
    snprintf(path, sizeof path, "%s/events.jsonl", root);
    const char *ev = "{\"ts\":10,\"event\":\"launch\"}\n{\"ts\":20,\"event\":\"done\"}\n";
    CHECK_INT(fs_write_durable(path, ev, strlen(ev)), GRIT_OK);
    json_t *v = obs_view(root, &(obs_cfg){.node_watts = 1000}, 0);
    json_t *s = json_object_get(v, "summary");
    CHECK_NEAR(json_number_value(json_object_get(s, "energy_kwh")), 8.0 / 3.6e6, 1e-15);
    CHECK(!strcmp(json_string_value(json_object_get(s, "energy_source")), "RAPL"));
    json_decref(v);

    remove_tree(root);
    CHECK_DONE();
}
