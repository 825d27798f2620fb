/*
 * comm.h - the distributed runtime: MPI behind a small interface.
 *
 * This is the only module that includes mpi.h. A build without MPI (or a
 * process not started by an MPI launcher) runs as world size 1 with every
 * collective a local no-op, so the trainer has one code path.
 *
 * Errors are returned, never aborted: communicators use MPI_ERRORS_RETURN,
 * and every blocking wait polls with a deadline (comm.timeout_s). A peer
 * that died or hung shows up as GRIT_EIO "collective X did not complete
 * within T s" on the survivors instead of a hang, so a supervisor can act.
 *
 * Determinism: collectives are called with the same counts in the same
 * order on every rank, and Open MPI's algorithms are then fixed for a given
 * world size, so a world size is bitwise reproducible (tested). Sums that
 * must not depend on the library (the gradient norm) are gathered and
 * added in rank order by the caller.
 *
 * Nonblocking all-reduces (comm_iallreduce_sum + comm_progress/comm_wait_all)
 * let the trainer start reducing one layer's gradients while backward
 * computes the next; comm_progress() is called between layers so the
 * reduction actually advances (Open MPI has no progress thread).
 */
#ifndef GRIT_COMM_COMM_H
#define GRIT_COMM_COMM_H

#include <stddef.h>

#include "core/error.h"

#define COMM_MAX_REQS 256

typedef struct comm {
    int rank, size, local_rank;
    int mpi;               /* 1 when MPI is initialised and in use */
    double timeout_s;      /* deadline for any collective to complete */
    void *world;           /* MPI_Comm (opaque) */
    void *reqs;            /* MPI_Request[COMM_MAX_REQS] */
    int nreqs;
    int ndone;             /* reqs[0 .. ndone) known complete (comm_wait_oldest) */
    double wait_s, comm_s; /* time blocked in waits; time from first start to last completion */
    double t_first;
    /* payload bytes of every collective this rank took part in on this handle: the whole
     * vector reduced or gathered (n elements of an all-reduce, every rank's counts of a
     * reduce-scatter or all-gather), plus bytes sent point to point; the wire carries
     * about 2 (p - 1) / p of an all-reduce's payload per rank in a ring */
    unsigned long long bytes;
} comm;

/* Initialises MPI when launched by mpirun/srun (detected from the environment),
 * else world size 1. */
grit_err comm_init(comm *d, int *argc, char ***argv);
void comm_finalize(comm *d);
/* A second handle on the same ranks with its own MPI communicator, so that
 * operations abandoned on one (a deadline passed) cannot be matched by the
 * other's collectives. Collective and blocking (no deadline): call it early,
 * when every rank is known to be alive. comm_dup_free releases it (NULL-safe
 * fields; call before comm_finalize). */
grit_err comm_dup(const comm *d, comm *out);
void comm_dup_free(comm *d);
/* A handle on the ranks of d that passed the same color, ordered by key
 * (MPI_Comm_split; grid.h builds the TP/DP/PP groups with it). Collective over
 * d and blocking, like comm_dup; release with comm_dup_free. Without MPI: a copy. */
grit_err comm_split(const comm *d, int color, int key, comm *out);
/* Leaves at once with a message; for a rank that cannot go on (peers are told by
 * the runtime). */
void comm_abort(comm *d, int code);

