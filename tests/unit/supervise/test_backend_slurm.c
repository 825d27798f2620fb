/* test_backend_slurm.c - the Slurm launcher backend against fake scontrol/srun programs
 * (shell scripts that record their arguments), and cluster slots named after hosts. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../check.h"
#include "supervise/backend.h"
#include "supervise/cluster.h"
#include "supervise/sup_internal.h"

static char dir[256];

static void write_script(const char *name, const char *body)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    fprintf(f, "#!/bin/sh\n%s\n", body);
    fclose(f);
    chmod(path, 0755);
}

static char *slurp(const char *name)
{
    static char buf[4096];
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

static void test_job_argv(void)
{
    char *cmd[] = {"grit", "train", "job.json", NULL};
    char *extra[] = {"--time=5", NULL};
    sup_opts o = {.cmd = cmd, .srun_args = extra};
    char *argv[BACKEND_ARGV_MAX + 1], buf[2048], joined[4096] = "";
    CHECK_INT(sup_backend_slurm.job_argv(&o, "n1,n4,n3", 3, 2, 7, argv, buf, sizeof buf), 0);
    for (int i = 0; argv[i]; i++) {
        strcat(joined, argv[i]);
        strcat(joined, " ");
    }
    CHECK_STR_HAS(joined, "--mpi=pmix");
    CHECK_STR_HAS(joined, "--overlap");
    CHECK_STR_HAS(joined, "--distribution=arbitrary");
    CHECK_STR_HAS(joined, "--nodes=3 --ntasks=6 --job-name=grit-step-7");
    /* rank r on the r/R-th listed host: position order, each host R times */
    CHECK_STR_HAS(joined, "--nodelist=n1,n1,n4,n4,n3,n3 --time=5 grit train job.json ");
    /* a buffer too small is an error, not a truncated list */
    CHECK_INT(sup_backend_slurm.job_argv(&o, "n1,n4,n3", 3, 2, 7, argv, buf, 40), -1);
}

static void test_failed_rank(void)
{
    /* a "Killed" task may be one srun killed after its peer's node died: never blamed */
    CHECK_INT(sup_backend_slurm.failed_rank("srun: error: n3: task 2: Killed\n"), -1);
    CHECK_INT(sup_backend_slurm.failed_rank(""), -1);
    CHECK_INT(sup_backend_local.failed_rank("mpirun noticed that process rank 2 with PID 9"), 2);
}

static void test_hosts(void)
{
    char names[8][32], path[512];
    int n = 0;
    sup_opts o = {0};
    write_script("scontrol", "echo \"$@\" >> \"$(dirname \"$0\")/scontrol.args\"\n"
                             "[ \"$1 $2\" = 'show hostnames' ] && printf 'n1\\nn2\\nn3\\n'\n"
                             "exit 0");
    snprintf(path, sizeof path, "%s/scontrol", dir);
    setenv("GRIT_SCONTROL", path, 1);
    unsetenv("SLURM_JOB_NODELIST");
    unsetenv("SLURM_NODELIST");
    CHECK(sup_backend_slurm.hosts(&o, names, 8, &n) != GRIT_OK);
    CHECK_STR_HAS(grit_errmsg(), "SLURM_JOB_NODELIST");
    setenv("SLURM_JOB_NODELIST", "n[1-3]", 1);
    CHECK_INT(sup_backend_slurm.hosts(&o, names, 8, &n), GRIT_OK);
    CHECK_INT(n, 3);
    CHECK(!strcmp(names[0], "n1") && !strcmp(names[2], "n3"));
    CHECK(sup_backend_slurm.hosts(&o, names, 2, &n) != GRIT_OK); /* more hosts than slots */
    CHECK_STR_HAS(slurp("scontrol.args"), "show hostnames n[1-3]");

    /* slots named after hosts; a restarted supervisor in the same allocation keeps them */
    cluster c;
    snprintf(path, sizeof path, "%s/cluster.json", dir);
    CHECK_INT(cluster_open_hosts(&c, path, names, 3, 1), GRIT_OK);
    CHECK_INT(cluster_active(&c), 2);
    CHECK_INT(cluster_spares(&c), 1);
    CHECK(!strcmp(cluster_replace(&c, "n2", "dead"), "n3"));
    cluster_save(&c);
    cluster_free(&c);
    CHECK_INT(cluster_open_hosts(&c, path, names, 3, 1), GRIT_OK);
    CHECK_INT(cluster_find(&c, "n2")->state, NODE_CORDONED);
    cluster_free(&c);
    /* a new allocation (a requeued job on other hosts) starts afresh */
    snprintf(names[1], 32, "n4");
    CHECK_INT(cluster_open_hosts(&c, path, names, 3, 1), GRIT_OK);
    CHECK(cluster_find(&c, "n2") == NULL);
    CHECK_INT(cluster_find(&c, "n4")->state, NODE_ACTIVE);
    cluster_free(&c);
    CHECK(cluster_open_hosts(&c, path, names, 3, 3) != GRIT_OK); /* all spares */
}

