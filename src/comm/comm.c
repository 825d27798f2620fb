/* comm.c - MPI wrapper with deadlines (see comm.h). Built with or without MPI. */
#include "comm/comm.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/progress.h"

#ifdef GRIT_HAVE_MPI
#include <mpi.h>
#include <pthread.h>

#define COMM(d) (*(MPI_Comm *)(d)->world)
#define REQS(d) ((MPI_Request *)(d)->reqs)

/* Every MPI call is made under this lock (MPI_THREAD_SERIALIZED): the training
 * thread's and the progress thread's. */
static pthread_mutex_t mpi_mu = PTHREAD_MUTEX_INITIALIZER;
static int unlock_rc(int rc)
{
    pthread_mutex_unlock(&mpi_mu);
    return rc;
}
#define LOCKED(expr) unlock_rc((pthread_mutex_lock(&mpi_mu), (expr)))

/* The optional progress thread: while nonblocking gradient reductions are
 * outstanding it calls MPI_Testall every progress_us, so their rounds can advance
 * while backward computes (Open MPI has no progress thread of its own; without
 * this they move only when the training thread enters MPI between layers). */
static struct {
    pthread_t th;
    pthread_cond_t cv;
    int on, quit, active; /* active: requests started, not yet seen complete */
    long us;
    comm *d;
} prog;

static void *progress_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mpi_mu);
    while (!prog.quit) {
        if (!prog.active) {
            pthread_cond_wait(&prog.cv, &mpi_mu);
            continue;
        }
        int flag = 0;
        MPI_Testall(prog.d->nreqs, REQS(prog.d), &flag, MPI_STATUSES_IGNORE);
        if (flag)
            prog.active = 0;
        pthread_mutex_unlock(&mpi_mu);
        usleep((useconds_t)prog.us);
        pthread_mutex_lock(&mpi_mu);
    }
    pthread_mutex_unlock(&mpi_mu);
    return NULL;
}

static void progress_stop(void)
{
    if (!prog.on)
        return;
    pthread_mutex_lock(&mpi_mu);
    prog.quit = 1;
    pthread_cond_signal(&prog.cv);
    pthread_mutex_unlock(&mpi_mu);
    pthread_join(prog.th, NULL);
    pthread_cond_destroy(&prog.cv);
    prog.on = 0;
}

/* Elements in a vector collective (the counts of every rank). */
static size_t count_sum(const comm *d, const int *counts)
{
    size_t n = 0;
    for (int r = 0; r < d->size; r++)
        n += (size_t)counts[r];
    return n;
}

static grit_err mpi_fail(comm *d, int code, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(code, msg, &len);
    return grit_errf(GRIT_EIO, "rank %d: %s failed: %s", d->rank, what, msg);
}

/* Waits for one request with the deadline; polls so a dead peer cannot hang us. */
static grit_err wait_req(comm *d, MPI_Request *r, const char *what)
{
    double t0 = now_seconds();
    int done = 0, spins = 0;
    while (!done) {
        int rc = LOCKED(MPI_Test(r, &done, MPI_STATUS_IGNORE));
        if (rc != MPI_SUCCESS)
            return mpi_fail(d, rc, what);
        if (done)
            break;
        if (now_seconds() - t0 > d->timeout_s)
            return grit_errf(GRIT_EIO,
                             "rank %d: %s did not complete within %.0f s: a peer rank died or "
                             "hung",
                             d->rank, what, d->timeout_s);
        if (++spins > 1000)
            usleep(50);
    }
    d->wait_s += now_seconds() - t0;
    return GRIT_OK;
}

#define CALL(what, expr)                                                                 \
    do {                                                                                 \
        MPI_Request r_;                                                                  \
        int rc_ = LOCKED(expr);                                                          \
        if (rc_ != MPI_SUCCESS)                                                          \
            return mpi_fail(d, rc_, what);                                               \
        return wait_req(d, &r_, what);                                                   \
    } while (0)

static int launched_by_mpi(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE",
                                       "PMI_RANK", NULL};
    for (const char *const *v = vars; *v; v++)
        if (getenv(*v))
            return 1;
    return 0;
}

