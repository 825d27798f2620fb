"""validate_ref.py - the PyTorch reference for validation during training
(tests/integration/validate.sh; src/train/validate.h).

    validate_ref.py RUN_DIR PREFIX SPLIT SEQ SAMPLES STEP...

For each STEP: the held-out loss of RUN_DIR/ckpt/step_<STEP> (float64 reference model,
tests/reference/gptneox_ref.py) over the first SAMPLES windows of SEQ + 1 tokens of
PREFIX's valid split (Megatron's get_train_valid_test_split_ over the documents, written
out here independently of grit's C code; the split's documents as one stream, windows
sharing their boundary token) must equal metrics.jsonl's val_loss at that step within
1e-5 relative, and val_ppl must be exp(val_loss). Exits 1 on any mismatch."""
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import eval_ref  # noqa: E402


def split_bounds(spec, size):
    """Megatron's get_train_valid_test_split_."""
    sep = "," if "," in spec else "/"
    shares = [float(s) for s in spec.split(sep)]
    shares = (shares + [0.0, 0.0, 0.0])[:3]
    total = sum(shares)
    shares = [s / total for s in shares]
    idx = [0]
    for i, s in enumerate(shares):
        idx.append(idx[i] + int(round(s * float(size))))
    diff = idx[-1] - size
    return [idx[0]] + [b - diff for b in idx[1:]]


def main(argv):
    run, prefix, spec, seq, samples = argv[1], argv[2], argv[3], int(argv[4]), int(argv[5])
    steps = [int(s) for s in argv[6:]]
    docs = eval_ref.read_idx(prefix)
    b = split_bounds(spec, len(docs))
    stream = np.concatenate(docs[b[1]:b[2]]).astype(np.int64)
    if len(stream) < samples * seq + 1:
        print(f"FAIL: the valid split holds {len(stream)} tokens, fewer than the test needs")
        return 1
    rows = {}
    for line in open(os.path.join(run, "metrics.jsonl")):
        r = json.loads(line)
        if "val_loss" in r:
            rows[r["step"]] = r
    bad = 0
    for step in steps:
        if step not in rows:
            print(f"FAIL: metrics.jsonl has no val_loss at step {step}")
            bad += 1
            continue
        model = eval_ref.load(os.path.join(run, "ckpt", f"step_{step:08d}"))
        total = 0.0
        for w in range(samples):
            lp, _, _ = eval_ref.logprobs(model, stream[w * seq:w * seq + seq + 1].tolist())
            total += -lp.mean()
        want = total / samples
        got = rows[step]["val_loss"]
        err = abs(got - want) / want
        print(f"step {step}: val_loss grit {got:.9f}, reference {want:.9f}, relative error "
              f"{err:.2e} (tolerance 1e-5)")
        if err > 1e-5:
            bad += 1
        if abs(rows[step]["val_ppl"] - math.exp(got)) > 1e-6 * math.exp(got):
            print(f"FAIL: step {step}: val_ppl {rows[step]['val_ppl']} is not exp(val_loss)")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
