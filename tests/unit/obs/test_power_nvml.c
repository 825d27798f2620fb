/* test_power_nvml.c - GPU energy through NVML, against the stand-in libnvidia-ml
 * (tests/fake/fake_nvml.c, loaded by path; GPUs, counters and power staged through its
 * environment) at explicit sample times:
 *   - the energy counter: the difference between samples, summed over GPUs;
 *   - a counter that goes down (driver reload) counts the new value, never negative;
 *   - no energy counter (pre-Volta): the power draw integrated over the interval;
 *   - RAPL + NVML summed, named "RAPL + NVML (2 GPUs)" in nodes.json, the run view,
 *     /metrics and the end-of-run summary;
 *   - no library, no GPU, or a GPU with neither counter: RAPL only, nothing printed;
 *   - the view reads a nodes.json from before NVML (RAPL) and one with absurd fields. */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../check.h"
#include "core/fsutil.h"
#include "obs/obs.h"
#include "obs_fixture.h"

#define NOLIB "/nonexistent/libnvidia-ml.so.1"
#define NORAPL "/nonexistent-powercap"

/* One sample at time t with the fake's counters at mj (NULL: unset). */
static obs_energy sample(const char *rapl, const char *lib, double t, const char *mj)
{
    if (mj)
        setenv("FAKE_NVML_ENERGY_MJ", mj, 1);
    else
        unsetenv("FAKE_NVML_ENERGY_MJ");
    obs__power_sample_at(rapl, lib, t);
    obs_energy e;
    obs__energy(&e);
    return e;
}

static void energy_counter(void)
{
    obs__power_reset();
    setenv("FAKE_NVML_GPUS", "2", 1);
    unsetenv("FAKE_NVML_POWER_MW");
    unsetenv("FAKE_NVML_NO_ENERGY");
    obs_energy e = sample(NORAPL, GRIT_FAKE_NVML, 100, "1000,5000");
    CHECK_INT(e.sources, 0); /* a baseline, no interval yet */
    e = sample(NORAPL, GRIT_FAKE_NVML, 102, "3000,9000"); /* +2 J, +4 J in 2 s */
    CHECK_INT(e.sources, OBS_SRC_NVML);
    CHECK_INT(e.gpus, 2);
    CHECK_NEAR(e.joules, 6.0, 1e-9);
    CHECK_NEAR(e.watts, 3.0, 1e-9);
    /* GPU 0's driver reloaded: its counter restarted from 0 within the interval */
    e = sample(NORAPL, GRIT_FAKE_NVML, 103, "500,9500");
    CHECK_NEAR(e.joules, 7.0, 1e-9);
    CHECK_NEAR(e.watts, 1.0, 1e-9);
    e = sample(NORAPL, GRIT_FAKE_NVML, 104, "1500,9500"); /* counted from the new value */
    CHECK_NEAR(e.joules, 8.0, 1e-9);
    CHECK_NEAR(e.watts, 1.0, 1e-9);
}

static void power_fallback(void)
{
    obs__power_reset();
    setenv("FAKE_NVML_GPUS", "2", 1);
    setenv("FAKE_NVML_NO_ENERGY", "1", 1);
    setenv("FAKE_NVML_POWER_MW", "150000,250000", 1);
    obs_energy e = sample(NORAPL, GRIT_FAKE_NVML, 10, "1,1"); /* counter present but refused */
    CHECK_INT(e.sources, 0);
    e = sample(NORAPL, GRIT_FAKE_NVML, 12, "1,1"); /* 400 W for 2 s */
    CHECK_INT(e.sources, OBS_SRC_NVML);
    CHECK_INT(e.gpus, 2);
    CHECK_NEAR(e.joules, 800.0, 1e-6);
    CHECK_NEAR(e.watts, 400.0, 1e-9);
    setenv("FAKE_NVML_POWER_MW", "50000", 1); /* both GPUs drop to 50 W: the mean of the ends */
    e = sample(NORAPL, GRIT_FAKE_NVML, 14, "1,1");
    CHECK_NEAR(e.watts, 250.0, 1e-9); /* (150 + 50) / 2 + (250 + 50) / 2 */
    CHECK_NEAR(e.joules, 1300.0, 1e-6);
    unsetenv("FAKE_NVML_NO_ENERGY");
    unsetenv("FAKE_NVML_POWER_MW");
}

