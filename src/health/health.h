/*
 * health.h - node health checks: the common result type, options, the
 * report and the fault-injection switch shared by every check family.
 *
 * A check family (compute, memory, disk, network, gpu, system; one .c each)
 * appends one or more results to a health_report. Each result names what
 * was measured, the threshold it was held to, the verdict and, when it did
 * not pass, the reason in one line. The report decides the exit code:
 *   0 healthy (every result pass or skip), 1 unhealthy (any fail),
 *   2 could not run (an ERROR result and no fail).
 *
 * Not here: printing (report.c renders into a FILE* the caller owns and
 * src/cli/ decides where it goes), Slurm actions (slurm.c).
 *
 * Fault injection (for tests): GRIT_HEALTH_FAULT=<fault>[,<fault>...] makes
 * the named check fail on demand through the same code path that would
 * catch the real fault (a bit is flipped in a GEMM output, memory is
 * corrupted after writing, fsync is reported failed, ...). The list of
 * names is health_fault_names. GRIT_HEALTH_SLOWDOWN=F stretches every timed
 * compute interval by F (>= 1), which is how the throughput check's
 * sensitivity is measured. The network faults hit one rank,
 * GRIT_HEALTH_FAULT_RANK (default the last): slow_link delays every message
 * that rank sends (and each all-reduce it joins) by GRIT_HEALTH_NET_DELAY_US (default 5000),
 * allreduce_corrupt changes one element of that rank's all-reduce result.
 *
 * Ownership: health_report_init/free pair; results own no heap memory.
 */
#ifndef GRIT_HEALTH_HEALTH_H
#define GRIT_HEALTH_HEALTH_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

struct comm; /* comm/comm.h */

typedef enum health_verdict {
    HEALTH_PASS = 0,
    HEALTH_SKIP = 1,
    HEALTH_FAIL = 2,
    HEALTH_ERROR = 3, /* the check itself could not run (e.g. no memory for its buffers) */
    HEALTH_WARN = 4   /* passed, but something worth a look was seen (a benign GPU Xid) */
} health_verdict;

/* "pass", "skip", "fail", "error", "warn" */
const char *health_verdict_name(health_verdict v);
static inline int health_verdict_bad(health_verdict v)
{
    return v == HEALTH_FAIL || v == HEALTH_ERROR;
}

/* How the measured value is held to the threshold. */
typedef enum health_cmp {
    HEALTH_CMP_NONE = 0, /* no numeric threshold (e.g. a digest equality) */
    HEALTH_CMP_LE = 1,   /* pass when measured <= threshold */
    HEALTH_CMP_GE = 2    /* pass when measured >= threshold */
} health_cmp;

typedef struct health_result {
    char name[48];     /* "family.check", e.g. "compute.gemm_kat" */
    char unit[24];     /* "GFLOP/s", "u (2^-24)", "bytes", ... ; "" when none */
    char reason[320];  /* why it failed or was skipped; a short note when it passed */
    double measured;   /* NAN when nothing was measured */
    double threshold;  /* NAN when there is no numeric threshold */
    health_cmp cmp;
    health_verdict verdict;
    double seconds;    /* time its check family took */
} health_result;

typedef enum health_mode { HEALTH_QUICK = 0, HEALTH_DEEP = 1 } health_mode;

#define HEALTH_MAX_RESULTS 96
#define HEALTH_MAX_LIST 16

/* Options. health_opts_defaults() fills every field for a mode; the CLI
 * overrides what the user gave. Byte counts of 0 mean "derive from mode". */
