#!/usr/bin/env bash
# ckpt_enospc.sh GRIT - the disk fills up during a save (the fault store fails a put
# with ENOSPC after writing half of it). The save must fail cleanly: reported on
# stderr and as an event, nothing partial visible (no step dir, no .tmp), training
# goes on (on_error "continue") and the next save succeeds when space returns; the
# run still ends bitwise equal to the uninterrupted one. With on_error "stop" the run
# stops with a clear error and resumes from the last good checkpoint.
set -euo pipefail
source "$(dirname "$0")/ckpt_lib.sh" "$1"  # grit, cfg, a scratch $tmp removed on exit
run_reference

# 6 puts per save (5 files + LATEST): put 8 is step 6's optimizer.safetensors
d="$tmp/cont"; rc=0
out=$(GRIT_CKPT_FAULT=enospc:8 "$grit" train "$cfg" --run-dir "$d" --quiet 2>&1) || rc=$?
[ $rc -eq 0 ] || fail "continue: exit $rc: $out"
grep -q "checkpoint step 6 FAILED: .*No space left on device (injected)" <<<"$out" || fail "continue: no failure report: $out"
grep -q '"event":"ckpt_failed","step":6' "$d/events.jsonl" || fail "continue: no ckpt_failed event"
[ ! -e "$d/ckpt/step_00000006" ] || fail "continue: a partial step_00000006 is visible"
grep -q '"event":"ckpt_saved","step":9' "$d/events.jsonl" || fail "continue: the next save (step 9) did not succeed"
same_as_reference "$d" continue
echo "ok   on_error continue: step 6 failed cleanly, steps 9 and 12 saved"

# on_error stop: the failure ends the run; a resume continues from step 3
sed 's/"keep_last": 2}/"keep_last": 2, "on_error": "stop"}/' "$cfg" > "$tmp/stop.json"
grep -q '"on_error": "stop"' "$tmp/stop.json" || fail "setup: could not write the stop config"
cfg_stop="$tmp/stop.json"
d="$tmp/stop"; rc=0
out=$(GRIT_CKPT_FAULT=enospc:8 "$grit" train "$cfg_stop" --run-dir "$d" --quiet 2>&1) || rc=$?
[ $rc -eq 3 ] || fail "stop: expected exit 3 (disk full: a retry would repeat it), got $rc"
grep -q "grit train: I/O error: checkpoint step 6 failed: .*No space left on device" <<<"$out" || fail "stop: message: $out"
ls "$d/ckpt" | grep -v -e '^step_00000003$' -e '^LATEST$' > /dev/null && fail "stop: unexpected entries: $(ls "$d/ckpt")"
"$grit" train "$cfg_stop" --run-dir "$d" --quiet
grep -q '"event":"resume","dir":"step_00000003"' "$d/events.jsonl" || fail "stop: did not resume from step 3"
cmp -s "$tmp/ref/model.safetensors" "$d/model.safetensors" || fail "stop: final weights differ"
echo "ok   on_error stop: run stopped at the failed save and resumed from step 3"

# space never returns: every save from the second on fails; training still finishes
d="$tmp/full"; rc=0
out=$(GRIT_CKPT_FAULT=enospc_from:7 "$grit" train "$cfg" --run-dir "$d" --quiet 2>&1) || rc=$?
[ $rc -eq 0 ] || fail "full disk: exit $rc"
[ "$(grep -c '"event":"ckpt_failed"' "$d/events.jsonl")" -eq 3 ] || fail "full disk: expected 3 failed saves"
[ "$(ls "$d/ckpt")" = "$(printf 'LATEST\nstep_00000003')" ] || fail "full disk: partial files left: $(ls "$d/ckpt")"
cmp -s "$tmp/ref/model.safetensors" "$d/model.safetensors" || fail "full disk: final weights differ"
echo "ok   disk stays full: 3 saves failed cleanly, training finished"

# the failed saves on the dashboard's data and in Prometheus: grit dashboard on that run
pf="$tmp/port"
"$grit" dashboard "$d" --port 0 --port-file "$pf" 2> "$tmp/dash.log" &
dash=$!
for _ in $(seq 1 100); do [ -s "$pf" ] && break; sleep 0.1; done
port=$(cat "$pf" 2>/dev/null || true)
metrics=$(curl -fsS "http://127.0.0.1:$port/metrics" 2>&1 || true)
run=$(curl -fsS "http://127.0.0.1:$port/api/run" 2>&1 || true)
kill "$dash" 2>/dev/null || true; wait "$dash" 2>/dev/null || true
grep -qx 'grit_checkpoint_failures_total 3' <<<"$metrics" &&
  grep -qx 'grit_checkpoint_fallbacks_total 0' <<<"$metrics" &&
  [ "$(grep -o '"kind": *"save_failed"' <<<"$run" | wc -l)" -eq 3 ] &&
  grep -q 'No space left on device' <<<"$run" &&
  echo "ok   the 3 failed saves on /metrics (grit_checkpoint_failures_total 3) and the dashboard's /api/run" ||
  fail "dashboard/metrics: $(grep checkpoint_f <<<"$metrics") / $(head -c 300 <<<"$run") $(cat "$tmp/dash.log")"
finish ckpt_enospc
