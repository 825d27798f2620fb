#!/usr/bin/env python3
"""Check a grit parity dump against the independent PyTorch reference (docs/parity.md).

    compare.py OUTDIR [--rtol 1e-5] [--param-rtol 1e-3] [--threads 2]
    compare.py --self-test

OUTDIR is what `grit-parity-dump CONFIG.json OUTDIR` writes.  From its config.json, initial
weights and token batches, the reference (tests/reference/gptneox_ref.py) recomputes in
float64 -- the ground truth the C trainer's float32 numbers are held to --:

  * step-0 logits of micro-batch 0, step-0 loss (mean over grad_accum micro-batches) and the
    gradient of every parameter (before clipping)       vs step0.safetensors   (--rtol)
  * `parity_steps` optimiser steps: per-step loss, grad_norm and lr   vs train.json (--rtol)
  * the parameters after those steps                    vs final.safetensors   (--param-rtol;
    looser because Adam's m/sqrt(v) amplifies tiny gradient differences where v ~ 0)

Metric for a tensor: max|a - b| / (max|b| + 1e-30), a tensor-wise relative error (the largest
element error relative to the tensor's scale), with a = dumped value, b = float64 reference.
Scalars: |a - b| / (|b| + 1e-30).  The dumped float32 values are only widened to float64 to
compute the metric.  A missing or unexpected tensor or a shape mismatch is a failure.

Prints a table (name, shape, error, tolerance, PASS/FAIL) and the worst entries; exits 0 only
if everything passes, 1 otherwise.  Final-parameter rows also show, as a diagnostic outside
the verdict, the error of this same reference run in float32 ("torch fp32"), i.e. what a
correct fp32 trainer lands at, and for a failing tensor the step-0 gradient of its worst
element. Elements whose exact gradient is 0 but whose fp32 gradient is rounding noise (the key
bias outside the rotary dims: softmax ignores a constant shift) are counted, not judged:
Adam turns that noise into updates of order lr in any fp32 trainer.  --self-test writes fake dumps from the reference itself
in float32 (no C side needed), expects them to pass, then corrupts one gradient element by
1e-3 relative and drops one tensor, and expects both to be caught.
"""

import argparse
import json
import math
import os
import shutil
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decoder_ref as ref  # noqa: E402  (gptneox_ref plus the Llama and Falcon families)
import safetensors_io as st  # noqa: E402

METRIC_NOTE = ("error = tensor-wise relative error max|a-b| / (max|b| + 1e-30) for tensors, "
               "|a-b| / (|b| + 1e-30) for scalars; a = dump, b = float64 reference")


# ----------------------------------------------------------------------------- metric

def tensor_error(got, want, tol=0.0):
    """Tensor-wise relative error max|got - want| / (max|want| + 1e-30), in float64.

    got: np.ndarray from the dump; want: float64 torch tensor.  Chunked along dim 0 to bound
    memory.  Returns (error, number of elements whose |got - want| exceeds
    tol * (max|want| + 1e-30), flat index of the worst element).
    """
    a = torch.from_numpy(np.ascontiguousarray(got)).reshape(-1)
    b = want.reshape(-1)
    if not b.numel():
        return 0.0, 0, 0
    denom = b.abs().max().item() + 1e-30
    chunk = 1 << 22
    worst, worst_idx, nbad = -1.0, 0, 0
    for i in range(0, b.numel(), chunk):
        d = (a[i:i + chunk].to(torch.float64) - b[i:i + chunk]).abs()
        d = torch.nan_to_num(d, nan=math.inf)  # NaN counts as infinitely wrong
        j = int(d.argmax())
        if d[j].item() > worst:
            worst, worst_idx = d[j].item(), i + j
        nbad += int((d > tol * denom).sum())
    return worst / denom, nbad, worst_idx


def scalar_error(got, want):
    return abs(float(got) - float(want)) / (abs(float(want)) + 1e-30)


# ----------------------------------------------------------------------------- report

