#!/usr/bin/env python3
"""Check a grit bf16 parity dump against PyTorch's CPU bf16 autocast (docs/precision.md).

    compare_bf16.py OUTDIR [--expect-fail] [--threads 2]

OUTDIR is what `grit-parity-dump CONFIG.json OUTDIR 1` writes for a config with
"precision": "bf16".  From its config, initial weights and batches the same reference model
as the fp32 parity test (decoder_ref.py: GPT-NeoX, Llama, Falcon) computes the step-0
forward and backward (logits of micro-batch 0, the loss, every parameter's gradient) twice:

  exact:  float64, no autocast (the ground truth)
  torch:  float32 weights under torch.autocast("cpu", dtype=torch.bfloat16), PyTorch's own
          mixed precision (its matmuls, the attention's included, take and return bf16)

Metric: relative L2 error rel(a, b) = ||a - b|| / ||b|| per tensor, in float64.  With
e_grit = rel(grit, exact), e_torch = rel(torch, exact) and e_cross = rel(grit, torch):

  (1) agreement with PyTorch bf16:  e_cross <= max(2 e_torch, 4 u),  u = 2^-8
      Two bf16 computations of one quantity differ by about the sum of their errors;
      grit keeps more in float32 than autocast (GEMM outputs, attention, softmax), so its
      error should not exceed PyTorch's, and e_cross <= e_grit + e_torch <= 2 e_torch.
      4 u (0.0156, four bf16 rounding steps at 1) is the floor for tensors on which
      PyTorch's error is small by chance.
  (2) accuracy:  e_grit <= max(2 e_torch, 4 u) - grit's bf16 no worse than PyTorch's (2x).
  (3) bf16 is really in use:  e_grit of the logits >= 1e-4 (float32 arithmetic stays
      near 1e-6 here: docs/parity.md), so a bf16 config silently run in fp32 fails.

Prints one row per tensor; exits 0 only if every check passes.  --expect-fail inverts
the verdict (the negative test runs a dump made with GRIT_FAULT_BF16_ACCUM=1).
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decoder_ref as ref  # noqa: E402
import safetensors_io as st  # noqa: E402

U = 2.0 ** -8
FLOOR = 4 * U
IN_USE = 1e-4


def step0(cfg, weights, tokens, dtype, autocast):
    """Step-0 logits (micro-batch 0), mean loss and gradients, as float64 tensors."""
    optim = cfg["optim"]
    mb, ga = int(optim["micro_batch"]), int(optim["grad_accum"])
    model = ref.build(ref.ModelConfig.from_dict(cfg["model"]), dtype)
    ref.load_weights_(model, weights)
    tok = torch.from_numpy(np.ascontiguousarray(tokens).astype(np.int64))
    loss_sum, logits0 = 0.0, None
    for i, batch in enumerate(ref.split_batches(tok, 0, mb, ga)):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = model(batch[:, :-1])
            loss = ref.loss_fn(logits, batch[:, 1:])
        (loss / ga).backward()
        loss_sum += loss.item()
        if i == 0:
            logits0 = logits.detach().to(torch.float64)
    grads = {n: p.grad.detach().to(torch.float64) for n, p in model.named_parameters()}
    return logits0, loss_sum / ga, grads


def rel(a, b):
    return (torch.linalg.vector_norm(a - b) / (torch.linalg.vector_norm(b) + 1e-30)).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--expect-fail", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    ref.configure_torch(a.threads)
    with open(os.path.join(a.outdir, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("precision") != "bf16":
        print(f"FAIL: {a.outdir}/config.json has precision {cfg.get('precision')!r}, not bf16")
        return 1
    weights = st.load(os.path.join(a.outdir, "weights.safetensors"))
    tokens = st.load(os.path.join(a.outdir, "batches.safetensors"))["tokens"]
    dump = st.load(os.path.join(a.outdir, "step0.safetensors"))

    ex_logits, ex_loss, ex_grads = step0(cfg, weights, tokens, torch.float64, False)
    to_logits, to_loss, to_grads = step0(cfg, weights, tokens, torch.float32, True)

    rows = [("logits", torch.from_numpy(dump["logits"]).to(torch.float64), ex_logits, to_logits),
            ("loss", torch.tensor([float(dump["loss"][0])], dtype=torch.float64),
             torch.tensor([ex_loss], dtype=torch.float64),
             torch.tensor([to_loss], dtype=torch.float64))]
    missing = sorted(n for n in ex_grads if f"grad.{n}" not in dump)
    for n in sorted(ex_grads):
        if f"grad.{n}" in dump:
            g = torch.from_numpy(dump[f"grad.{n}"]).to(torch.float64)
            rows.append((f"grad.{n}", g.reshape(ex_grads[n].shape), ex_grads[n], to_grads[n]))

    fails = [f"missing gradient {n}" for n in missing]
    print(f"{'tensor':58s} {'e_grit':>9s} {'e_torch':>9s} {'e_cross':>9s} {'tol':>9s}")
    for name, g, ex, to in rows:
        eg, et, ec = rel(g, ex), rel(to, ex), rel(g, to)
        tol = max(2 * et, FLOOR)
        ok = ec <= tol and eg <= tol
        if name == "logits" and eg < IN_USE:
            ok = False
            fails.append(f"logits: e_grit {eg:.2e} < {IN_USE:g}: the dump looks like fp32")
        if not (ec <= tol and eg <= tol):
            fails.append(f"{name}: e_cross {ec:.4f}, e_grit {eg:.4f} > tol {tol:.4f}")
        print(f"{name:58s} {eg:9.5f} {et:9.5f} {ec:9.5f} {tol:9.5f} {'PASS' if ok else 'FAIL'}")
    fam = cfg["model"].get("family", "gpt_neox")
    if fails:
        print(f"compare_bf16 ({fam}): {len(fails)} failure(s): " + "; ".join(fails[:5]))
    else:
        print(f"compare_bf16 ({fam}): all {len(rows)} tensors within bf16 tolerance of "
              "PyTorch autocast")
    if a.expect_fail:
        print("expected a failure: " + ("got it" if fails else "FAIL: the check passed"))
        return 0 if fails else 1
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
