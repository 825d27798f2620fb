/* test_straggler.c - the straggler decision (src/supervise/straggler.h) on synthetic
 * series: a persistent straggler is flagged after exactly `window` aligned steps; host-wide
 * slowdowns, one-off spikes, gaps below the floor and misaligned heartbeats flag nobody. */
#include <stdio.h>
#include <string.h>

#include "../check.h"
#include "supervise/straggler.h"

static straggler st; /* large: not on the stack */

/* nranks ranks, R per node */
static void init(double factor, int window, double min_gap, int nranks, int R)
{
    straggler_cfg c = {.factor = factor, .window = window, .min_gap = min_gap};
    int node_of[256];
    CHECK(nranks <= 256);
    for (int r = 0; r < nranks; r++)
        node_of[r] = r / R;
    CHECK_INT(straggler_init(&st, &c, nranks, node_of), GRIT_OK);
}

/* Records one step for every rank: base seconds, times mult[node] when given. */
static void step_all(long step, double base, const double *mult, int R)
{
    for (int r = 0; r < st.nranks; r++)
        CHECK_INT(straggler_record(&st, r, step, base * (mult ? mult[r / R] : 1.0)), GRIT_OK);
}

static int check(straggler_verdict *v)
{
    memset(v, 0, sizeof *v);
    return straggler_check(&st, v);
}

/* (a) one node 3x slower on every step: flagged on the W-th aligned step, not before */
static void test_persistent(void)
{
    straggler_verdict v;
    for (int W = 1; W <= 8; W++) {
        init(2.5, W, 0.02, 4, 1);
        double mult[4] = {1, 3, 1, 1};
        for (long s = 1; s < W; s++) {
            step_all(s, 0.1, mult, 1);
            CHECK_INT(check(&v), 0);
        }
        step_all(W, 0.1, mult, 1);
        CHECK_INT(check(&v), 1);
        CHECK_INT(v.node, 1);
        CHECK_INT(v.rank, 1);
        CHECK_NEAR(v.compute, 0.3, 1e-9);
        CHECK_NEAR(v.others, 0.1, 1e-9);
        CHECK_NEAR(v.ratio, 3.0, 1e-9);
        CHECK_INT(v.first_step, 1);
        CHECK_INT(v.last_step, W);
    }
    char msg[256];
    straggler_describe(&st, &v, "node1", msg, sizeof msg);
    CHECK_STR_HAS(msg, "node node1 computes 0.3 s vs 0.1 s");
    CHECK_STR_HAS(msg, "(3.0x)");
    CHECK_STR_HAS(msg, "above 2.5x");
    CHECK_STR_HAS(msg, "on each of the last 8 steps (1-8)");
    /* a node only 2x slower is not over factor 2.5 */
    init(2.5, 5, 0.02, 4, 1);
    double mult2[4] = {1, 1, 2, 1};
    for (long s = 1; s <= 20; s++)
        step_all(s, 0.1, mult2, 1);
    CHECK_INT(check(&v), 0);
}

/* (b) every node slows down together (host-wide load): nobody */
static void test_host_wide(void)
{
    straggler_verdict v;
    init(2.5, 5, 0.02, 4, 1);
    for (long s = 1; s <= 30; s++) {
        double base = s >= 10 && s < 20 ? 1.0 : 0.1; /* 10x slower for 10 steps */
        double jitter[4] = {1.0, 1.1, 0.95, 1.05};
        step_all(s, base, jitter, 1);
        CHECK_INT(check(&v), 0);
    }
}

/* (c) spikes on 2 of 5 steps (scheduler hiccups): nobody; the old 5-sample mean would
 * have flagged this (mean 0.1 x 3 + 1.0 x 2 = 0.46 s > 2.5 x 0.1) */