grit_err comm_init(comm *d, int *argc, char ***argv)
{
    memset(d, 0, sizeof *d);
    d->size = 1;
    d->timeout_s = 300;
    const char *t = getenv("GRIT_DIST_TIMEOUT");
    if (t && atof(t) > 0)
        d->timeout_s = atof(t);
    if (!launched_by_mpi())
        return GRIT_OK;
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return grit_errf(GRIT_EIO, "MPI_Init_thread failed");
    d->world = malloc(sizeof(MPI_Comm));
    d->reqs = calloc(COMM_MAX_REQS, sizeof(MPI_Request));
    if (!d->world || !d->reqs)
        return grit_errf(GRIT_ENOMEM, "out of memory");
    MPI_Comm_dup(MPI_COMM_WORLD, (MPI_Comm *)d->world);
    MPI_Comm_set_errhandler(COMM(d), MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(COMM(d), &d->rank);
    MPI_Comm_size(COMM(d), &d->size);
    /* the launcher's idea of the node: OpenMPI's (mpirun, srun --mpi=pmix), else Slurm's */
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (!lr)
        lr = getenv("SLURM_LOCALID");
    d->local_rank = lr ? atoi(lr) : d->rank;
    d->mpi = 1;
    /* GRIT_DIST_PROGRESS_US: the progress thread's polling period; 0 (the default): no
     * thread. On the 2-core machine it was measured on it did not pay (bench/dp_scaling.sh):
     * a round of a reduction runs under the MPI lock, so the training thread's next start
     * waits for it, and the thread takes CPU from the other rank. */
    const char *pu = getenv("GRIT_DIST_PROGRESS_US");
    prog.us = pu && *pu ? atol(pu) : 0;
    if (d->size > 1 && prog.us > 0 && provided >= MPI_THREAD_SERIALIZED) {
        prog.d = d;
        pthread_cond_init(&prog.cv, NULL);
        prog.on = pthread_create(&prog.th, NULL, progress_main, NULL) == 0;
    }
    return GRIT_OK;
}

void comm_finalize(comm *d)
{
    if (d->mpi) {
        progress_stop();
        MPI_Comm_free((MPI_Comm *)d->world);
        MPI_Finalize();
    }
    free(d->world);
    free(d->reqs);
    memset(d, 0, sizeof *d);
}

grit_err comm_dup(const comm *d, comm *out)
{
    *out = *d;
    out->world = out->reqs = NULL;
    out->nreqs = 0;
    if (!d->mpi)
        return GRIT_OK;
    out->world = malloc(sizeof(MPI_Comm));
    out->reqs = calloc(COMM_MAX_REQS, sizeof(MPI_Request));
    if (!out->world || !out->reqs) {
        free(out->world);
        free(out->reqs);
        out->world = out->reqs = NULL;
        out->mpi = 0;
        return grit_errf(GRIT_ENOMEM, "out of memory");
    }
    int rc = MPI_Comm_dup(COMM(d), (MPI_Comm *)out->world);
    if (rc != MPI_SUCCESS) {
        free(out->world);
        free(out->reqs);
        out->world = out->reqs = NULL;
        out->mpi = 0;
        return mpi_fail(out, rc, "communicator duplication");
    }
    MPI_Comm_set_errhandler(COMM(out), MPI_ERRORS_RETURN);
    return GRIT_OK;
}

grit_err comm_split(const comm *d, int color, int key, comm *out)
{
    *out = *d;
    out->world = out->reqs = NULL;
    out->nreqs = 0;
    if (!d->mpi)
        return GRIT_OK;
    out->world = malloc(sizeof(MPI_Comm));
    out->reqs = calloc(COMM_MAX_REQS, sizeof(MPI_Request));
    int rc = MPI_ERR_NO_MEM;
    if (out->world && out->reqs)
        rc = LOCKED(MPI_Comm_split(COMM(d), color, key, (MPI_Comm *)out->world));
    if (rc != MPI_SUCCESS) {
        free(out->world);
        free(out->reqs);
        out->world = out->reqs = NULL;
        out->mpi = 0;
        return mpi_fail(out, rc, "communicator split");
    }
    MPI_Comm_set_errhandler(COMM(out), MPI_ERRORS_RETURN);
    MPI_Comm_rank(COMM(out), &out->rank);
    MPI_Comm_size(COMM(out), &out->size);
    return GRIT_OK;
}

void comm_dup_free(comm *d)
{
    if (d->mpi && d->world)
        MPI_Comm_free((MPI_Comm *)d->world);
    free(d->world);
    free(d->reqs);
    d->world = d->reqs = NULL;
    d->mpi = 0;
}

void comm_abort(comm *d, int code)
{
    fflush(stdout);
    fflush(stderr);
    if (d->mpi) {
        pthread_mutex_lock(&mpi_mu); /* the progress thread is between calls (Testall never blocks) */
        MPI_Abort(MPI_COMM_WORLD, code);
    }
    _exit(code);
}

grit_err comm_barrier(comm *d)
{
    if (!d->mpi)
        return GRIT_OK;
    CALL("barrier", MPI_Ibarrier(COMM(d), &r_));
}

grit_err comm_bcast(comm *d, void *buf, size_t bytes, int root)
{
    if (!d->mpi)
        return GRIT_OK;
    d->bytes += bytes;
    CALL("broadcast", MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, COMM(d), &r_));
}

