/* test_view.c - the run view and its Prometheus text from a hand-written run directory:
 * goodput, cost, energy, CO2 and tokens per dollar by the documented formulas, the
 * incident's phases, node states, a torn last line skipped, label escaping, and clear
 * errors for a directory that is not a run and for a bad obs.json. */
#include <stdlib.h>
#include <unistd.h>

#include "../check.h"
#include "core/fsutil.h"
#include "obs/obs.h"

static void put(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    CHECK_INT(fs_write_durable(path, text, strlen(text)), GRIT_OK);
}

static double num(const json_t *o, const char *k)
{
    return json_number_value(json_object_get(o, k));
}

int main(void)
{
    char dir[] = "/tmp/grit-view-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    CHECK(obs_view(dir, &(obs_cfg){0}, 10) == NULL);
    CHECK_ERRMSG("no metrics.jsonl or events.jsonl");

    put(dir, "metrics.jsonl",
        "{\"step\":1,\"loss\":3.5,\"grad_norm\":1.5,\"lr\":0.001,\"tokens\":1000,\"tokens_per_s\":100,\"step_time_s\":10}\n"
        "{\"step\":2,\"loss\":3.25,\"grad_norm\":1.25,\"lr\":0.001,\"tokens\":2000,\"tokens_per_s\":100,\"step_time_s\":10,\"ckpt_stall_s\":0.5}\n"
        "{\"step\":3,\"loss\":2.5,\"grad_norm\":1.0,\"lr\":0.0005,\"tokens\":3000,\"tokens_per_s\":200,\"step_time_s\":20}\n"
        "{\"step\":4,\"loss\":9");
    put(dir, "events.jsonl",
        "{\"ts\":90,\"event\":\"supervisor_start\",\"nodes\":2,\"spares\":1}\n"
        "{\"ts\":100,\"event\":\"launch\",\"attempt\":0}\n"
        "{\"ts\":110,\"event\":\"ckpt_saved\",\"step\":2,\"bytes\":4096,\"seconds\":0.25,\"stall_s\":0.5,\"gb_per_s\":1}\n"
        "{\"ts\":120,\"event\":\"detected\",\"kind\":\"exit\",\"node\":\"node1\",\"detail\":\"rank 1 died\",\"step\":3,\"latency_s\":0.5}\n"
        "{\"ts\":121,\"event\":\"diagnosis\",\"node\":\"node1\",\"verdict\":\"unhealthy\",\"detail\":\"unreachable\"}\n"
        "{\"ts\":122,\"event\":\"cordon\",\"node\":\"node1\",\"reason\":\"unreachable\",\"replacement\":\"node2\"}\n"
        "{\"ts\":123,\"event\":\"launch\",\"attempt\":1}\n"
        "{\"ts\":124,\"event\":\"resume\",\"step\":2,\"seconds\":0.125}\n"
        "{\"ts\":125,\"event\":\"recovered\",\"kind\":\"exit\",\"resumed_at_step\":2,\"recovery_s\":5.5,\"steps_lost\":1}\n"
        "{\"ts\":200,\"event\":\"done\"}\n");
    put(dir, "cluster.json",
        "{\"version\":1,\"nodes\":[{\"name\":\"node0\",\"state\":\"active\",\"position\":0},"
        "{\"name\":\"node1\",\"state\":\"cordoned\",\"position\":-1,\"reason\":\"unreachable\"},"
        "{\"name\":\"no\\\"de2\",\"state\":\"active\",\"position\":1}]}");
    put(dir, "nodes.json", "{\"version\":1,\"nodes\":[{\"name\":\"node0\",\"step\":3,\"step_time_s\":2,"
                           "\"comm_time_s\":0.5}],\"energy_measured\":false}");

    obs_cfg c = {.price_node_hour = 3.6, .grid_gco2_kwh = 500, .node_watts = 1000};
    json_t *v = obs_view(dir, &c, 2);
    CHECK(v != NULL);
    json_t *s = json_object_get(v, "summary");
    CHECK_NEAR(num(s, "wall_s"), 100, 1e-9);       /* first launch to done */
    CHECK_NEAR(num(s, "productive_s"), 40, 1e-9);  /* the torn line is skipped */
    CHECK_NEAR(num(s, "goodput"), 0.4, 1e-12);
    CHECK_NEAR(num(s, "lost_s"), 60, 1e-9);
    CHECK_NEAR(num(s, "restarts"), 1, 0);
    CHECK_NEAR(num(s, "incidents"), 1, 0);
    CHECK_NEAR(num(s, "allocated_nodes"), 3, 0);
    CHECK_NEAR(num(s, "cost"), 3 * 100 / 3600.0 * 3.6, 1e-12);
    CHECK_NEAR(num(s, "failure_cost"), 60 * 3 * 3.6 / 3600, 1e-12);
    CHECK_NEAR(num(s, "energy_kwh"), 1000.0 * 3 * 100 / 3.6e6, 1e-12);
    CHECK_NEAR(num(s, "co2_kg"), 1000.0 * 3 * 100 / 3.6e6 * 0.5, 1e-12);
    CHECK_NEAR(num(s, "tokens_per_dollar"), 3000 / (3 * 100 / 3600.0 * 3.6), 1e-6);
    CHECK_NEAR(num(s, "loss"), 2.5, 0);
    CHECK_NEAR(num(s, "ckpt_stall_s"), 0.5, 0);
    /* series thinned to 2 points: the first and the last */
    json_t *steps = json_object_get(json_object_get(v, "series"), "step");
    CHECK_INT(json_array_size(steps), 2);
    CHECK_NEAR(json_number_value(json_array_get(steps, 1)), 3, 0);
    json_t *in = json_array_get(json_object_get(v, "incidents"), 0);
    CHECK_NEAR(num(in, "fault_ts"), 119.5, 1e-9);
    CHECK_INT(json_array_size(json_object_get(in, "diagnosis")), 1);
    CHECK_INT(json_array_size(json_object_get(in, "cordoned")), 1);
    CHECK_NEAR(num(json_object_get(in, "recovered"), "steps_lost"), 1, 0);
    CHECK_INT(json_array_size(json_object_get(v, "restarts")), 1);

    char *text = obs_prometheus(v);
    CHECK_STR_HAS(text, "# TYPE grit_loss gauge\ngrit_loss 2.5\n");
    CHECK_STR_HAS(text, "grit_node_state{node=\"node1\",state=\"cordoned\"} 1\n");
    CHECK_STR_HAS(text, "grit_node_state{node=\"node0\",state=\"cordoned\"} 0\n");
    CHECK_STR_HAS(text, "grit_node_state{node=\"no\\\"de2\",state=\"active\"} 1\n");
    CHECK_STR_HAS(text, "grit_node_step_seconds{node=\"node0\"} 2\n");
    CHECK_STR_HAS(text, "grit_restarts_total 1\n");
    CHECK_STR_HAS(text, "grit_goodput_ratio 0.4\n");
    CHECK_STR_HAS(text, "grit_checkpoint_save_seconds 0.25\n");
    CHECK_STR_HAS(text, "grit_checkpoint_load_seconds 0.125\n");
    CHECK_STR_HAS(text, "grit_run_finished 1\n");
    CHECK(!strstr(text, "grit_mfu")); /* no peak given: left out, not 0 */
    free(text);
    json_decref(v);

    /* no price: cost left out of the metrics */
    v = obs_view(dir, &(obs_cfg){0}, 0);
    text = obs_prometheus(v);
    CHECK(!strstr(text, "grit_cost"));
    free(text);
    json_decref(v);

    /* the metrics cache: an append is read, the torn line completed; a rewrite (new
     * inode) and an in-place truncate-and-rewrite (same inode) are both noticed */
    char mpath[512];
    snprintf(mpath, sizeof mpath, "%s/metrics.jsonl", dir);
    FILE *f = fopen(mpath, "a");
    fputs("9,\"step_time_s\":5}\n", f); /* completes the torn step-4 line */
    fclose(f);
    v = obs_view(dir, &c, 0);
    CHECK_NEAR(num(json_object_get(v, "summary"), "loss"), 99, 0); /* "9" + "9," */
    CHECK_NEAR(num(json_object_get(v, "summary"), "tokens"), 0, 0); /* that line has none */
    CHECK_NEAR(num(json_object_get(v, "summary"), "productive_s"), 45, 1e-9);
    json_decref(v);
    put(dir, "metrics.jsonl", "{\"step\":1,\"loss\":7.5,\"step_time_s\":1}\n");
    v = obs_view(dir, &c, 0);
    CHECK_NEAR(num(json_object_get(v, "summary"), "loss"), 7.5, 0);
    CHECK_NEAR(num(json_object_get(v, "summary"), "productive_s"), 1, 1e-9);
    json_decref(v);
    f = fopen(mpath, "r+");
    CHECK(ftruncate(fileno(f), 0) == 0);
    fputs("{\"step\":1,\"loss\":6.5,\"step_time_s\":2}\n{\"step\":2,\"loss\":6.25,\"step_time_s\":2}\n", f);
    fclose(f);
    v = obs_view(dir, &c, 0);
    CHECK_NEAR(num(json_object_get(v, "summary"), "loss"), 6.25, 0);
    CHECK_NEAR(num(json_object_get(v, "summary"), "productive_s"), 4, 1e-9);
    CHECK_INT(json_array_size(json_object_get(json_object_get(v, "series"), "step")), 2);
    json_decref(v);

    /* absurd numbers do not break the view (JSON has no infinity) */
    put(dir, "metrics.jsonl", "{\"step\":1,\"loss\":1,\"step_time_s\":1e308}\n"
                              "{\"step\":2,\"loss\":1e308,\"step_time_s\":1e308}\n");
    v = obs_view(dir, &c, 0);
    CHECK(v != NULL);
    CHECK_NEAR(num(json_object_get(v, "summary"), "productive_s"), 0, 0);
    text = obs_prometheus(v);
    CHECK_STR_HAS(text, "grit_loss 1e+308\n");
    free(text);
    json_decref(v);

    /* obs.json: round trip, then a bad field named */
    CHECK_INT(obs_cfg_save(dir, &c), GRIT_OK);
    obs_cfg back = {0};
    CHECK_INT(obs_cfg_load(dir, &back), GRIT_OK);
    CHECK_NEAR(back.price_node_hour, 3.6, 0);
    CHECK_NEAR(back.node_watts, 1000, 0);
    put(dir, "obs.json", "{\"price_node_hour\": -1}");
    CHECK_INT(obs_cfg_load(dir, &back), GRIT_ECONFIG);
    CHECK_ERRMSG("price_node_hour");
    put(dir, "obs.json", "{\"price\": 1}");
    CHECK_INT(obs_cfg_load(dir, &back), GRIT_ECONFIG);
    CHECK_ERRMSG("price");

    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_INT(system(cmd), 0);
    CHECK_DONE();
}
