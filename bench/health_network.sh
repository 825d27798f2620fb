#!/usr/bin/env bash
# health_network.sh [GRIT] - the network check of `grit health` across MPI ranks on this
# machine (one host: ranks talk through Open MPI's shared-memory transport, not a NIC).
#
#   1. for NP in NPS: one quick run; prints the all-reduce table (bytes, time, algbw,
#      busbw) and every pair's ping-pong latency and bandwidth, and the run's duration
#   2. sensitivity: slow_link on the last of SENS_NP ranks with each per-message delay
#      in DELAYS (us), REPS runs each: how often the run fails and which rank/pair it names
#   3. false positives: N healthy quick runs on SENS_NP ranks with default thresholds:
#      how many fail, and which check
#
# Env: NPS ("2 3 4"), SENS_NP (3), DELAYS ("20 50 100 200 500 1000 2000 5000"), REPS (5), N (20).
set -euo pipefail
grit=${1:-build/grit}
NPS=${NPS:-"2 3 4"}; SENS_NP=${SENS_NP:-3}; REPS=${REPS:-5}; N=${N:-20}
DELAYS=${DELAYS:-"20 50 100 200 500 1000 2000 5000"}
tmp=$(mktemp -d /tmp/grit-health-netbench.XXXXXX)
mpipid=""
cleanup() { # TERM lets mpirun end its ranks
  if [ -n "$mpipid" ]; then kill -TERM "$mpipid" 2>/dev/null; sleep 1; kill -9 "$mpipid" 2>/dev/null; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
small=(--quick --json --dir "$tmp" --mem-max-bytes 1048576 --disk-bytes 1048576)

run() { # NP OUT ARGS... (rank 0's JSON in OUT)
  local np=$1 out=$2; shift 2
  mpirun -np "$np" "$grit" health "${small[@]}" "$@" >"$out" 2>/dev/null &
  mpipid=$!
  wait "$mpipid" || true
  mpipid=""
}

echo "== 1. sweep and pairs (quick defaults; $(nproc) cores; load $(cut -d' ' -f1 /proc/loadavg))"
for np in $NPS; do
  run "$np" "$tmp/np$np.json"
  python3 - "$tmp/np$np.json" "$np" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1])); net = rep["network"]
print(f"-- {sys.argv[2]} ranks: exit {rep['exit_code']}, {rep['duration_s']:.2f} s")
print(f"{'bytes':>10} {'time(us)':>10} {'algbw GB/s':>11} {'busbw GB/s':>11}")
for s in net["allreduce"]:
    print(f"{s['bytes']:>10} {s['time_us']:>10.1f} {s['algbw_gbps']:>11.3f} {s['busbw_gbps']:>11.3f}")
for p in net["pairs"]:
    print(f"  pair {p['a']}<->{p['b']}: {p['latency_us']:.1f} us, {p['gbps']:.2f} GB/s ({net['pair_bytes']>>20} MiB)")
PY
done

echo "== 2. slow_link sensitivity on $SENS_NP ranks (rank $((SENS_NP - 1)) delayed), $REPS runs per delay"
for dl in $DELAYS; do
  fails=0 named=0
  for ((i = 0; i < REPS; i++)); do
    GRIT_HEALTH_FAULT=slow_link GRIT_HEALTH_NET_DELAY_US=$dl run "$SENS_NP" "$tmp/s.json"
    r=$(python3 - "$tmp/s.json" $((SENS_NP - 1)) <<'PY'
import json, sys
rep = json.load(open(sys.argv[1])); bad = sys.argv[2]
f = [c for c in rep["checks"] if c["family"] == "network" and c["verdict"] == "fail"]
named = any(f"rank {bad} (" in c["reason"] or f"<->{bad} (" in c["reason"] for c in f)
print(int(bool(f)), int(named), ",".join(c["name"].split(".")[1] for c in f))
PY
)
    set -- $r
    fails=$((fails + $1)); named=$((named + $2)); last=${3:-}
  done
  echo "delay ${dl} us: failed $fails/$REPS, named rank $((SENS_NP - 1)) $named/$REPS (checks: ${last:-none})"
done

echo "== 3. false positives: $N healthy runs on $SENS_NP ranks, default thresholds"
fp=0; why=""
for ((i = 0; i < N; i++)); do
  run "$SENS_NP" "$tmp/h.json"
  w=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(" ".join(f["name"] for f in r["failures"]))' "$tmp/h.json")
  if [ -n "$w" ]; then fp=$((fp + 1)); why="$why $w"; fi
done
echo "false positives: $fp/$N${why:+ (}${why# }${why:+)}"
