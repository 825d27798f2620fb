#!/usr/bin/env bash
# dp_scaling.sh - data-parallel throughput for the pythia-70m shape (seq 512, global batch
# 8 sequences), in one run: np=1 with 1 thread, np=2 with 1 thread each (MPI), np=1 with
# 2 threads; the fraction of gradient all-reduce time hidden behind backward; AdamW state
# per rank with and without ZeRO-1. Override STEPS (timed, default 3).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
grit=${GRIT:-$root/build/grit}
STEPS=${STEPS:-3}
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mk() { # NAME THREADS ZERO
  cat > "$tmp/$1.json" <<CFG
{"model": "pythia-70m", "optim": {"micro_batch": 4, "global_batch": 8, "seq_len": 512,
 "warmup_steps": 1, "total_steps": $((STEPS + 1)), "zero1": $3}, "threads": $2,
 "data": {"synthetic_vocab": 50277}, "checkpoint": {"interval_steps": 0}, "run_dir": "$tmp/$1"}
CFG
}
mk np1t1 1 false; mk np2t1 1 false; mk np1t2 2 false; mk np2z 1 true
echo "bench: np=1, 1 thread";  "$grit" train "$tmp/np1t1.json" --quiet
echo "bench: np=2, 1 thread each"; mpirun --bind-to none -np 2 "$grit" train "$tmp/np2t1.json" 2> "$tmp/np2t1.log" >/dev/null
echo "bench: np=1, 2 threads"; "$grit" train "$tmp/np1t2.json" --quiet
echo "bench: np=2, ZeRO-1";    mpirun --bind-to none -np 2 "$grit" train "$tmp/np2z.json" 2> "$tmp/np2z.log" >/dev/null
python3 - "$tmp" <<'PY'
import json, re, sys
tmp = sys.argv[1]
def tps(run):
    rows = [json.loads(l) for l in open(f"{tmp}/{run}/metrics.jsonl")][1:]
    return sum(r["tokens"] - p["tokens"] for p, r in zip(rows, rows[1:])) / sum(r["step_time_s"] for r in rows[1:]) if len(rows) > 1 else rows[0]["tokens_per_s"], rows
print(f"\n{'configuration':<28} {'tok/s':>8} {'vs np=1 t=1':>12}")
base = None
for run, label in [("np1t1", "np=1, 1 thread"), ("np2t1", "np=2 (MPI), 1 thread each"),
                   ("np1t2", "np=1, 2 threads"), ("np2z", "np=2, 1 thread each, ZeRO-1")]:
    rows = [json.loads(l) for l in open(f"{tmp}/{run}/metrics.jsonl")][1:]
    t = sum(r["tokens_per_s"] * r["step_time_s"] for r in rows) / sum(r["step_time_s"] for r in rows)
    base = base or t
    print(f"{label:<28} {t:>8.0f} {t / base:>11.2f}x")
for log in ("np2t1", "np2z"):
    text = open(f"{tmp}/{log}.log").read()
    m = re.search(r"data parallel\s+(.*)", text)
    print(f"{log}: {m.group(1) if m else 'no summary line'}")
PY
