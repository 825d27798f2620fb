#!/usr/bin/env bash
# train_vs_pytorch.sh - grit vs PyTorch training throughput, side by side in one run.
#
# For pythia-14m, pythia-70m, llama-70m (GQA 8/2, SwiGLU, RMSNorm) and falcon-70m
# (new_decoder_architecture, grouped qkv, tied) shapes at seq 512, micro batch 8, 2 threads:
# trains STEPS timed steps (after WARMUP untimed ones) with grit in fp32 and in bf16
# ("precision": "bf16", docs/precision.md), and with the PyTorch reference
# (tests/reference/gptneox_ref.py, decoder_ref.py) in fp32 and under CPU bf16 autocast
# (torch.autocast("cpu", dtype=torch.bfloat16)). Prints tokens/s for the four, the ratios
# (grit bf16 vs PyTorch fp32 and vs PyTorch bf16, grit fp32 vs PyTorch fp32), peak RSS,
# and grit's achieved GFLOP/s as a fraction of the GEMM ceilings measured on this machine
# in the same run (grit-bench-gemm: OpenBLAS sgemm and the bf16 GEMM at 4096^3).
#
# Both sides get the same thread count and OPENBLAS_CORETYPE (bench/blas_coretype.sh: SkylakeX
# where the CPU has AVX-512, else Haswell). Override: STEPS, WARMUP, THREADS, PRESETS;
# PyTorch runs with tcmalloc (bench/torch_alloc.sh; TORCH_MALLOC=glibc for glibc's malloc).
# TORCH_BF16=0 leaves out PyTorch's bf16 autocast (on a CPU without AVX512-BF16 it is
# emulated and takes over 10 minutes on the 70M shapes; its columns then read "-").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
grit=${GRIT:-$root/build/grit}
gemm=${GRIT_GEMM:-$root/build/grit-bench-gemm}
py=${PYTHON:-/usr/bin/python3}
STEPS=${STEPS:-5} WARMUP=${WARMUP:-1} THREADS=${THREADS:-2} TORCH_BF16=${TORCH_BF16:-1}
PRESETS=${PRESETS:-"pythia-14m pythia-70m llama-70m falcon-70m"}
. "$(dirname "$0")/blas_coretype.sh"
. "$(dirname "$0")/torch_alloc.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "bench: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs," \
     "bf16 flags: $(grep -m1 -o -w -E 'avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "bench: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE threads=$THREADS steps=$STEPS (+$WARMUP warm-up)"
"$gemm" 4096 "$THREADS" | tee "$tmp/gemm.txt" | sed 's/^/bench: /'
tail -n 1 "$tmp/gemm.txt" > "$tmp/gemm.json"

for p in $PRESETS; do
  case $p in llama-*) sv=32000 ;; falcon-*) sv=65024 ;; *) sv=50277 ;; esac
  for prec in fp32 bf16; do
    cat > "$tmp/$p-$prec.json" <<CFG
{"model": "$p", "optim": {"micro_batch": 8, "seq_len": 512, "lr": 6e-4, "min_lr": 6e-4,
 "warmup_steps": 0, "total_steps": $((STEPS + WARMUP))}, "precision": "$prec",
 "data": {"synthetic_vocab": $sv}, "threads": $THREADS, "run_dir": "$tmp/run-$p-$prec"}
CFG
    echo "bench: $p: grit $prec ..."
    "$py" "$root/bench/maxrss.py" "$tmp/$p-$prec.grit-rss" "$grit" train "$tmp/$p-$prec.json" --quiet
  done
  echo "bench: $p: pytorch fp32 ..."
  "${torch_env[@]}" "$py" "$root/bench/torch_train.py" --preset "$p" --seq 512 --micro-batch 8 --steps "$STEPS" \
      --warmup-steps "$WARMUP" --threads "$THREADS" --json > "$tmp/$p-fp32.torch.json"
  [ "$TORCH_BF16" = 0 ] && continue
  echo "bench: $p: pytorch bf16 autocast ..."
  "${torch_env[@]}" "$py" "$root/bench/torch_train.py" --preset "$p" --seq 512 --micro-batch 8 --steps "$STEPS" \
      --warmup-steps "$WARMUP" --threads "$THREADS" --bf16 --json > "$tmp/$p-bf16.torch.json"