grit_err comm_allreduce_sum(comm *d, float *buf, size_t n)
{
    if (!d->mpi)
        return GRIT_OK;
    d->bytes += n * sizeof(float);
    CALL("all-reduce", MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, COMM(d), &r_));
}

grit_err comm_allreduce_max(comm *d, float *buf, size_t n)
{
    if (!d->mpi)
        return GRIT_OK;
    d->bytes += n * sizeof(float);
    CALL("all-reduce max", MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_MAX, COMM(d), &r_));
}

grit_err comm_allreduce_sum_f64(comm *d, double *buf, size_t n)
{
    if (!d->mpi)
        return GRIT_OK;
    d->bytes += n * sizeof(double);
    CALL("all-reduce", MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, COMM(d), &r_));
}

grit_err comm_allreduce_or_u8(comm *d, unsigned char *buf, size_t n)
{
    if (!d->mpi)
        return GRIT_OK;
    d->bytes += n;
    CALL("all-reduce", MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_UNSIGNED_CHAR, MPI_BOR,
                                      COMM(d), &r_));
}

grit_err comm_allgather_f64(comm *d, const double *in, double *out, size_t n)
{
    if (!d->mpi) {
        memcpy(out, in, n * sizeof(double));
        return GRIT_OK;
    }
    d->bytes += n * sizeof(double) * (size_t)d->size;
    CALL("all-gather", MPI_Iallgather(in, (int)n, MPI_DOUBLE, out, (int)n, MPI_DOUBLE, COMM(d), &r_));
}

grit_err comm_reduce_scatter_sum(comm *d, const float *buf, float *out, size_t n)
{
    if (!d->mpi) {
        memmove(out, buf, n * sizeof(float));
        return GRIT_OK;
    }
    d->bytes += n * sizeof(float) * (size_t)d->size;
    CALL("reduce-scatter",
         MPI_Ireduce_scatter_block(buf, out, (int)n, MPI_FLOAT, MPI_SUM, COMM(d), &r_));
}

grit_err comm_allgather(comm *d, float *buf, size_t n)
{
    if (!d->mpi)
        return GRIT_OK;
    d->bytes += n * sizeof(float) * (size_t)d->size;
    CALL("all-gather",
         MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, (int)n, MPI_FLOAT, COMM(d), &r_));
}

grit_err comm_gather(comm *d, const void *in, void *out, size_t bytes, int root)
{
    if (!d->mpi) {
        memcpy(out, in, bytes);
        return GRIT_OK;
    }
    d->bytes += bytes * (size_t)d->size;
    CALL("gather", MPI_Igather(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, root, COMM(d), &r_));
}

