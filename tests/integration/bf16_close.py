#!/usr/bin/env python3
"""bf16_close.py RUN_A RUN_B WHAT [any-step-1] - two bf16 runs of one model at two layouts.

A sum that differs in its last fp32 bit can round an activation to the other bf16 neighbour,
so bf16 runs at different layouts drift apart at bf16's scale (tp.sh: measured 2.6e-5 of the
loss; bf16 against fp32 1.1e-4), while a stale or mis-sliced bf16 weight copy moves the loss
by far more. Checks: the same number of steps (20 or more), step 1's loss and grad norm
equal bit for bit (the same rounding of the same weights; not with any-step-1, for layouts
whose fp32 step 1 differs in the last bits already, such as ZeRO's vocabulary pieces, whose
softmax adds its exponentials piece by piece), every step's loss within 2.5e-4 relative.
Exit 1 with the numbers otherwise."""
import json
import sys


def rows(run):
    with open(f"{run}/metrics.jsonl") as f:
        return [json.loads(line) for line in f if '"loss"' in line]


a, b = rows(sys.argv[1]), rows(sys.argv[2])
what = sys.argv[3]
need_first = sys.argv[4:] != ["any-step-1"]
worst = max((abs(x["loss"] - y["loss"]) / y["loss"] for x, y in zip(a, b)), default=0.0)
first = bool(a and b) and (a[0]["loss"], a[0]["grad_norm"]) == (b[0]["loss"], b[0]["grad_norm"])
ok = len(a) == len(b) >= 20 and (first or not need_first) and worst <= 2.5e-4
print(f"{'ok  ' if ok else 'FAIL:'} bf16 {what} over {len(a)} steps: step 1 "
      f"{'bit for bit' if first else 'differs'}, loss worst {worst:.2e} relative (bound 2.5e-4)")
sys.exit(0 if ok else 1)