static void test_drain_and_requeue(void)
{
    sup_opts o = {.no_spare = "requeue"};
    char args[512];
    snprintf(args, sizeof args, "%s/scontrol.args", dir);
    unlink(args);
    sup_backend_slurm.cordoned(&o, "n2", "unreachable: connection refused");
    CHECK_STR_HAS(slurp("scontrol.args"),
                  "update NodeName=n2 State=DRAIN Reason=grit: unreachable: connection refused");
    setenv("SLURM_JOB_ID", "42", 1);
    CHECK_INT(sup_backend_slurm.no_spare(&o, "n2 failed"), 1);
    CHECK_STR_HAS(slurp("scontrol.args"), "requeue 42");
    o.no_spare = "give_up";
    CHECK_INT(sup_backend_slurm.no_spare(&o, "n2 failed"), 0);
}

static void test_check_node(void)
{
    char path[512], why[200];
    sup_opts o = {.grit = "/bin/grit"};
    snprintf(path, sizeof path, "%s/srun", dir);
    setenv("GRIT_SRUN", path, 1);
    o.health_timeout = 1;
    write_script("srun", "echo \"$@\" > \"$(dirname \"$0\")/srun.args\"; exit 0");
    CHECK_INT(sup_backend_slurm.check_node(&o, "n3", NULL, why, sizeof why), 0);
    CHECK_STR_HAS(slurp("srun.args"), "--nodelist=n3");
    CHECK_STR_HAS(slurp("srun.args"), "/bin/grit health --quick");
    CHECK_INT(sup_backend_slurm.check_node(&o, "n3", "gemm_bitflip", why, sizeof why), 0);
    CHECK_STR_HAS(slurp("srun.args"), "--export=ALL,GRIT_HEALTH_FAULT=gemm_bitflip");
    write_script("srun", "echo 'UNHEALTHY in 1 s: 2 check(s) failed, first compute.gemm_kat'; exit 1");
    CHECK_INT(sup_backend_slurm.check_node(&o, "n3", NULL, why, sizeof why), 1);
    CHECK_STR_HAS(why, "grit health: compute.gemm_kat failed");
    write_script("srun", "echo 'srun: error: Task launch failed on node n3' >&2; exit 1");
    CHECK_INT(sup_backend_slurm.check_node(&o, "n3", NULL, why, sizeof why), 1);
    CHECK_STR_HAS(why, "unreachable: Task launch failed on node n3");
    /* all suspects at once; each verdict handed out once, then checked anew */
    write_script("srun", "case \"$*\" in *nodelist=n2[!0-9]*) echo 'x failed, first compute.digest'; exit 1;; esac\n"
                         "echo \"$@\" >> \"$(dirname \"$0\")/srun.many\"; exit 0");
    char targets[3][64] = {"n1", "n2", "n3"};
    const char *faults[3] = {NULL, NULL, "gemm_bitflip"};
    sup_backend_slurm.check_begin(&o, targets, 3, faults);
    CHECK_INT(sup_backend_slurm.check_node(&o, "n1", NULL, why, sizeof why), 0);
    CHECK_INT(sup_backend_slurm.check_node(&o, "n2", NULL, why, sizeof why), 1);
    CHECK_STR_HAS(why, "grit health: compute.digest failed");
    CHECK_INT(sup_backend_slurm.check_node(&o, "n3", NULL, why, sizeof why), 0);
    CHECK_STR_HAS(slurp("srun.many"), "--nodelist=n3 --job-name=grit-health --export=ALL,GRIT_HEALTH_FAULT=gemm_bitflip");
    write_script("srun", "exit 1");
    CHECK_INT(sup_backend_slurm.check_node(&o, "n1", NULL, why, sizeof why), 1);
    write_script("srun", "exec sleep 30");
    CHECK_INT(sup_backend_slurm.check_node(&o, "n3", NULL, why, sizeof why), 1);
    CHECK_STR_HAS(why, "no answer from the node");
}

