/* test_network.c - the network check's pieces that need no second rank: the
 * pairwise round schedule (every pair once, nobody twice in a round, for 2..64
 * ranks), the single-process skip, comm's point-to-point calls in a world of
 * one (no peer: an error, not a crash), the merge of one rank, the new fault
 * names and the warn verdict. The collective paths run in integration.health_mpi. */
#include <stdlib.h>

#include "../check.h"
#include "comm/comm.h"
#include "health/health.h"
#include "health/report.h"

static void check_schedule(int n)
{
    int rounds = health_net_rounds(n);
    CHECK_INT(rounds, n % 2 ? n : n - 1);
    int *met = calloc((size_t)n * n, sizeof *met);
    for (int r = 0; r < rounds; r++) {
        int byes = 0;
        for (int q = 0; q < n; q++) {
            int p = health_net_partner(n, r, q);
            if (p < 0) {
                byes++;
                continue;
            }
            CHECK(p != q && p < n);
            CHECK_INT(health_net_partner(n, r, p), q); /* symmetric: one pair per rank */
            met[q * n + p]++;
        }
        CHECK_INT(byes, n % 2); /* odd n: exactly one rank sits out each round */
    }
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++)
            if (a != b && met[a * n + b] != 1) {
                fprintf(stderr, "n=%d: pair %d,%d met %d times\n", n, a, b, met[a * n + b]);
                CHECK(0);
            }
    free(met);
}

int main(void)
{
    for (int n = 2; n <= 64; n++)
        check_schedule(n);
    CHECK_INT(health_net_rounds(1), 0);
    CHECK_INT(health_net_partner(1, 0, 0), -1);
    CHECK_INT(health_net_partner(4, 3, 0), -1); /* round out of range */

    /* One process: the check skips and says how to run it. */
    comm d;
    CHECK_INT(comm_init(&d, NULL, NULL), GRIT_OK);
    CHECK_INT(d.size, 1);
    health_opts o;
    health_opts_defaults(&o, HEALTH_QUICK);
    o.comm = &d;
    health_report r;
    health_report_init(&r, HEALTH_QUICK);
    CHECK_INT(health_check_network(&r, &o), GRIT_OK);
    CHECK_INT(r.n, 1);
    CHECK_INT(r.results[0].verdict, HEALTH_SKIP);
    CHECK_STR_HAS(r.results[0].reason, "mpirun -np N");
    CHECK(r.net == NULL);
    int code = -1;
    CHECK_INT(health_merge_ranks(&r, &d, &code), GRIT_OK);
    CHECK_INT(code, 0);

    /* Point to point in a world of one: no peer. */
    char buf[8] = {0};
    CHECK_INT(comm_send(&d, buf, sizeof buf, 0, 1), GRIT_EINVAL);
    CHECK_INT(comm_recv(&d, buf, sizeof buf, 0, 1), GRIT_EINVAL);
    CHECK_INT(comm_sendrecv(&d, buf, 0, -1, buf, 0, -1, 1), GRIT_OK);
    CHECK_INT(comm_allgather_bytes(&d, "abc", buf, 4), GRIT_OK);
    CHECK_STR_HAS(buf, "abc");
    comm ctl;
    CHECK_INT(comm_dup(&d, &ctl), GRIT_OK);
    CHECK_INT(ctl.size, 1);
    comm_dup_free(&ctl);
    comm_finalize(&d);

    /* Fault names and the rank/delay knobs. */
    setenv("GRIT_HEALTH_FAULT", "slow_link,allreduce_corrupt", 1);
    setenv("GRIT_HEALTH_FAULT_RANK", "2", 1);
    setenv("GRIT_HEALTH_NET_DELAY_US", "1500", 1);
    health_opts_defaults(&o, HEALTH_QUICK);
    CHECK_INT(health_faults_from_env(&o), GRIT_OK);
    CHECK(health_fault_on(&o, HF_SLOW_LINK) && health_fault_on(&o, HF_ALLREDUCE_CORRUPT));
    CHECK_INT(o.fault_rank, 2);
    CHECK_NEAR(o.net_delay_us, 1500, 0);
    setenv("GRIT_HEALTH_FAULT_RANK", "-1", 1);
    CHECK_INT(health_faults_from_env(&o), GRIT_EINVAL);
    CHECK_STR_HAS(grit_errmsg(), "GRIT_HEALTH_FAULT_RANK");
    unsetenv("GRIT_HEALTH_FAULT_RANK");
    setenv("GRIT_HEALTH_NET_DELAY_US", "soon", 1);
    CHECK_INT(health_faults_from_env(&o), GRIT_EINVAL);
    CHECK_STR_HAS(grit_errmsg(), "GRIT_HEALTH_NET_DELAY_US");
    unsetenv("GRIT_HEALTH_NET_DELAY_US");
    unsetenv("GRIT_HEALTH_FAULT");

    /* warn: healthy, listed in the table, counted neither as bad nor in failures. */
    health_report_init(&r, HEALTH_QUICK);
    health_result *w = health_add(&r, "gpu.xid");
    health_set(w, HEALTH_WARN, "Xid 13 on GPU 0");
    CHECK_INT(health_exit_code(&r), 0);
    CHECK(health_first_bad(&r) == NULL);
    CHECK(!health_verdict_bad(HEALTH_WARN));
    CHECK_STR_HAS(health_verdict_name(HEALTH_WARN), "warn");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    health_report_print(&r, f, 0);
    fclose(f);
    CHECK_STR_HAS(text, "HEALTHY");
    CHECK_STR_HAS(text, "warning: gpu.xid: Xid 13 on GPU 0");
    free(text);
    json_t *j = health_report_json(&r);
    CHECK_INT(json_array_size(json_object_get(j, "failures")), 0);
    CHECK_INT(json_integer_value(json_object_get(j, "ranks")), 1);
    json_decref(j);
    health_report_free(&r);
    CHECK_DONE();
}
