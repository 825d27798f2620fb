#!/usr/bin/env bash
# contention.sh - grit training beside a busy neighbour (docs/performance.md, "Contention").
#
# Trains a small pythia-14m shape (micro batch 2, seq 128, synthetic data) for STEPS steps
# with 1 and 2 threads, on a quiet machine and beside a busy-loop process pinned to one core
# (started before the runs that want it, ended by its PID after them), for each MODE:
#   before  libgomp's built-in waiting (spin ~300,000 pauses at every barrier), what grit
#           did before it chose its own policy: BEFORE_BIN (e.g. main's build/grit) with the
#           environment as given, else this grit with GOMP_SPINCOUNT=300000 (libgomp's default,
#           which grit leaves alone because it is explicit)
#   after   this grit with its own wait policy (src/core/ompenv.h)
# Runs are interleaved (repeat > neighbour > threads > mode) so drift in the machine's load
# hits every cell alike. A run's time is its median step time (first step left out); a cell's
# is the median over REPS runs. Prints the CPU, the medians, and the slowdown ratios.
#
# Override: GRIT, BEFORE_BIN, REPS (5), STEPS (6), CORE (the last CPU), MODES ("before after"),
# EXTRA_MODES ("name=VAR=value,VAR=value ..." more env variants of this grit, for tuning).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
grit=${GRIT:-$root/build/grit}
before_bin=${BEFORE_BIN:-}
REPS=${REPS:-5} STEPS=${STEPS:-6}
CORE=${CORE:-$(($(nproc) - 1))}
MODES=${MODES:-"before after"}
EXTRA_MODES=${EXTRA_MODES:-}
py=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
nb=
cleanup() {
  if [ -n "$nb" ]; then kill "$nb" 2>/dev/null || true; wait "$nb" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs online"
echo "flags: $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2- | tr ' ' '\n' | grep -E '^(avx|avx2|fma|avx512[a-z_0-9]*|amx[a-z_0-9]*)$' | tr '\n' ' ')"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); neighbour core $CORE; reps $REPS; steps $STEPS"
echo "before: ${before_bin:-$grit with GOMP_SPINCOUNT=300000}; after: $grit"

cat > "$tmp/cfg.json" <<CFG
{"model": "pythia-14m", "optim": {"micro_batch": 2, "seq_len": 128, "lr": 6e-4, "min_lr": 6e-4,
 "warmup_steps": 0, "total_steps": $STEPS}, "data": {"synthetic_vocab": 50277}, "checkpoint": {"interval_steps": 0}, "threads": 1}
CFG

modes=()
for m in $MODES; do modes+=("$m"); done
for e in $EXTRA_MODES; do modes+=("$e"); done

# run_one MODE THREADS NEIGHBOUR REP: one training run, its median step time into results
run_one() {
  local mode=$1 th=$2 nbr=$3 rep=$4 bin=$grit env=()
  case $mode in
    before) if [ -n "$before_bin" ]; then bin=$before_bin; else env=(GOMP_SPINCOUNT=300000); fi ;;
    after) ;;
    *=*) IFS=, read -r -a env <<< "${mode#*=}" ;;
    *) echo "contention.sh: unknown mode '$mode'" >&2; exit 2 ;;
  esac
  local dir=$tmp/run-$rep-$nbr-$th-${mode%%=*}
  env "${env[@]}" "$bin" train "$tmp/cfg.json" --run-dir "$dir" --threads "$th" --quiet \
    > "$dir.log" 2>&1 || { echo "contention.sh: run failed:"; cat "$dir.log"; exit 1; }
  "$py" - "$dir/metrics.jsonl" "${mode%%=*}" "$th" "$nbr" >> "$tmp/results" <<'PY'
import json, statistics, sys
rows = [json.loads(l)["step_time_s"] for l in open(sys.argv[1])][1:]
print(sys.argv[2], sys.argv[3], sys.argv[4], f"{statistics.median(rows):.4f}")
PY
}

for rep in $(seq "$REPS"); do
  for nbr in quiet busy; do
    if [ "$nbr" = busy ]; then
      taskset -c "$CORE" bash -c 'while :; do :; done' &
      nb=$!
      sleep 0.2
    fi
    for th in 1 2; do
      for mode in "${modes[@]}"; do run_one "$mode" "$th" "$nbr" "$rep"; done
    done
    if [ -n "$nb" ]; then kill "$nb"; wait "$nb" 2>/dev/null || true; nb=; fi
  done
  echo "rep $rep/$REPS done (load $(cut -d' ' -f1 /proc/loadavg))"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

"$py" - "$tmp/results" <<'PY'
import collections, statistics, sys
cells = collections.defaultdict(list)
order = []
for line in open(sys.argv[1]):
    mode, th, nbr, t = line.split()
    if mode not in order:
        order.append(mode)
    cells[(mode, int(th), nbr)].append(float(t))
med = {k: statistics.median(v) for k, v in cells.items()}
print(f"\nmedian step time (s), {len(next(iter(cells.values())))} runs per cell")
hdr = f"{'mode':<10} {'1t quiet':>9} {'1t busy':>9} {'2t quiet':>9} {'2t busy':>9}   " \
      f"{'1t busy/quiet':>13} {'2t busy/quiet':>13} {'2t busy / 1t quiet':>18}"
print(hdr + "\n" + "-" * len(hdr))
for m in order:
    g = lambda th, n: med[(m, th, n)]
    print(f"{m:<10} {g(1,'quiet'):9.3f} {g(1,'busy'):9.3f} {g(2,'quiet'):9.3f} {g(2,'busy'):9.3f}   "
          f"{g(1,'busy')/g(1,'quiet'):13.2f} {g(2,'busy')/g(2,'quiet'):13.2f} "
          f"{g(2,'busy')/g(1,'quiet'):18.2f}")
PY
