#!/usr/bin/env bash
# sigterm.sh GRIT PYTHON - SIGTERM/SIGINT, sent from outside as Slurm preemption or Ctrl-C:
#   grit train alone: stops after a step with a final checkpoint, exit 143 (130 on SIGINT);
#     a 2-rank job signalled on one rank only stops every rank at the same step;
#     the rerun resumes and ends bitwise equal to the uninterrupted run
#   grit launch: stops the job gracefully (checkpoint saved), STOPPED summary and events,
#     exit 143, no rank left; the rerun ends DONE, bitwise equal to the fault-free run
#   a second signal to grit launch ends it at once, and its job with it
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

tiny_job "$tmp/job.json" 8 100 60
alive() { # PID...: true when one of them runs (a zombie waiting for its reaper does not)
  for p in "$@"; do
    st=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -c1) || true
    [ -n "$st" ] && [ "$st" != Z ] && return 0
  done
  return 1
}
field() { grep -o "\"event\":\"$2\".*" "$1/events.jsonl" | grep -o "\"$3\":[^,}]*" | head -1 | cut -d: -f2 | tr -d '"'; }

# --- grit train alone --------------------------------------------------------------------
"$grit" train "$tmp/job.json" --run-dir "$tmp/ref1" --quiet
"$grit" train "$tmp/job.json" --run-dir "$tmp/t1" --quiet 2> "$tmp/t1.err" &
p=$!; bgs+=("$p")
wait_step "$tmp/t1" 5 || fail "train: no step 5"
kill -TERM "$p"
rc=0; wait "$p" || rc=$?
st=$(field "$tmp/t1" train_stopped step); ck=$(field "$tmp/t1" train_stopped checkpoint_step)
if [ $rc -eq 143 ] && [ -n "$st" ] && [ "$st" = "$ck" ] && [ "$st" -lt 100 ] &&
   [ -d "$tmp/t1/ckpt/step_$(printf %08d "$st")" ] && [ ! -e "$tmp/t1/model.safetensors" ]; then
  echo "ok   train: SIGTERM -> exit 143 after step $st with its checkpoint, no final weights"
else
  fail "train SIGTERM: rc=$rc stopped at '$st' checkpoint '$ck' ($(ls "$tmp/t1/ckpt" 2>&1 | tr '\n' ' '))"
fi
"$grit" train "$tmp/job.json" --run-dir "$tmp/t1" --quiet || fail "train: the rerun failed"
cmp -s "$tmp/ref1/model.safetensors" "$tmp/t1/model.safetensors" &&
  echo "ok   train: the rerun resumed at step $st, bitwise equal" || fail "train: resumed weights differ"

# SIGINT (Ctrl-C) -> 130
"$grit" train "$tmp/job.json" --run-dir "$tmp/t2" --quiet 2> "$tmp/t2.err" &
p=$!; bgs+=("$p")
wait_step "$tmp/t2" 3 || fail "train SIGINT: no step 3"
kill -INT "$p"
rc=0; wait "$p" || rc=$?
[ $rc -eq 130 ] && grep -q '"event":"train_stopped".*"signal":2' "$tmp/t2/events.jsonl" &&
  echo "ok   train: SIGINT -> exit 130" || fail "train SIGINT: rc=$rc"

# two ranks, the signal to rank 1 only: both stop after the same step (one train_stopped,
# every rank's part in the checkpoint), and the rerun is bitwise equal
mpirun -np 2 --oversubscribe "$grit" train "$tmp/job.json" --run-dir "$tmp/ref2" --quiet > /dev/null 2>&1
mpirun -np 2 --oversubscribe "$grit" train "$tmp/job.json" --run-dir "$tmp/t3" --quiet > "$tmp/t3.out" 2>&1 &
mp=$!; bgs+=("$mp")
wait_step "$tmp/t3" 5 || fail "2 ranks: no step 5"
r1=$(rank_pid "$tmp/t3" 1 || true)
[ -n "$r1" ] || fail "2 ranks: rank 1's PID not found"
[ -n "$r1" ] && kill -TERM "$r1"
rc=0; wait "$mp" || rc=$?
st=$(field "$tmp/t3" train_stopped step); ck=$(field "$tmp/t3" train_stopped checkpoint_step)
if [ -n "$st" ] && [ "$st" = "$ck" ] && [ -d "$tmp/t3/ckpt/step_$(printf %08d "$st")" ]; then
  echo "ok   2 ranks: SIGTERM to rank 1 only -> both stopped after step $st, checkpoint saved (mpirun rc=$rc)"
