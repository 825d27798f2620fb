#!/usr/bin/env bash
# config_errors.sh GRIT DIR - each DIR/NAME.json is a bad config; grit train must
# refuse it (exit 3: a retry would repeat it; nothing trained) with a message containing DIR/NAME.expect
# (file:line:col, field, what was expected).
set -euo pipefail
grit=$1 dir=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$dir"
n=0 fail=0
for cfg in *.json; do
  name=${cfg%.json}
  want=$(cat "$name.expect")
  rc=0
  out=$("$grit" train "$cfg" --run-dir "$tmp/$name" --quiet 2>&1) || rc=$?
  if [ "$rc" -ne 3 ] || ! grep -qF -- "$want" <<<"$out"; then
    echo "FAIL $name: rc=$rc"; echo "  expected: $want"; echo "  got:      $out"; fail=$((fail+1))
  elif [ -e "$tmp/$name" ]; then
    echo "FAIL $name: a run directory was created for a bad config"; fail=$((fail+1))
  else
    echo "ok   $name: $out"
  fi
  n=$((n+1))
done
[ "$n" -ge 8 ] || { echo "FAIL: only $n bad configs found"; exit 1; }
echo "$((n-fail)) passed, $fail failed"
[ $fail -eq 0 ]
