"""Checks grit's supervised fine-tuning step (gx_step_ex) against PyTorch (docs/sft.md).

usage: sft_ref.py OUTDIR [--expect-fail]

OUTDIR is what grit-sft-dump wrote: config.json, weights.safetensors and sft.safetensors
(tokens [B, T+1], mask [B, T+1], seg [B, T], logits, loss, grad.*).

The reference does not pack and does not mask attention: it cuts every row into its
examples at the segment starts and runs each example ALONE through the float64 model of
its family (decoder_ref.py), from position 0, as Hugging Face would run one unpacked
example. The loss is the cross-entropy summed over the targets the mask keeps, divided by
their number (F.cross_entropy with ignore_index over the whole batch); gradients come
from autograd. So grit matches only if its loss mask, its attention boundaries between
packed examples and its per-example positions are all right.

Rotary tables: grit builds them once for the training row length T, so with dynamic NTK
scaling a packed example is rotated as rows of length T are (the scaling grit documents in
docs/sft.md); the reference does the same by computing its tables for T and taking the
example's first positions. Every other rope kind does not depend on T.

Rule (compare.py's): tensor-wise relative error max|a - b| / max|b| <= 1e-5 for the logits
of every example and every gradient; relative error <= 1e-5 for the loss. With
--expect-fail the script exits 0 only if the check FAILS (the negative test: a dump made
with --no-seg, whose packed examples attend to each other).
"""

import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decoder_ref  # noqa: E402
import safetensors_io  # noqa: E402

RTOL = 1e-5


def rel(got, want):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    return float(np.max(np.abs(got - want)) / (np.max(np.abs(want)) + 1e-30))


def examples(seg_row):
    """[(start, end)) input ranges of the examples of one row, from its segment starts."""
    out, t, T = [], 0, len(seg_row)
    while t < T:
        s = int(seg_row[t])
        if s != t:
            raise ValueError(f"segment start {s} at position {t}: expected {t}")
        e = t + 1
        while e < T and int(seg_row[e]) == s:
            e += 1
        out.append((s, e))
        t = e
    return out


def check(outdir):
    with open(os.path.join(outdir, "config.json")) as f:
        cfg = json.load(f)
    decoder_ref.configure_torch(2)
    weights = safetensors_io.load(os.path.join(outdir, "weights.safetensors"))
    dump = safetensors_io.load(os.path.join(outdir, "sft.safetensors"))
    tok, mask, seg = dump["tokens"].astype(np.int64), dump["mask"], dump["seg"]
    mcfg = decoder_ref.ModelConfig.from_dict(cfg["model"])
    model = decoder_ref.build(mcfg, torch.float64)
    decoder_ref.load_weights_(model, weights)

    B, T = tok.shape[0], seg.shape[1]
    full = decoder_ref.rope_tables
    decoder_ref.rope_tables = lambda c, t, dtype: tuple(x[:t] for x in full(c, T, dtype))
    counted = int(sum(mask[b, 1:].astype(np.int64).sum() for b in range(B)))
    total = torch.zeros((), dtype=torch.float64)
    fails, worst = [], 0.0
    n_ex = 0
    for b in range(B):
        for s, e in examples(seg[b]):
            n_ex += 1
            inp = torch.from_numpy(tok[b, s:e][None, :])
            tgt = torch.from_numpy(tok[b, s + 1:e + 1].copy())
            keep = torch.from_numpy(mask[b, s + 1:e + 1].astype(bool))
            logits = model(inp)[0]
            err = rel(dump["logits"][b, s:e], logits.detach().numpy())
            worst = max(worst, err)
            if err > RTOL:
                fails.append(f"logits row {b} example [{s},{e}): error {err:.3e} > {RTOL}")
            if keep.any():
                total = total + F.cross_entropy(logits[keep], tgt[keep], reduction="sum")
    loss = total / max(counted, 1)
    loss.backward()
    lerr = abs(float(dump["loss"][0]) - float(loss)) / abs(float(loss))
    print(f"loss: grit {float(dump['loss'][0]):.8f} reference {float(loss):.8f} "
          f"relative error {lerr:.3e} ({counted} counted targets, {n_ex} examples)")
    if lerr > RTOL:
        fails.append(f"loss: relative error {lerr:.3e} > {RTOL}")
    for name, p in model.named_parameters():
        got = dump.get("grad." + name)
        if got is None:
            fails.append(f"grad.{name}: missing from the dump")
            continue
        err = rel(got, p.grad.numpy())
        worst = max(worst, err)
        if err > RTOL:
            fails.append(f"grad.{name}: error {err:.3e} > {RTOL}")
    print(f"worst tensor-wise relative error (logits, gradients): {worst:.3e} (tolerance {RTOL})")
    return fails


def main(argv):
    if len(argv) not in (2, 3) or (len(argv) == 3 and argv[2] != "--expect-fail"):
        print(__doc__, file=sys.stderr)
        return 2
    fails = check(argv[1])
    for f in fails:
        print("MISMATCH " + f)
    if len(argv) == 3:
        if fails:
            print(f"expected failure seen ({len(fails)} mismatches): the check catches "
                  "attention across packed examples")
            return 0
        print("FAIL: the check passed a dump whose packed examples attend to each other")
        return 1
    print("OK" if not fails else f"FAIL: {len(fails)} mismatches")
    return 0 if not fails else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