typedef struct health_opts {
    health_mode mode;
    double deep_seconds;      /* deep mode: target seconds spent in the timed compute loop */
    /* compute */
    uint64_t seed;
    int threads;              /* 0: OpenMP default */
    const struct health_baseline *baseline; /* NULL: no throughput comparison */
    double slow_factor;       /* fail when throughput < baseline / slow_factor */
    int gemm_threads;         /* threads of the throughput GEMM (default 1; 0: all) */
    /* memory */
    double mem_fraction;      /* of MemAvailable */
    size_t mem_max_bytes;     /* cap on the memory test size */
    double min_mem_gbps;      /* absolute floor on memory bandwidth */
    /* disk */
    const char *dir;
    size_t disk_test_bytes;
    uint64_t need_bytes;      /* free space needed; 0 = derived from ckpt_model x ckpt_count */
    const char *ckpt_model;   /* preset name, e.g. "pythia-160m" (NULL: none) */
    int ckpt_count;
    double min_disk_mbps;
    /* gpu */
    int expect_gpus;          /* -1: any number (0 means: none expected) */
    double max_gpu_temp_c;
    double xid_window_s;      /* deep mode: seconds to wait for Xid events (0: no wait) */
    const char *nvml_path;    /* NVML library to dlopen (default libnvidia-ml.so.1) */
    /* network (only when comm has more than one rank; see network.c) */
    struct comm *comm;        /* NULL: one process, the network check skips */
    size_t net_max_bytes;     /* largest all-reduce of the sweep (quick 1 MiB, deep 64 MiB) */
    size_t net_pair_bytes;    /* ping-pong message for pair bandwidth (quick 8 MiB, deep 64 MiB) */
    double min_busbw_gbps;    /* all-reduce bus bandwidth floor at the largest size */
    double max_allreduce_us;  /* all-reduce latency ceiling (smallest size) */
    double min_pair_gbps;     /* ping-pong bandwidth floor for every pair */
    double max_pair_us;       /* ping-pong one-way latency ceiling for every pair */
    double net_rel_factor;    /* a pair/node worse than the median by this factor fails */
    /* system */
    uint64_t min_nofile;
    uint64_t min_memlock;     /* bytes */
    const char *require_bins[HEALTH_MAX_LIST];
    int n_require_bins;
    const char *require_libs[HEALTH_MAX_LIST];
    int n_require_libs;
    double ref_time;          /* seconds since the epoch from the supervisor; NAN: none */
    double max_skew_s;
    /* faults (parsed from GRIT_HEALTH_FAULT and GRIT_HEALTH_SLOWDOWN) */
    uint32_t faults;          /* bit i set: health_fault_names[i] injected */
    int fault_bit;            /* bit flipped by gemm_bitflip / memory_corrupt (GRIT_HEALTH_FAULT_BIT) */
    double slowdown;          /* >= 1 */
    int fault_rank;           /* rank that slow_link / allreduce_corrupt hit (GRIT_HEALTH_FAULT_RANK; -1: last) */
    double net_delay_us;      /* delay per message on fault_rank (GRIT_HEALTH_NET_DELAY_US) */
} health_opts;

void health_opts_defaults(health_opts *o, health_mode mode);

/* Faults: names in the order of their bits. */
typedef enum health_fault {
    HF_GEMM_BITFLIP, HF_LAYERNORM_CORRUPT, HF_ATTENTION_CORRUPT, HF_ADAMW_CORRUPT,
    HF_SLOW_COMPUTE, HF_MEMORY_CORRUPT, HF_SLOW_MEMORY, HF_DISK_READONLY, HF_FSYNC_FAIL,
    HF_DISK_FULL, HF_SLOW_DISK, HF_GPU_ECC, HF_NOFILE_LIMIT, HF_MEMLOCK_LIMIT,
    HF_MISSING_BINARY, HF_CLOCK_SKEW, HF_SLOW_LINK, HF_ALLREDUCE_CORRUPT, HF_COUNT
} health_fault;
extern const char *const health_fault_names[HF_COUNT];

/* Parses GRIT_HEALTH_FAULT, GRIT_HEALTH_FAULT_BIT and GRIT_HEALTH_SLOWDOWN from
 * the environment into o; GRIT_EINVAL (with context) on an unknown name. */
grit_err health_faults_from_env(health_opts *o);

/* Injected fault GRIT_FAULT_NODE_DOWN (core/fault.h): 1 when the marker file it names
 * exists - this node is down, as if it could not be reached - with the reason in why;
 * else 0. */