else
  fail "2 ranks: stopped at '$st' checkpoint '$ck' rc=$rc: $(tail -3 "$tmp/t3.out")"
fi
mpirun -np 2 --oversubscribe "$grit" train "$tmp/job.json" --run-dir "$tmp/t3" --quiet > /dev/null 2>&1 ||
  fail "2 ranks: rerun failed"
cmp -s "$tmp/ref2/model.safetensors" "$tmp/t3/model.safetensors" &&
  echo "ok   2 ranks: resumed, bitwise equal" || fail "2 ranks: resumed weights differ"

# --- grit launch ---------------------------------------------------------------------------
L() { # DIR: grit launch of the job on 2 nodes + 1 spare (in the background: $lp)
  "$grit" launch --nodes 2 --spares 1 --run "$1" --backoff 0.1 --straggler-factor 0 --quiet \
    -- "$grit" train "$tmp/job.json" --run-dir "$1" --quiet > "$1.out" 2>&1 &
  lp=$!; bgs+=("$lp")
}
L "$tmp/lref"; wait "$lp" || fail "launch reference failed"
L "$tmp/l1"
wait_step "$tmp/l1" 5 || fail "launch: no step 5"
pids=$(grep -o '"pid":[0-9]*' "$tmp/l1/events.jsonl" | cut -d: -f2 | sort -u | tr '\n' ' ')
ranks=$(for r in $(pgrep -f -- "--run-dir $tmp/l1" || true); do [ "$r" != "$lp" ] && echo "$r"; done)
t0=$(date +%s.%N)
kill -TERM "$lp"
rc=0; wait "$lp" || rc=$?
dt=$("$py" -c "print(round($(date +%s.%N) - $t0, 1))")
st=$(grep -o '"event":"stopped",.*' "$tmp/l1/events.jsonl" | grep -o '"step":[0-9]*' | cut -d: -f2)
if [ $rc -eq 143 ] && grep -q '"event":"stop_requested","signal":"SIGTERM"' "$tmp/l1/events.jsonl" &&
   grep -q '"event":"stopped","signal":"SIGTERM".*"graceful":true.*"checkpoint":"saved"' "$tmp/l1/events.jsonl" &&
   grep -q '"to":"STOPPED"' "$tmp/l1/events.jsonl" && grep -q '"event":"stopped_summary"' "$tmp/l1/events.jsonl" &&
   grep -q 'result *STOPPED' "$tmp/l1.out" && [ -d "$tmp/l1/ckpt/step_$(printf %08d "$st")" ]; then
  echo "ok   launch: SIGTERM -> graceful stop after step $st in $dt s, checkpoint saved, STOPPED, exit 143"
else
  fail "launch SIGTERM: rc=$rc step '$st': $(grep -E 'stop' "$tmp/l1/events.jsonl" | tail -3)"
fi
# shellcheck disable=SC2086
alive $ranks $pids && fail "launch: a process of the stopped job is still alive ($ranks $pids)"
L "$tmp/l1"; rc=0; wait "$lp" || rc=$?
[ $rc -eq 0 ] && cmp -s "$tmp/lref/model.safetensors" "$tmp/l1/model.safetensors" &&
  echo "ok   launch: the rerun resumed and finished, bitwise equal" || fail "launch rerun: rc=$rc or weights differ"

# a second signal: grit launch ends at once (no summary), the job goes down with it
L "$tmp/l2"
wait_step "$tmp/l2" 5 || fail "launch 2: no step 5"
ranks=$(for r in $(pgrep -f -- "--run-dir $tmp/l2" || true); do [ "$r" != "$lp" ] && echo "$r"; done)
kill -TERM "$lp"; sleep 0.3; kill -TERM "$lp" 2>/dev/null || true # apart: signals coalesce
rc=0; wait "$lp" || rc=$?
gone=0
for _ in $(seq 1 100); do
  # shellcheck disable=SC2086
  alive $ranks || { gone=1; break; }
  sleep 0.1
done
if [ $rc -eq 143 ] && [ $gone -eq 1 ] && ! grep -q '"event":"stopped_summary"' "$tmp/l2/events.jsonl"; then
  echo "ok   launch: a second SIGTERM ends it at once, the job's processes gone"
else
  fail "second signal: rc=$rc job gone=$gone"
fi

if [ "$fails" -eq 0 ]; then echo "sigterm: all cases passed"; else echo "sigterm: $fails failure(s)"; fi
[ "$fails" -eq 0 ]
