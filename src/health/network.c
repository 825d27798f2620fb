/*
 * network.c - the network check. Across nodes this will be an MPI
 * all-reduce bus-bandwidth and latency test (like nccl-tests, naming the
 * slowest pair); it arrives with data-parallel training, which brings MPI
 * into the build. Until then grit runs on one node and the check says so.
 */
#include "health/health.h"

grit_err health_check_network(health_report *r, const health_opts *o)
{
    (void)o;
    health_result *res = health_add(r, "network.allreduce");
    if (res)
        health_set(res, HEALTH_SKIP,
                   "skipped: single node (the MPI all-reduce bandwidth/latency check comes "
                   "with multi-node training)");
    return GRIT_OK;
}
