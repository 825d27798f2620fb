#!/usr/bin/env bash
# multi_death.sh GRIT PYTHON - failures from outside that the supervisor must account for
# whole (issue #23, points 2, 4, 5):
#   two ranks on two nodes killed at once (kill -9 of both PIDs in one call): the detection
#     names both nodes, both are diagnosed, the incident table has a row for each, and the
#     run ends DONE bitwise equal to the fault-free run
#   a second grit launch on the same run directory is refused while the first runs
#   the supervisor killed (kill -9) after an incident: its ranks stop by themselves within
#     seconds (run lock) without a checkpoint; the newest checkpoint corrupted, and
#     a rerun: the summary keeps the earlier incident and restart count, goodput is at most
#     100% (wall time from the first launch), and the rejected checkpoint is in the summary
# Every process is started here and ended by its PID.
set -euo pipefail
grit=$1 py=$2
tmp=$(mktemp -d)
bgs=()
cleanup() { for p in "${bgs[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
command -v mpirun >/dev/null || { echo "FAIL: mpirun not found (make deps)"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
. "$(dirname "$0")/sup_lib.sh"

tiny_job "$tmp/job.json" 12 60 4
L() { # DIR [options]: grit launch of the job on 3 nodes + 1 spare, in the background ($lp)
  local d=$1; shift
  "$grit" launch --nodes 3 --spares 1 --run "$d" --backoff 0.1 --straggler-factor 0 --hang-timeout 10 "$@" \
    -- "$grit" train "$tmp/job.json" --run-dir "$d" --quiet > "$d.out" 2>&1 &
  lp=$!; bgs+=("$lp")
}
mpirun -np 3 --oversubscribe "$grit" train "$tmp/job.json" --run-dir "$tmp/ref" --quiet > /dev/null 2>&1 ||
  fail "reference run failed"

# --- two nodes at once --------------------------------------------------------------------
L "$tmp/two"
wait_step "$tmp/two" 6 || fail "two: no step 6"
# one supervisor per run directory: a second grit launch on it is refused, naming the first
# (the supervisor and the job's ranks stopped meanwhile: on a fast CPU the tiny job ended
# within the second one's wait, and the ranks to kill below were gone)
kill -STOP "$lp"
p0=$(rank_pid "$tmp/two" 0 || true); p1=$(rank_pid "$tmp/two" 1 || true)
p2=$(rank_pid "$tmp/two" 2 || true)
for p in $p0 $p1 $p2; do kill -STOP "$p" 2>/dev/null || true; done
rc=0; "$grit" launch --nodes 1 --run "$tmp/two" -- true > "$tmp/second.out" 2>&1 || rc=$?
if [ $rc -ne 0 ] && grep -q "run directory .*/two is in use by grit launch pid $lp on " "$tmp/second.out"; then
  echo "ok   a second grit launch on a run directory in use is refused, naming the first"
else
  fail "second launch: rc=$rc: $(cat "$tmp/second.out")"
fi
# ranks 1 and 2 killed while still stopped (SIGKILL ends a stopped process), then the rest go on
if [ -z "$p1" ] || [ -z "$p2" ]; then fail "two: rank PIDs not found ('$p1' '$p2')"; else kill -9 "$p1" "$p2"; fi
for p in $p0 $p1 $p2; do kill -CONT "$p" 2>/dev/null || true; done
kill -CONT "$lp"
rc=0; wait "$lp" || rc=$?
ev="$tmp/two/events.jsonl"
det=$(grep -m1 '"event":"detected"' "$ev" || true)
if [ $rc -eq 0 ] && echo "$det" | grep -q '"nodes":"node[12],node[12]"' &&
   grep -q '"event":"diagnosis","node":"node1"' "$ev" && grep -q '"event":"diagnosis","node":"node2"' "$ev" &&
   ! grep -q '"event":"diagnosis","node":"node0".*"state":"DIAGNOSING"' "$ev" &&
   grep -Eq '^  exit +node1 ' "$tmp/two.out" && grep -Eq '^  exit +node2 ' "$tmp/two.out" &&
   [ "$(grep -c '"event":"recovered"' "$ev")" -eq 2 ]; then
  echo "ok   two ranks on two nodes killed at once: both detected, diagnosed, in the table, recovered"
else
  fail "two at once: rc=$rc detected: $det; rows: $(grep -E '^  exit ' "$tmp/two.out" | tr '\n' ';')"
fi
cmp -s "$tmp/ref/model.safetensors" "$tmp/two/model.safetensors" &&
  echo "ok   two at once: final weights bitwise equal to the fault-free run" || fail "two at once: weights differ"

# --- a killed supervisor: the ledger survives ----------------------------------------------
L "$tmp/crash"
wait_step "$tmp/crash" 6 || fail "crash: no step 6"
p1=$(rank_pid "$tmp/crash" 1 || true)
if [ -n "$p1" ]; then kill -9 "$p1" || fail "crash: rank 1 ($p1) had exited"; else fail "crash: rank 1 not found"; fi
for _ in $(seq 1 600); do grep -qs '"event":"recovered"' "$tmp/crash/events.jsonl" && break; sleep 0.05; done
wait_step "$tmp/crash" 14 || fail "crash: no step 14 after the recovery"
job=$(pgrep -P "$lp" | head -n 1 || true)
kill -9 "$lp"; wait "$lp" 2>/dev/null || true
# the job dies with its supervisor (mpirun gets SIGTERM), but its ranks may take a moment:
# until every one is gone a rank could still commit a newer checkpoint than the LATEST read
# below, and the corrupted one would then not be the newest (nothing rejected at resume)
for _ in $(seq 1 100); do
  { [ -n "$job" ] && kill -0 "$job" 2>/dev/null; } || rank_pid "$tmp/crash" 0 > /dev/null ||
    rank_pid "$tmp/crash" 1 > /dev/null || rank_pid "$tmp/crash" 2 > /dev/null || break
  sleep 0.1
done
grep -q '"incidents":\[{"kind":"exit","node":"node1"' "$tmp/crash/supervisor.json" ||
  fail "crash: supervisor.json holds no incident: $(cat "$tmp/crash/supervisor.json")"
newest=$(cat "$tmp/crash/ckpt/LATEST")
f=$(find "$tmp/crash/ckpt/$newest" -name '*.safetensors' | head -1)
printf 'garbage' | dd of="$f" bs=1 seek=200 conv=notrunc 2>/dev/null
sleep 2 # time the supervisor was down: it counts in the wall time
L "$tmp/crash"; rc=0; wait "$lp" || rc=$?
out="$tmp/crash.out"
good=$(grep -o 'goodput [0-9.]*' "$out" | cut -d' ' -f2)
if [ $rc -eq 0 ] && grep -Eq '^  exit +node1 ' "$out" && grep -Eq '^  restarts +1$' "$out" &&
   "$py" -c "import sys; sys.exit(0 if 0 < float('${good:-0}') <= 100 else 1)" &&
   grep -Eq '^  checkpoints +0 saves failed, 1 rejected' "$out"; then
  echo "ok   supervisor killed and rerun: earlier incident and restart kept, goodput $good%, rejected checkpoint counted"
else
  fail "ledger: rc=$rc goodput '$good': $(grep -E '^  (exit|restarts|checkpoints|productive)' "$out" | tr '\n' ';')"
fi
cmp -s "$tmp/ref/model.safetensors" "$tmp/crash/model.safetensors" &&
  echo "ok   ledger: final weights bitwise equal" || fail "ledger: weights differ"

# --- ranks that outlive their supervisor --------------------------------------------------
# a trainer in its own session (setsid), writing to its own file, is not taken down with the
# dying supervisor's mpirun (SIGTERM, then a closed pipe): it must see the run lock free (core/runlock.h, asked once a second), stop without a
# checkpoint and never commit one after the supervisor is gone
tiny_job "$tmp/long.json" 4 100000 3
"$grit" launch --nodes 1 --spares 0 --run "$tmp/orph" --hang-timeout 60 --straggler-factor 0 \
  -- setsid -w bash -c 'exec "$0" train "$1" --run-dir "$2" --quiet > "$3" 2>&1' \
     "$grit" "$tmp/long.json" "$tmp/orph" "$tmp/orph.err" > "$tmp/orph.out" 2>&1 &
lp=$!; bgs+=("$lp")
wait_step "$tmp/orph" 8 || fail "orphan: no step 8"
tr=$(pgrep -f -- "train $tmp/long.json --run-dir $tmp/orph" | while read -r p; do
       [ "$(cat "/proc/$p/comm" 2>/dev/null)" = grit ] && echo "$p"; done | head -n 1)
bgs+=("$tr")
kill -9 "$lp"; wait "$lp" 2>/dev/null || true
t0=$(date +%s.%N); latest=$(cat "$tmp/orph/ckpt/LATEST" 2>/dev/null || true)
for _ in $(seq 1 150); do [ -n "$tr" ] && kill -0 "$tr" 2>/dev/null || break; sleep 0.1; done
secs=$("$py" -c "import time; print(f'{time.time() - $t0:.1f}')")
last=$(grep -o '"step":[0-9]*' "$tmp/orph/metrics.jsonl" | tail -n 1 | cut -d: -f2)
newer=$(find "$tmp/orph/ckpt" -maxdepth 1 -name 'step_*' -newer "$tmp/orph/supervisor.lock" -newermt "@$t0" | wc -l)
if [ -n "$tr" ] && ! kill -0 "$tr" 2>/dev/null && [ "$newer" -eq 0 ] &&
   grep -q "stopping at step [0-9]* without a checkpoint: the supervisor that launched this rank (grit launch pid $lp on .*) is gone" \
     "$tmp/orph.err"; then
  echo "ok   a trainer that outlived its supervisor stopped by itself in $secs s (at step $last), no checkpoint after ${latest:-none}"
else
  fail "orphan: trainer '$tr' alive=$(kill -0 "$tr" 2>/dev/null && echo yes || echo no) after $secs s, $newer newer checkpoints: $(tail -n 3 "$tmp/orph.err")"
fi

if [ "$fails" -eq 0 ]; then echo "multi_death: all cases passed"; else echo "multi_death: $fails failure(s)"; fi
[ "$fails" -eq 0 ]