grit_err comm_reduce_scatter_v(comm *d, const float *buf, float *out, const int *counts)
{
    if (!d->mpi) {
        memmove(out, buf, (size_t)counts[0] * sizeof(float));
        return GRIT_OK;
    }
    d->bytes += count_sum(d, counts) * sizeof(float);
    CALL("reduce-scatter",
         MPI_Ireduce_scatter(buf, out, counts, MPI_FLOAT, MPI_SUM, COMM(d), &r_));
}

grit_err comm_allgather_v(comm *d, float *buf, const int *counts, const int *displs)
{
    if (!d->mpi)
        return GRIT_OK;
    d->bytes += count_sum(d, counts) * sizeof(float);
    CALL("all-gather", MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs,
                                       MPI_FLOAT, COMM(d), &r_));
}

grit_err comm_gather_v(comm *d, const float *in, int n, float *out, const int *counts,
                       const int *displs, int root)
{
    if (!d->mpi) {
        memmove(out + displs[0], in, (size_t)n * sizeof(float));
        return GRIT_OK;
    }
    d->bytes += count_sum(d, counts) * sizeof(float);
    CALL("gather", MPI_Igatherv(in, n, MPI_FLOAT, out, counts, displs, MPI_FLOAT, root, COMM(d),
                                &r_));
}

grit_err comm_allgather_bytes(comm *d, const void *in, void *out, size_t bytes)
{
    if (!d->mpi) {
        memcpy(out, in, bytes);
        return GRIT_OK;
    }
    d->bytes += bytes * (size_t)d->size;
    CALL("all-gather", MPI_Iallgather(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE,
                                      COMM(d), &r_));
}

/* Waits for n requests under one deadline (see wait_req). */
static grit_err wait_reqs(comm *d, MPI_Request *r, int n, const char *what, int peer)
{
    double t0 = now_seconds();
    int done = 0, spins = 0;
    while (!done) {
        int rc = MPI_Testall(n, r, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS)
            return mpi_fail(d, rc, what);
        if (done)
            break;
        if (now_seconds() - t0 > d->timeout_s) {
            for (int i = 0; i < n; i++)
                if (r[i] != MPI_REQUEST_NULL) {
                    MPI_Cancel(&r[i]);
                    MPI_Request_free(&r[i]);
                }
            return grit_errf(GRIT_EIO,
                             "rank %d: %s with rank %d did not complete within %.0f s: the peer "
                             "died or hung",
                             d->rank, what, peer, d->timeout_s);
        }
        if (++spins > 1000)
            usleep(50);
    }
    d->wait_s += now_seconds() - t0;
    return GRIT_OK;
}

grit_err comm_sendrecv(comm *d, const void *sbuf, size_t sbytes, int dest, void *rbuf,
                       size_t rbytes, int src, int tag)
{
    if (dest >= d->size || src >= d->size || dest < -1 || src < -1 || tag < 0 ||
        sbytes > (size_t)INT32_MAX || rbytes > (size_t)INT32_MAX)
        return grit_errf(GRIT_EINVAL,
                         "rank %d: send/recv: peers %d/%d, tag %d, %zu/%zu bytes: expected ranks "
                         "in [-1, %d), a tag >= 0 and under 2 GiB",
                         d->rank, dest, src, tag, sbytes, rbytes, d->size);
    if (!d->mpi)
        return dest < 0 && src < 0 ? GRIT_OK
                                   : grit_errf(GRIT_EINVAL, "send/recv: no peer in a world of 1");
    d->bytes += dest >= 0 ? sbytes : 0;
    MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int rc = MPI_SUCCESS;
    if (src >= 0)
        rc = MPI_Irecv(rbuf, (int)rbytes, MPI_BYTE, src, tag, COMM(d), &r[0]);
    if (rc == MPI_SUCCESS && dest >= 0)
        rc = MPI_Isend(sbuf, (int)sbytes, MPI_BYTE, dest, tag, COMM(d), &r[1]);
    if (rc != MPI_SUCCESS) {
        if (r[0] != MPI_REQUEST_NULL) {
            MPI_Cancel(&r[0]);
            MPI_Request_free(&r[0]);
        }
        return mpi_fail(d, rc, "send/recv");
    }
    return wait_reqs(d, r, 2, dest >= 0 && src >= 0 ? "send/recv" : dest >= 0 ? "send" : "recv",
                     dest >= 0 ? dest : src);
}

