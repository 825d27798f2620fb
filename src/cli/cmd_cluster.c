/* cmd_cluster.c - `grit cluster`: a Slurm cluster's lifecycle from a HyperPod-style spec. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cluster/agent.h"
#include "cluster/cluster.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: grit cluster [options] COMMAND ...\n"
            "\n"
            "Makes, inspects, heals and deletes a Slurm cluster described by a JSON spec in\n"
            "SageMaker HyperPod's shape (ClusterName, InstanceGroups with InstanceGroupName,\n"
            "InstanceType, InstanceCount, LifeCycleConfig {SourceS3Uri, OnCreate},\n"
            "ThreadsPerCore; grit adds Role controller|login|worker, WarmSpares, Network).\n"
            "Provider `local`: every node is a network-namespace host on a private bridge of\n"
            "this machine running real munge, slurmctld (controller) and slurmd (workers).\n"
            "State is kept in SQLite; every command can be run again after a kill and\n"
            "finishes the work (docs/cluster.md).\n"
            "\n"
            "commands:\n"
            "  create SPEC.json              create the cluster (or finish a cut-short create)\n"
            "  list                          clusters and their status\n"
            "  describe NAME                 groups, counts, network, recent operations\n"
            "  list-nodes NAME               nodes: NodeId, group, InstanceStatus, Slurm state\n"
            "  describe-node NAME NODE       one node (NodeId or Slurm name), with the output\n"
            "                                of its lifecycle script\n"
            "  update NAME SPEC.json         change group sizes (InstanceCount, WarmSpares):\n"
            "                                new nodes created and admitted; removed ones\n"
            "                                drained, their jobs waited for, then removed\n"
            "  update-software NAME          run every group's OnCreate again on its nodes\n"
            "  replace-node NAME NODE        a fresh node in NODE's place (same Slurm name):\n"
            "                                lifecycle, admission check, rejoin\n"
            "  reboot-node NAME NODE         restart the node's processes (slurmd)\n"
            "  provide-spare NAME            for grit launch --on-no-spare: a node for the job\n"
            "                                on stdout (one line): the worker named by\n"
            "                                $GRIT_FAILED_NODE replaced (same name), else a\n"
            "                                Running warm spare not in $GRIT_CLUSTER_JSON\n"
            "  delete NAME                   remove every node, process, namespace and file\n"
            "  agent NAME                    the healing agent (create starts it, delete stops\n"
            "                                it): replaces nodes marked Action:Replace, drained\n"
            "                                by grit or down; reboots nodes marked Action:Reboot\n"
            "\n"
            "options:\n"
            "  --state DIR       state database and cluster files (default $GRIT_CLUSTER_STATE,\n"
            "                    else /var/lib/grit/cluster); every directory above it must be\n"
            "                    world-searchable (munged runs as user munge)\n"
            "  --json            print HyperPod-shaped JSON (DescribeCluster, ListClusterNodes,\n"
            "                    DescribeClusterNode) instead of text\n"
            "  --health ARGS     admission check run in each new worker before it joins Slurm:\n"
            "                    `grit health ARGS` (default \"--deep\"); \"\" or --no-health: none\n"
            "  --no-health       no admission check\n"
            "  --no-mpi-check    admission without the MPI check (after grit health, an\n"
            "                    all-reduce of grit health on the new worker and a healthy one,\n"
            "                    through mpirun; local provider)\n"
            "  --attempts N      replace-node: fresh nodes tried before giving up (default 3)\n"
            "  --if-node-id ID   replace-node/reboot-node: only while NODE is still ID (one\n"
            "                    replace or reboot of a node runs at a time; a node replaced\n"
            "                    meanwhile and Running is left alone)\n"
            "  --down-grace S    agent: seconds a node may stay DOWN (slurmd silent) before it\n"
            "                    is replaced (default 10; given to create, kept by its agent)\n"
            "  --quiet           no progress lines\n"
            "  --help, -h        this help\n"
            "\n"
            "environment: GRIT_SLURM_LOCAL_CLUSTER names scripts/slurm-local-cluster.sh when it\n"
            "is not next to the grit binary (../scripts/ or ../share/grit/); GRIT_SPANK_PLUGIN\n"
            "names spank_grit.so (default: beside the binary or ../lib/grit/; \"\" for none),\n"
            "loaded in the cluster's plugstack.conf so srun has --auto-resume.\n");
}

/* scripts/slurm-local-cluster.sh: $GRIT_SLURM_LOCAL_CLUSTER, else beside the binary. */
static int find_script(char *out, size_t cap, const char *exe)
{
    const char *e = getenv("GRIT_SLURM_LOCAL_CLUSTER");
    if (e && *e) {
        snprintf(out, cap, "%s", e);
        return access(out, X_OK) == 0;
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", exe);
    char *d = dirname(dir);
    const char *rel[] = {"../scripts/slurm-local-cluster.sh", "../share/grit/slurm-local-cluster.sh"};
    for (int i = 0; i < 2; i++) {
        if ((size_t)snprintf(out, cap, "%s/%s", d, rel[i]) >= cap)
            continue;
        if (access(out, X_OK) == 0)
            return 1;
    }
    return 0;
}

static void print_json(json_t *j)
{
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (s)
        printf("%s\n", s);
    free(s);
}

static const char *jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static void print_nodes(json_t *arr)
{
    printf("%-20s %-5s %-16s %-14s %-14s %-12s %s\n", "NodeId", "Name", "Group", "Type",
           "Status", "Slurm", "LaunchTime");
    size_t i;
    json_t *n;
    json_array_foreach(arr, i, n) {
        json_t *is = json_object_get(n, "InstanceStatus");
        char st[64];
        snprintf(st, sizeof st, "%s%s", jstr(is, "Status"),
                 json_is_true(json_object_get(n, "WarmSpare")) ? "*" : "");
        printf("%-20s %-5s %-16s %-14s %-14s %-12s %s\n", jstr(n, "NodeId"),
               jstr(n, "PrivateDnsHostname"), jstr(n, "InstanceGroupName"),
               jstr(n, "InstanceType"), st,
               json_object_get(n, "SlurmState") ? jstr(n, "SlurmState") : "-",
               jstr(n, "LaunchTime"));
        if (*jstr(is, "Message"))
            printf("    %s\n", jstr(is, "Message"));
    }
    printf("(* warm spare)\n");
}

static void print_describe(json_t *d)
{
    json_t *net = json_object_get(d, "Network");
    printf("ClusterName     %s\nClusterStatus   %s\nCreationTime    %s\nProvider        %s\n"
           "Network         bridge %s, %s.0/24, controller %s port %lld\nSlurmConf       %s\n",
           jstr(d, "ClusterName"), jstr(d, "ClusterStatus"), jstr(d, "CreationTime"),
           jstr(d, "Provider"), jstr(net, "Bridge"), jstr(net, "Subnet"),
           jstr(net, "ControllerAddr"), json_integer_value(json_object_get(net, "Port")),
           jstr(d, "SlurmConf"));
    printf("\n%-16s %-10s %-14s %8s %8s %7s\n", "Group", "Role", "Type", "Running", "Target",
           "Spares");
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(d, "InstanceGroups"), i, g)
        printf("%-16s %-10s %-14s %8lld %8lld %3lld/%-3lld\n", jstr(g, "InstanceGroupName"),
               jstr(g, "Role"), jstr(g, "InstanceType"),
               json_integer_value(json_object_get(g, "CurrentCount")),
               json_integer_value(json_object_get(g, "TargetCount")),
               json_integer_value(json_object_get(g, "CurrentWarmSpares")),
               json_integer_value(json_object_get(g, "WarmSpares")));
    printf("\nOperations (newest last):\n");
    json_array_foreach(json_object_get(d, "Events"), i, g) {
        time_t t = (time_t)json_number_value(json_object_get(g, "StartTime"));
        struct tm tm;
        char ts[32];
        gmtime_r(&t, &tm);
        strftime(ts, sizeof ts, "%H:%M:%S", &tm);
        json_t *sec = json_object_get(g, "Seconds");
        printf("  %s %-22s %-20s %-10s %6.1f s  %s\n", ts, jstr(g, "Kind"), jstr(g, "Target"),
               jstr(g, "Status"), sec ? json_number_value(sec) : 0.0, jstr(g, "Detail"));
    }
}

