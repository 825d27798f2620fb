#!/usr/bin/env bash
# train_vs_pytorch.sh - grit vs PyTorch training throughput, side by side in one run.
#
# For pythia-14m, pythia-70m, llama-70m (GQA 8/2, SwiGLU, RMSNorm) and falcon-70m
# (new_decoder_architecture, grouped qkv, tied) shapes at seq 512, micro batch 8, 2 threads, fp32:
# trains STEPS timed steps (after WARMUP untimed ones) with grit and with the PyTorch
# reference (tests/reference/gptneox_ref.py), and prints tokens/s for both, the ratio,
# peak RSS for both, and grit's achieved GFLOP/s as a fraction of OpenBLAS sgemm's
# rate measured on this machine in the same run.
#
# Both sides get the same thread count and OPENBLAS_CORETYPE=SkylakeX (this machine's
# environment defaults to Haswell kernels). Override: STEPS, WARMUP, THREADS, PRESETS.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
grit=${GRIT:-$root/build/grit}
sgemm=${GRIT_SGEMM:-$root/build/grit-bench-sgemm}
py=${PYTHON:-/usr/bin/python3}
STEPS=${STEPS:-5} WARMUP=${WARMUP:-1} THREADS=${THREADS:-2}
PRESETS=${PRESETS:-"pythia-14m pythia-70m llama-70m falcon-70m"}
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "bench: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE threads=$THREADS steps=$STEPS (+$WARMUP warm-up)"
"$sgemm" 4096 "$THREADS" > "$tmp/sgemm.json"
echo "bench: sgemm ceiling $(cat "$tmp/sgemm.json")"

for p in $PRESETS; do
  case $p in llama-*) sv=32000 ;; falcon-*) sv=65024 ;; *) sv=50277 ;; esac
  cat > "$tmp/$p.json" <<CFG
{"model": "$p", "optim": {"micro_batch": 8, "seq_len": 512, "lr": 6e-4, "min_lr": 6e-4,
 "warmup_steps": 0, "total_steps": $((STEPS + WARMUP))},
 "data": {"synthetic_vocab": $sv}, "threads": $THREADS, "run_dir": "$tmp/run-$p"}
CFG
  echo "bench: $p: grit ..."
  "$py" "$root/bench/maxrss.py" "$tmp/$p.grit-rss" "$grit" train "$tmp/$p.json" --quiet
  echo "bench: $p: pytorch ..."
  "$py" "$root/bench/torch_train.py" --preset "$p" --seq 512 --micro-batch 8 --steps "$STEPS" \
      --warmup-steps "$WARMUP" --threads "$THREADS" --json > "$tmp/$p.torch.json"
done

"$py" - "$tmp" "$WARMUP" $PRESETS <<'PY'
import json, sys
tmp, warm, presets = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
sg = json.load(open(f"{tmp}/sgemm.json"))["gflops"]
# C, L, I, V, q/k/v rows per C (heads + 2 kv) / heads, MLP matrices
shapes = {"pythia-14m": (128, 6, 512, 50304, 3, 2), "pythia-70m": (512, 6, 2048, 50304, 3, 2),
          "llama-70m": (512, 12, 1408, 32000, 1.5, 3), "falcon-70m": (512, 12, 2048, 65024, 1.5, 2)}
def flops_per_token(C, L, I, V, Q, F, T=512):  # same formula as gx_flops_per_token()
    linear = L * (Q * C * C + C * C + F * C * I) + V * C
    attn = L * 2.0 * C * (T + 1) / 2.0 * 2.0
    return 6.0 * linear + 3.0 * attn
hdr = f"{'model':<12} {'grit tok/s':>11} {'torch tok/s':>12} {'ratio':>6} {'grit RSS':>9} {'torch RSS':>10} {'grit GFLOP/s':>13} {'of sgemm':>9}"
print("\n" + hdr + "\n" + "-" * len(hdr))
for p in presets:
    rows = [json.loads(l) for l in open(f"{tmp}/run-{p}/metrics.jsonl")][warm:]
    tok = sum(r["tokens_per_s"] * r["step_time_s"] for r in rows) / sum(r["step_time_s"] for r in rows)
    t = json.load(open(f"{tmp}/{p}.torch.json"))
    rss = float(open(f"{tmp}/{p}.grit-rss").read())
    gf = tok * flops_per_token(*shapes[p]) / 1e9
    print(f"{p:<12} {tok:>11.0f} {t['tokens_per_s']:>12.0f} {tok / t['tokens_per_s']:>5.2f}x "
          f"{rss:>6.0f}MiB {t['peak_rss_mib']:>7.0f}MiB {gf:>13.1f} {gf / sg:>8.0%}")
print(f"\nsgemm ceiling (OpenBLAS, {sg:.0f} GFLOP/s, 4096^3); targets: >= 2x on 14m, >= 1.5x on the 70m shapes")
PY