grit_err comm_send(comm *d, const void *buf, size_t bytes, int dest, int tag)
{
    return comm_sendrecv(d, buf, bytes, dest, NULL, 0, -1, tag);
}

grit_err comm_recv(comm *d, void *buf, size_t bytes, int src, int tag)
{
    return comm_sendrecv(d, NULL, 0, -1, buf, bytes, src, tag);
}

/* Room for one more outstanding reduction; takes the MPI lock on success. */
static grit_err reduction_begin(comm *d)
{
    if (d->nreqs == COMM_MAX_REQS)
        return grit_errf(GRIT_EINVAL, "too many outstanding reductions (%d)", COMM_MAX_REQS);
    if (d->nreqs == 0)
        d->t_first = now_seconds();
    pthread_mutex_lock(&mpi_mu);
    return GRIT_OK;
}

/* Counts the reduction just started (rc: the MPI call's result) in REQS(d)[nreqs],
 * wakes the progress thread, and releases the MPI lock. */
static grit_err reduction_end(comm *d, int rc, const char *what)
{
    if (rc == MPI_SUCCESS) {
        d->nreqs++;
        prog.active = 1;
        pthread_cond_signal(&prog.cv);
    }
    pthread_mutex_unlock(&mpi_mu);
    return rc == MPI_SUCCESS ? GRIT_OK : mpi_fail(d, rc, what);
}

grit_err comm_iallreduce_sum(comm *d, float *buf, size_t n)
{
    if (!d->mpi)
        return GRIT_OK;
    d->bytes += n * sizeof(float);
    grit_err e = reduction_begin(d);
    if (e != GRIT_OK)
        return e;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, COMM(d),
                            &REQS(d)[d->nreqs]);
    return reduction_end(d, rc, "all-reduce");
}

grit_err comm_ireduce_scatter_v(comm *d, const float *buf, float *out, const int *counts)
{
    if (!d->mpi) {
        memmove(out, buf, (size_t)counts[0] * sizeof(float));
        return GRIT_OK;
    }
    d->bytes += count_sum(d, counts) * sizeof(float);
    grit_err e = reduction_begin(d);
    if (e != GRIT_OK)
        return e;
    int rc = MPI_Ireduce_scatter(buf, out, counts, MPI_FLOAT, MPI_SUM, COMM(d),
                                 &REQS(d)[d->nreqs]);
    return reduction_end(d, rc, "reduce-scatter");
}

void comm_progress(comm *d)
{
    if (!d->mpi || !d->nreqs)
        return;
    int flag;
    LOCKED(MPI_Testall(d->nreqs, REQS(d), &flag, MPI_STATUSES_IGNORE));
}

grit_err comm_wait_oldest(comm *d, int keep)
{
    if (!d->mpi)
        return GRIT_OK;
    for (; d->nreqs - d->ndone > keep; d->ndone++) {
        grit_err rc = wait_req(d, &REQS(d)[d->ndone], "gradient reduction");
        if (rc != GRIT_OK)
            return rc;
    }
    return GRIT_OK;
}

grit_err comm_wait_all(comm *d)
{
    if (!d->mpi)
        return GRIT_OK;
    for (int i = 0; i < d->nreqs; i++) {
        grit_err rc = wait_req(d, &REQS(d)[i], "gradient reduction");
        if (rc != GRIT_OK)
            return rc;
    }
    if (d->nreqs)
        d->comm_s += now_seconds() - d->t_first;
    pthread_mutex_lock(&mpi_mu);
    d->nreqs = d->ndone = 0;
    prog.active = 0;
    pthread_mutex_unlock(&mpi_mu);
    return GRIT_OK;
}

