/*
 * fault.h - the registry of injectable faults (tests and demos).
 *
 * Every fault grit can inject into itself is one row of fault_points: the
 * environment variable that carries it, the module that reads it (the injection
 * point, the only code that acts on it) and what it does. Nothing else reads these
 * variables: fault_spec() is the one place they come from, and no decision outside
 * an injection point may depend on them. The supervisor's --inject is a launcher of
 * these faults: it exports them to the processes of the nodes they target (see
 * supervise/sup_inject.c), and then learns about their effects only by observing
 * (process exits, heartbeats, health-check results), like a real fault.
 *
 * Each point parses its own spec (the formats are in docs/env.md and at the
 * reader); errors name the variable. Rank-scoped faults: a fault whose row names a
 * rank variable applies only on that rank (fault_set_rank).
 */
#ifndef GRIT_CORE_FAULT_H
#define GRIT_CORE_FAULT_H

typedef enum fault_id {
    FAULT_TRAIN,           /* GRIT_FAULTS: kill/hang/slow/nan/spike in the trainer */
    FAULT_NODE_DOWN,       /* GRIT_FAULT_NODE_DOWN: marker file of a node taken down */
    FAULT_CKPT,            /* GRIT_CKPT_FAULT: checkpoint store faults */
    FAULT_CKPT_RANK,       /* GRIT_CKPT_FAULT_RANK: the rank GRIT_CKPT_FAULT applies to */
    FAULT_HEALTH,          /* GRIT_HEALTH_FAULT: broken hardware as grit health sees it */
    FAULT_HEALTH_BIT,      /* GRIT_HEALTH_FAULT_BIT */
    FAULT_HEALTH_RANK,     /* GRIT_HEALTH_FAULT_RANK */
    FAULT_HEALTH_SLOWDOWN, /* GRIT_HEALTH_SLOWDOWN */
    FAULT_HEALTH_NET_DELAY_US, /* GRIT_HEALTH_NET_DELAY_US */
    FAULT_PREP_CRASH_AFTER, /* GRIT_PREP_CRASH_AFTER */
    FAULT_BF16_ACCUM,       /* GRIT_FAULT_BF16_ACCUM: bf16 GEMMs accumulate in bf16 */
    FAULT_COUNT
} fault_id;

typedef struct fault_point {
    const char *env;    /* the variable */
    const char *reader; /* the injection point (file) */
    const char *effect; /* what it does */
} fault_point;

extern const fault_point fault_points[FAULT_COUNT];

/* The spec injected for id in this process: the variable's value, "" when unset,
 * and "" for a rank-scoped fault on another rank. Read from the environment at each
 * call: an injection point calls it once, when it starts. */
const char *fault_spec(fault_id id);

/* This process's rank for rank-scoped faults (GRIT_CKPT_FAULT_RANK); -1 (the
 * default): unknown, every rank-scoped fault applies. */
void fault_set_rank(int rank);

#endif
