#!/usr/bin/env python3
"""tp_compare.py A B LOSS_ULPS GNORM1 GNORM [VAL] - a tensor-parallel run (A) against the
single-rank run (B), step by step:
  loss       within LOSS_ULPS units in the last place of the fp32 loss (the trainer
             reports the mean loss rounded to fp32: one ulp at a loss of 4..8 is
             6e-8..1.2e-7 relative, so a relative bound under that asks for bitwise
             equality, which a different fp32 summation order cannot give);
  grad norm  within GNORM1 relative at step 1 (same weights: the reduction order alone)
             and within GNORM at every step (later steps start from weights that
             differ by rounding, which AdamW amplifies; see docs/parallel.md).
  validation the held-out loss (val_loss, when the runs validate) on the same steps,
             within VAL relative (optional 6th argument, default 2e-6).
Prints the worst values; exits 1 when a bound is exceeded.
"""
import json
import os
import struct
import sys


def ulp32(x):
    b = struct.unpack("<I", struct.pack("<f", x))[0]
    return abs(struct.unpack("<f", struct.pack("<I", b + 1))[0] - struct.unpack("<f", struct.pack("<f", x))[0])


def main():
    a, b = sys.argv[1], sys.argv[2]
    ulps, g1, gall = float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
    ra = [json.loads(x) for x in open(os.path.join(a, "metrics.jsonl"))]
    rb = [json.loads(x) for x in open(os.path.join(b, "metrics.jsonl"))]
    if [r["step"] for r in ra] != [r["step"] for r in rb] or not ra:
        print(f"FAIL: steps differ: {len(ra)} vs {len(rb)}")
        return 1
    wl = max(abs(x["loss"] - y["loss"]) / ulp32(y["loss"]) for x, y in zip(ra, rb))
    wlr = max(abs(x["loss"] - y["loss"]) / abs(y["loss"]) for x, y in zip(ra, rb))
    e1 = abs(ra[0]["grad_norm"] - rb[0]["grad_norm"]) / abs(rb[0]["grad_norm"])
    eg = [abs(x["grad_norm"] - y["grad_norm"]) / abs(y["grad_norm"]) for x, y in zip(ra, rb)]
    ok = wl <= ulps and e1 <= g1 and max(eg) <= gall
    vb = float(sys.argv[6]) if len(sys.argv) > 6 else 2e-6
    va = [(x["step"], x.get("val_loss")) for x in ra]
    vr = [(y["step"], y.get("val_loss")) for y in rb]
    if [s for s, v in va if v is not None] != [s for s, v in vr if v is not None]:
        print(f"FAIL: validation steps differ: {va} vs {vr}")
        ok = False
    else:
        ev = [abs(x - y) / abs(y) for (_, x), (_, y) in zip(va, vr) if y is not None]
        if ev:
            print(f"validation: {len(ev)} values, worst relative {max(ev):.2e} (bound {vb:g}): "
                  f"{'ok' if max(ev) <= vb else 'FAIL'}")
            ok = ok and max(ev) <= vb
    print(f"metrics {a} vs {b}: {len(ra)} steps; loss worst {wl:.2f} fp32 ulps ({wlr:.2e} "
          f"relative, bound {ulps:g} ulps); grad norm step 1 {e1:.2e} (bound {g1:g}), worst "
          f"{max(eg):.2e} at step {eg.index(max(eg)) + 1} (bound {gall:g}): "
          f"{'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