grit_err comm_alltoallv(comm *d, const void *send, const size_t *scounts, size_t elem,
                        void **recv, size_t *rcount, size_t *rcounts)
{
    *recv = NULL;
    *rcount = 0;
    if (!d->mpi) {
        *recv = malloc(scounts[0] * elem + 1);
        if (!*recv)
            return grit_errf(GRIT_ENOMEM, "all-to-all: out of memory (%zu bytes)",
                             scounts[0] * elem);
        memcpy(*recv, send, scounts[0] * elem);
        *rcount = scounts[0];
        if (rcounts)
            rcounts[0] = scounts[0];
        return GRIT_OK;
    }
    int n = d->size;
    int *sc = calloc((size_t)n * 4, sizeof *sc);
    grit_err rc = GRIT_OK;
    MPI_Datatype t = MPI_DATATYPE_NULL;
    if (!sc)
        return grit_errf(GRIT_ENOMEM, "all-to-all: out of memory");
    int *sd = sc + n, *rc_ = sc + 2 * n, *rd = sc + 3 * n;
    size_t off = 0;
    for (int r = 0; r < n; r++) {
        if (scounts[r] > (size_t)INT32_MAX || off > (size_t)INT32_MAX) {
            rc = grit_errf(GRIT_EINVAL, "all-to-all: a block of %zu elements is too large",
                           scounts[r]);
            goto out;
        }
        sc[r] = (int)scounts[r];
        sd[r] = (int)off;
        off += scounts[r];
    }
    {
        MPI_Request r_;
        int e = LOCKED(MPI_Ialltoall(sc, 1, MPI_INT, rc_, 1, MPI_INT, COMM(d), &r_));
        if (e != MPI_SUCCESS || (rc = wait_req(d, &r_, "all-to-all (counts)")) != GRIT_OK) {
            rc = rc ? rc : mpi_fail(d, e, "all-to-all (counts)");
            goto out;
        }
    }
    size_t total = 0;
    for (int r = 0; r < n; r++) {
        if (total > (size_t)INT32_MAX) {
            rc = grit_errf(GRIT_EINVAL, "all-to-all: %zu elements received is too many", total);
            goto out;
        }
        rd[r] = (int)total;
        total += (size_t)rc_[r];
        if (rcounts)
            rcounts[r] = (size_t)rc_[r];
    }
    *recv = malloc(total * elem + 1);
    if (!*recv) {
        rc = grit_errf(GRIT_ENOMEM, "all-to-all: out of memory (%zu bytes)", total * elem);
        goto out;
    }
    if (LOCKED(MPI_Type_contiguous((int)elem, MPI_BYTE, &t)) != MPI_SUCCESS ||
        LOCKED(MPI_Type_commit(&t)) != MPI_SUCCESS) {
        rc = grit_errf(GRIT_EIO, "all-to-all: cannot make a %zu-byte MPI type", elem);
        goto out;
    }
    {
        MPI_Request r_;
        int e = LOCKED(MPI_Ialltoallv(send, sc, sd, t, *recv, rc_, rd, t, COMM(d), &r_));
        if (e != MPI_SUCCESS || (rc = wait_req(d, &r_, "all-to-all")) != GRIT_OK) {
            rc = rc ? rc : mpi_fail(d, e, "all-to-all");
            goto out;
        }
    }
    *rcount = total;
out:
    if (t != MPI_DATATYPE_NULL)
        LOCKED(MPI_Type_free(&t));
    if (rc != GRIT_OK) {
        free(*recv);
        *recv = NULL;
    }
    free(sc);
    return rc;
}

#else /* no MPI: world size 1 */

