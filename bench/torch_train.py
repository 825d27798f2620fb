#!/usr/bin/env python3
"""PyTorch CPU training-throughput baseline for grit's benchmarks.

Trains the reference GPT-NeoX (tests/reference/gptneox_ref.py), or Llama / Falcon
(tests/reference/decoder_ref.py) in float32 on synthetic random
tokens, tuned as a user would for CPU speed: fixed torch.set_num_threads, no anomaly
detection, grads freed with zero_grad(set_to_none=True), plain autograd (not inference mode).
Each step is one micro-batch: forward, mean cross-entropy, backward, global-norm clipping at
1.0, AdamW (lr 6e-4 constant, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on the matrices and
embeddings only, as in docs/parity.md).  `--warmup-steps` untimed steps run first.

    torch_train.py --preset pythia-14m|pythia-70m|llama-70m|falcon-70m --seq 512 --micro-batch 8 --steps N \\
                   --warmup-steps W --threads 2 [--bf16] [--json]

--bf16 runs each step under torch.autocast("cpu", dtype=torch.bfloat16): PyTorch's own CPU
mixed precision (float32 weights and optimiser, bf16 matmuls through oneDNN).

Reports tokens/s, seconds/step and peak RSS (ru_maxrss, MiB); with --json a single JSON line.
"""

import argparse
import json
import os
import platform
import resource
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "reference"))
import decoder_ref as dref  # noqa: E402
import gptneox_ref as ref  # noqa: E402

COMMON = dict(vocab_size=50304, rotary_pct=0.25, rotary_base=10000.0, max_positions=2048,
              layer_norm_eps=1e-5, activation="gelu", parallel_residual=True)
PRESETS = {
    "pythia-14m": dict(hidden_size=128, num_layers=6, num_heads=4, intermediate_size=512,
                       **COMMON),
    "pythia-70m": dict(hidden_size=512, num_layers=6, num_heads=8, intermediate_size=2048,
                       **COMMON),
    # grit's llama-70m and falcon-70m presets (src/model/family.c)
    "llama-70m": dict(family="llama", hidden_size=512, num_layers=12, num_heads=8,
                      num_kv_heads=2, intermediate_size=1408, vocab_size=32000,
                      max_positions=2048, layer_norm_eps=1e-5),
    "falcon-70m": dict(family="falcon", hidden_size=512, num_layers=12, num_heads=8,
                       num_kv_heads=2, intermediate_size=2048, vocab_size=65024,
                       max_positions=2048, norm="layernorm", mlp="gelu", qkv_layout="grouped",
                       parallel_residual=True, norms_per_block=2, tie_embeddings=True),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="pythia-14m")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10, help="timed optimiser steps")
    ap.add_argument("--warmup-steps", type=int, default=2, help="untimed steps run first")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast (CPU mixed precision)")
    ap.add_argument("--json", action="store_true", help="print one JSON line")
    args = ap.parse_args(argv)
    if args.steps < 1 or args.warmup_steps < 0:
        ap.error("--steps must be >= 1 and --warmup-steps >= 0")

    torch.set_num_threads(args.threads)
    torch.autograd.set_detect_anomaly(False)
    torch.manual_seed(args.seed)

    mcfg = dref.ModelConfig.from_dict(PRESETS[args.preset])
    optim = dict(lr=6e-4, min_lr=6e-4, warmup_steps=0, total_steps=1, beta1=0.9, beta2=0.95,
                 eps=1e-8, weight_decay=0.1, grad_clip=1.0)
    model = dref.build(mcfg, torch.float32)
    ref.init_weights_(model, args.seed)
    model.train()
    opt = (ref if isinstance(model, ref.GPTNeoXForCausalLM) else dref).make_optimizer(model, optim)
    n_params = sum(p.numel() for p in model.parameters())

    gen = torch.Generator().manual_seed(args.seed + 1)

    def step(s):
        tokens = torch.randint(0, mcfg.vocab_size, (args.micro_batch, args.seq + 1),
                               generator=gen)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            return ref.train_step(model, opt, [tokens], s, optim)["loss"]

    for s in range(args.warmup_steps):
        step(s)
    t0 = time.perf_counter()
    for s in range(args.warmup_steps, args.warmup_steps + args.steps):
        loss = step(s)
    elapsed = time.perf_counter() - t0

    tokens = args.steps * args.micro_batch * args.seq
    result = {
        "impl": "pytorch-bf16-autocast" if args.bf16 else "pytorch",
        "torch": torch.__version__,
        "preset": args.preset,
        "params": n_params,
        "seq": args.seq,
        "micro_batch": args.micro_batch,
        "threads": args.threads,
        "steps": args.steps,
        "warmup_steps": args.warmup_steps,
        "tokens_per_s": tokens / elapsed,
        "s_per_step": elapsed / args.steps,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "final_loss": loss,
        "machine": platform.machine(),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"pytorch {torch.__version__} {args.preset} ({n_params / 1e6:.1f}M params), "
              f"seq {args.seq}, micro-batch {args.micro_batch}, {args.threads} threads")
        print(f"tokens/s      {result['tokens_per_s']:.1f}")
        print(f"seconds/step  {result['s_per_step']:.3f}")
        print(f"peak RSS      {result['peak_rss_mib']:.1f} MiB")
        print(f"final loss    {loss:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
