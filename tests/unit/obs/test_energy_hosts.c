/* test_energy_hosts.c - the run's energy summed over the hosts workers measured
 * (obs_energy_beat, live.c), persisted to nodes.json and shown by the view, /metrics
 * and the summary:
 *   - two hosts add up; power is the sum of the hosts heard lately;
 *   - a worker restart (new pid, or a counter that went down) adds the new counter,
 *     never a negative difference;
 *   - a second sampler on the same machine is ignored while the first reports; a
 *     silent reporter is replaced, the newcomer's first beat only a baseline;
 *   - the supervisor's own sampling counts only when no worker reported from its
 *     boot_id (the local backend is never counted twice);
 *   - beats without energy fields or host map nodes to hosts but measure nothing;
 *   - allocated nodes on no measured host are charged node_watts. */
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../check.h"
#include "core/fsutil.h"
#include "obs/obs.h"
#include "obs_fixture.h"

#define NOLIB "/nonexistent/libnvidia-ml.so.1"

static void beat(const char *host, const char *node, int rank, long pid, double j, double w,
                 int src, int gpus)
{
    obs_energy_beat(&(obs_host_beat){.host = host, .node = node, .rank = rank, .pid = pid,
                                     .joules = j, .watts = w, .sources = src, .gpus = gpus});
}

static obs_energy totals(int *hosts, int *nodes)
{
    obs_energy e;
    obs__totals(&e, hosts, nodes);
    return e;
}

static void two_hosts_and_restart(void)
{
    obs__power_reset();
    obs__set_host("supervisor-boot-id");
    int hosts, nodes;
    beat("A", "node0", 0, 100, 50, 100, OBS_SRC_RAPL, 0);            /* first report: all of it */
    beat("B", "node1", 4, 200, 30, 300, OBS_SRC_RAPL | OBS_SRC_NVML, 2);
    beat("A", "node0", 0, 100, 80, 110, OBS_SRC_RAPL, 0);            /* +30 */
    beat("A", "node0", 0, 100, 80, 110, OBS_SRC_RAPL, 0);            /* a step beat: same value */
    obs_energy e = totals(&hosts, &nodes);
    CHECK_NEAR(e.joules, 110, 1e-9);
    CHECK_NEAR(e.watts, 410, 1e-9);
    CHECK_INT(e.sources, OBS_SRC_RAPL | OBS_SRC_NVML);
    CHECK_INT(e.gpus, 2);
    CHECK_INT(hosts, 2);
    CHECK_INT(nodes, 2);

    /* a restart on A: the new worker's counter starts again from 0 */
    beat("A", "node0", 0, 101, 5, 90, OBS_SRC_RAPL, 0);               /* new pid: +5 */
    beat("A", "node0", 0, 101, 25, 90, OBS_SRC_RAPL, 0);              /* +20 */
    beat("B", "node1", 4, 200, 10, 300, OBS_SRC_RAPL | OBS_SRC_NVML, 2); /* went down: +10 */
    e = totals(&hosts, &nodes);
    CHECK_NEAR(e.joules, 110 + 5 + 20 + 10, 1e-9);
    CHECK(e.joules >= 110); /* never decreases */

    /* the local backend: another rank on A also samples; A's reporter is alive */
    beat("A", "node2", 2, 300, 1e6, 5000, OBS_SRC_RAPL, 0);
    e = totals(&hosts, &nodes);
    CHECK_NEAR(e.joules, 145, 1e-9);
    CHECK_INT(hosts, 2);
    CHECK_INT(nodes, 3); /* node2's ranks run on the measured A */

    /* beats with no measurement, or no host: membership at most, no energy */
    beat("C", "node3", 6, 400, 999, 999, 0, 0);
    beat("", "node4", 7, 500, 999, 999, OBS_SRC_RAPL, 0);
    beat(NULL, "node4", 7, 500, 999, 999, OBS_SRC_RAPL, 0);
    e = totals(&hosts, &nodes);
    CHECK_NEAR(e.joules, 145, 1e-9);
    CHECK_INT(hosts, 2);
    CHECK_INT(nodes, 3);
}