int health_node_down(char *why, size_t cap);
static inline int health_fault_on(const health_opts *o, health_fault f)
{
    return (o->faults >> f) & 1u;
}

/* The network check's measurements (network.c), kept for the report:
 * the all-reduce sweep like nccl-tests' table and every pair's ping-pong. */
typedef struct health_net_size {
    size_t bytes;
    double time_us;     /* best iteration, slowest rank */
    double algbw_gbps;  /* bytes / time */
    double busbw_gbps;  /* algbw * 2 (n - 1) / n */
    int wrong_rank;     /* first rank whose result was wrong, -1 when all right */
} health_net_size;

typedef struct health_net_pair {
    int a, b;           /* ranks, a < b */
    double latency_us;  /* one way: half the best round trip of a small message */
    double gbps;        /* 2 x bytes / best round trip of a large message */
} health_net_pair;

#define HEALTH_NET_MAX_SIZES 32

typedef struct health_net {
    int nranks;
    char (*hosts)[64];  /* [nranks] */
    health_net_size sizes[HEALTH_NET_MAX_SIZES];
    int nsizes;
    health_net_pair *pairs; /* [npairs], sorted by (a, b) */
    int npairs;
    int rounds;         /* pairwise rounds (pairs in one round run at the same time) */
    size_t pair_bytes;
} health_net;

typedef struct health_report {
    health_result results[HEALTH_MAX_RESULTS];
    int n;
    double seconds;      /* whole run */
    char host[64];
    health_mode mode;
    int threads;         /* compute threads used (set by the compute check) */
    char digest[24];     /* hex xxh3 of the deterministic kernel outputs ("" if not run) */
    int rank, nranks;    /* this process in the MPI world (0 and 1 alone) */
    health_net *net;     /* owned; NULL unless the network check ran across ranks */
} health_report;

void health_report_init(health_report *r, health_mode mode);
void health_report_free(health_report *r); /* frees r->net */

/* Appends a result and returns it (zeroed, measured/threshold NAN); NULL when
 * full. The name is printf-formatted. */
health_result *health_add(health_report *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Sets measured/threshold/cmp/unit and the verdict from the comparison. */
void health_judge(health_result *res, double measured, health_cmp cmp, double threshold,
                  const char *unit);
/* Sets the verdict and a printf-formatted reason. */
void health_set(health_result *res, health_verdict v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* 0 healthy, 1 unhealthy, 2 could not run (see the top of this file). */
int health_exit_code(const health_report *r);
/* The first failing result (or erroring, when none failed); NULL when healthy. */
const health_result *health_first_bad(const health_report *r);

/* The check families. Each appends its results and returns GRIT_OK unless it
 * could not record anything at all. */
grit_err health_check_system(health_report *r, const health_opts *o);
grit_err health_check_compute(health_report *r, const health_opts *o);
grit_err health_check_memory(health_report *r, const health_opts *o);
grit_err health_check_disk(health_report *r, const health_opts *o);
grit_err health_check_network(health_report *r, const health_opts *o);
grit_err health_check_gpu(health_report *r, const health_opts *o);

/* The network check's pairwise schedule (circle method): the number of rounds
 * for n ranks, and rank's partner in a round (-1: none this round). Every
 * pair meets exactly once; no rank is in two pairs of one round. */
int health_net_rounds(int n);
int health_net_partner(int n, int round, int rank);

/* Runs every family in a fixed order and times the whole run. Under MPI
 * (o->comm with more than one rank) every rank must call it: the network
 * family is collective. */
grit_err health_run(health_report *r, const health_opts *o);

/* Under MPI, after health_run on every rank: rank 0's report gains one
 * result per bad check of every other rank ("rank2.disk.fsync", its reason
 * prefixed with the rank and host), and every rank returns the same exit
 * code (0/1/2 as health_exit_code, over all ranks) in *code. Collective. */
grit_err health_merge_ranks(health_report *r, struct comm *d, int *code);

#endif