static void test_spikes(void)
{
    straggler_verdict v;
    init(2.5, 5, 0.02, 4, 1);
    for (long s = 1; s <= 40; s++) {
        double mult[4] = {1, s % 5 == 1 || s % 5 == 3 ? 10 : 1, 1, 1};
        step_all(s, 0.1, mult, 1);
        CHECK_INT(check(&v), 0);
    }
    /* 4 of 5 is still not every one */
    init(2.5, 5, 0.02, 4, 1);
    for (long s = 1; s <= 40; s++) {
        double mult[4] = {1, s % 5 == 0 ? 1 : 10, 1, 1};
        step_all(s, 0.1, mult, 1);
        CHECK_INT(check(&v), 0);
    }
}

/* (d) 5x slower but by less than the floor (tiny steps): nobody; above it: flagged */
static void test_floor(void)
{
    straggler_verdict v;
    double mult[3] = {1, 5, 1};
    init(2.5, 5, 0.02, 3, 1);
    for (long s = 1; s <= 10; s++)
        step_all(s, 0.004, mult, 1); /* 0.020 vs 0.004: 16 ms apart */
    CHECK_INT(check(&v), 0);
    init(2.5, 5, 0.01, 3, 1);
    for (long s = 1; s <= 5; s++)
        step_all(s, 0.004, mult, 1);
    CHECK_INT(check(&v), 1);
    CHECK_INT(v.node, 1);
    /* the others' median is 0 (a program that reports all time as communication): no
     * ratio to judge by */
    init(2.5, 5, 0.0, 3, 1);
    double zero[3] = {0, 1, 0};
    for (long s = 1; s <= 10; s++)
        step_all(s, 0.5, zero, 1);
    CHECK_INT(check(&v), 0);
}

/* (e) ranks report different steps (late, lost beats): compared only on common steps */
static void test_misaligned(void)
{
    straggler_verdict v;
    init(2.5, 3, 0.02, 3, 1);
    /* rank 1 (the slow one) is ahead: its steps 1..10 are in, the others only to 2 */
    for (long s = 1; s <= 10; s++)
        CHECK_INT(straggler_record(&st, 1, s, 0.5), GRIT_OK);
    for (long s = 1; s <= 2; s++) {
        CHECK_INT(straggler_record(&st, 0, s, 0.1), GRIT_OK);
        CHECK_INT(straggler_record(&st, 2, s, 0.1), GRIT_OK);
    }
    CHECK_INT(check(&v), 0); /* 2 common steps < window 3 */
    /* step 3 from rank 0 only: still 2 */
    CHECK_INT(straggler_record(&st, 0, 3, 0.1), GRIT_OK);
    CHECK_INT(check(&v), 0);
    CHECK_INT(straggler_record(&st, 2, 3, 0.1), GRIT_OK);
    CHECK_INT(check(&v), 1);
    CHECK_INT(v.last_step, 3);
    /* a lost beat (rank 2 never reports 5): steps 4, 6, 7 make the window, skipping 5 */
    init(2.5, 3, 0.02, 3, 1);
    for (long s = 1; s <= 7; s++)
        for (int r = 0; r < 3; r++)
            if (!(r == 2 && s == 5))
                straggler_record(&st, r, s, r == 1 && s >= 4 ? 0.5 : 0.1);
    CHECK_INT(check(&v), 1);
    CHECK_INT(v.first_step, 4);
    CHECK_INT(v.last_step, 7);
    /* the slow samples of rank 1 sit on steps where the others were not yet measured;
     * by sample order (the old ring buffer) they line up, by step they do not */
    init(2.5, 3, 0.02, 2, 1);
    for (long s = 1; s <= 6; s++)
        straggler_record(&st, 0, s, 0.1);
    for (long s = 4; s <= 9; s++)
        straggler_record(&st, 1, s, s <= 6 ? 0.1 : 0.5); /* slow only where 0 has no data */
    CHECK_INT(check(&v), 0);
    /* a step recorded again replaces its value */
    init(2.5, 2, 0.02, 2, 1);
    for (long s = 1; s <= 2; s++) {
        straggler_record(&st, 0, s, 0.1);
        straggler_record(&st, 1, s, 0.5);
    }
    CHECK_INT(check(&v), 1);
    straggler_record(&st, 1, 2, 0.1);
    CHECK_INT(check(&v), 0);
    /* bad input is refused and changes nothing */
    CHECK_INT(straggler_record(&st, 2, 3, 0.1), GRIT_EINVAL);
    CHECK_INT(straggler_record(&st, 0, 0, 0.1), GRIT_EINVAL);
    CHECK_INT(straggler_record(&st, 0, 3, -1), GRIT_EINVAL);
    CHECK_INT(straggler_record(&st, 0, 3, NAN), GRIT_EINVAL);
}

