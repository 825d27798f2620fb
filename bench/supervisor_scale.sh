#!/usr/bin/env bash
# supervisor_scale.sh [BUILD] - the supervisor's CPU time per second of heartbeats at
# 4,096 ranks on 512 nodes (+2 spares), each rank beating at 1 Hz, all beats from one
# paced sender process over real UDP (tests/integration/sup_scale.c --bench). The figure
# is the CPU (user + system, every thread) of the process that runs sup_run, over
# SECONDS of steady beating, as a percentage of one core. Target: under 5%.
#
#   with the dashboard      the live dashboard thread too (nodes.json persisted once a
#                           second), as `grit launch` runs by default
#   without                 the supervisor loop alone
#
# Env: REPEATS (5), SECONDS_EACH (10). Prints each run, the median of each kind, the CPU.
set -euo pipefail
build=${1:-build}
bin="$build/grit-sup-scale"
[ -x "$bin" ] || { echo "FAIL: $bin not built (make build)"; exit 1; }
REPEATS=${REPEATS:-5}; SECONDS_EACH=${SECONDS_EACH:-10}
median() { python3 -c 'import statistics,sys; print("%.2f" % statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') ($(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg))"
for mode in dashboard no-dashboard; do
  pcts=()
  for i in $(seq 1 "$REPEATS"); do
    extra=(); [ "$mode" = no-dashboard ] && extra=(--no-dashboard)
    line=$("$bin" --bench "$SECONDS_EACH" "${extra[@]}" | tail -1)
    echo "  $mode run $i: $line"
    case $line in *" rc 0 detected 0 rejected 0"*) ;; *) echo "FAIL: run $i did not end cleanly"; exit 1 ;; esac
    pcts+=("$(sed 's/.*cpu_pct_of_core \([0-9.]*\).*/\1/' <<<"$line")")
  done
  echo "$mode: median $(median "${pcts[@]}")% of one core per second of heartbeats (4,096 beats/s; $REPEATS runs of ${SECONDS_EACH} s)"
done