static void print_node(json_t *d)
{
    json_t *is = json_object_get(d, "InstanceStatus");
    printf("NodeId            %s\nName              %s (%s)\nInstanceGroupName %s\n"
           "InstanceType      %s\nRole              %s%s\nInstanceStatus    %s%s%s\n"
           "SlurmState        %s %s\nLaunchTime        %s\n",
           jstr(d, "NodeId"), jstr(d, "PrivateDnsHostname"), jstr(d, "PrivatePrimaryIp"),
           jstr(d, "InstanceGroupName"), jstr(d, "InstanceType"), jstr(d, "Role"),
           json_is_true(json_object_get(d, "WarmSpare")) ? " (warm spare)" : "",
           jstr(is, "Status"), *jstr(is, "Message") ? ": " : "", jstr(is, "Message"),
           json_object_get(d, "SlurmState") ? jstr(d, "SlurmState") : "-", jstr(d, "SlurmReason"),
           jstr(d, "LaunchTime"));
    json_t *lc = json_object_get(d, "LifeCycleConfig");
    json_t *ex = json_object_get(d, "LifeCycleExitStatus");
    printf("LifeCycle         %s/%s, exit %s%lld\nLifeCycleLog      %s\n", jstr(lc, "SourceS3Uri"),
           jstr(lc, "OnCreate"), ex ? "" : "(not run) ", ex ? json_integer_value(ex) : 0LL,
           jstr(d, "LifeCycleLog"));
    const char *out = jstr(d, "LifeCycleOutput");
    if (*out)
        printf("--- lifecycle output (last 4 KiB) ---\n%s%s", out,
               out[strlen(out) - 1] == '\n' ? "" : "\n");
}