/* A silent reporter is replaced by another rank on the same machine; the newcomer's
 * first counter is a baseline (it may overlap what the old reporter counted). */
static void takeover(void)
{
    obs__power_reset();
    obs__set_host("supervisor-boot-id");
    double now = (double)time(NULL);
    obs_energy_beat(&(obs_host_beat){.host = "A", .node = "node0", .rank = 0, .pid = 1,
                                     .joules = 40, .sources = OBS_SRC_RAPL, .t = now - 60});
    obs_energy_beat(&(obs_host_beat){.host = "A", .node = "node0", .rank = 1, .pid = 2,
                                     .joules = 500, .sources = OBS_SRC_RAPL, .t = now});
    obs_energy_beat(&(obs_host_beat){.host = "A", .node = "node0", .rank = 1, .pid = 2,
                                     .joules = 510, .watts = 10, .sources = OBS_SRC_RAPL,
                                     .t = now});
    int hosts, nodes;
    obs_energy e = totals(&hosts, &nodes);
    CHECK_NEAR(e.joules, 50, 1e-9);
    CHECK_NEAR(e.watts, 10, 1e-9);
}

/* The supervisor's machine: its own sampling counts until a worker reports from it. */
static void supervisor_host(const char *root)
{
    obs__power_reset();
    obs__set_host("S");
    rapl_zone(root, "intel-rapl:0", "1000000\n", "100000000\n");
    obs__power_sample_at(root, NOLIB, 10);
    rapl_zone(root, "intel-rapl:0", "8000000\n", "100000000\n"); /* +7 J over 1 s */
    obs__power_sample_at(root, NOLIB, 11);
    int hosts, nodes;
    obs_energy e = totals(&hosts, &nodes);
    CHECK_NEAR(e.joules, 7, 1e-9); /* nobody else measured: the supervisor's machine */
    CHECK_INT(hosts, 1);
    CHECK_INT(nodes, 0);
    beat("B", "node1", 1, 20, 100, 50, OBS_SRC_NVML, 1); /* another machine: added */
    e = totals(&hosts, &nodes);
    CHECK_NEAR(e.joules, 107, 1e-9);
    CHECK_NEAR(e.watts, 57, 1e-9);
    CHECK_INT(hosts, 2);
    beat("S", "node0", 0, 10, 60, 40, OBS_SRC_RAPL, 0); /* a worker on the supervisor's machine */
    e = totals(&hosts, &nodes);
    CHECK_NEAR(e.joules, 160, 1e-9); /* its 60 J replace the supervisor's 7 J, not added */
    CHECK_NEAR(e.watts, 90, 1e-9);
    CHECK_INT(hosts, 2);
    CHECK_INT(nodes, 2);
    obs_energy self;
    obs__energy(&self);
    CHECK_NEAR(self.joules, 7, 1e-9); /* still measured, just not counted */
}

/* nodes.json, the view, /metrics and the summary for two measured hosts of a run with
 * three allocated nodes (one spare on no measured host, charged node_watts). */
