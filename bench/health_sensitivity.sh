#!/usr/bin/env bash
# health_sensitivity.sh [GRIT] - how fast `grit health` is and how well its GEMM
# throughput check separates slow nodes from noise on this machine.
#
#   1. quick duration (median of 3 runs) and deep duration (one run, DEEP_SECONDS)
#   2. a baseline: the median best-of-trials GFLOP/s of BASE_RUNS quick runs
#      (what a node's first runs or a cluster median would give)
#   3. sensitivity: for each slowdown in SLOWDOWNS (injected with
#      GRIT_HEALTH_SLOWDOWN, which stretches every timed GEMM trial), REPS quick
#      runs against the baseline at --slow-factor SLOW_FACTOR; the smallest
#      slowdown flagged in every run is the one flagged "reliably"
#   4. false positives: N quick runs without slowdown (default 50); how many the
#      throughput check flags, and how many fail for any reason
#
# Env: N (50), REPS (10), BASE_RUNS (5), SLOWDOWNS ("1.1 1.2 1.3 1.4 1.5 2 3"),
#      SLOW_FACTOR (1.25), DEEP_SECONDS (20), SKIP_DEEP (0).
set -euo pipefail
grit=${1:-build/grit}
N=${N:-50}; REPS=${REPS:-10}; BASE_RUNS=${BASE_RUNS:-5}
SLOWDOWNS=${SLOWDOWNS:-"1.1 1.2 1.3 1.4 1.5 2 3"}; SLOW_FACTOR=${SLOW_FACTOR:-1.25}
DEEP_SECONDS=${DEEP_SECONDS:-20}; SKIP_DEEP=${SKIP_DEEP:-0}
tmp=$(mktemp -d /tmp/grit-health-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
small=(--dir "$tmp" --mem-max-bytes 1048576 --disk-bytes 1048576)

field() { # FILE CHECK KEY -> value (or the report's KEY when CHECK is "-")
  python3 - "$@" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
if sys.argv[2] == "-":
    print(rep[sys.argv[3]])
else:
    print([c for c in rep["checks"] if c["name"] == sys.argv[2]][0][sys.argv[3]])
PY
}
median() { python3 -c 'import statistics,sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }

echo "== durations ($(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg))"
qd=()
for i in 1 2 3; do
  "$grit" health --quick --json --dir "$tmp" >"$tmp/q$i.json" || true
  qd+=("$(field "$tmp/q$i.json" - duration_s)")
done
printf 'quick: median %.2f s (runs: %s)\n' "$(median "${qd[@]}")" "${qd[*]}"
if [ "$SKIP_DEEP" != 1 ]; then
  "$grit" health --deep --json --deep-seconds "$DEEP_SECONDS" --dir "$tmp" >"$tmp/deep.json" || true
  printf 'deep:  %.2f s (--deep-seconds %s, memory %s)\n' "$(field "$tmp/deep.json" - duration_s)" \
    "$DEEP_SECONDS" "$(field "$tmp/deep.json" memory.patterns reason | cut -d' ' -f1-2)"
fi

echo "== baseline (median of $BASE_RUNS quick runs)"
g=()
for i in $(seq "$BASE_RUNS"); do
  "$grit" health --quick --json "${small[@]}" >"$tmp/b$i.json" || true
  g+=("$(field "$tmp/b$i.json" compute.gemm_gflops measured)")
done
base=$(median "${g[@]}")
printf '{"format": "grit-health-baseline", "version": 1, "values": {"compute.gemm_gflops": %s}}\n' \
  "$base" >"$tmp/baseline.json"
printf 'baseline %.1f GFLOP/s (runs: %s)\n' "$base" "${g[*]}"

flagged() { # RUNS SLOWDOWN -> count of runs whose throughput check failed
  local k=0 i
  for i in $(seq "$1"); do
    GRIT_HEALTH_SLOWDOWN=$2 "$grit" health --quick --json "${small[@]}" --baseline "$tmp/baseline.json" \
      --slow-factor "$SLOW_FACTOR" >"$tmp/r.json" || true
    [ "$(field "$tmp/r.json" compute.gemm_gflops verdict)" = fail ] && k=$((k + 1))
  done
  echo "$k"
}

echo "== sensitivity (slow factor $SLOW_FACTOR, $REPS runs per slowdown)"
reliable=none
for s in $SLOWDOWNS; do
  k=$(flagged "$REPS" "$s")
  printf 'slowdown %-4s flagged %2d/%d\n' "$s" "$k" "$REPS"
  if [ "$k" -eq "$REPS" ] && [ "$reliable" = none ]; then reliable=$s; fi
done
echo "smallest slowdown flagged in every run: $reliable"

echo "== false positives ($N healthy quick runs)"
fp=0; anyfail=0
for i in $(seq "$N"); do
  rc=0
  "$grit" health --quick --json "${small[@]}" --baseline "$tmp/baseline.json" \
    --slow-factor "$SLOW_FACTOR" >"$tmp/r.json" || rc=$?
  [ "$(field "$tmp/r.json" compute.gemm_gflops verdict)" = fail ] && fp=$((fp + 1))
  [ "$rc" -ne 0 ] && anyfail=$((anyfail + 1))
done
python3 -c 'import sys; n,fp,a=map(int,sys.argv[1:]); print(f"throughput flagged {fp}/{n} ({100*fp/n:.1f}%); any check failed {a}/{n} ({100*a/n:.1f}%)")' "$N" "$fp" "$anyfail"