/* (f) factor 0: off, whatever the data; fewer than two nodes: nothing to compare */
static void test_off(void)
{
    straggler_verdict v;
    double mult[2] = {1, 100};
    init(0, 5, 0.02, 2, 1);
    for (long s = 1; s <= 10; s++)
        step_all(s, 0.1, mult, 1);
    CHECK_INT(check(&v), 0);
    init(2.5, 5, 0.02, 4, 4); /* one node, four ranks */
    for (long s = 1; s <= 10; s++)
        for (int r = 0; r < 4; r++)
            straggler_record(&st, r, s, r == 3 ? 1.0 : 0.1);
    CHECK_INT(check(&v), 0);
    /* bad configurations */
    straggler_cfg c = {.factor = 2.5, .window = 0, .min_gap = 0};
    int node_of[4] = {0, 0, 2, 2};
    CHECK_INT(straggler_init(&st, &c, 2, node_of), GRIT_EINVAL);
    c.window = STRAGGLER_MAX_WINDOW + 1;
    CHECK_INT(straggler_init(&st, &c, 2, node_of), GRIT_EINVAL);
    c.window = 5;
    c.min_gap = -1;
    CHECK_INT(straggler_init(&st, &c, 2, node_of), GRIT_EINVAL);
    c.min_gap = 0;
    CHECK_INT(straggler_init(&st, &c, 4, node_of), GRIT_EINVAL); /* node 1 has no rank */
}

/* (g) several ranks per node: a node is as slow as its slowest rank, judged per node */
static void test_ranks_per_node(void)
{
    straggler_verdict v;
    /* 3 nodes x 2 ranks; rank 3 (node 1) is 4x slower: node 1 flagged, named by rank 3 */
    init(2.5, 5, 0.02, 6, 2);
    for (long s = 1; s <= 5; s++)
        for (int r = 0; r < 6; r++)
            straggler_record(&st, r, s, r == 3 ? 0.4 : 0.1);
    CHECK_INT(check(&v), 1);
    CHECK_INT(v.node, 1);
    CHECK_INT(v.rank, 3);
    CHECK_NEAR(v.ratio, 4.0, 1e-9);
    /* 2 nodes x 2 ranks: each rank compared with the other NODE, never with its own
     * node's other rank; a slow whole node is found, and the fast node is not
     * flagged for being faster */
    init(2.5, 5, 0.02, 4, 2);
    double mult[2] = {1, 3};
    for (long s = 1; s <= 5; s++)
        step_all(s, 0.1, mult, 2);
    CHECK_INT(check(&v), 1);
    CHECK_INT(v.node, 1);
    /* ranks of the same node that differ (one slow rank, 2 nodes) do not flag the
     * other node; with one rank per node slow on alternate steps nobody is flagged */
    init(2.5, 5, 0.02, 4, 2);
    for (long s = 1; s <= 20; s++)
        for (int r = 0; r < 4; r++)
            straggler_record(&st, r, s, (s % 2 ? r == 0 : r == 2) ? 0.5 : 0.1);
    CHECK_INT(check(&v), 0);
    /* two of five nodes slow: each is judged against the others' median, the worse one
     * is named */
    init(2.5, 3, 0.02, 5, 1);
    double two[5] = {1, 3, 1, 4, 1};
    for (long s = 1; s <= 3; s++)
        step_all(s, 0.1, two, 1);
    CHECK_INT(check(&v), 1);
    CHECK_INT(v.node, 3);
}

int main(void)
{
    test_persistent();
    test_host_wide();
    test_spikes();
    test_floor();
    test_misaligned();
    test_off();
    test_ranks_per_node();
    straggler_free(&st);
    CHECK_DONE();
}
