#!/usr/bin/env bash
# run_planted.sh DUMP PYTHON CONFIG - the checker's negative test on the real trainer: the
# dump tool pushes every parameter one float32 ulp further along its update at each AdamW step
# (grit-parity-dump --plant adam-ulp) and compare.py must reject that in its optimiser check.
set -euo pipefail
dump=$1 py=$2 cfg=$3
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$dump" "$cfg" "$out" 10 --plant adam-ulp
"$py" "$here/compare.py" --expect-fail adam.safetensors "$out" | grep -E 'FAIL|negative test|passed'
exit "${PIPESTATUS[0]}"