class Report:
    """Collects one row per compared tensor/metric and prints the table."""

    def __init__(self):
        self.rows = []  # dicts: section, name, shape, err, tol, ok, note, kind

    def _add(self, section, name, shape, err, tol, ok, note="", kind="tensor"):
        self.rows.append(dict(section=section, name=name, shape=shape, err=err, tol=tol,
                              ok=ok, note=note, kind=kind))

    def fail(self, section, name, why, shape=""):
        self._add(section, name, shape, None, None, False, why)

    def tensor(self, section, name, got, want, tol, detail=None):
        """got: np.ndarray or None (missing); want: float64 torch tensor.

        detail(nbad, worst_idx) -> str, if given, annotates the row when it fails.
        """
        shape = "x".join(map(str, want.shape)) or "scalar"
        if got is None:
            return self.fail(section, name, "missing from dump", shape)
        if tuple(got.shape) != tuple(want.shape):
            return self.fail(section, name, f"shape {list(got.shape)} != reference "
                                            f"{list(want.shape)}", shape)
        if got.dtype.kind != "f":
            return self.fail(section, name, f"dtype {got.dtype} is not floating point", shape)
        err, nbad, worst_idx = tensor_error(got, want, tol)
        ok = err <= tol
        note = detail(nbad, worst_idx) if detail is not None else ""
        self._add(section, name, shape, err, tol, ok, note)

    def scalar(self, section, name, got, want, tol):
        try:
            g = float(got)
        except (TypeError, ValueError):
            return self.fail(section, name, f"not a number: {got!r}", "scalar")
        err = scalar_error(g, want)
        self._add(section, name, "scalar", err, tol, err <= tol,
                  f"dump {g:.9g} ref {float(want):.9g}", kind="scalar")

    @property
    def failed(self):
        return [r["name"] for r in self.rows if not r["ok"]]

    @property
    def ok(self):
        return bool(self.rows) and all(r["ok"] for r in self.rows)

    def print(self, out=sys.stdout, only_failures=False):
        w = max([len(r["name"]) for r in self.rows] + [4])
        ws = max([len(r["shape"]) for r in self.rows] + [5])
        print(METRIC_NOTE, file=out)
        section = None
        for r in self.rows:
            if only_failures and r["ok"]:
                continue
            if r["section"] != section:
                section = r["section"]
                print(f"\n[{section}]", file=out)
                print(f"  {'name':<{w}}  {'shape':<{ws}}  {'error':>10}  {'tol':>7}  status",
                      file=out)
            err = "-" if r["err"] is None else f"{r['err']:.3e}"
            tol = "-" if r["tol"] is None else f"{r['tol']:.0e}"
            status = "PASS" if r["ok"] else "FAIL"
            note = f"  {r['note']}" if r["note"] else ""
            print(f"  {r['name']:<{w}}  {r['shape']:<{ws}}  {err:>10}  {tol:>7}  {status}{note}",
                  file=out)
        nfail = sum(not r["ok"] for r in self.rows)
        print(file=out)
        for kind in ("tensor", "scalar"):
            rated = [r for r in self.rows if r["kind"] == kind and r["err"] is not None]
            if rated:
                r = max(rated, key=lambda r: (math.inf if r["err"] != r["err"]
                                              else r["err"] / r["tol"]))
                print(f"worst {kind} (relative to its tolerance): {r['name']}  "
                      f"error {r['err']:.3e}  tol {r['tol']:.0e}", file=out)
        final = [r for r in self.rows if r["section"].startswith("final") and r["err"] is not None]
        if final:
            r = max(final, key=lambda r: r["err"] if r["err"] == r["err"] else math.inf)
            print(f"largest final-parameter error: {r['name']}  {r['err']:.3e}", file=out)
        print(f"{len(self.rows) - nfail} passed, {nfail} failed: "
              f"{'PASS' if self.ok else 'FAIL'}", file=out)


# ----------------------------------------------------------------------------- compare

def parity_steps(cfg):
    for key in ("parity_steps", "steps"):
        if key in cfg:
            n = cfg[key]
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise ValueError(f"config.json: {key} = {n!r} is not a positive integer")
            return n
    raise ValueError("config.json has neither 'parity_steps' nor 'steps'")


def load_optional(path, report, section):
    if not os.path.exists(path):
        report.fail(section, os.path.basename(path), "file missing")
        return None
    try:
        return st.load(path)
    except st.SafetensorsError as e:
        report.fail(section, os.path.basename(path), str(e))
        return None


