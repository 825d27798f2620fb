#!/usr/bin/env bash
# silent.sh - detection of silent slowdowns versus the throttle level, on this machine:
#   CPU: one node's rank limited by a CPU cgroup to 90%, 70%, 50% and 40% of the CPU it
#        was getting (tests/integration/silent_cpu.sh, 2 nodes + 1 spare; the Slurm test
#        throttles to 25%: CPU_LEVELS="40 25" for the levels around it);
#   link: one node's veth limited with tc tbf to RATES (default 40mbit 18mbit 7mbit 4mbit;
#        the healthy nodes' peak rate with this job is about 4-5 MB/s, i.e. ~37 Mbit/s,
#        so these are ~100%, 50%, 20%, 10% of it) (tests/integration/silent_net.sh, 3 + 1).
# Each level runs RUNS times (default 1; each run is ~40-90 s): detected (kind and node
# right), mean detection latency from the throttle, and alarms of another kind or node
# (false positives). Prints a markdown table; the smallest slowdown detected on every run
# is the last row with RUNS/RUNS. Needs root (cgroups, namespaces); levels that cannot run
# are reported as skipped.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
grit=${GRIT:-$root/build/grit}
py=${PYTHON:-/usr/bin/python3}
RUNS=${RUNS:-1}
CPU_LEVELS=${CPU_LEVELS-"90 70 50 40"} # empty: no CPU rows
RATES=${RATES-"40mbit 18mbit 7mbit 4mbit"} # empty: no link rows
out=$(mktemp)
trap 'rm -f "$out"' EXIT
row() { # KIND LEVEL: RUNS runs, one table row
  local kind=$1 level=$2 det=0 lat="" other=0 skipped=0 i line
  for i in $(seq "$RUNS"); do
    if [ "$kind" = cpu ]; then
      GRIT_SILENT_BENCH=1 GRIT_THROTTLE=$level bash "$root/tests/integration/silent_cpu.sh" "$grit" "$py" > "$out" 2>&1 || true
    else
      GRIT_SILENT_BENCH=1 GRIT_NET_RATE=$level bash "$root/tests/integration/silent_net.sh" "$grit" "$py" > "$out" 2>&1 || true
    fi
    line=$(grep '^BENCH' "$out" || true)
    if [ -z "$line" ]; then skipped=$((skipped + 1)); grep -m1 'SKIP\|FAIL' "$out" >&2 || true; continue; fi
    case $line in *detected=yes*) det=$((det + 1)); lat="$lat $(echo "$line" | grep -o 'latency_s=[0-9.]*' | cut -d= -f2)";; esac
    other=$((other + $(echo "$line" | grep -o 'other_alarms=[0-9]*' | cut -d= -f2)))
  done
  local mean=-
  [ -n "${lat// /}" ] && mean=$("$py" -c "import sys; v=[float(x) for x in sys.argv[1:]]; print(round(sum(v)/len(v), 1))" $lat)
  echo "| $kind | $level | $det/$((RUNS - skipped)) | $mean | $other |"
}
echo "silent slowdowns on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
echo
echo "| signal | throttle (cpu: % of its CPU; net: tbf rate) | detected | latency s (mean) | other alarms |"
echo "|---|---|---|---|---|"
for l in $CPU_LEVELS; do row cpu "$l"; done
for r in $RATES; do row net "$r"; done