/* the MPI pairwise network check: two ranks, one per node, under PMIx; judged by the report
 * rows of pair bandwidth and exact all-reduce sums (a latency row failing is timing noise);
 * a step that does not answer is a failed link, one that cannot run no verdict */
static void test_pair_check(void)
{
    char path[512], why[200];
    sup_opts o = {.grit = "/bin/grit", .health_timeout = 1};
    snprintf(path, sizeof path, "%s/srun", dir);
    setenv("GRIT_SRUN", path, 1);
    const char *rows_ok = "network.allreduce_correct pass 0 <= 0 ranks exact sums\n"
                          "network.pair_latency     fail 2699 <= 1000 us slowest pair 0<->1\n"
                          "network.pair_bandwidth   pass 1.5 >= 0.100 GB/s slowest pair 0<->1 1.5 GB/s\n";
    char body[1024];
    snprintf(body, sizeof body, "echo \"$@\" > \"$(dirname \"$0\")/srun.args\"; printf '%s'; exit 1", rows_ok);
    write_script("srun", body);
    CHECK_INT(sup_backend_slurm.pair_check(&o, "n2", "n1", why, sizeof why), 0);
    CHECK_STR_HAS(why, "healthy");
    CHECK_STR_HAS(slurp("srun.args"), "--overlap --mpi=pmix --nodes=2 --ntasks=2 --ntasks-per-node=1 --nodelist=n2,n1");
    CHECK_STR_HAS(slurp("srun.args"), "/bin/grit health --quick --net-pair-bytes 262144");
    write_script("srun", "echo 'network.allreduce_correct pass 0 <= 0 ranks exact'\n"
                         "echo 'network.pair_bandwidth   fail 0.0005 >= 0.100 GB/s slowest pair 0<->1 (n2<->n1) 0.0005 GB/s'\n"
                         "exit 1");
    CHECK_INT(sup_backend_slurm.pair_check(&o, "n2", "n1", why, sizeof why), 1);
    CHECK_STR_HAS(why, "network.pair_bandwidth: slowest pair 0<->1 (n2<->n1) 0.0005 GB/s");
    write_script("srun", "echo 'network.allreduce_correct fail 1 <= 0 ranks rank 1 sums differ'\n"
                         "echo 'network.pair_bandwidth   pass 1 >= 0.100 GB/s slowest pair 0<->1'; exit 1");
    CHECK_INT(sup_backend_slurm.pair_check(&o, "n2", "n1", why, sizeof why), 1);
    CHECK_STR_HAS(why, "network.allreduce_correct: fail 1 <= 0 ranks rank 1 sums differ");
    write_script("srun", "exec sleep 30");
    CHECK_INT(sup_backend_slurm.pair_check(&o, "n2", "n1", why, sizeof why), 1);
    CHECK_STR_HAS(why, "no answer within 1 s");
    write_script("srun", "echo 'srun: error: Unable to create step for job 5' >&2; exit 1");
    CHECK_INT(sup_backend_slurm.pair_check(&o, "n2", "n1", why, sizeof why), -1);
    CHECK_STR_HAS(why, "could not run: Unable to create step for job 5");
    write_script("srun", "echo 'HEALTHY in 1 s'; exit 0"); /* no network rows: no MPI */
    CHECK_INT(sup_backend_slurm.pair_check(&o, "n2", "n1", why, sizeof why), -1);
    CHECK_STR_HAS(why, "no network checks in the report");
}

/* sup_pair_evidence: the suspect with a healthy peer, then two healthy peers when that
 * failed; a bad link on the suspect is the node, every pair failing is the fabric */