done

"$py" - "$tmp" "$WARMUP" $PRESETS <<'PY'
import json, os, sys
tmp, warm, presets = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
g = json.load(open(f"{tmp}/gemm.json"))
sg, bg = g["sgemm_gflops"], g["bf16_gflops"]
# C, L, I, V, q/k/v rows per C (heads + 2 kv) / heads, MLP matrices
shapes = {"pythia-14m": (128, 6, 512, 50304, 3, 2), "pythia-70m": (512, 6, 2048, 50304, 3, 2),
          "llama-70m": (512, 12, 1408, 32000, 1.5, 3), "falcon-70m": (512, 12, 2048, 65024, 1.5, 2)}
def flops_per_token(C, L, I, V, Q, F, T=512):  # same formula as gx_flops_per_token()
    linear = L * (Q * C * C + C * C + F * C * I) + V * C
    attn = L * 2.0 * C * (T + 1) / 2.0 * 2.0
    return 6.0 * linear + 3.0 * attn
def grit_tok(p, prec):
    rows = [json.loads(l) for l in open(f"{tmp}/run-{p}-{prec}/metrics.jsonl")][warm:]
    return sum(r["tokens_per_s"] * r["step_time_s"] for r in rows) / sum(r["step_time_s"] for r in rows)
print("\ntokens/s (peak RSS)")
hdr = (f"{'model':<12} {'grit fp32':>16} {'grit bf16':>16} {'torch fp32':>16} {'torch bf16':>16}"
       f" {'g16/t32':>8} {'g16/t16':>8} {'g32/t32':>8} {'g32 of sgemm':>13} {'g16 of bf16':>12}")
print(hdr + "\n" + "-" * len(hdr))
for p in presets:
    gt = {k: grit_tok(p, k) for k in ("fp32", "bf16")}
    gr = {k: float(open(f"{tmp}/{p}-{k}.grit-rss").read()) for k in ("fp32", "bf16")}
    t = {k: json.load(open(f"{tmp}/{p}-{k}.torch.json")) for k in ("fp32", "bf16")
         if os.path.exists(f"{tmp}/{p}-{k}.torch.json")}
    t.setdefault("bf16", {"tokens_per_s": float("nan"), "peak_rss_mib": float("nan")})
    ratio = lambda a, b: f"{a / b:>7.2f}x" if b == b else f"{'-':>8}"
    cell = lambda tok, rss: (f"{tok:>8.0f} ({rss:>4.0f}M)" if tok == tok else f"{'-':>16}")
    fpt = flops_per_token(*shapes[p])
    print(f"{p:<12} {cell(gt['fp32'], gr['fp32'])} {cell(gt['bf16'], gr['bf16'])} "
          f"{cell(t['fp32']['tokens_per_s'], t['fp32']['peak_rss_mib'])} "
          f"{cell(t['bf16']['tokens_per_s'], t['bf16']['peak_rss_mib'])} "
          f"{gt['bf16'] / t['fp32']['tokens_per_s']:>7.2f}x "
          f"{ratio(gt['bf16'], t['bf16']['tokens_per_s'])} "
          f"{gt['fp32'] / t['fp32']['tokens_per_s']:>7.2f}x "
          f"{gt['fp32'] * fpt / 1e9 / sg:>12.0%} {gt['bf16'] * fpt / 1e9 / bg:>11.0%}")
print(f"\nceilings at 4096^3, {g['threads']} threads: sgemm {sg:.0f} GFLOP/s (OpenBLAS), bf16 "
      f"{bg:.0f} GFLOP/s ({g['backend']}); on the pythia-70m step's GEMM shapes: sgemm "
      f"{g['shapes_sgemm_gflops']:.0f}, bf16 {g['shapes_bf16_gflops']:.0f} GFLOP/s")
print("goals: grit bf16 >= 3x torch fp32 and >= 2x torch bf16; grit fp32 >= 2x torch fp32 on 14m, "
      ">= 1.5x on the 70m shapes; grit bf16 >= 60% of the bf16 ceiling on the 70m shapes")
PY