static void shown(const char *root)
{
    obs__power_reset();
    obs__set_host("S");
    beat("A", "node0", 0, 1, 3.6e6, 500, OBS_SRC_RAPL, 0);           /* 1 kWh */
    beat("B", "node1", 1, 2, 7.2e6, 1500, OBS_SRC_RAPL | OBS_SRC_NVML, 4); /* 2 kWh */
    json_t *nj = saved_registry(root);
    CHECK_NEAR(json_number_value(json_object_get(nj, "energy_j")), 10.8e6, 1e-6);
    CHECK_INT(json_integer_value(json_object_get(nj, "hosts_measured")), 2);
    CHECK_INT(json_integer_value(json_object_get(nj, "nodes_measured")), 2);
    CHECK_INT(json_array_size(json_object_get(nj, "hosts")), 2);
    json_t *h1 = json_array_get(json_object_get(nj, "hosts"), 1);
    CHECK(!strcmp(json_string_value(json_object_get(h1, "host")), "B"));
    CHECK_INT(json_integer_value(json_object_get(h1, "gpus")), 4);
    json_decref(nj);

    /* cluster.json: two active nodes and a spare; the run lasted 3600 s */
    char path[512];
    snprintf(path, sizeof path, "%s/cluster.json", root);
    const char *cl = "{\"nodes\":[{\"name\":\"node0\",\"state\":\"active\"},{\"name\":\"node1\","
                     "\"state\":\"active\"},{\"name\":\"node2\",\"state\":\"spare\"}]}";
    CHECK_INT(fs_write_durable(path, cl, strlen(cl)), GRIT_OK);
    snprintf(path, sizeof path, "%s/events.jsonl", root);
    const char *ev = "{\"ts\":1000,\"event\":\"supervisor_start\",\"nodes\":2,\"spares\":1}\n"
                     "{\"ts\":1000,\"event\":\"launch\"}\n"
                     "{\"ts\":4600,\"event\":\"done\"}\n";
    CHECK_INT(fs_write_durable(path, ev, strlen(ev)), GRIT_OK);
    json_t *v = obs_view(root, &(obs_cfg){.node_watts = 100, .grid_gco2_kwh = 500}, 0);
    json_t *s = json_object_get(v, "summary");
    CHECK_NEAR(json_number_value(json_object_get(s, "allocated_nodes")), 3, 0);
    CHECK_INT(json_integer_value(json_object_get(s, "energy_hosts")), 2);
    /* 3 kWh measured + the spare: 100 W x 1 h = 0.1 kWh */
    CHECK_NEAR(json_number_value(json_object_get(s, "energy_kwh")), 3.1, 1e-9);
    CHECK_NEAR(json_number_value(json_object_get(s, "power_w")), 2100, 1e-9);
    CHECK(!strcmp(json_string_value(json_object_get(s, "energy_source")),
                  "RAPL + NVML (4 GPUs) + configured"));
    CHECK_INT(json_array_size(json_object_get(v, "energy_hosts")), 2);
    char *prom = obs_prometheus(v);
    CHECK_STR_HAS(prom, "grit_energy_hosts 2\n");
    CHECK_STR_HAS(prom, "grit_node_energy_joules{host=\"A\",node=\"node0\"} 3600000\n");
    CHECK_STR_HAS(prom, "grit_node_energy_joules{host=\"B\",node=\"node1\"} 7200000\n");
    free(prom);
    char *out = NULL;
    size_t outn = 0;
    FILE *f = open_memstream(&out, &outn);
    obs_print_summary(f, v);
    fclose(f);
    CHECK_STR_HAS(out, "3.1000 kWh (RAPL + NVML (4 GPUs) + configured on 2 hosts measured, "
                       "1 node configured, 2100 W)");
    free(out);
    json_decref(v);

    /* without node_watts the spare is not guessed at: measured energy only */
    v = obs_view(root, &(obs_cfg){0}, 0);
    s = json_object_get(v, "summary");
    CHECK_NEAR(json_number_value(json_object_get(s, "energy_kwh")), 3.0, 1e-9);
    CHECK(!strcmp(json_string_value(json_object_get(s, "energy_source")), "RAPL + NVML (4 GPUs)"));
    json_decref(v);
}

int main(void)
{
    char root[] = "/tmp/grit-ehosts-XXXXXX";
    CHECK(mkdtemp(root) != NULL);
    two_hosts_and_restart();
    takeover();
    supervisor_host(root);
    shown(root);
    obs__power_reset();
    remove_tree(root);
    CHECK_DONE();
}
