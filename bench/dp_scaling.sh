#!/usr/bin/env bash
# dp_scaling.sh - data-parallel throughput for the pythia-70m shape (seq 512, global batch
# 8 sequences), in one run: np=1 with 1 thread, np=2 with 1 thread each (MPI), np=1 with
# 2 threads, np=2 with ZeRO-1; for comparison, np=2 with the progress thread
# (GRIT_DIST_PROGRESS_US=100) and, as before, with the input embedding reduced densely
# (GRIT_DP_SPARSE_EMBED=0) and no progress thread. Per np=2 run: the
# fraction of the gradient reduction hidden behind backward, 1 - (median waited per step)
# / (one blocking reduction of all gradients), and the AdamW state per rank.
# Step 1 (warm-up) is left out. Override STEPS (timed, default 5); ONLY="np2t1 np2d ..."
# runs a subset (names as in the table's code below).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
grit=${GRIT:-$root/build/grit}
STEPS=${STEPS:-5}
. "$(dirname "$0")/blas_coretype.sh"
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
mk np1t1 1 false; mk np2t1 1 false; mk np1t2 2 false; mk np2z 1 true; mk np2d 1 false; mk np2zd 1 true
mk np2p 1 false
want() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }
np2() { # NAME LABEL [ENV...]
  local n=$1; want "$n" || return 0
  echo "bench: $2"; shift 2
  env "$@" mpirun --bind-to none -np 2 "$grit" train "$tmp/$n.json" 2> "$tmp/$n.log" >/dev/null ||
    { echo "bench: $n FAILED:"; tail -n 5 "$tmp/$n.log"; }
}
echo "bench: load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
! want np1t1 || { echo "bench: np=1, 1 thread"; "$grit" train "$tmp/np1t1.json" --quiet; }
np2 np2t1 "np=2, 1 thread each"
np2 np2p "np=2, progress thread every 100 us" GRIT_DIST_PROGRESS_US=100
np2 np2d "np=2, before (dense embedding)" GRIT_DP_SPARSE_EMBED=0 GRIT_DIST_PROGRESS_US=0
! want np1t2 || { echo "bench: np=1, 2 threads"; "$grit" train "$tmp/np1t2.json" --quiet; }
np2 np2z "np=2, ZeRO-1"
np2 np2zd "np=2, ZeRO-1, before" GRIT_DP_SPARSE_EMBED=0 GRIT_DIST_PROGRESS_US=0
echo "bench: load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
python3 - "$tmp" <<'PY'
import json, re, statistics, sys
tmp = sys.argv[1]
def rows(run):
    return [json.loads(l) for l in open(f"{tmp}/{run}/metrics.jsonl")][1:]
print(f"\n{'configuration':<44} {'tok/s':>7} {'vs np=1 t=1':>11} {'wait/step':>10} {'blocking':>9} {'hidden':>7}  AdamW/rank")
base = None
for run, label in [("np1t1", "np=1, 1 thread"), ("np2t1", "np=2 (MPI), 1 thread each"),
                   ("np1t2", "np=1, 2 threads"), ("np2z", "np=2, 1 thread each, ZeRO-1"),
                   ("np2p", "np=2, progress thread (100 us)"),
                   ("np2d", "np=2, before: dense embedding"),
                   ("np2zd", "np=2, ZeRO-1, before")]:
    try:
        rs = rows(run)
    except (OSError, ValueError):
        print(f"{label:<44} (not run or failed)")
        continue
    t = sum(r["tokens_per_s"] * r["step_time_s"] for r in rs) / sum(r["step_time_s"] for r in rs)
    base = base or (t if run == "np1t1" else None)
    extra = ""
    if "comm_wait_s" in rs[0]:
        text = open(f"{tmp}/{run}.log").read()
        m = re.search(r"AdamW state ([0-9.]+) MiB per rank; gradient \S+ ([0-9.]+) s blocking", text)
        wait = statistics.median(r["comm_wait_s"] for r in rs)
        if m:
            blk = float(m.group(2))
            extra = f" {wait:>9.3f}s {blk:>8.3f}s {100 * max(0.0, 1 - wait / blk):>6.0f}%  {m.group(1)} MiB"
    rel = f"{t / base:>10.2f}x" if base else f"{'-':>11}"
    print(f"{label:<44} {t:>7.0f} {rel}{extra}")
PY
