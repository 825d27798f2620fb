#!/usr/bin/env bash
# ckpt_corrupt.sh GRIT - damage the newest checkpoint in every way we can name (a
# flipped byte in each file kind, a truncated file, a deleted manifest, a silently
# short write): grit ckpt verify must flag it, and a resumed run must report it
# (stderr and an event), fall back to the previous checkpoint and still end bitwise
# equal to the uninterrupted run. With every checkpoint corrupt, grit must refuse to
# start over.
set -euo pipefail
source "$(dirname "$0")/ckpt_lib.sh" "$1"  # grit, cfg, a scratch $tmp removed on exit
run_reference

# stop right after step 9's checkpoint is committed (3rd save): steps 3, 6, 9 on disk
stopped_run() { # DIR [extra faults]
  local rc=0
  GRIT_CKPT_FAULT="crash:latest@3${2:+,$2}" "$grit" train "$cfg" --run-dir "$1" --quiet 2>/dev/null || rc=$?
  [ $rc -eq 137 ] || fail "setup: expected the injected crash, got $rc"
}

check_case() { # NAME DIR EXPECT-IN-VERIFY
  local name=$1 d=$2 want=$3 out rc=0
  out=$("$grit" ckpt verify "$d" 2>&1) || rc=$?
  verify_out=$out
  [ $rc -eq 1 ] || fail "$name: grit ckpt verify exit $rc, expected 1"
  grep -Eq "step_00000009 .*CORRUPT: .*($want)" <<<"$out" || fail "$name: verify output lacks '$want': $out"
  out=$("$grit" train "$cfg" --run-dir "$d" --quiet 2>&1) || fail "$name: resume failed: $out"
  grep -q "step_00000009 is unusable" <<<"$out" || fail "$name: no warning on stderr: $out"
  grep -q '"event":"ckpt_rejected","dir":"step_00000009"' "$d/events.jsonl" || fail "$name: no ckpt_rejected event"
  grep -q '"event":"resume","dir":"step_00000006"' "$d/events.jsonl" || fail "$name: did not resume from step 6"
  same_as_reference "$d" "$name"
  echo "ok   $name: $(grep -o 'CORRUPT: .*' <<<"$verify_out")"
}

n=0
for spec in flip:model.safetensors flip:optimizer.safetensors flip:config.json \
            flip:trainer_state.json flip:manifest.json edit:manifest.json \
            truncate:model.safetensors delete:manifest.json; do
  n=$((n + 1)); d="$tmp/c$n"; how=${spec%%:*} file=${spec#*:}
  stopped_run "$d"
  f="$d/ckpt/step_00000009/$file"
  case $how in
    flip) flip_byte "$f"; want="manifest.json: (self-check failed|not a grit manifest)" ;;
    edit) # still valid JSON, sizes and hashes consistent with a different file: only the
          # manifest's self-check can tell
          sed -i '0,/"size": [0-9]*/s//"size": 12345/' "$f"; want="manifest.json: self-check failed" ;;
    truncate) truncate -s -100 "$f"; want="$file: size" ;;
    delete) rm -f "$f"; want="manifest.json: missing" ;;
  esac
  [ "$how" = flip ] && [ "$file" != manifest.json ] && want="$file: xxh3"
  check_case "$spec" "$d" "$want"
done

# a write that claimed success but stored half the bytes (put #7 = step 9's... counted below)
# puts per save: model, optimizer, config, trainer_state, manifest, LATEST = 6; save 3 starts at put 13
d="$tmp/short"; stopped_run "$d" "short:14"
check_case "short write (optimizer.safetensors)" "$d" "optimizer.safetensors: size"

# every checkpoint corrupt: refuse to start over
d="$tmp/all"; stopped_run "$d"
for s in 3 6 9; do flip_byte "$d/ckpt/step_0000000$s/model.safetensors"; done
rc=0; out=$("$grit" train "$cfg" --run-dir "$d" --quiet 2>&1) || rc=$?
[ $rc -eq 3 ] || fail "all-corrupt: expected exit 3 (a retry would repeat it), got $rc"
grep -q "none of the 3 checkpoints verifies; refusing to start over" <<<"$out" || fail "all-corrupt: message: $out"
[ "$(grep -c '"event":"ckpt_rejected"' "$d/events.jsonl")" -eq 3 ] || fail "all-corrupt: expected 3 ckpt_rejected events"
echo "ok   all checkpoints corrupt: refused to start over"
finish ckpt_corrupt
