#!/usr/bin/env bash
# error_paths.sh GRIT PYTHON - malformed inputs end in a clear error (exit 1, the file
# named) and, in the sanitizer build, with no leak or sanitizer report: `grit ckpt import`
# on broken safetensors files (each a different defect) and `grit prep` on WARC records
# with broken headers. LeakSanitizer is on explicitly (ASAN_OPTIONS), so a leak on an
# error path fails the test.
set -uo pipefail
grit=$1 py=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export ASAN_OPTIONS=detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}
tok=$(cd "$(dirname "$0")/../data" && pwd)/gpt-neox-20b-tokenizer.json
"$py" "$(dirname "$0")/error_paths_make.py" "$tmp" || exit 1
fails=0 runs=0
check() { # NAME EXPECTED-SUBSTRING LOG RC
  runs=$((runs + 1))
  if [ "$4" != 1 ]; then echo "FAIL $1: exit $4, expected 1"; sed 's/^/  /' "$3" | head -20; fails=$((fails + 1)); return; fi
  if ! grep -qF -- "$2" "$3"; then echo "FAIL $1: message lacks '$2':"; sed 's/^/  /' "$3" | head -5; fails=$((fails + 1)); return; fi
  if grep -qE 'LeakSanitizer|AddressSanitizer|runtime error' "$3"; then
    echo "FAIL $1: sanitizer report:"; grep -A8 -E 'Sanitizer|runtime error' "$3" | head -30; fails=$((fails + 1)); return; fi
}
for d in "$tmp"/st_*; do
  n=$(basename "$d")
  (cd "$d" && "$grit" ckpt import . "$tmp/out_$n") > "$tmp/$n.log" 2>&1
  check "ckpt import $n" "model.safetensors" "$tmp/$n.log" $?
done
for w in "$tmp"/*.warc; do
  n=$(basename "$w" .warc)
  "$grit" prep -o "$tmp/prep_$n" --tokenizer "$tok" "$w" > "$tmp/$n.log" 2>&1
  check "prep $n" "$n.warc" "$tmp/$n.log" $?
done
echo "$((runs - fails)) passed, $fails failed"
[ "$fails" = 0 ]
