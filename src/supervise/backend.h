/*
 * backend.h - how grit launch starts a job and reaches its nodes.
 *
 * The supervisor (sup.c) is the same for every backend; a backend supplies:
 *   hosts        the node slots' names (NULL: slots are node0..node{N+K-1})
 *   job_argv     the command that starts every rank of one attempt
 *   check_node   a node's health (NULL: `grit health --quick` on this machine)
 *   check_begin  start the checks of all suspects at once (optional)
 *   pair_check   the MPI pairwise network check between two nodes (optional; a network
 *                incident's evidence: the suspect with a healthy peer, two healthy peers)
 *   cordoned     a node was taken out of service (e.g. drained in Slurm)
 *   job_stopped  after the job's launcher process was stopped (clean up leftovers)
 *   no_spare     a node failed with no spare left; 1 when handled (e.g. requeued)
 *   grow         a node from outside (--on-no-spare) joins the job's allocation before
 *                its health check (optional: the local backend's slots need nothing)
 *   failed_rank  the rank named as failed in the attempt's log, or -1
 *   addrs        each host's address as the allocation knows it (optional: the
 *                heartbeat socket's address and which hosts are other machines,
 *                hb_bind.h)
 *
 *   local  (backend_local.c) mpirun on this machine; node slots are virtual.
 *   slurm  (backend_slurm.c) srun steps inside the current Slurm allocation; node slots
 *          are its hosts; a rank's PID lives on another node, so remote_ranks is set
 *          and the supervisor never signals or inspects rank PIDs itself.
 */
#ifndef GRIT_SUPERVISE_BACKEND_H
#define GRIT_SUPERVISE_BACKEND_H

#include <stddef.h>

#include "core/error.h"
#include "supervise/sup.h"

#define BACKEND_ARGV_MAX 512

typedef struct sup_backend {
    const char *name;
    int remote_ranks;
    /* Fills names[0..*n) (at most cap) with the allocation's hosts. */
    grit_err (*hosts)(const sup_opts *o, char names[][32], int cap, int *n);
    /* argv (NULL-terminated, at most BACKEND_ARGV_MAX entries) for `nodes` (comma list of
     * `count` names) x rpn ranks; strings may point into buf. Returns 0, -1 on overflow. */
    int (*job_argv)(const sup_opts *o, const char *nodes, int count, int rpn, int attempt,
                    char **argv, char *buf, size_t cap);
    /* 0 healthy, 1 unhealthy (why filled); fault: GRIT_HEALTH_FAULT to inject or NULL. */
    int (*check_node)(const sup_opts *o, const char *node, const char *fault, char *why,
                      size_t cap);
    /* Optional: starts the checks of n suspects at once (faults[i]: as for check_node);
     * check_node then returns their verdicts instead of checking one by one. */
    void (*check_begin)(const sup_opts *o, char targets[][64], int n, const char *const *faults);
    /* Optional: the network between nodes a and b (one rank on each): 0 healthy, 1 failed,
     * -1 could not be run; why filled either way. */
    int (*pair_check)(const sup_opts *o, const char *a, const char *b, char *why, size_t cap);
    void (*cordoned)(const sup_opts *o, const char *node, const char *reason);
    void (*job_stopped)(const sup_opts *o);
    int (*no_spare)(const sup_opts *o, const char *reason);
    /* Optional: makes node usable by the job's next step (Slurm: expands the allocation
     * onto it; nothing when it is in it already). 0 done (what was done in did, "" for
     * nothing), -1 refused (why filled: what failed and how to fix it). */
    int (*grow)(const sup_opts *o, const char *node, char *did, size_t dcap, char *why,
                size_t wcap);
    int (*failed_rank)(const char *log);
    /* Optional: addrs[i] = host names[i]'s IPv4 address (dotted) as the allocation knows
     * it, "" where it cannot be learnt. Never fails: an unknown host is other machine. */
    void (*addrs)(const sup_opts *o, const char (*names)[32], int n, char (*addrs)[16]);
} sup_backend;

/* The backend called name ("local" or "slurm"), or NULL. */
const sup_backend *sup_backend_find(const char *name);

extern const sup_backend sup_backend_local, sup_backend_slurm;

#endif
