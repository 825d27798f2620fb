#!/usr/bin/env bash
# recovery.sh - how fast grit launch recovers, for pythia-14m on 4 ranks (this machine):
#  1. recovery time after a node failure (failure -> first training step after resume),
#     split into detection, diagnosis (grit health), relaunch (stop + backoff + start) and
#     checkpoint load + first step, from events.jsonl timestamps; goal < 5 s;
#  2. goodput over a run of MINUTES (default 20) with a node failure every FAULT_EVERY
#     minutes (default 5): productive training time kept / wall time.
# Override MINUTES / FAULT_EVERY for a shorter run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
grit=${GRIT:-$root/build/grit}
MINUTES=${MINUTES:-20} FAULT_EVERY=${FAULT_EVERY:-5}
. "$(dirname "$0")/blas_coretype.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mk() { # NAME STEPS
  cat > "$tmp/$1.json" <<CFG
{"model": "pythia-14m", "optim": {"micro_batch": 2, "global_batch": 8, "seq_len": 128,
 "warmup_steps": 5, "total_steps": $2}, "threads": 1, "seed": 1,
 "data": {"synthetic_vocab": 50277}, "checkpoint": {"interval_steps": 10, "keep_last": 2}}
CFG
}
echo "bench: 1/2 recovery from a node failure (4 ranks, 1 spare)"
mk rec 40
"$grit" launch --nodes 4 --spares 1 --run "$tmp/rec" --backoff 0.2 --quiet \
  --inject kill:node=node2:step=15 -- "$grit" train "$tmp/rec.json" --run-dir "$tmp/rec" --quiet
python3 - "$tmp/rec/events.jsonl" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
def ts(pred):
    return next(e["ts"] for e in ev if pred(e))
fault = ts(lambda e: e["event"] == "worker_event" and e.get("kind") == "fault_kill")
det = ts(lambda e: e["event"] == "detected")
diag_start = ts(lambda e: e["event"] == "state" and e.get("to") == "DIAGNOSING" and e["ts"] > det)
diag_end = ts(lambda e: e["event"] == "state" and e.get("to") == "REPAIRING" and e["ts"] > det)
launch = ts(lambda e: e["event"] == "launch" and e["ts"] > det)
start = ts(lambda e: e["event"] == "train_start" and e["ts"] > det)
rec = next(e for e in ev if e["event"] == "recovered")
t_rec = rec["ts"]
print(f"\nrecovery from a node failure (pythia-14m, 4 ranks): {t_rec - fault:.2f} s in all (goal < 5 s)")
print(f"  detection          {det - fault:6.2f} s")
print(f"  stop + diagnosis   {diag_end - det:6.2f} s   (grit health on the implicated node)")
print(f"  relaunch           {launch - diag_end:6.2f} s   (cordon, spare in, backoff)")
print(f"  startup + load     {start - launch:6.2f} s   (mpirun, MPI init, checkpoint verify + load)")
print(f"  first step         {t_rec - start:6.2f} s   (steps lost: {rec['steps_lost']})")
PY
echo "bench: 2/2 goodput over $MINUTES min with a node failure every $FAULT_EVERY min"
mk good 100000000
inject=""
n=$(( MINUTES / FAULT_EVERY )); spares=$n
# estimate steps per minute from the recovery run, and place one node kill every FAULT_EVERY min
spm=$(python3 -c "
import json; m=[json.loads(l) for l in open('$tmp/rec/metrics.jsonl')]
print(int(60 / (sum(r['step_time_s'] for r in m) / len(m))))")
for k in $(seq 1 $((n - 1))); do
  inject="$inject${inject:+,}kill:node=node$((k % 4)):step=$(( k * FAULT_EVERY * spm )):attempt=$((k - 1))"
done
total=$(( MINUTES * spm ))
sed -i "s/\"total_steps\": 100000000/\"total_steps\": $total/" "$tmp/good.json"
"$grit" launch --nodes 4 --spares "$spares" --run "$tmp/good" --backoff 0.2 ${inject:+--inject "$inject"} \
  -- "$grit" train "$tmp/good.json" --run-dir "$tmp/good" --quiet 2>&1 | grep -E "incident|exit|result|restarts|wall|productive"