/* Whether the job's RUN/cluster.json (path; NULL: none) holds a slot called node. */
static int job_holds(const char *path, const char *node)
{
    json_t *j = path && *path ? json_load_file(path, 0, NULL) : NULL, *x;
    size_t i;
    int held = 0;
    json_array_foreach(json_object_get(j, "nodes"), i, x)
        held |= !strcmp(jstr(x, "name"), node);
    json_decref(j);
    return held;
}

/* The cluster's node called node (PrivateDnsHostname) in a ListClusterNodes answer. */
static json_t *node_named(json_t *list, const char *node)
{
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(list, "ClusterNodeSummaries"), i, x)
        if (!strcmp(jstr(x, "PrivateDnsHostname"), node))
            return x;
    return NULL;
}

static int running(json_t *n)
{
    return n && !strcmp(jstr(json_object_get(n, "InstanceStatus"), "Status"), "Running");
}

/* provide-spare NAME (docs/cluster.md, docs/supervisor.md): grit launch --on-no-spare
 * asks for a node. A worker of the cluster named $GRIT_FAILED_NODE is replaced (a fresh
 * node under the same name: lifecycle, admission, rejoin) and that name printed; else a
 * Running warm spare the job does not hold ($GRIT_CLUSTER_JSON). stdout carries only
 * the name: everything else (progress, helpers) goes to stderr. */
static int provide_spare(const cluster_opts *o, const char *name)
{
    const char *failed = getenv("GRIT_FAILED_NODE"), *held = getenv("GRIT_CLUSTER_JSON");
    char pick[64] = "", why[300] = "";
    json_t *list = NULL;
    fflush(stdout);
    /* close-on-exec: the node's daemons started below must not hold the caller's pipe
     * (a $(...) or grit launch waits for its end) */
    int out = fcntl(1, F_DUPFD_CLOEXEC, 3);
    dup2(2, 1);
    grit_err rc = cluster_list_nodes(o, name, &list);
    json_t *f = rc == GRIT_OK && failed ? node_named(list, failed) : NULL;
    if (f && !strcmp(jstr(f, "Role"), "worker")) {
        rc = cluster_replace_node(o, name, failed, jstr(f, "NodeId"));
        json_decref(list);
        list = NULL;
        if (rc == GRIT_OK)
            rc = cluster_list_nodes(o, name, &list);
        if (rc == GRIT_OK && running(node_named(list, failed)))
            snprintf(pick, sizeof pick, "%s", failed);
        else if (rc == GRIT_OK)
            snprintf(why, sizeof why, "the replacement of %s did not come up Running", failed);
    } else if (rc == GRIT_OK) {
        size_t i;
        json_t *x;
        json_array_foreach(json_object_get(list, "ClusterNodeSummaries"), i, x)
            if (!pick[0] && running(x) && json_is_true(json_object_get(x, "WarmSpare")) &&
                !strcmp(jstr(x, "Role"), "worker") &&
                (!failed || strcmp(jstr(x, "PrivateDnsHostname"), failed)) &&
                !job_holds(held, jstr(x, "PrivateDnsHostname")))
                snprintf(pick, sizeof pick, "%s", jstr(x, "PrivateDnsHostname"));
        if (!pick[0])
            snprintf(why, sizeof why, "no Running warm spare left in cluster %s that the job "
                     "does not hold, and GRIT_FAILED_NODE (%s) is not one of its workers", name,
                     failed ? failed : "unset");
    }
    json_decref(list);
    fflush(stdout);
    dup2(out, 1);
    close(out);
    if (rc != GRIT_OK) {
        fprintf(stderr, "grit cluster provide-spare: %s\n",
                *grit_errmsg() ? grit_errmsg() : grit_strerror(rc));
        return 1;
    }
    if (!pick[0]) {
        fprintf(stderr, "grit cluster provide-spare: %s\n", why);
        return 1;
    }
    printf("%s\n", pick);
    return 0;
}

