#!/usr/bin/env bash
# obs_tensorboard.sh GRIT PYTHON - the TensorBoard event files of a run that was killed and
# resumed (two files) decode, with the test's own reader (tb_decode.py: TFRecord framing,
# masked CRC32C, protobuf wire format by hand), to exactly the scalars of metrics.jsonl;
# a flipped byte is caught by the reader.
set -euo pipefail
grit=$1 py=$2
here=$(cd "$(dirname "$0")" && pwd)
source "$here/obs_lib.sh"
obs_run "$tmp/run"
n=$(ls "$tmp/run/tb" | grep -c '^events\.out\.tfevents\.' || true)
[ "$n" -eq 2 ] || fail "expected 2 event files (one per attempt), got $n"
"$py" "$here/tb_decode.py" "$tmp/run" || fail "the event files do not match metrics.jsonl"
# the reader must notice damage: flip one byte inside the last record's data
mkdir -p "$tmp/bad/tb"
cp "$tmp/run/metrics.jsonl" "$tmp/bad/"
f=$(ls "$tmp/run/tb" | tail -1)
cp "$tmp/run/tb/$f" "$tmp/bad/tb/$f"
size=$(stat -c %s "$tmp/bad/tb/$f")
printf '\x55' | dd of="$tmp/bad/tb/$f" bs=1 seek=$((size - 8)) conv=notrunc status=none
if "$py" "$here/tb_decode.py" "$tmp/bad" > "$tmp/bad.out" 2>&1; then
  fail "a damaged event file was accepted"
else
  grep -q "CRC" "$tmp/bad.out" && echo "ok   damaged record detected: $(head -1 "$tmp/bad.out")" ||
    fail "damage detected for the wrong reason: $(cat "$tmp/bad.out")"
fi
[ $fails -eq 0 ] && echo "obs_tensorboard: all checks passed"
exit $((fails > 0))
