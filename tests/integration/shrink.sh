#!/usr/bin/env bash
# shrink.sh GRIT PYTHON - `--no-spare shrink` keeps whole data-parallel replicas (issue #17,
# point 7): a tensor-parallel 2 x data-parallel 2 job on 4 nodes (one rank each) and no
# spare loses node3 (--inject kill:node=node3: its processes die and its health check fails); the supervisor learns the grid from the job's "layout" event, cordons
# node3, parks node2 (healthy, as a spare: a TP pair cannot run on one node of two) and
# relaunches on node0,node1 (TP 2 x DP 1); the trainer resumes from the TP x DP checkpoint
# with the global batch kept by accumulation (4 instead of 2) and ends close to the
# fault-free TP 2 x DP 2 run (a different fp32 summation order, not a different run: the
# bounds of tp.sh). A TP 2 job on two nodes that loses one: fewer than one replica, a clear
# give-up.
# A TP 2 x PP 2 job on 4 nodes and a spare loses node2: the spare takes its place, bitwise;
# the same grid with a hung stage: found by the supervisor, restarted, bitwise.
# And --shrink-unit that does not divide --nodes is refused.
# Every process is started here and ended by its PID.
set -euo pipefail
grit=$1 py=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
bgs=()
cleanup() { for p in "${bgs[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done; [ -n "${KEEP:-}" ] || rm -rf "$tmp"; }
trap cleanup EXIT
command -v mpirun >/dev/null || { echo "FAIL: mpirun not found (make deps)"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
. "$here/sup_lib.sh"

# L DIR JOB [launch options...]: grit launch of JOB in the background (its PID recorded for
# the cleanup), waited for; rc is its exit status, DIR.out its output
L() {
  local d=$1 job=$2; shift 2
  "$grit" launch --run "$d" --backoff 0.1 --straggler-factor 0 "$@" \
    -- "$grit" train "$job" --run-dir "$d" --quiet > "$d.out" 2>&1 &
  lp=$!; bgs+=("$lp")
  rc=0; wait "$lp" || rc=$?
}

tiny_job "$tmp/base.json" 8 40 4
sed 's/"seed": 42/"seed": 42, "parallel": {"tensor": 2}/' "$tmp/base.json" > "$tmp/job.json"
mpirun -np 4 --oversubscribe "$grit" train "$tmp/job.json" --run-dir "$tmp/ref" --quiet > /dev/null 2>&1 ||
  fail "reference TP 2 x DP 2 run failed"

d="$tmp/shrink"
L "$d" "$tmp/job.json" --nodes 4 --spares 0 --no-spare shrink --hang-timeout 20 --inject kill:node=node3:step=10
ev="$d/events.jsonl"
if [ $rc -eq 0 ] && grep -q '"event":"worker_event","kind":"layout"' "$ev" &&
   grep -q '"event":"cordon","node":"node3".*"replacement":"none (shrinking)"' "$ev" &&
   grep -q '"event":"parked","node":"node2","replica_nodes":2' "$ev" &&
   grep -q 'attempt 1: 2 ranks on node0,node1 ' "$d.out" &&
   grep -q '"event":"train_start".*"world":2' "$ev"; then
  echo "ok   node3 lost with no spare: cordoned, node2 parked as a spare, relaunched as TP 2 x DP 1 on node0,node1"
else
  fail "shrink: rc=$rc: $(grep -E 'cordon|parked|attempt|giving' "$d.out" | tr '\n' ';')"
fi
grep -q '"state": *"spare"' "$d/cluster.json" && grep -q '"node2"' "$d/cluster.json" ||
  fail "cluster.json does not hold node2 as a spare: $(cat "$d/cluster.json")"
# the same steps, the global batch kept (accumulation 4 at DP 1), close to the fault-free run
"$py" "$here/tp_compare.py" "$d" "$tmp/ref" 1.5 5e-8 1e-5 || fail "metrics after the shrink"
"$py" "$here/dp_compare.py" weights "$d" "$tmp/ref" 3e-5 || fail "final weights after the shrink"

# TP 2 x PP 2 on 4 nodes (one rank each) and a spare: node2 (stage 1's first TP rank) dies;
# the spare takes its grid coordinates (its world rank) and the run, resumed from the
# checkpoint the stages assembled, ends bitwise equal to the fault-free run
sed 's/"tensor": 2/"tensor": 2, "pipeline": 2/' "$tmp/job.json" > "$tmp/grid.json"
mpirun -np 4 --oversubscribe "$grit" train "$tmp/grid.json" --run-dir "$tmp/gref" --quiet > /dev/null 2>&1 ||
  fail "reference TP 2 x PP 2 run failed"
d="$tmp/grid"
L "$d" "$tmp/grid.json" --nodes 4 --spares 1 --hang-timeout 20 --inject kill:node=node2:step=10
if [ $rc -eq 0 ] && grep -q '"event":"worker_event","kind":"layout"' "$d/events.jsonl" &&
   grep -q '"event":"cordon","node":"node2".*"replacement":"node4"' "$d/events.jsonl" &&
   grep -q '"event":"resume"' "$d/events.jsonl" &&
   cmp -s "$d/model.safetensors" "$tmp/gref/model.safetensors"; then
  echo "ok   TP 2 x PP 2: node2 lost, the spare node4 took its place, bitwise equal to the fault-free run"
else
  fail "grid: rc=$rc: $(grep -E 'cordon|attempt|giving|resum' "$d.out" | tr '\n' ';')"
fi

# the same grid with a hung stage (rank 2 stops mid-step, alive and silent): the other
# stages block in their pipeline exchanges, the supervisor sees no progress within
# --hang-timeout, restarts the job from the checkpoint, and the run ends bitwise equal
d="$tmp/ghang"
L "$d" "$tmp/grid.json" --nodes 4 --spares 1 --hang-timeout 3 --inject hang:rank=2:step=10
if [ $rc -eq 0 ] && grep -q '"event":"detected","kind":"hang"' "$d/events.jsonl" &&
   grep -q '"event":"recovered"' "$d/events.jsonl" &&
   cmp -s "$d/model.safetensors" "$tmp/gref/model.safetensors"; then
  echo "ok   TP 2 x PP 2: a hung stage found by the supervisor, the job restarted, bitwise equal to the fault-free run"
else
  fail "grid hang: rc=$rc: $(grep -E 'detected|hang|attempt|giving' "$d.out" | tr '\n' ';')"
fi

# a TP 2 job on 2 nodes loses one: one node left, less than a replica
d="$tmp/none"
L "$d" "$tmp/job.json" --nodes 2 --spares 0 --no-spare shrink --hang-timeout 20 --inject kill:node=node1:step=6
if [ $rc -ne 0 ] && grep -q '1 node left, fewer than one data-parallel replica (2 nodes): cannot shrink' "$d.out"; then
  echo "ok   one node of a TP 2 pair left: gives up saying why (rc $rc)"
else
  fail "none: rc=$rc: $(tail -n 5 "$d.out")"
fi

rc=0; "$grit" launch --nodes 3 --shrink-unit 2 --no-spare shrink --run "$tmp/bad" -- true > "$tmp/bad.out" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q -- '--nodes 3 is not a multiple of --shrink-unit 2' "$tmp/bad.out" &&
  echo "ok   --shrink-unit that does not divide --nodes is refused" || fail "bad unit: rc=$rc $(cat "$tmp/bad.out")"

if [ "$fails" -eq 0 ]; then echo "shrink: all cases passed"; else echo "shrink: $fails failure(s)"; fi
[ "$fails" -eq 0 ]
