/*
 * spec.h - the cluster spec: a JSON file in the shape of SageMaker HyperPod's
 * create-cluster request, plus grit's own fields.
 *
 *   {
 *     "ClusterName": "demo",
 *     "Network": {"Bridge": "gritc0", "Subnet": "10.79.0", "Port": 18200},   (grit)
 *     "InstanceGroups": [
 *       {"InstanceGroupName": "controller", "Role": "controller",             (Role: grit)
 *        "InstanceType": "ml.c5.xlarge", "InstanceCount": 1,
 *        "LifeCycleConfig": {"SourceS3Uri": "./lifecycle", "OnCreate": "on_create.sh"},
 *        "ThreadsPerCore": 1},
 *       {"InstanceGroupName": "workers", "Role": "worker", "InstanceType": "ml.g5.xlarge",
 *        "InstanceCount": 4, "WarmSpares": 1, ...}]                          (WarmSpares: grit)
 *   }
 *
 * The `ssh` provider (grit): a top-level "Ssh" object,
 *     "Ssh": {"User": "root", "IdentityFile": "id_ed25519", "KnownHosts": "known_hosts",
 *             "Port": 22, "RemoteDir": "/var/lib/grit-node"}
 * and in every group "Hosts": the addresses of its machines, one per node (InstanceCount +
 * WarmSpares of them, in slot order). Without "Ssh" the provider is `local` and "Hosts"
 * is refused. IdentityFile and KnownHosts resolve like SourceS3Uri and must exist (host
 * keys are always checked).
 *
 * Every error names the file, line:column, the field and what was expected
 * (jcfg). SourceS3Uri is a local directory (relative to the spec's folder, or
 * file://); OnCreate must be a regular file in it. Exactly one controller group
 * with InstanceCount 1. Total nodes (counts + spares) at most CLUSTER_MAX_NODES.
 * The spec never touches the machine: it only reads files.
 */
#ifndef GRIT_CLUSTER_SPEC_H
#define GRIT_CLUSTER_SPEC_H

#include <limits.h>

#include "core/error.h"

#define CLUSTER_MAX_NODES 32
#define CLUSTER_MAX_GROUPS 16

typedef enum cluster_role { CLUSTER_CONTROLLER, CLUSTER_LOGIN, CLUSTER_WORKER } cluster_role;

typedef struct cluster_group {
    char name[64];              /* InstanceGroupName */
    cluster_role role;          /* Role (default worker) */
    char type[64];              /* InstanceType; also the Slurm node feature */
    int count;                  /* InstanceCount >= 0 */
    int spares;                 /* WarmSpares (worker groups only) */
    int threads_per_core;       /* ThreadsPerCore 1|2 */
    char source[PATH_MAX];      /* LifeCycleConfig.SourceS3Uri resolved to an absolute dir */
    char on_create[256];        /* LifeCycleConfig.OnCreate, a file name in source */
    int nhosts;                 /* Hosts (ssh provider) */
    char hosts[CLUSTER_MAX_NODES][64];
} cluster_group;

typedef struct cluster_spec {
    char name[64];               /* ClusterName */
    char file[PATH_MAX];         /* the spec file as given */
    char bridge[16];             /* Network.Bridge (default gritc0) */
    char subnet[16];             /* Network.Subnet, first three octets (default 10.79.0) */
    int port;                    /* Network.Port, slurmctld's; node i at port+i (default 18200) */
    int ssh;                     /* "Ssh" given: the ssh provider */
    char ssh_user[64];           /* Ssh.User (default root) */
    char ssh_key[PATH_MAX];      /* Ssh.IdentityFile, absolute */
    char ssh_known[PATH_MAX];    /* Ssh.KnownHosts, absolute */
    int ssh_port;                /* Ssh.Port (default 22) */
    char remote_dir[256];        /* Ssh.RemoteDir: the node's files on each host */
    int ngroups;
    cluster_group groups[CLUSTER_MAX_GROUPS];
} cluster_spec;

/* Reads and validates path into *s (caller-owned, no allocation kept). */
grit_err cluster_spec_load(cluster_spec *s, const char *path);

/* The same from text (name for messages; relative sources resolve against base_dir). */
grit_err cluster_spec_parse(cluster_spec *s, const char *name, const char *text,
                            const char *base_dir);

const char *cluster_role_name(cluster_role r);

/* Index of the group named name, or -1. */
int cluster_spec_group(const cluster_spec *s, const char *name);

#endif