grit_err comm_init(comm *d, int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    memset(d, 0, sizeof *d);
    d->size = 1;
    d->timeout_s = 300;
    return GRIT_OK;
}
void comm_finalize(comm *d) { memset(d, 0, sizeof *d); }
grit_err comm_dup(const comm *d, comm *out)
{
    *out = *d;
    return GRIT_OK;
}
void comm_dup_free(comm *d) { (void)d; }
grit_err comm_split(const comm *d, int color, int key, comm *out)
{
    (void)color, (void)key;
    *out = *d;
    return GRIT_OK;
}
grit_err comm_allreduce_max(comm *d, float *b, size_t n) { (void)d, (void)b, (void)n; return GRIT_OK; }
void comm_abort(comm *d, int code)
{
    (void)d;
    fflush(stderr);
    _exit(code);
}
grit_err comm_barrier(comm *d) { (void)d; return GRIT_OK; }
grit_err comm_bcast(comm *d, void *b, size_t n, int root) { (void)d, (void)b, (void)n, (void)root; return GRIT_OK; }
grit_err comm_allreduce_sum(comm *d, float *b, size_t n) { (void)d, (void)b, (void)n; return GRIT_OK; }
grit_err comm_allreduce_sum_f64(comm *d, double *b, size_t n) { (void)d, (void)b, (void)n; return GRIT_OK; }
grit_err comm_allreduce_or_u8(comm *d, unsigned char *b, size_t n) { (void)d, (void)b, (void)n; return GRIT_OK; }
grit_err comm_allgather_f64(comm *d, const double *in, double *out, size_t n)
{
    (void)d;
    memcpy(out, in, n * sizeof(double));
    return GRIT_OK;
}
grit_err comm_reduce_scatter_sum(comm *d, const float *b, float *out, size_t n)
{
    (void)d;
    memmove(out, b, n * sizeof(float));
    return GRIT_OK;
}
grit_err comm_allgather(comm *d, float *b, size_t n) { (void)d, (void)b, (void)n; return GRIT_OK; }
grit_err comm_gather(comm *d, const void *in, void *out, size_t n, int root)
{
    (void)d, (void)root;
    memcpy(out, in, n);
    return GRIT_OK;
}
grit_err comm_reduce_scatter_v(comm *d, const float *b, float *out, const int *counts)
{
    (void)d;
    memmove(out, b, (size_t)counts[0] * sizeof(float));
    return GRIT_OK;
}
grit_err comm_allgather_v(comm *d, float *b, const int *c, const int *di) { (void)d, (void)b, (void)c, (void)di; return GRIT_OK; }
grit_err comm_gather_v(comm *d, const float *in, int n, float *out, const int *c, const int *di, int root)
{
    (void)d, (void)c, (void)root;
    memmove(out + di[0], in, (size_t)n * sizeof(float));
    return GRIT_OK;
}
grit_err comm_allgather_bytes(comm *d, const void *in, void *out, size_t n)
{
    (void)d;
    memcpy(out, in, n);
    return GRIT_OK;
}
grit_err comm_sendrecv(comm *d, const void *sb, size_t sn, int dest, void *rb, size_t rn, int src,
                       int tag)
{
    (void)d, (void)sb, (void)sn, (void)rb, (void)rn, (void)tag;
    return dest < 0 && src < 0 ? GRIT_OK
                               : grit_errf(GRIT_EINVAL, "send/recv: no peer in a world of 1 "
                                                        "(built without MPI)");
}
grit_err comm_send(comm *d, const void *b, size_t n, int dest, int tag)
{
    return comm_sendrecv(d, b, n, dest, NULL, 0, -1, tag);
}
grit_err comm_recv(comm *d, void *b, size_t n, int src, int tag)
{
    return comm_sendrecv(d, NULL, 0, -1, b, n, src, tag);
}
grit_err comm_iallreduce_sum(comm *d, float *b, size_t n) { (void)d, (void)b, (void)n; return GRIT_OK; }
grit_err comm_ireduce_scatter_v(comm *d, const float *b, float *out, const int *counts)
{
    (void)d;
    memmove(out, b, (size_t)counts[0] * sizeof(float));
    return GRIT_OK;
}
void comm_progress(comm *d) { (void)d; }
grit_err comm_wait_all(comm *d) { (void)d; return GRIT_OK; }

grit_err comm_alltoallv(comm *d, const void *send, const size_t *scounts, size_t elem,
                        void **recv, size_t *rcount, size_t *rcounts)
{
    (void)d;
    *rcount = 0;
    *recv = malloc(scounts[0] * elem + 1);
    if (!*recv)
        return grit_errf(GRIT_ENOMEM, "all-to-all: out of memory (%zu bytes)",
                         scounts[0] * elem);
    memcpy(*recv, send, scounts[0] * elem);
    *rcount = scounts[0];
    if (rcounts)
        rcounts[0] = scounts[0];
    return GRIT_OK;
}

#endif