int cmd_cluster(int argc, char **argv)
{
    cluster_opts o;
    memset(&o, 0, sizeof o);
    const char *st = getenv("GRIT_CLUSTER_STATE");
    snprintf(o.state_dir, sizeof o.state_dir, "%s", st && *st ? st : "/var/lib/grit/cluster");
    snprintf(o.health_args, sizeof o.health_args, "--deep");
    o.progress = stderr;
    o.attempts = 3;
    o.down_grace = 10;
    o.mpi_check = 1;
    int json = 0, i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json"))
            json = 1;
        else if (!strcmp(a, "--quiet"))
            o.progress = NULL;
        else if (!strcmp(a, "--no-health"))
            o.health_args[0] = '\0';
        else if (!strcmp(a, "--no-mpi-check"))
            o.mpi_check = 0;
        else if (!strcmp(a, "--down-grace") && i + 1 < argc) {
            if (cli_num("cluster", a, argv[++i], 0, 3600, &o.down_grace))
                return 2;
        } else if (!strcmp(a, "--if-node-id") && i + 1 < argc) {
            if ((size_t)snprintf(o.if_node_id, sizeof o.if_node_id, "%s", argv[++i]) >=
                sizeof o.if_node_id) {
                fprintf(stderr, "grit cluster: --if-node-id: value too long\n");
                return 2;
            }
        } else if (!strcmp(a, "--attempts") && i + 1 < argc) {
            if (cli_int("cluster", a, argv[++i], 1, 10, &o.attempts))
                return 2;
        }
        else if ((!strcmp(a, "--state") || !strcmp(a, "--health")) && i + 1 < argc) {
            char *dst = a[2] == 's' ? o.state_dir : o.health_args;
            size_t cap = a[2] == 's' ? sizeof o.state_dir : sizeof o.health_args;
            if ((size_t)snprintf(dst, cap, "%s", argv[++i]) >= cap) {
                fprintf(stderr, "grit cluster: %s: value too long\n", a);
                return 2;
            }
        } else {
            fprintf(stderr, "grit cluster: unknown option '%s' (try --help)\n", a);
            return 2;
        }
    }
    if (i >= argc) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[i++];
    int nargs = argc - i;
    char **args = argv + i;
    static const struct {
        const char *name;
        int nargs;
        const char *usage;
    } cmds[] = {{"create", 1, "create SPEC.json"},       {"list", 0, "list"},
                {"describe", 1, "describe NAME"},        {"list-nodes", 1, "list-nodes NAME"},
                {"describe-node", 2, "describe-node NAME NODE"},
                {"update-software", 1, "update-software NAME"},
                {"update", 2, "update NAME SPEC.json"},
                {"replace-node", 2, "replace-node NAME NODE"},
                {"reboot-node", 2, "reboot-node NAME NODE"}, {"delete", 1, "delete NAME"},
                {"agent", 1, "agent NAME"}, {"provide-spare", 1, "provide-spare NAME"}};
    int c = -1;
    for (int k = 0; k < (int)(sizeof cmds / sizeof cmds[0]); k++)
        if (!strcmp(cmds[k].name, cmd))
            c = k;
    if (c < 0) {
        fprintf(stderr, "grit cluster: unknown command '%s' (try --help)\n", cmd);
        return 2;
    }
    if (nargs == 1 && (!strcmp(args[0], "--help") || !strcmp(args[0], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (nargs != cmds[c].nargs) {
        fprintf(stderr, "grit cluster: usage: grit cluster [options] %s\n", cmds[c].usage);
        return 2;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    snprintf(o.grit, sizeof o.grit, "%s", exe);
    /* spank_grit.so: $GRIT_SPANK_PLUGIN, else beside the binary (the build tree) or in
     * ../lib/grit/; without it srun has no --auto-resume in the cluster */
    const char *sp = getenv("GRIT_SPANK_PLUGIN");
    if (sp)
        snprintf(o.spank, sizeof o.spank, "%s", sp);
    else {
        char d[PATH_MAX];
        snprintf(d, sizeof d, "%s", exe);
        const char *dd = dirname(d);
        const char *rel[] = {"spank_grit.so", "../lib/grit/spank_grit.so"};
        for (int k = 0; k < 2 && !o.spank[0]; k++)
            if ((size_t)snprintf(o.spank, sizeof o.spank, "%s/%s", dd, rel[k]) >= sizeof o.spank ||
                access(o.spank, R_OK) != 0)
                o.spank[0] = '\0';
    }
    int mutating = strcmp(cmd, "list") && strcmp(cmd, "describe") && strcmp(cmd, "list-nodes") &&
                   strcmp(cmd, "describe-node");
    if (mutating && !find_script(o.script, sizeof o.script, exe)) {
        fprintf(stderr, "grit cluster: scripts/slurm-local-cluster.sh not found (set "
                        "GRIT_SLURM_LOCAL_CLUSTER to its path)\n");
        return 2;
    }
    if (mutating && geteuid() != 0) {
        fprintf(stderr, "grit cluster %s: must run as root (network namespaces, munge, slurmd)\n",
                cmd);
        return 2;
    }
    if (!strcmp(cmd, "provide-spare"))
        return provide_spare(&o, args[0]);
    grit_err rc = GRIT_OK;
    json_t *out = NULL;
    char name[64];
    if (!strcmp(cmd, "create")) {
        rc = cluster_create(&o, args[0], name);
        if (rc == GRIT_OK && json)
            rc = cluster_describe(&o, name, &out);
    } else if (!strcmp(cmd, "list"))
        rc = cluster_list(&o, &out);
    else if (!strcmp(cmd, "describe"))
        rc = cluster_describe(&o, args[0], &out);
    else if (!strcmp(cmd, "list-nodes"))
        rc = cluster_list_nodes(&o, args[0], &out);
    else if (!strcmp(cmd, "describe-node"))
        rc = cluster_describe_node(&o, args[0], args[1], &out);
    else if (!strcmp(cmd, "update"))
        rc = cluster_update(&o, args[0], args[1]);
    else if (!strcmp(cmd, "update-software"))
        rc = cluster_update_software(&o, args[0]);
    else if (!strcmp(cmd, "replace-node"))
        rc = cluster_replace_node(&o, args[0], args[1], o.if_node_id[0] ? o.if_node_id : NULL);
    else if (!strcmp(cmd, "reboot-node"))
        rc = cluster_reboot_node(&o, args[0], args[1], o.if_node_id[0] ? o.if_node_id : NULL);
    else if (!strcmp(cmd, "delete"))
        rc = cluster_delete(&o, args[0]);
    else if (!strcmp(cmd, "agent"))
        rc = cluster_agent_run(&o, args[0], 1.0, o.down_grace);
    if (rc != GRIT_OK) {
        fprintf(stderr, "grit cluster %s: %s\n", cmd,
                *grit_errmsg() ? grit_errmsg() : grit_strerror(rc));
        json_decref(out);
        return 1;
    }
    if (out && json)
        print_json(out);
    else if (out && !strcmp(cmd, "list")) {
        size_t k;
        json_t *x;
        printf("%-24s %-12s %s\n", "ClusterName", "Status", "CreationTime");
        json_array_foreach(json_object_get(out, "ClusterSummaries"), k, x)
            printf("%-24s %-12s %s\n", jstr(x, "ClusterName"), jstr(x, "ClusterStatus"),
                   jstr(x, "CreationTime"));
    } else if (out && !strcmp(cmd, "describe"))
        print_describe(out);
    else if (out && !strcmp(cmd, "list-nodes"))
        print_nodes(json_object_get(out, "ClusterNodeSummaries"));
    else if (out && !strcmp(cmd, "describe-node"))
        print_node(json_object_get(out, "NodeDetails"));
    json_decref(out);
    return 0;
}
