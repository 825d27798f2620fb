#!/usr/bin/env python3
"""dp_compare.py - compares two grit runs' metrics and weights.

    dp_compare.py metrics A B RTOL [--from STEP]  per-step loss and grad_norm within RTOL relative
    dp_compare.py weights A B RTOL                every tensor: ||a-b|| / ||b|| within RTOL
                                                  as relative L2 per tensor (elements with an
                                                  exactly-zero gradient excepted)
Prints the worst value; exits 1 when over the tolerance.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))


def metrics(a, b, rtol, first=0):
    ra = {r["step"]: r for r in map(json.loads, open(os.path.join(a, "metrics.jsonl")))}
    rb = {r["step"]: r for r in map(json.loads, open(os.path.join(b, "metrics.jsonl")))}
    steps = sorted(s for s in ra if s > first)
    if not steps or steps != sorted(s for s in rb if s > first):
        print(f"steps differ: {sorted(ra)} vs {sorted(rb)}")
        return 1
    worst = (0.0, None, None)
    for s in steps:
        for k in ("loss", "grad_norm"):
            e = abs(ra[s][k] - rb[s][k]) / abs(rb[s][k])
            if e > worst[0]:
                worst = (e, s, k)
    ok = worst[0] <= rtol
    print(f"metrics {a} vs {b}: steps {steps[0]}..{steps[-1]}, worst relative error "
          f"{worst[0]:.2e} ({worst[2]} at step {worst[1]}), tolerance {rtol:g}: "
          f"{'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


def zero_grad_mask(name, shape, model):
    """Elements whose exact gradient is 0: the key bias outside the rotary dims (softmax
    ignores a constant shift of a row's scores). Any fp32 trainer's rounding noise there is
    turned into updates of order lr by Adam, so they carry no information and are not judged."""
    import numpy as np
    mask = np.zeros(shape, dtype=bool)
    if name.endswith("attention.query_key_value.bias"):
        hd = model["hidden_size"] // model["num_heads"]
        rot = int(hd * model["rotary_pct"])
        for h in range(model["num_heads"]):
            mask[h * 3 * hd + hd + rot: h * 3 * hd + 2 * hd] = True
    return mask


def weights(a, b, rtol):
    import numpy as np
    import safetensors_io as st
    ta = st.load(os.path.join(a, "model.safetensors"))
    tb = st.load(os.path.join(b, "model.safetensors"))
    model = json.load(open(os.path.join(a, "config.json")))["model"]
    if set(ta) != set(tb):
        print("tensor names differ")
        return 1
    worst, worst_max = (0.0, None), (0.0, None)
    for k in ta:
        x, y = ta[k].astype(np.float64), tb[k].astype(np.float64)
        keep = ~zero_grad_mask(k, y.shape, model)
        dx, yk = (x - y)[keep], y[keep]
        e = float(np.linalg.norm(dx) / (np.linalg.norm(yk) + 1e-30))
        em = float(np.abs(dx).max() / (np.abs(y).max() + 1e-30))
        if e > worst[0]:
            worst = (e, k)
        if em > worst_max[0]:
            worst_max = (em, k)
    ok = worst[0] <= rtol
    print(f"weights {a} vs {b}: worst tensor {worst[1]} relative L2 error {worst[0]:.2e}, "
          f"tolerance {rtol:g}: {'ok' if ok else 'FAIL'} (largest single element, relative to "
          f"the tensor's scale: {worst_max[0]:.1e} in {worst_max[1]}; Adam turns rounding "
          f"differences in nearly-cancelling gradients into updates of order lr)")
    return 0 if ok else 1


if __name__ == "__main__":
    kind, a, b, rtol = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    first = int(sys.argv[6]) if len(sys.argv) > 6 and sys.argv[5] == "--from" else 0
    sys.exit(metrics(a, b, rtol, first) if kind == "metrics" else weights(a, b, rtol))