static const char *bad_nodes; /* pairs touching one of these fail; "*": every pair */
static int fake_pairs;
static int fake_pair(const sup_opts *o, const char *a, const char *b, char *why, size_t cap)
{
    (void)o;
    fake_pairs++;
    int bad = !strcmp(bad_nodes, "*") || strstr(bad_nodes, a) || strstr(bad_nodes, b);
    snprintf(why, cap, "%s", bad ? "network.pair_bandwidth: slowest pair 0.0005 GB/s" : "healthy");
    return bad;
}

static void test_pair_evidence(void)
{
    sup_backend be = {.name = "fake", .pair_check = fake_pair}, none = {.name = "none"};
    sup_opts o = {0};
    const char *peers[2] = {"n1", "n3"};
    char out[320];
    bad_nodes = "n2", fake_pairs = 0;
    sup_pair_evidence(&be, &o, "n2", peers, 2, out, sizeof out);
    CHECK_STR_HAS(out, "n2<->n1 failed in ");
    CHECK_STR_HAS(out, "(network.pair_bandwidth: slowest pair 0.0005 GB/s); n1<->n3 healthy in ");
    CHECK_STR_HAS(out, ": the node, not the fabric");
    CHECK_INT(fake_pairs, 2);
    bad_nodes = "*", fake_pairs = 0;
    sup_pair_evidence(&be, &o, "n2", peers, 2, out, sizeof out);
    CHECK_STR_HAS(out, "; n1<->n3 failed too in ");
    CHECK_STR_HAS(out, ": the fabric, not the node");
    bad_nodes = "", fake_pairs = 0; /* the suspect's link is fine: no second check */
    sup_pair_evidence(&be, &o, "n2", peers, 2, out, sizeof out);
    CHECK_STR_HAS(out, "n2<->n1 healthy in ");
    CHECK(!strstr(out, "n1<->n3"));
    CHECK_INT(fake_pairs, 1);
    bad_nodes = "n2";
    sup_pair_evidence(&be, &o, "n2", peers, 1, out, sizeof out);
    CHECK_STR_HAS(out, "; no second healthy peer to tell the node from the fabric");
    sup_pair_evidence(&be, &o, "n2", peers, 0, out, sizeof out);
    CHECK(out[0] == '\0');
    sup_pair_evidence(&none, &o, "n2", peers, 2, out, sizeof out); /* no such check */
    CHECK(out[0] == '\0');
}

/* every host's NodeAddr from sinfo (a node listed once per partition), a name-valued one
 * resolved, a host sinfo does not list by its own name; many hosts in several calls */
static void test_addrs(void)
{
    char path[512], addrs[70][16], hn[70][32] = {"n1", "n2", "n3", "localhost"};
    sup_opts o = {0};
    snprintf(path, sizeof path, "%s/sinfo", dir);
    setenv("GRIT_SINFO", path, 1);
    write_script("sinfo", "echo \"$@\" >> \"$(dirname \"$0\")/sinfo.args\"\n"
                          "printf 'n1 10.1.0.11\\nn2 10.1.0.12\\nn2 10.1.0.12\\nn3 localhost\\n'");
    sup_backend_slurm.addrs(&o, (const char (*)[32])hn, 4, addrs);
    CHECK(!strcmp(addrs[0], "10.1.0.11"));
    CHECK(!strcmp(addrs[1], "10.1.0.12"));
    CHECK(!strcmp(addrs[2], "127.0.0.1"));
    CHECK(!strcmp(addrs[3], "127.0.0.1"));
    CHECK_STR_HAS(slurp("sinfo.args"), "-h -N -o %N %o --nodes=n1,n2,n3,localhost");
    /* sinfo fails: every host by its name (an address as a name is itself) */
    write_script("sinfo", "exit 1");
    snprintf(hn[0], 32, "10.4.5.6");
    sup_backend_slurm.addrs(&o, (const char (*)[32])hn, 4, addrs);
    CHECK(!strcmp(addrs[0], "10.4.5.6"));
    CHECK(!strcmp(addrs[3], "127.0.0.1"));
    /* 70 hosts: two sinfo calls (64 + 6), every host's address */
    char args[512];
    snprintf(args, sizeof args, "%s/sinfo.args", dir);
    unlink(args);
    for (int i = 0; i < 70; i++)
        snprintf(hn[i], 32, "h%d", i);
    write_script("sinfo", "echo \"$@\" >> \"$(dirname \"$0\")/sinfo.args\"\n"
                          "for n in $(echo \"$5\" | sed 's/^--nodes=//; s/,/ /g'); do\n"
                          "  echo \"$n 10.0.${n#h}.1\"; done");
    sup_backend_slurm.addrs(&o, (const char (*)[32])hn, 70, addrs);
    CHECK(!strcmp(addrs[0], "10.0.0.1"));
    CHECK(!strcmp(addrs[63], "10.0.63.1"));
    CHECK(!strcmp(addrs[69], "10.0.69.1"));
    char *calls = slurp("sinfo.args");
    CHECK_STR_HAS(calls, ",h63\n");
    CHECK_STR_HAS(calls, "--nodes=h64,h65,h66,h67,h68,h69\n");
}

