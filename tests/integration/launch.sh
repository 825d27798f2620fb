#!/usr/bin/env bash
# launch.sh GRIT PYTHON - grit launch survives every fault kind without a person:
# kill a rank, kill a node, hang a rank, a straggler, NaN (rollback; and the skip policy),
# a failing health check, a crash during a checkpoint save, two faults in one run, a
# killed supervisor. Each run must end DONE with final weights bitwise identical to the
# run without faults, the right node cordoned, and the detection and recovery in
# events.jsonl. Also: a forged heartbeat is rejected, hang detection is within the
# timeout + 2 s, and a non-grit program (tests/integration/toy_trainer.py) is resumed.
set -euo pipefail
grit=$1 py=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
bg=""
cleanup() { [ -n "$bg" ] && kill -9 "$bg" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
command -v mpirun >/dev/null || { echo "FAIL: mpirun not found (make deps)"; exit 1; }
. "$(dirname "$0")/sup_lib.sh"

tiny_job "$tmp/job.json" 8 24 4
L() { # DIR [launch options...]: grit launch of the job on 2 nodes + 1 spare
  local d=$1; shift
  # the straggler detector is off except where it is under test: timing on a shared
  # machine must not cordon a healthy node
  "$grit" launch --nodes 2 --spares 1 --run "$d" --hang-timeout 3 --backoff 0.1 --straggler-factor 0 "$@" \
    -- "$grit" train "$tmp/job.json" --run-dir "$d" --quiet > "$d.out" 2>&1
}
ev() { grep -c "\"event\":\"$2\"" "$1/events.jsonl" || true; }
check() { # NAME DIR EXPECT-KIND CORDONED(node|-)
  local name=$1 d=$2 kind=$3 cord=$4
  cmp -s "$tmp/ref/model.safetensors" "$d/model.safetensors" || fail "$name: final weights differ from the fault-free run"
  grep -q '"event":"done"' "$d/events.jsonl" || fail "$name: no done event"
  if [ "$kind" != - ]; then
    grep -q "\"event\":\"detected\",\"kind\":\"$kind\"" "$d/events.jsonl" || fail "$name: no '$kind' detection"
    grep -q '"event":"recovered"' "$d/events.jsonl" || fail "$name: no recovered event"
  fi
  if [ "$cord" != - ]; then
    grep -q "\"event\":\"cordon\",\"node\":\"$cord\"" "$d/events.jsonl" || fail "$name: $cord was not cordoned"
    [ "$(grep -c '"event":"cordon"' "$d/events.jsonl")" -eq 1 ] || fail "$name: more than the faulty node cordoned"
  elif grep -q '"event":"cordon"' "$d/events.jsonl"; then
    fail "$name: a healthy node was cordoned"
  fi
  echo "ok   $name: $(grep -o 'detected [a-z]*[^:]*: .*' "$d.out" | head -2 | tr '\n' ';')"
}

L "$tmp/ref"
[ "$(ev "$tmp/ref" detected)" -eq 0 ] || fail "reference: a failure was detected in the fault-free run: $(grep -o '"event":"detected".*' "$tmp/ref/events.jsonl" | head -2)"

L "$tmp/kill-rank" --inject kill:rank=1:step=6;             check "kill a rank" "$tmp/kill-rank" exit -
L "$tmp/kill-node" --inject kill:node=node1:step=6;         check "kill a node" "$tmp/kill-node" exit node1
L "$tmp/hang" --inject hang:rank=1:step=10;                 check "hang a rank" "$tmp/hang" hang -
lat=$(grep -o '"event":"detected","kind":"hang".*"latency_s":[0-9.]*' "$tmp/hang/events.jsonl" | grep -o '[0-9.]*$')
"$py" -c "import sys; sys.exit(0 if 0 <= float('$lat') <= 3 + 2 else 1)" || fail "hang detected after $lat s (timeout 3 s + 2)"
ls "$tmp/hang/logs/"stacks_attempt_00.txt >/dev/null 2>&1 && grep -q "state T" "$tmp/hang/logs/stacks_attempt_00.txt" ||
  fail "hang: no stacks captured for the stopped rank"
L "$tmp/slow" --straggler-factor 2.5 --inject slow:node=node1:factor=5;            check "straggler" "$tmp/slow" straggler node1
L "$tmp/nan" --inject nan:step=10;                          check "NaN (rollback)" "$tmp/nan" nan -
L "$tmp/spike" --inject spike:step=12;                      check "loss spike (rollback)" "$tmp/spike" spike -
L "$tmp/health" --inject health_fail:node=node0;            check "failing health check" "$tmp/health" - node0
L "$tmp/ckpt" --inject ckpt_crash:phase=manifest:attempt=0; check "crash in a checkpoint save" "$tmp/ckpt" exit -
L "$tmp/two" --inject kill:node=node1:step=6,hang:rank=0:step=14:attempt=1
check "two faults (node, then hang)" "$tmp/two" hang node1
grep -q '"event":"detected","kind":"exit"' "$tmp/two/events.jsonl" || fail "two faults: the node failure was not detected"

# NaN at the same step twice: its batch is skipped (logged); the run completes
L "$tmp/nan2" --inject nan:step=10,nan:step=10:attempt=1
grep -q '"event":"skip_batches","steps":"10"' "$tmp/nan2/events.jsonl" || fail "NaN twice: no skip_batches event"
grep -q '"event":"batch_skipped","step":10' "$tmp/nan2/events.jsonl" || fail "NaN twice: the trainer did not skip step 10"
grep -q '"event":"done"' "$tmp/nan2/events.jsonl" && echo "ok   NaN twice at step 10: batch skipped, run completed" || fail "NaN twice: not done"

# a periodic health check that starts failing mid-run (here: the whole machine) takes the
# nodes out of service; with no healthy spare the supervisor gives up, saying why
sed 's/"total_steps": 24/"total_steps": 2000/' "$tmp/job.json" > "$tmp/ph.json"
rc=0; GRIT_HEALTH_FAULT=gemm_bitflip "$grit" launch --nodes 2 --spares 1 --run "$tmp/ph" --health-every 1 \
  --backoff 0.1 -- "$grit" train "$tmp/ph.json" --run-dir "$tmp/ph" --quiet > "$tmp/ph.out" 2>&1 || rc=$?
# preflight already fails every node: the supervisor must refuse to start
[ $rc -eq 1 ] && grep -q "giving up" "$tmp/ph.out" && echo "ok   failing health at preflight: refused to start" ||
  fail "health everywhere: rc=$rc $(tail -3 "$tmp/ph.out")"
rc=0; "$grit" launch --nodes 2 --spares 1 --run "$tmp/ph2" --health-every 0.5 --backoff 0.1 --max-restarts 1 \
  -- bash -c "sleep 1; touch $tmp/ph2.flag; exec \"$grit\" train $tmp/ph.json --run-dir $tmp/ph2 --quiet" > "$tmp/ph2.out" 2>&1 &
bgh=$!
for _ in $(seq 1 100); do [ -e "$tmp/ph2.flag" ] && break; sleep 0.1; done
wait $bgh || rc=$?
grep -q '"event":"periodic_health","verdict":"healthy"' "$tmp/ph2/events.jsonl" &&
  echo "ok   periodic health checks run while training" || fail "no periodic health events"
# a periodic check that fails mid-run: detected, the nodes re-checked, the job relaunched
sed 's/"total_steps": 24/"total_steps": 300/' "$tmp/job.json" > "$tmp/ph3.json"
"$grit" launch --nodes 2 --spares 1 --run "$tmp/ph3" --health-every 0.2 --backoff 0.1 --straggler-factor 0 \
  --inject periodic_health_fail -- "$grit" train "$tmp/ph3.json" --run-dir "$tmp/ph3" --quiet > "$tmp/ph3.out" 2>&1 ||
  fail "periodic failure: grit launch failed"
"$grit" launch --nodes 2 --spares 1 --run "$tmp/ph3ref" --straggler-factor 0 \
  -- "$grit" train "$tmp/ph3.json" --run-dir "$tmp/ph3ref" --quiet > /dev/null 2>&1
if grep -q '"event":"detected","kind":"health"' "$tmp/ph3/events.jsonl" &&
   grep -q '"event":"done"' "$tmp/ph3/events.jsonl" &&
   cmp -s "$tmp/ph3/model.safetensors" "$tmp/ph3ref/model.safetensors"; then
  echo "ok   periodic health failure: detected, relaunched, bitwise equal"
else
  fail "periodic health failure: $(grep -E 'detected|giving' "$tmp/ph3.out" | head -3)"
fi

# no spare left: give up with a clear reason (exit 1)
rc=0; "$grit" launch --nodes 2 --spares 0 --run "$tmp/nospare" --backoff 0.1 --inject kill:node=node1:step=6 \
  -- "$grit" train "$tmp/job.json" --run-dir "$tmp/nospare" --quiet > "$tmp/nospare.out" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q "giving up: node node1 failed .* and no spare is left" "$tmp/nospare.out" &&
  echo "ok   no spare: gave up with the reason" || fail "no spare: rc=$rc $(tail -3 "$tmp/nospare.out")"

# forged heartbeat (wrong secret) during a run: rejected, logged, secret never written
sed 's/"total_steps": 24/"total_steps": 400/' "$tmp/job.json" > "$tmp/long.json"
"$grit" launch --nodes 2 --spares 1 --run "$tmp/forge" --hang-timeout 5 --straggler-factor 0 \
  -- "$grit" train "$tmp/long.json" --run-dir "$tmp/forge" --quiet > "$tmp/forge.out" 2>&1 &
bg=$!
for _ in $(seq 1 200); do grep -q '"heartbeat"' "$tmp/forge/events.jsonl" 2>/dev/null && break; sleep 0.05; done
addr=$(grep -o '"heartbeat":"[0-9.:]*"' "$tmp/forge/events.jsonl" | head -1 | cut -d'"' -f4)
"$py" - "$addr" <<'PY'
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(b"HB1 0123456789abcdef rank=0 node=evil step=999999 loss=1 pid=1\n", (host, int(port)))
PY
# and kill the supervisor mid-run: its job must go down with it; a new supervisor finishes
for _ in $(seq 1 400); do [ "$(cat "$tmp/forge/metrics.jsonl" 2>/dev/null | wc -l)" -ge 20 ] && break; sleep 0.05; done
job=$(pgrep -P "$bg" | head -n 1)
kill -9 "$bg"; wait "$bg" 2>/dev/null || true; bg=""
for _ in $(seq 1 100); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
kill -0 "$job" 2>/dev/null && fail "killed supervisor: its job (mpirun $job) still runs 10 s later"
"$grit" launch --nodes 2 --spares 1 --run "$tmp/forge" --straggler-factor 0 -- "$grit" train "$tmp/long.json" --run-dir "$tmp/forge" --quiet > "$tmp/forge2.out" 2>&1 ||
  fail "restarted supervisor did not finish the job: $(tail -5 "$tmp/forge2.out")"
"$grit" launch --nodes 2 --spares 1 --run "$tmp/longref" --straggler-factor 0 -- "$grit" train "$tmp/long.json" --run-dir "$tmp/longref" --quiet > /dev/null 2>&1
cmp -s "$tmp/longref/model.safetensors" "$tmp/forge/model.safetensors" && echo "ok   supervisor killed and restarted: job finished, bitwise equal" ||
  fail "restarted supervisor: final weights differ"
grep -q '"event":"heartbeat_rejected".*wrong or missing job secret' "$tmp/forge/events.jsonl" &&
  echo "ok   forged heartbeat rejected" || fail "forged heartbeat was not rejected"
grep -q '"node":"evil"' "$tmp/forge/events.jsonl" && fail "forged heartbeat was accepted"
if grep -rEq '[0-9a-f]{64}' "$tmp/forge/events.jsonl" "$tmp/forge/logs" "$tmp/forge.out" "$tmp/forge2.out"; then
  fail "something that looks like the job secret was logged"
fi

# a non-grit program without heartbeats, killed at step 15 and resumed from its own checkpoint
"$py" "$here/toy_trainer.py" "$tmp/toy-ref.state" 30 > "$tmp/toy-ref.out"
"$grit" launch --nodes 1 --spares 1 --run "$tmp/toy" --hang-timeout 5 --backoff 0.1 --inject kill:step=15 \
  -- "$py" "$here/toy_trainer.py" "$tmp/toy.state" 30 > "$tmp/toy.out" 2>&1 || fail "toy: grit launch failed"
if [ "$(tail -1 "$tmp/toy-ref.out")" = "$(tail -1 "$tmp/toy/logs/attempt_01.log" 2>/dev/null)" ] &&
   grep -q '"event":"detected","kind":"exit"' "$tmp/toy/events.jsonl"; then
  echo "ok   non-grit program: killed at step 15, resumed, same result ($(tail -1 "$tmp/toy-ref.out"))"
else
  fail "toy: expected '$(tail -1 "$tmp/toy-ref.out")', got '$(tail -1 "$tmp/toy/logs/attempt_01.log" 2>/dev/null)'"
fi

if [ "$fails" -eq 0 ]; then echo "launch: all cases passed"; else echo "launch: $fails failure(s)"; fi
[ "$fails" -eq 0 ]