def compare(outdir, rtol=1e-5, param_rtol=1e-3, out=sys.stdout, only_failures=False):
    """Compare one dump directory; prints the table and returns the Report (`.ok`, `.failed`)."""
    report = Report()
    try:
        with open(os.path.join(outdir, "config.json")) as f:
            cfg = json.load(f)
        steps = parity_steps(cfg)
        weights = st.load(os.path.join(outdir, "weights.safetensors"))
        batches = st.load(os.path.join(outdir, "batches.safetensors"))
        if set(batches) != {"tokens"}:
            raise ValueError(f"batches.safetensors holds {sorted(batches)}, expected ['tokens']")
        tokens = batches["tokens"]
        if tokens.dtype.kind not in "iu":
            raise ValueError(f"batches.safetensors: tokens dtype {tokens.dtype} is not integer")
        for name, arr in weights.items():
            if arr.dtype != np.float32:
                report.fail("inputs", f"weights:{name}", f"dtype {arr.dtype}, expected F32")
        res = ref.run_reference(cfg, weights, tokens, steps, dtype=torch.float64)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"compare.py: cannot compute the reference for {outdir}: "
              f"{type(e).__name__}: {e}", file=out)
        report.fail("inputs", "reference", f"{type(e).__name__}: {e}")
        return report
    mcfg = ref.ModelConfig.from_dict(cfg["model"])
    optim = cfg["optim"]
    print(f"{outdir}: hidden {mcfg.hidden_size}, layers {mcfg.num_layers}, heads "
          f"{mcfg.num_heads}, vocab {mcfg.vocab_size}, micro_batch {optim['micro_batch']}, "
          f"grad_accum {optim['grad_accum']}, seq_len {optim['seq_len']}, steps {steps}",
          file=out)

    # step 0: logits, loss, gradients
    sec = "step0.safetensors"
    step0 = load_optional(os.path.join(outdir, sec), report, sec)
    if step0 is not None:
        expected = {"logits", "loss"} | {f"grad.{n}" for n in res["grads"]}
        report.tensor(sec, "logits", step0.get("logits"), res["logits"], rtol)
        loss = step0.get("loss")
        if loss is None:
            report.fail(sec, "loss", "missing from dump", "1")
        elif tuple(loss.shape) != (1,):
            report.fail(sec, "loss", f"shape {list(loss.shape)} != [1]", "1")
        else:
            report.scalar(sec, "loss", loss[0], res["loss0"], rtol)
        for name, g in res["grads"].items():
            report.tensor(sec, f"grad.{name}", step0.get(f"grad.{name}"), g, rtol)
        for name in sorted(set(step0) - expected):
            report.fail(sec, name, "unexpected tensor in dump")

    # per-step scalars
    sec = "train.json"
    path = os.path.join(outdir, sec)
    train = None
    try:
        with open(path) as f:
            train = json.load(f)
        if not isinstance(train, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as e:
        report.fail(sec, sec, f"unreadable: {e}")
        train = None
    if train is not None:
        for key in ("loss", "grad_norm", "lr"):
            vals = train.get(key)
            if not isinstance(vals, list) or len(vals) != steps:
                n = len(vals) if isinstance(vals, list) else "no list"
                report.fail(sec, key, f"expected a list of {steps} entries, got {n}")
                continue
            for s, (got, want) in enumerate(zip(vals, res[key])):
                report.scalar(sec, f"{key}[{s}]", got, want, rtol)

    # parameters after the steps
    sec = f"final.safetensors (after {steps} steps)"
    final = load_optional(os.path.join(outdir, "final.safetensors"), report, sec)
    if final is not None:
        # Diagnostic, not part of the verdict: how far this same reference, run in float32,
        # lands from the float64 truth, i.e. the error a correct fp32 trainer can be expected
        # to show; and for failing tensors the step-0 gradient at the worst element (Adam
        # normalises each element by sqrt(v), so a gradient near zero -- below eps or at
        # rounding-noise level -- turns fp32 noise into an update of order lr).
        # Elements whose true gradient is zero (the key bias outside the rotary dims: a
        # constant shift of every score in a softmax row) get pure rounding noise as
        # gradient, which Adam normalises into updates of order lr in fp32 and float64
        # alike. They carry no information about correctness, so they are counted and
        # left out of the verdict; every other element is judged.
        res32 = {}

        def fp32_final():
            if not res32:
                res32.update(ref.run_reference(cfg, weights, tokens, steps, dtype=torch.float32))
            return res32["final"]

        for name, p in res["final"].items():
            g0 = res["grads"][name]
            zero = g0.abs() <= 1e-12 * (g0.abs().max() + 1e-300)
            gd = step0.get(f"grad.{name}") if step0 is not None else None
            if gd is not None and tuple(gd.shape) == tuple(g0.shape):
                # an exact zero in the dump too (e.g. embedding rows of unseen tokens, which
                # only decay) is no noise: judge it
                zero &= torch.from_numpy(np.ascontiguousarray(gd)) != 0
            nzero = int(zero.sum())
            got = final.get(name)
            if got is not None and tuple(got.shape) == tuple(p.shape) and nzero:
                got = np.where(zero.numpy(), p.numpy(), got)

            def detail(nbad, idx, name=name, p=p, nzero=nzero):
                note = f"{nzero} zero-gradient elements not judged" if nzero else ""
                if nbad:
                    e32 = tensor_error(fp32_final()[name].numpy(), p)[0]
                    g_ref = res["grads"][name].reshape(-1)[idx].item()
                    g_dump = step0.get(f"grad.{name}") if step0 is not None else None
                    g_dump = (f"{g_dump.reshape(-1)[idx]:.3e}"
                              if g_dump is not None and g_dump.shape == p.shape else "n/a")
                    note += (f"; torch fp32: {e32:.1e}; {nbad} of {p.numel()} elements over "
                             f"tol; worst element [{idx}] step-0 grad ref {g_ref:.3e} dump "
                             f"{g_dump}")
                return note
            report.tensor(sec, name, got, p, param_rtol, detail=detail)
        for name in sorted(set(final) - set(res["final"])):
            report.fail(sec, name, "unexpected tensor in dump")

    report.print(out, only_failures=only_failures)
    return report


# ----------------------------------------------------------------------------- self-test

SELF_TEST_CASES = [
    ("parallel residual, gelu, grad_accum 2, clipping",
     {"model": {"hidden_size": 32, "num_layers": 2, "num_heads": 4, "intermediate_size": 128,
                "vocab_size": 96, "rotary_pct": 0.25, "rotary_base": 10000,
                "max_positions": 64, "layer_norm_eps": 1e-5, "activation": "gelu",
                "parallel_residual": True},
      "optim": {"micro_batch": 2, "grad_accum": 2, "seq_len": 16, "lr": 1e-3, "min_lr": 1e-4,
                "warmup_steps": 2, "total_steps": 6, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8,
                "weight_decay": 0.1, "grad_clip": 0.5},
      "parity_steps": 4}),
    ("sequential residual, gelu_tanh, no clipping, schedule past total_steps",
     {"model": {"hidden_size": 48, "num_layers": 2, "num_heads": 3, "intermediate_size": 96,
                "vocab_size": 80, "rotary_pct": 0.5, "rotary_base": 10000,
                "max_positions": 32, "layer_norm_eps": 1e-5, "activation": "gelu_tanh",
                "parallel_residual": False},
      "optim": {"micro_batch": 3, "grad_accum": 1, "seq_len": 12, "lr": 1e-3, "min_lr": 0.0,
                "warmup_steps": 0, "total_steps": 2, "beta1": 0.9, "beta2": 0.99, "eps": 1e-8,
                "weight_decay": 0.05, "grad_clip": 0.0},
      "parity_steps": 3}),
]


def write_fake_dump(outdir, cfg, seed):
    """Play the C side: a float32 run of the reference, written in the parity.md layout."""
    os.makedirs(outdir, exist_ok=True)
    steps = cfg["parity_steps"]
    mcfg = ref.ModelConfig.from_dict(cfg["model"])
    o = cfg["optim"]
    model = ref.GPTNeoXForCausalLM(mcfg, torch.float32)
    ref.init_weights_(model, seed, randomize_affine=True)
    weights = ref.state_numpy(model)
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, mcfg.vocab_size, dtype=np.int32,
                          size=(steps * o["grad_accum"] * o["micro_batch"], o["seq_len"] + 1))
    res = ref.run_reference(cfg, weights, tokens, steps, dtype=torch.float32)
    f32 = lambda t: t.numpy().astype(np.float32)  # noqa: E731
    with open(os.path.join(outdir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    st.save(os.path.join(outdir, "weights.safetensors"), weights)
    st.save(os.path.join(outdir, "batches.safetensors"), {"tokens": tokens})
    step0 = {"logits": f32(res["logits"]), "loss": np.array([res["loss0"]], np.float32)}
    step0.update({f"grad.{k}": f32(v) for k, v in res["grads"].items()})
    st.save(os.path.join(outdir, "step0.safetensors"), step0)
    with open(os.path.join(outdir, "train.json"), "w") as f:
        json.dump({k: [float(np.float32(x)) for x in res[k]]
                   for k in ("loss", "grad_norm", "lr")}, f)
    st.save(os.path.join(outdir, "final.safetensors"),
            {k: f32(v) for k, v in res["final"].items()})


def self_test_safetensors(tmp):
    """Round trip, then a few corrupt files that must be rejected with a clear message."""
    path = os.path.join(tmp, "t.safetensors")
    data = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([7], np.int32),
            "c": np.zeros((0, 4), np.float32)}
    st.save(path, data)
    raw = open(path, "rb").read()
    assert int.from_bytes(raw[:8], "little") % 8 == 0, "header not padded to 8"
    back = st.load(path)
    assert set(back) == set(data) and all(
        back[k].dtype == data[k].dtype and np.array_equal(back[k], data[k]) for k in data)
    corrupt = {
        "truncated": raw[:-4],
        "bad json": raw[:8] + b"x" + raw[9:],
        "huge header length": (1 << 40).to_bytes(8, "little") + raw[8:],
        "trailing bytes": raw + b"\0" * 4,
        "bad dtype": raw.replace(b'"F32"', b'"X32"', 1),
    }
    for what, blob in corrupt.items():
        with open(path, "wb") as f:
            f.write(blob)
        try:
            st.load(path)
        except st.SafetensorsError as e:
            assert path in str(e), e
            print(f"  safetensors rejects {what}: {str(e).replace(path, 't.safetensors')}")
        else:
            raise AssertionError(f"safetensors accepted a file with {what}")


def self_test(rtol, param_rtol):
    ok = True
    tmp = tempfile.mkdtemp(prefix="grit-compare-selftest-")
    try:
        print("== safetensors_io checks")
        self_test_safetensors(tmp)

        for i, (title, cfg) in enumerate(SELF_TEST_CASES):
            outdir = os.path.join(tmp, f"case{i}")
            write_fake_dump(outdir, cfg, seed=1234 + i)
            print(f"\n== case {i}: {title}: float32 reference dump vs float64 reference, "
                  f"expect PASS")
            passed = compare(outdir, rtol, param_rtol).ok
            print(f"-> {'PASS as expected' if passed else 'UNEXPECTED FAIL'}")
            ok &= passed

        outdir = os.path.join(tmp, "case0")
        target = "grad.gpt_neox.layers.0.attention.query_key_value.weight"
        path = os.path.join(outdir, "step0.safetensors")
        step0 = st.load(path)
        g = step0[target]
        idx = np.unravel_index(np.argmax(np.abs(g)), g.shape)
        before = float(g[idx])
        g[idx] = np.float32(before * (1 + 1e-3))
        st.save(path, step0)
        print(f"\n== negative test: {target}{list(idx)} {before:.6g} -> {float(g[idx]):.6g} "
              f"(1e-3 relative), expect FAIL on exactly that tensor")
        failed = compare(outdir, rtol, param_rtol, only_failures=True).failed
        caught = failed == [target]
        print(f"-> {'FAIL on exactly that tensor, as expected' if caught else f'WRONG: {failed}'}")
        ok &= caught

        outdir = os.path.join(tmp, "case1")
        path = os.path.join(outdir, "final.safetensors")
        final = st.load(path)
        del final["gpt_neox.final_layer_norm.bias"]
        st.save(path, final)
        print("\n== negative test: gpt_neox.final_layer_norm.bias dropped from final.safetensors,"
              " expect FAIL")
        failed = compare(outdir, rtol, param_rtol, only_failures=True).failed
        caught = failed == ["gpt_neox.final_layer_norm.bias"]
        print(f"-> {'FAIL as expected' if caught else f'WRONG: {failed}'}")
        ok &= caught
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nself-test: {'PASS' if ok else 'FAIL'}")
    return ok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir", nargs="?", help="directory written by grit-parity-dump")
    ap.add_argument("--rtol", type=float, default=1e-5,
                    help="tolerance for logits, loss, gradients, per-step loss/grad_norm/lr")
    ap.add_argument("--param-rtol", type=float, default=1e-3,
                    help="tolerance for the parameters after parity_steps optimiser steps")
    ap.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    ap.add_argument("--self-test", action="store_true",
                    help="check the checker on fake dumps written by the reference itself")
    args = ap.parse_args(argv)
    ref.configure_torch(args.threads)
    if args.self_test:
        return 0 if self_test(args.rtol, args.param_rtol) else 1
    if not args.outdir:
        ap.error("OUTDIR is required (or --self-test)")
    return 0 if compare(args.outdir, args.rtol, args.param_rtol).ok else 1


if __name__ == "__main__":
    sys.exit(main())
