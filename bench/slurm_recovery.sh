#!/usr/bin/env bash
# slurm_recovery.sh [GRIT] [REPS] - time from a node failure to the retried step's first
# training step, on a 4-node local Slurm cluster (scripts/slurm-local-cluster.sh), with
# `srun --auto-resume=1 grit train` on 3 nodes + 1 spare. Run as root, from a build with
# spank_grit.so next to grit. For each fault (crash: every process of n2 SIGKILLed;
# freeze: SIGSTOP) and repetition it prints, from the fault:
#   slurm_s    Slurm marks n2 NOT_RESPONDING (Slurm's own detection, SlurmdTimeout=5)
#   detect_s   grit's supervisor detects the failure (hang timeout 3 s: the surviving ranks
#              block in their all-reduce; srun cannot reach the dead node)
#   stop_s     the failed step is stopped (srun SIGTERM, grace, leftover steps cancelled)
#   diag_s     grit health on the suspects at once with srun -w (a frozen node: until
#              --health-timeout 8 s), n2 drained (scontrol update)
#   relaunch_s the new srun step on n1,n4,n3 until its first training step
#   total_s    fault -> first training step of the retried step
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
grit=${1:-$here/../build/grit}
reps=${2:-2}
grit=$(cd "$(dirname "$grit")" && pwd)/$(basename "$grit")
spank=$(dirname "$grit")/spank_grit.so
lc=$here/../scripts/slurm-local-cluster.sh
[ "$(id -u)" = 0 ] || { echo "slurm_recovery: needs root" >&2; exit 1; }
[ -x "$grit" ] && [ -f "$spank" ] || { echo "slurm_recovery: need $grit and $spank (build first)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/grit-slurm-bench.XXXXXX)
chmod 0755 "$tmp"
export GRIT_SLURM_DIR=$tmp/cluster GRIT_SLURM_NODES=4 GRIT_SLURM_PORT=${GRIT_SLURM_PORT:-17960}
export GRIT_SLURM_PLUGIN=$spank GRIT_SLURM_PLUGIN_ARGS="grit=$grit"
export SLURM_CONF=$GRIT_SLURM_DIR/etc/slurm.conf
poller=""
cleanup() {
  [ -n "$poller" ] && kill "$poller" 2> /dev/null
  "$lc" thaw-node n2 > /dev/null 2>&1 || true
  "$lc" stop > /dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# 3 data-parallel ranks, 60 steps, a checkpoint every 5 (shared by the Slurm test and bench)
cp "$here/../tests/configs/slurm_job.json" "$tmp/job.json"
ev_ts() { { grep "\"event\":\"$2\"" "$1/events.jsonl" || true; } | head -1 | sed 's/^{"ts":\([0-9.]*\),.*/\1/'; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a == "" || b == "") print "-"; else printf "%.2f", b - a }'; }

printf '%-7s %-4s %8s %9s %7s %7s %11s %8s\n' fault rep slurm_s detect_s stop_s diag_s relaunch_s total_s
for fault in crash freeze; do
  for rep in $(seq "$reps"); do
    "$lc" start 2> "$tmp/start.log" || { cat "$tmp/start.log" >&2; exit 1; }
    run=$tmp/run-$fault-$rep
    cat > "$tmp/batch.sh" << EOF
#!/bin/bash
export GRIT_LAUNCH_OPTS="--run $run --spares 1 --hang-timeout 3 --health-timeout 8 --backoff 0.1 --straggler-factor 0 --quiet"
srun --auto-resume=1 "$grit" train "$tmp/job.json" --run-dir "$run" --quiet
EOF
    jid=$(sbatch --parsable -N 4 --no-kill -o "$tmp/job-$fault-$rep.out" "$tmp/batch.sh")
    for _ in $(seq 300); do
      n=$(grep -c '"step"' "$run/metrics.jsonl" 2> /dev/null || true)
      [ "${n:-0}" -ge 12 ] && break
      sleep 0.1
    done
    # Slurm's view of n2, polled in the background
    (while :; do
       scontrol show node n2 2> /dev/null | grep 'State=[A-Z+]*NOT_RESPONDING\|State=DOWN' > /dev/null && { date +%s.%N; exit 0; }
       sleep 0.1
     done) > "$tmp/slurm_ts" &
    poller=$!
    if [ "$fault" = crash ]; then "$lc" kill-node n2 2> /dev/null; else "$lc" freeze-node n2 2> /dev/null; fi
    t0=$(date +%s.%N)
    for _ in $(seq 1200); do
      st=$(scontrol show job "$jid" 2> /dev/null | grep -o 'JobState=[A-Z]*' | cut -d= -f2 || true)
      [ "$st" = COMPLETED ] || [ "$st" = FAILED ] || [ "$st" = CANCELLED ] && break
      sleep 0.1
    done
    for _ in $(seq 100); do [ -s "$tmp/slurm_ts" ] && break; sleep 0.1; done
    kill "$poller" 2> /dev/null || true; wait "$poller" 2> /dev/null || true; poller=""
    ts_slurm=$(cat "$tmp/slurm_ts" 2> /dev/null || true)
    det=$(ev_ts "$run" detected) stop=$(ev_ts "$run" job_stopped) cord=$(ev_ts "$run" cordon)
    rec=$(ev_ts "$run" recovered)
    printf '%-7s %-4s %8s %9s %7s %7s %11s %8s\n' "$fault" "$rep" "$(sub "$t0" "$ts_slurm")" \
      "$(sub "$t0" "$det")" "$(sub "$det" "$stop")" "$(sub "$stop" "$cord")" \
      "$(sub "$cord" "$rec")" "$(sub "$t0" "$rec")"
    if [ "$st" != COMPLETED ]; then
      echo "  (job ended '$st':)"; cat "$tmp/job-$fault-$rep.out"
    fi
    "$lc" thaw-node n2 > /dev/null 2>&1 || true
    "$lc" stop 2> /dev/null || true
  done
done
