/* fault.c - the registry of injectable faults (see fault.h; docs/env.md lists them
 * with every other GRIT_* variable). */
#include "core/fault.h"

#include <stdlib.h>

const fault_point fault_points[FAULT_COUNT] = {
    [FAULT_TRAIN] = {"GRIT_FAULTS", "train/faults.c",
                     "kill, hang, slow down a rank or node; NaN or spike a step's loss"},
    [FAULT_NODE_DOWN] = {"GRIT_FAULT_NODE_DOWN", "train/faults.c, health/health.c",
                         "a node-wide kill creates this marker; grit health fails while it "
                         "exists (the node is down)"},
    [FAULT_CKPT] = {"GRIT_CKPT_FAULT", "ckpt/store.c",
                    "crash at a checkpoint phase, corrupt a byte, ENOSPC, short writes"},
    [FAULT_CKPT_RANK] = {"GRIT_CKPT_FAULT_RANK", "core/fault.c",
                         "GRIT_CKPT_FAULT applies on this rank only"},
    [FAULT_HEALTH] = {"GRIT_HEALTH_FAULT", "health/health.c",
                      "named hardware faults that grit health's checks must catch"},
    [FAULT_HEALTH_BIT] = {"GRIT_HEALTH_FAULT_BIT", "health/health.c",
                          "the bit gemm_bitflip flips"},
    [FAULT_HEALTH_RANK] = {"GRIT_HEALTH_FAULT_RANK", "health/health.c",
                           "the rank the network faults apply to"},
    [FAULT_HEALTH_SLOWDOWN] = {"GRIT_HEALTH_SLOWDOWN", "health/health.c",
                               "factor of slow_compute / slow_memory / slow_disk"},
    [FAULT_HEALTH_NET_DELAY_US] = {"GRIT_HEALTH_NET_DELAY_US", "health/health.c",
                                   "delay slow_link adds per message"},
    [FAULT_PREP_CRASH_AFTER] = {"GRIT_PREP_CRASH_AFTER", "cli/cmd_prep.c",
                                "grit prep exits right after its N-th durable commit"},
    [FAULT_BF16_ACCUM] = {"GRIT_FAULT_BF16_ACCUM", "tensor/gemm_bf16.c",
                          "1: bf16 GEMMs round their running sums to bf16 after every term "
                          "(the planted bug the bf16 accuracy guard must catch)"},
};

static int my_rank = -1;

void fault_set_rank(int rank)
{
    my_rank = rank;
}

const char *fault_spec(fault_id id)
{
    if ((unsigned)id >= FAULT_COUNT)
        return "";
    if (id == FAULT_CKPT) {
        const char *r = getenv(fault_points[FAULT_CKPT_RANK].env);
        if (r && *r && my_rank >= 0 && atoi(r) != my_rank)
            return "";
    }
    const char *v = getenv(fault_points[id].env);
    return v ? v : "";
}
