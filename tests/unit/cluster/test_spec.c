/* test_spec.c - the cluster spec: a good spec loads with its defaults; each bad spec is
 * refused with file:line:col, the field and what was expected. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../check.h"
#include "cluster/spec.h"

static char dir[64];

/* A spec with one group's text replaced: GROUPS is the InstanceGroups array body. */
static grit_err parse(const char *groups, cluster_spec *s)
{
    char text[4096];
    snprintf(text, sizeof text, "{\n  \"ClusterName\": \"demo\",\n  \"InstanceGroups\": [\n%s\n  ]\n}\n",
             groups);
    return cluster_spec_parse(s, "spec.json", text, dir);
}

#define CTL "    {\"InstanceGroupName\": \"ctl\", \"Role\": \"controller\", \"InstanceType\": \"ml.c5.large\",\n" \
            "     \"InstanceCount\": 1, \"LifeCycleConfig\": {\"SourceS3Uri\": \"lc\", \"OnCreate\": \"on_create.sh\"}}"
#define WRK(name, count, extra) \
    "    {\"InstanceGroupName\": \"" name "\", \"InstanceType\": \"ml.g5.xlarge\", \"InstanceCount\": " count ",\n" \
    "     \"LifeCycleConfig\": {\"SourceS3Uri\": \"lc\", \"OnCreate\": \"on_create.sh\"}" extra "}"

static void bad(const char *groups, const char *want)
{
    cluster_spec s;
    grit_err rc = parse(groups, &s);
    if (rc == GRIT_OK || !strstr(grit_errmsg(), want)) {
        fprintf(stderr, "expected an error containing '%s', got rc=%d '%s'\n", want, rc,
                grit_errmsg());
        check_failures++;
    }
    CHECK(s.ngroups == 0 && s.name[0] == '\0'); /* nothing half-filled */
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/grit-spec-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    char p[128];
    snprintf(p, sizeof p, "%s/lc", dir);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/lc/on_create.sh", dir);
    FILE *f = fopen(p, "w");
    fputs("#!/bin/sh\nexit 0\n", f);
    fclose(f);

    cluster_spec s;
    CHECK_INT(parse(CTL ",\n" WRK("workers", "4", ", \"WarmSpares\": 1, \"ThreadsPerCore\": 2"), &s), GRIT_OK);
    CHECK_INT(s.ngroups, 2);
    CHECK(!strcmp(s.name, "demo"));
    CHECK(s.groups[0].role == CLUSTER_CONTROLLER && s.groups[1].role == CLUSTER_WORKER);
    CHECK_INT(s.groups[1].count, 4);
    CHECK_INT(s.groups[1].spares, 1);
    CHECK_INT(s.groups[1].threads_per_core, 2);
    CHECK_INT(s.groups[0].threads_per_core, 1);
    CHECK(!strcmp(s.bridge, "gritc0") && !strcmp(s.subnet, "10.79.0") && s.port == 18200);
    CHECK(strstr(s.groups[1].source, "/lc") != NULL && !strcmp(s.groups[1].on_create, "on_create.sh"));
    CHECK_INT(cluster_spec_group(&s, "workers"), 1);

    /* missing group: no controller */
    bad(WRK("workers", "4", ""), "spec.json:3:3: field 'InstanceGroups': expected exactly one group with \"Role\": \"controller\"");
    /* duplicate name: the second one, line and column */
    bad(CTL ",\n" WRK("w", "1", "") ",\n" WRK("w", "2", ""),
        "spec.json:8:6: field 'InstanceGroups[2].InstanceGroupName': duplicate group name \"w\"");
    /* count < 0 */
    bad(CTL ",\n" WRK("w", "-1", ""), "spec.json:6:64: field 'InstanceGroups[1].InstanceCount': expected an integer in [0, 32], got -1");
    /* unknown role */
    bad(CTL ",\n" WRK("w", "1", ", \"Role\": \"boss\""),
        "field 'InstanceGroups[1].Role': expected one of \"controller\", \"login\", \"worker\", got \"boss\"");
    /* missing script */
    bad(CTL ",\n    {\"InstanceGroupName\": \"w\", \"InstanceType\": \"t\", \"InstanceCount\": 1,\n"
            "     \"LifeCycleConfig\": {\"SourceS3Uri\": \"lc\", \"OnCreate\": \"nope.sh\"}}",
        "field 'InstanceGroups[1].LifeCycleConfig.OnCreate': expected a script in");
    bad(CTL ",\n    {\"InstanceGroupName\": \"w\", \"InstanceType\": \"t\", \"InstanceCount\": 1,\n"
            "     \"LifeCycleConfig\": {\"SourceS3Uri\": \"lc\"}}",
        "spec.json:7:6: field 'InstanceGroups[1].LifeCycleConfig.OnCreate': missing; expected the name of a script");
    bad(CTL ",\n    {\"InstanceGroupName\": \"w\", \"InstanceType\": \"t\", \"InstanceCount\": 1}",
        "spec.json:6:5: field 'InstanceGroups[1].LifeCycleConfig': missing");
    bad(CTL ",\n" WRK("w", "1", "") ",\n    {\"InstanceGroupName\": \"x\", \"InstanceType\": \"t\", \"InstanceCount\": 1,\n"
            "     \"LifeCycleConfig\": {\"SourceS3Uri\": \"nodir\", \"OnCreate\": \"on_create.sh\"}}",
        "field 'InstanceGroups[2].LifeCycleConfig.SourceS3Uri': expected an existing directory");
    /* other fields */
    bad(CTL ",\n" WRK("w", "1", ", \"WarmSpare\": 1"), "field 'InstanceGroups[1].WarmSpare': unknown field");
    bad(CTL ",\n" WRK("w_1", "1", ""), "field 'InstanceGroups[1].InstanceGroupName': expected 1-63 letters");
    bad(CTL ",\n" WRK("w", "40", ""), "expected an integer in [0, 32], got 40");
    bad(CTL ",\n" WRK("w", "20", ", \"WarmSpares\": 20"), "expected at most 32 nodes");
    bad(CTL ",\n" CTL, "duplicate group name");
    bad(WRK("w", "2", ", \"Role\": \"controller\""), "a controller group has exactly 1 instance");
    bad(CTL ",\n" WRK("w", "1", ", \"ThreadsPerCore\": 3"), "'InstanceGroups[1].ThreadsPerCore': expected an integer in [1, 2]");
    bad("", "field 'InstanceGroups': expected an array of 1 to 16");
    CHECK(cluster_spec_parse(&s, "x.json", "{\"InstanceGroups\": []}", dir) != GRIT_OK &&
          strstr(grit_errmsg(), "x.json: field 'ClusterName': missing"));
    CHECK(cluster_spec_parse(&s, "x.json", "{\"ClusterName\": \"a\",\n \"InstanceGroups\": [}", dir) != GRIT_OK &&
          strstr(grit_errmsg(), "x.json:2:21: invalid JSON"));
    CHECK(cluster_spec_parse(&s, "x.json", "{\"ClusterName\": \"a\", \"Network\": {\"Bridge\": \"Bad-1\"}, \"InstanceGroups\": [1]}", dir) != GRIT_OK &&
          strstr(grit_errmsg(), "field 'Network.Bridge'"));
    if (check_failures)
        fprintf(stderr, "last message: %s\n", grit_errmsg());

    snprintf(p, sizeof p, "rm -rf '%s'", dir);
    CHECK(system(p) == 0);
    return check_failures != 0;
}
