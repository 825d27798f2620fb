#!/usr/bin/env bash
# failure_class.sh GRIT - failures that a retry would repeat end the run at once, with the
# cause where an operator looks (issue #23, point 3):
#   the disk fills during a checkpoint save with on_error "stop": grit train exits 3 and
#     says "disk_full" (worker event "fatal", event train_failed); grit launch launches once,
#     gives up at once (no diagnosis, no restart), exit 3, the cause in the gave_up event,
#     the incident table and the summary
#   a config error under grit launch: exit 3 at the first attempt, no restart
#   a transient failure (a rank killed) is still retried: the contrast
set -euo pipefail
grit=$1
cfgsrc=$(cd "$(dirname "$0")/.." && pwd)/configs/ckpt.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
command -v mpirun >/dev/null || { echo "FAIL: mpirun not found (make deps)"; exit 1; }
sed 's/"keep_last": 2}/"keep_last": 2, "on_error": "stop"}/' "$cfgsrc" > "$tmp/stop.json"
grep -q '"on_error": "stop"' "$tmp/stop.json" || fail "setup: could not write the stop config"
n() { grep -c "\"event\":\"$2\"" "$1/events.jsonl" || true; }
L() { # DIR CONFIG [options]: grit launch on 1 node + 1 spare, synchronously; sets rc
  local d=$1 c=$2; shift 2
  rc=0
  "$grit" launch --nodes 1 --spares 1 --run "$d" --backoff 0.1 --straggler-factor 0 --max-restarts 4 "$@" \
    -- "$grit" train "$c" --run-dir "$d" --quiet > "$d.out" 2>&1 || rc=$?
}

# grit train alone: exit 3, the cause in events.jsonl
rc=0
GRIT_CKPT_FAULT=enospc:8 "$grit" train "$tmp/stop.json" --run-dir "$tmp/t" --quiet > "$tmp/t.out" 2>&1 || rc=$?
if [ $rc -eq 3 ] && grep -q '"event":"train_failed","cause":"disk_full"' "$tmp/t/events.jsonl" &&
   grep -q 'a retry would fail the same way (disk_full): exit 3' "$tmp/t.out"; then
  echo "ok   train: disk full with on_error stop -> exit 3, cause disk_full recorded"
else
  fail "train disk full: rc=$rc $(tail -2 "$tmp/t.out")"
fi

# grit launch: one launch, no restart, exit 3, the cause everywhere
L "$tmp/full" "$tmp/stop.json" --inject disk_full:put=8
out="$tmp/full.out"
if [ $rc -eq 3 ] && [ "$(n "$tmp/full" launch)" -eq 1 ] && [ "$(n "$tmp/full" diagnosis)" -le 1 ] &&
   grep -q '"event":"gave_up","reason":"a failure that a retry would repeat (disk_full)' "$tmp/full/events.jsonl" &&
   grep -q '"to":"GAVE_UP","via":"sup_give_up_permanent' "$tmp/full/events.jsonl" &&
   grep -Eq '^  exit .*will not retry: disk_full' "$out" && grep -Eq '^  restarts +0$' "$out" &&
   grep -q 'giving up: a failure that a retry would repeat (disk_full)' "$out" &&
   grep -Eq '^  checkpoints +1 saves failed' "$out" &&
   grep -q 'No space left on device' "$tmp/full/logs/attempt_00.log"; then
  echo "ok   launch: disk full -> one attempt, gave up at once with the cause (exit 3)"
else
  fail "launch disk full: rc=$rc launches=$(n "$tmp/full" launch): $(grep -E 'giving|detected|^  exit|restarts' "$out" | tr '\n' ';')"
fi

# a config error: the trainer exits 3 before any heartbeat; no restart
printf '{"model": {"hidden_size": 65, "num_heads": 4}}\n' > "$tmp/bad.json"
L "$tmp/cfg" "$tmp/bad.json"
if [ $rc -eq 3 ] && [ "$(n "$tmp/cfg" launch)" -eq 1 ] &&
   grep -q 'a failure that a retry would repeat (exit status 3)' "$tmp/cfg.out"; then
  echo "ok   launch: config error -> one attempt, gave up (exit 3)"
else
  fail "launch config error: rc=$rc launches=$(n "$tmp/cfg" launch): $(tail -3 "$tmp/cfg.out")"
fi

# the contrast: a killed rank is transient, retried, and the run completes
L "$tmp/kill" "$cfgsrc" --inject kill:rank=0:step=5
if [ $rc -eq 0 ] && [ "$(n "$tmp/kill" launch)" -eq 2 ] && [ "$(n "$tmp/kill" gave_up)" -eq 0 ]; then
  echo "ok   launch: a killed rank is retried (2 attempts, done)"
else
  fail "transient: rc=$rc launches=$(n "$tmp/kill" launch)"
fi

if [ "$fails" -eq 0 ]; then echo "failure_class: all cases passed"; else echo "failure_class: $fails failure(s)"; fi
[ "$fails" -eq 0 ]