/* grow: job expansion through fake salloc/scontrol/scancel (the fake slurmctld merges
 * job 77 into 42 when told NumNodes=0); the environment afterwards is the grown job's */
static void test_grow(void)
{
    char path[512], did[320], why[400];
    sup_opts o = {0};
    const char *fakes[][2] = {{"GRIT_SCONTROL", "scontrol"}, {"GRIT_SALLOC", "salloc"},
                              {"GRIT_SCANCEL", "scancel"}};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, fakes[i][1]);
        setenv(fakes[i][0], path, 1);
    }
    write_script("scontrol", "d=$(dirname \"$0\"); echo \"$@\" >> \"$d/scontrol.args\"\n"
                             "case \"$*\" in\n"
                             "'show hostnames n[1-2]') printf 'n1\\nn2\\n';;\n"
                             "'show hostnames n[1,3]') printf 'n1\\nn3\\n';;\n"
                             "'-o show job 42') l='n[1-2] NumNodes=2 NumCPUs=4'\n"
                             "  [ -e \"$d/merged\" ] && l='n[1,3] NumNodes=2 NumCPUs=4'\n"
                             "  [ -e \"$d/merged\" ] && [ -e \"$d/uneven\" ] && l='n[1,3] NumNodes=2 NumCPUs=3'\n"
                             "  echo \"JobId=42 JobName=t ReqNodeList=n9 NodeList=$l Partition=gpu\";;\n"
                             "'update JobId=77 NumNodes=0') [ -e \"$d/refuse\" ] && "
                             "{ echo 'Job step already exists for job 77' >&2; exit 1; }\n"
                             "  touch \"$d/merged\";;\n"
                             "'update JobId=78 NumNodes=0') ;;\n"
                             "*) exit 1;; esac");
    write_script("salloc", "echo \"$@\" >> \"$(dirname \"$0\")/salloc.args\"\n"
                           "echo 'salloc: Granted job allocation 77' >&2");
    write_script("scancel", "echo \"$@\" >> \"$(dirname \"$0\")/scancel.args\"");
    unsetenv("SLURM_JOB_ID");
    CHECK_INT(sup_backend_slurm.grow(&o, "n3", did, sizeof did, why, sizeof why), -1);
    CHECK_STR_HAS(why, "SLURM_JOB_ID is not set");
    setenv("SLURM_JOB_ID", "42", 1);
    setenv("SLURM_JOB_NODELIST", "n[1-2]", 1);
    setenv("SLURM_JOB_CPUS_PER_NODE", "2(x2)", 1);
    setenv("SLURM_TASKS_PER_NODE", "1(x2)", 1);
    /* in the allocation already: nothing asked of Slurm */
    CHECK_INT(sup_backend_slurm.grow(&o, "n2", did, sizeof did, why, sizeof why), 0);
    CHECK(did[0] == '\0');
    CHECK(access(strcat(strcpy(path, dir), "/salloc.args"), F_OK) != 0);
    /* outside: salloc on it with expand:42 and this job's partition and CPUs, the new
     * job merged, this process's SLURM_* the grown allocation's */
    CHECK_INT(sup_backend_slurm.grow(&o, "n3", did, sizeof did, why, sizeof why), 0);
    CHECK_STR_HAS(did, "job 42 expanded onto n3 (job 77 merged): nodes n[1,3]");
    CHECK_STR_HAS(slurp("salloc.args"), "--no-shell --immediate=60 --nodes=1 --ntasks=1 "
                  "--cpus-per-task=2 --nodelist=n3 --dependency=expand:42 --job-name=grit-grow "
                  "--partition=gpu");
    CHECK_STR_HAS(slurp("scontrol.args"), "update JobId=77 NumNodes=0");
    CHECK(!strcmp(getenv("SLURM_JOB_NODELIST"), "n[1,3]"));
    CHECK(!strcmp(getenv("SLURM_NODELIST"), "n[1,3]"));
    CHECK(!strcmp(getenv("SLURM_JOB_NUM_NODES"), "2") && !strcmp(getenv("SLURM_NNODES"), "2"));
    CHECK(!strcmp(getenv("SLURM_JOB_CPUS_PER_NODE"), "2(x2)"));
    CHECK(getenv("SLURM_TASKS_PER_NODE") == NULL);
    /* CPUs not even across nodes: not guessed */
    snprintf(path, sizeof path, "%s/uneven", dir);
    fclose(fopen(path, "w"));
    snprintf(path, sizeof path, "%s/merged", dir);
    unlink(path);
    CHECK_INT(sup_backend_slurm.grow(&o, "n3", did, sizeof did, why, sizeof why), 0);
    CHECK(getenv("SLURM_JOB_CPUS_PER_NODE") == NULL);
    snprintf(path, sizeof path, "%s/uneven", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/merged", dir); /* job 42 on n[1-2] again */
    unlink(path);
    /* Slurm without permit_job_expansion: said so */
    write_script("salloc", "echo 'salloc: error: Job submit/allocate failed: Requested "
                           "operation not supported on this system' >&2; exit 1");
    CHECK_INT(sup_backend_slurm.grow(&o, "n3", did, sizeof did, why, sizeof why), -1);
    CHECK_STR_HAS(why, "Slurm refuses job expansion (slurm.conf needs SchedulerParameters="
                  "permit_job_expansion); salloc --dependency=expand:42 -w n3 failed (status 1): "
                  "salloc: error: Job submit/allocate failed: Requested operation not supported");
    CHECK(!strncmp(why, "Slurm refuses", 13));
    /* another refusal: Slurm's words only */
    write_script("salloc", "echo 'salloc: error: Unable to allocate resources: Requested node "
                           "configuration is not available' >&2; exit 1");
    CHECK_INT(sup_backend_slurm.grow(&o, "n3", did, sizeof did, why, sizeof why), -1);
    CHECK(!strncmp(why, "salloc --dependency=expand:42 -w n3 failed (status 1): salloc: error: "
                   "Unable to allocate", 88));
    /* the merge refused: the new job cancelled, the reason given */
    write_script("salloc", "echo 'salloc: Granted job allocation 77' >&2");
    snprintf(path, sizeof path, "%s/refuse", dir);
    fclose(fopen(path, "w"));
    CHECK_INT(sup_backend_slurm.grow(&o, "n3", did, sizeof did, why, sizeof why), -1);
    CHECK_STR_HAS(why, "scontrol update JobId=77 NumNodes=0 (hand n3 to job 42) failed "
                  "(status 1): Job step already exists for job 77; job 77 cancelled");
    CHECK_STR_HAS(slurp("scancel.args"), "77\n");
    /* merged but the node is not in the job: an error, not a silent success */
    unlink(path);
    write_script("salloc", "echo 'salloc: Granted job allocation 78' >&2");
    CHECK_INT(sup_backend_slurm.grow(&o, "n3", did, sizeof did, why, sizeof why), -1);
    CHECK_STR_HAS(why, "job 78's node n3 was not merged into job 42 (its nodes: n[1-2])");
    unsetenv("GRIT_SALLOC");
    unsetenv("GRIT_SCANCEL");
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/grit-test-bslurm.XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    CHECK(sup_backend_find("slurm") == &sup_backend_slurm);
    CHECK(sup_backend_find(NULL) == &sup_backend_local);
    CHECK(sup_backend_find("pbs") == NULL);
    test_job_argv();
    test_failed_rank();
    test_hosts();
    test_drain_and_requeue();
    test_check_node();
    test_pair_check();
    test_pair_evidence();
    test_addrs();
    test_grow();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    CHECK_DONE();
}