/* RAPL and two GPUs summed; the sources named everywhere the energy is shown. */
static void rapl_plus_nvml(const char *root)
{
    obs__power_reset();
    setenv("FAKE_NVML_GPUS", "2", 1);
    rapl_zone(root, "intel-rapl:0", "1000000\n", "100000000\n");
    sample(root, GRIT_FAKE_NVML, 50, "0,0");
    rapl_zone(root, "intel-rapl:0", "21000000\n", "100000000\n"); /* +20 J CPU */
    obs_energy e = sample(root, GRIT_FAKE_NVML, 51, "100000,200000"); /* +300 J GPUs */
    CHECK_INT(e.sources, OBS_SRC_RAPL | OBS_SRC_NVML);
    CHECK_INT(e.gpus, 2);
    CHECK_NEAR(e.joules, 320.0, 1e-9);
    CHECK_NEAR(e.watts, 320.0, 1e-9);
    char name[64];
    CHECK(!strcmp(obs_source_name(e.sources, e.gpus, name, sizeof name), "RAPL + NVML (2 GPUs)"));
    CHECK(!strcmp(obs_source_name(OBS_SRC_NVML, 1, name, sizeof name), "NVML (1 GPU)"));

    json_t *nj = saved_registry(root);
    json_t *src = json_object_get(nj, "energy_sources");
    CHECK_INT(json_array_size(src), 2);
    CHECK(!strcmp(json_string_value(json_array_get(src, 1)), "NVML"));
    CHECK_INT(json_integer_value(json_object_get(nj, "gpus")), 2);
    json_decref(nj);

    char path[512];
    snprintf(path, sizeof path, "%s/events.jsonl", root);
    const char *ev = "{\"ts\":10,\"event\":\"launch\"}\n{\"ts\":20,\"event\":\"done\"}\n";
    CHECK_INT(fs_write_durable(path, ev, strlen(ev)), GRIT_OK);
    json_t *v = obs_view(root, &(obs_cfg){.node_watts = 1000, .grid_gco2_kwh = 400}, 0);
    json_t *s = json_object_get(v, "summary");
    CHECK(!strcmp(json_string_value(json_object_get(s, "energy_source")), "RAPL + NVML (2 GPUs)"));
    CHECK_NEAR(json_number_value(json_object_get(s, "energy_kwh")), 320.0 / 3.6e6, 1e-15);
    CHECK_NEAR(json_number_value(json_object_get(s, "power_w")), 320.0, 1e-9);
    CHECK_INT(json_integer_value(json_object_get(s, "energy_gpus")), 2);
    char *prom = obs_prometheus(v);
    CHECK_STR_HAS(prom, "grit_energy_source_info{source=\"RAPL + NVML (2 GPUs)\",rapl=\"1\","
                        "nvml=\"1\"} 1\n");
    CHECK_STR_HAS(prom, "grit_energy_gpus 2\n");
    free(prom);
    char *out = NULL;
    size_t outn = 0;
    FILE *f = open_memstream(&out, &outn);
    obs_print_summary(f, v);
    fclose(f);
    CHECK_STR_HAS(out, "kWh (RAPL + NVML (2 GPUs) on 1 host measured, 320 W)");
    free(out);
    json_decref(v);
}

/* No NVIDIA library, a library with no GPU, GPUs with neither counter: RAPL only, and
 * nothing on stderr (a CPU node samples every second for the whole run). */
static void rapl_only(const char *root)
{
    char errpath[] = "/tmp/grit-nvml-err-XXXXXX";
    int fd = mkstemp(errpath);
    CHECK(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    const char *libs[3] = {NOLIB, GRIT_FAKE_NVML, GRIT_FAKE_NVML};
    const char *gpus[3] = {"2", "0", "2"};
    for (int k = 0; k < 3; k++) {
        obs__power_reset();
        setenv("FAKE_NVML_GPUS", gpus[k], 1);
        unsetenv("FAKE_NVML_POWER_MW"); /* k == 2: neither counter nor power */
        rapl_zone(root, "intel-rapl:0", "1000000\n", "100000000\n");
        sample(root, libs[k], 60, k == 2 ? NULL : "0,0");
        rapl_zone(root, "intel-rapl:0", "3000000\n", "100000000\n");
        obs_energy e = sample(root, libs[k], 62, k == 2 ? NULL : "1000,1000");
        if (e.sources != OBS_SRC_RAPL || e.gpus != 0 || fabs(e.joules - 2.0) > 1e-9)
            dprintf(saved, "rapl_only case %d: sources %d gpus %d joules %g\n", k, e.sources,
                    e.gpus, e.joules);
        CHECK_INT(e.sources, OBS_SRC_RAPL);
        CHECK_INT(e.gpus, 0);
        CHECK_NEAR(e.joules, 2.0, 1e-9);
        CHECK_NEAR(e.watts, 1.0, 1e-9);
    }
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    struct stat st;
    CHECK_INT(fstat(fd, &st), 0);
    CHECK_INT(st.st_size, 0);
    close(fd);
    unlink(errpath);
}

/* The energy_source the view derives from a nodes.json holding text. */
static void view_source(const char *root, const char *text, const char *want)
{
    char path[512];
    snprintf(path, sizeof path, "%s/nodes.json", root);
    CHECK_INT(fs_write_durable(path, text, strlen(text)), GRIT_OK);
    json_t *v = obs_view(root, &(obs_cfg){0}, 0);
    const char *got = json_string_value(json_object_get(json_object_get(v, "summary"),
                                                        "energy_source"));
    if (!got || strcmp(got, want))
        fprintf(stderr, "%s: energy_source '%s', want '%s'\n", text, got ? got : "(null)", want);
    CHECK(got && !strcmp(got, want));
    json_decref(v);
}

int main(void)
{
    char root[] = "/tmp/grit-nvml-XXXXXX";
    CHECK(mkdtemp(root) != NULL);
    energy_counter();
    power_fallback();
    rapl_plus_nvml(root);
    rapl_only(root);
    view_source(root, "{\"version\":1,\"nodes\":[],\"energy_measured\":true,\"energy_j\":5}",
                "RAPL");
    view_source(root, "{\"version\":1,\"nodes\":[],\"energy_measured\":true,\"energy_j\":5,"
                      "\"energy_sources\":[\"NVML\",3,\"GPU\"],\"gpus\":1e308}",
                "NVML (1000000 GPUs)");
    obs__power_reset();
    remove_tree(root);
    CHECK_DONE();
}
