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
static grit_err parse_with(const char *top, const char *groups, cluster_spec *s)
{
    char text[4096];
    snprintf(text, sizeof text, "{\n  \"ClusterName\": \"demo\",%s\n  \"InstanceGroups\": [\n%s\n  ]\n}\n",
             top, groups);
    return cluster_spec_parse(s, "spec.json", text, dir);
}

static grit_err parse(const char *groups, cluster_spec *s) { return parse_with("", groups, s); }

#define CTL "    {\"InstanceGroupName\": \"ctl\", \"Role\": \"controller\", \"InstanceType\": \"ml.c5.large\",\n" \
            "     \"InstanceCount\": 1, \"LifeCycleConfig\": {\"SourceS3Uri\": \"lc\", \"OnCreate\": \"on_create.sh\"}}"
#define WRK(name, count, extra) \
    "    {\"InstanceGroupName\": \"" name "\", \"InstanceType\": \"ml.g5.xlarge\", \"InstanceCount\": " count ",\n" \
    "     \"LifeCycleConfig\": {\"SourceS3Uri\": \"lc\", \"OnCreate\": \"on_create.sh\"}" extra "}"

static void bad_with(const char *top, const char *groups, const char *want)
{
    cluster_spec s;
    grit_err rc = parse_with(top, groups, &s);
    if (rc == GRIT_OK || !strstr(grit_errmsg(), want)) {
        fprintf(stderr, "expected an error containing '%s', got rc=%d '%s'\n", want, rc,
                grit_errmsg());
        check_failures++;
    }
    CHECK(s.ngroups == 0 && s.name[0] == '\0'); /* nothing half-filled */
}

static void bad(const char *groups, const char *want) { bad_with("", groups, want); }

#define SSH "\n  \"Ssh\": {\"IdentityFile\": \"id\", \"KnownHosts\": \"lc/on_create.sh\", \"RemoteDir\": \"/srv/g\"},"
#define CTLH "    {\"InstanceGroupName\": \"ctl\", \"Role\": \"controller\", \"InstanceType\": \"ml.c5.large\",\n" \
             "     \"InstanceCount\": 1, \"Hosts\": [\"10.0.0.1\"], \"LifeCycleConfig\": {\"SourceS3Uri\": \"lc\", \"OnCreate\": \"on_create.sh\"}}"

/* The ssh provider's fields. */
static void ssh_spec(void)
{
    char p[128];
    snprintf(p, sizeof p, "%s/id", dir);
    FILE *f = fopen(p, "w");
    fputs("key\n", f);
    fclose(f);
    cluster_spec s;
    CHECK_INT(parse_with(SSH, CTLH ",\n" WRK("w", "1", ", \"WarmSpares\": 1, \"Hosts\": [\"h2\", \"h3\"]"), &s), GRIT_OK);
    CHECK(s.ssh == 1 && s.ssh_port == 22 && !strcmp(s.ssh_user, "root") && !strcmp(s.remote_dir, "/srv/g"));
    CHECK(strstr(s.ssh_key, "/id") && s.ssh_key[0] == '/');
    CHECK_INT(s.groups[1].nhosts, 2);
    CHECK(!strcmp(s.groups[0].hosts[0], "10.0.0.1") && !strcmp(s.groups[1].hosts[1], "h3"));
    bad_with(SSH, CTLH ",\n" WRK("w", "2", ", \"Hosts\": [\"h2\"]"),
             "field 'InstanceGroups[1].Hosts': expected an array of 2 host addresses");
    bad_with(SSH, CTLH ",\n" WRK("w", "1", ""), "field 'InstanceGroups[1].Hosts': missing");
    bad_with("", CTLH ",\n" WRK("w", "1", ""), "field 'InstanceGroups[0].Hosts': only for the ssh provider");
    bad_with(SSH, CTLH ",\n" WRK("w", "1", ", \"Hosts\": [\"10.0.0.1\"]"),
             "field 'InstanceGroups[1].Hosts[0]': host \"10.0.0.1\" is listed twice");
    bad_with(SSH, CTLH ",\n" WRK("w", "1", ", \"Hosts\": [\"-oProxyCommand=x\"]"),
             "field 'InstanceGroups[1].Hosts[0]': expected a host name or address");
    bad_with("\n  \"Ssh\": {\"IdentityFile\": \"nokey\", \"KnownHosts\": \"id\"},", CTLH,
             "field 'Ssh.IdentityFile': expected an existing file, got \"nokey\"");
    bad_with("\n  \"Ssh\": {\"IdentityFile\": \"id\"},", CTLH, "field 'Ssh.KnownHosts': missing");
    bad_with("\n  \"Ssh\": {\"IdentityFile\": \"id\", \"KnownHosts\": \"id\", \"RemoteDir\": \"rel\"},", CTLH,
             "field 'Ssh.RemoteDir': expected an absolute path");
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
    ssh_spec();
    if (check_failures)
        fprintf(stderr, "last message: %s\n", grit_errmsg());

    snprintf(p, sizeof p, "rm -rf '%s'", dir);
    CHECK(system(p) == 0);
    return check_failures != 0;
}
