#!/usr/bin/env bash
# ab_train.sh - training throughput of two grit binaries, A and B, side by side: for each
# preset, REPEATS rounds of one A run and one B run (interleaved, so a change in the
# machine's load hits both; who goes first alternates), each STEPS steps of micro batch
# MB x SEQ tokens with THREADS threads; prints each run's tokens/s (mean over the steps
# after the first) and the medians.
# Usage: bench/ab_train.sh GRIT_A GRIT_B   (e.g. main's build/grit against a branch's)
# Override: PRESETS, REPEATS, STEPS, MB, SEQ, THREADS, PRECISION (fp32 or bf16). Prints
# the CPU, its vector flags and the load average (a shared machine's neighbours move every
# number).
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 GRIT_A GRIT_B" >&2; exit 2; }
a=$1 b=$2
py=${PYTHON:-/usr/bin/python3}
PRESETS=${PRESETS:-"pythia-14m llama-70m"} REPEATS=${REPEATS:-3} STEPS=${STEPS:-3}
MB=${MB:-2} SEQ=${SEQ:-512} THREADS=${THREADS:-1} PRECISION=${PRECISION:-fp32}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "ab: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs," \
     "flags: $(grep -m1 -o -w -E 'avx2|fma|avx512f|avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "ab: threads=$THREADS micro_batch=$MB seq=$SEQ steps=$STEPS repeats=$REPEATS" \
     "precision=$PRECISION," \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
echo "ab: load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
for p in $PRESETS; do
  case $p in llama-*) sv=32000 ;; falcon-*) sv=65024 ;; *) sv=50277 ;; esac
  cat > "$tmp/$p.json" <<CFG
{"model": "$p", "optim": {"micro_batch": $MB, "seq_len": $SEQ, "lr": 6e-4, "min_lr": 6e-4,
 "warmup_steps": 0, "total_steps": $STEPS}, "data": {"synthetic_vocab": $sv},
 "threads": $THREADS, "precision": "$PRECISION"}
CFG
  for r in $(seq "$REPEATS"); do
    order="a b"; [ $((r % 2)) -eq 0 ] && order="b a" # alternate who goes first
    for side in $order; do
      bin=$a; [ $side = b ] && bin=$b
      rm -rf "$tmp/run"
      "$bin" train "$tmp/$p.json" --run-dir "$tmp/run" --quiet >/dev/null
      "$py" -c 'import json, sys  # steps after the first: tokens / time
r = [json.loads(l) for l in open(sys.argv[1])][1:]
print("%.1f" % (sum(x["tokens_per_s"] * x["step_time_s"] for x in r) / sum(x["step_time_s"] for x in r)))' \
        "$tmp/run/metrics.jsonl" > "$tmp/$p.$side.$r"
      echo "ab: $p round $r $side: $(cat "$tmp/$p.$side.$r") tok/s (load $(cut -d' ' -f1 /proc/loadavg))"
    done
  done
  "$py" - "$tmp" "$p" "$REPEATS" <<'PY'
import statistics, sys
tmp, p, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
med = {s: statistics.median(float(open(f"{tmp}/{p}.{s}.{r}").read()) for r in range(1, n + 1))
       for s in "ab"}
print(f"ab: {p}: median A {med['a']:.1f} tok/s, B {med['b']:.1f} tok/s, B/A {med['b'] / med['a']:.3f}")
PY
done