grit_err comm_barrier(comm *d);
grit_err comm_bcast(comm *d, void *buf, size_t bytes, int root);
/* In place; every rank gets the same sum. */
grit_err comm_allreduce_sum(comm *d, float *buf, size_t n);
grit_err comm_allreduce_sum_f64(comm *d, double *buf, size_t n);
/* In place; every rank gets the element-wise maximum (vocab-parallel softmax). */
grit_err comm_allreduce_max(comm *d, float *buf, size_t n);
/* In place bitwise OR of n bytes over all ranks. */
grit_err comm_allreduce_or_u8(comm *d, unsigned char *buf, size_t n);
/* Gathers n doubles from every rank into out[size][n] on every rank. */
grit_err comm_allgather_f64(comm *d, const double *in, double *out, size_t n);
/* buf holds size blocks of n floats; block r is summed into rank r's out[n]. */
grit_err comm_reduce_scatter_sum(comm *d, const float *buf, float *out, size_t n);
/* In place: block r of buf[size][n] comes from rank r. */
grit_err comm_allgather(comm *d, float *buf, size_t n);
/* Gathers bytes from every rank to root: out[size][bytes] (root only). */
grit_err comm_gather(comm *d, const void *in, void *out, size_t bytes, int root);

/* Variable-size forms (counts/displs in elements, one per rank):
 * reduce-scatter: rank r receives the sum of every rank's buf[displs[r] ..
 * + counts[r]) in out; all-gather: in place, rank r's block at displs[r];
 * gather: rank r's in[counts[r]] lands at out + displs[r] on root. */
grit_err comm_reduce_scatter_v(comm *d, const float *buf, float *out, const int *counts);
grit_err comm_allgather_v(comm *d, float *buf, const int *counts, const int *displs);
grit_err comm_gather_v(comm *d, const float *in, int n, float *out, const int *counts,
                       const int *displs, int root);

/* Gathers bytes from every rank to every rank: out[size][bytes]. */
grit_err comm_allgather_bytes(comm *d, const void *in, void *out, size_t bytes);

/* All-to-all of variable-size blocks of elem-byte elements (grit prep's
 * dedup exchange by hash owner). send holds size blocks, block r
 * (scounts[r] elements) going to rank r, in rank order. The received blocks
 * are concatenated in source-rank order into a buffer this call allocates:
 * *recv (caller frees; never NULL on success), *rcount elements in all;
 * rcounts[size] (may be NULL) gets each source's count. A block must stay
 * under 2^31 elements (GRIT_EINVAL otherwise). World of 1: a copy. */
grit_err comm_alltoallv(comm *d, const void *send, const size_t *scounts, size_t elem,
                        void **recv, size_t *rcount, size_t *rcounts);

/* Point to point (the network health check's ping-pong). Sends sbytes to
 * rank dest and receives up to rbytes from rank src at the same time, both
 * under the deadline; dest or src may be -1 for "none", so comm_send and
 * comm_recv are the one-sided forms. Every call names a tag (>= 0) that the
 * matching call on the peer uses too. Errors (a dead or hung peer, a rank
 * outside the world) are returned as GRIT_EIO / GRIT_EINVAL, never aborted;
 * in a world of one there is no peer, so any real peer is GRIT_EINVAL. */
grit_err comm_sendrecv(comm *d, const void *sbuf, size_t sbytes, int dest, void *rbuf,
                       size_t rbytes, int src, int tag);
grit_err comm_send(comm *d, const void *buf, size_t bytes, int dest, int tag);
grit_err comm_recv(comm *d, void *buf, size_t bytes, int src, int tag);

/* Starts an in-place sum all-reduce; completes in comm_wait_all. */
grit_err comm_iallreduce_sum(comm *d, float *buf, size_t n);
/* Starts a reduce-scatter (comm_reduce_scatter_v's contract); counts must stay
 * valid until comm_wait_all. Completes in comm_wait_all, in start order. */
grit_err comm_ireduce_scatter_v(comm *d, const float *buf, float *out, const int *counts);
/* Advances outstanding nonblocking operations without blocking. */
void comm_progress(comm *d);
/* Waits (with the deadline) for every outstanding nonblocking operation. */
grit_err comm_wait_all(comm *d);
/* Waits for the oldest outstanding reductions until at most `keep` are in flight: each holds
 * the MPI library's temporaries (Open MPI's nonblocking reduce-scatter twice its whole
 * input), so bounding them bounds the memory. */
grit_err comm_wait_oldest(comm *d, int keep);

#endif
