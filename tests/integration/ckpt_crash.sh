#!/usr/bin/env bash
# ckpt_crash.sh GRIT - kill -9 the trainer at every checkpoint commit phase (first and
# third save) and at 20 seeded random byte offsets inside checkpoint file writes, then
# resume: every run must end bitwise equal to the uninterrupted one, leave no .tmp
# behind, and verify. The kill is the fault store's SIGKILL at the named point
# (GRIT_CKPT_FAULT, src/ckpt/store.h), so it lands exactly where we say.
set -euo pipefail
source "$(dirname "$0")/ckpt_lib.sh" "$1"  # grit, cfg, a scratch $tmp removed on exit
run_reference

crash_then_resume() { # NAME FAULT
  local name=$1 fault=$2 d="$tmp/$1" rc=0
  GRIT_CKPT_FAULT=$fault "$grit" train "$cfg" --run-dir "$d" --quiet 2>"$d.err" || rc=$?
  if [ $rc -ne 137 ]; then fail "$name: expected the injected SIGKILL (137), got $rc"; cat "$d.err"; return; fi
  "$grit" train "$cfg" --run-dir "$d" --quiet 2>"$d.err2" || { fail "$name: resume failed"; cat "$d.err2"; return; }
  same_as_reference "$d" "$name"
  echo "ok   $name ($fault): resumed $(grep -o '"event":"resume","dir":"[^"]*"' "$d/events.jsonl" | tail -1 | sed 's/.*"dir"://' || echo 'from scratch')"
  rm -rf "$d" "$d.err" "$d.err2"
}

for phase in files manifest rename latest; do
  for k in 1 3; do crash_then_resume "phase-$phase-$k" "crash:$phase@$k"; done
done

# bytes one run puts through the store: the saves' files plus LATEST per save
total=$(python3 -c "
import json
ev = [json.loads(l) for l in open('$tmp/ref/events.jsonl')]
print(int(sum(e['bytes'] + 14 for e in ev if e['event'] == 'ckpt_saved')))")
RANDOM=20261122
for i in $(seq 1 20); do
  off=$(( (RANDOM * 32768 + RANDOM) % total ))
  crash_then_resume "byte-$i" "crash_byte:$off"
done

# two crashes in a row, the second in the resumed process, then a clean finish
d="$tmp/chain"; rc=0
GRIT_CKPT_FAULT=crash:manifest@2 "$grit" train "$cfg" --run-dir "$d" --quiet 2>/dev/null || rc=$?
[ $rc -eq 137 ] || fail "chain: first crash expected"
rc=0; GRIT_CKPT_FAULT=crash:rename@1 "$grit" train "$cfg" --run-dir "$d" --quiet 2>/dev/null || rc=$?
[ $rc -eq 137 ] || fail "chain: second crash expected"
"$grit" train "$cfg" --run-dir "$d" --quiet
same_as_reference "$d" chain && echo "ok   chain (manifest@2 then rename@1)"
# resuming under a different config is refused as a configuration error (exit 3: a retry would fail the same way); starting from the weights only is allowed
sed 's/"lr": 3e-3/"lr": 2e-3/' "$cfg" > "$tmp/other.json"
rc=0; out=$("$grit" train "$tmp/other.json" --run-dir "$d" --quiet 2>&1) || rc=$?
if [ $rc -ne 3 ] || ! grep -q "step_00000012 was written by a different config (fingerprint" <<<"$out"; then
  fail "fingerprint: expected a refusal, got rc=$rc: $out"
fi
sed "s#\"lr\": 3e-3#\"lr\": 2e-3#; s#\"seed\": 42#\"seed\": 42, \"init_from\": \"$d/ckpt/step_00000012\"#" "$cfg" > "$tmp/ft.json"
"$grit" train "$tmp/ft.json" --run-dir "$tmp/finetune" --quiet || fail "init_from: fine-tuning run failed"
grep -q '"event":"init_from"' "$tmp/finetune/events.jsonl" || fail "init_from: no event"
echo "ok   fingerprint mismatch refused; init_from (weights only) accepted"
finish ckpt_crash
