#!/usr/bin/env bash
# run_parity_bf16.sh DUMP_BIN PYTHON CONFIG [planted] - CONFIG with "precision": "bf16"
# added, grit's step-0 numbers dumped and checked against PyTorch's bf16 autocast
# (compare_bf16.py exits non-zero on any mismatch). "planted": the dump is made with
# GRIT_FAULT_BF16_ACCUM=1 (bf16 GEMMs accumulating in bf16) and the check must fail.
set -euo pipefail
dump=$1 py=$2 cfg=$3 mode=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$py" -c 'import json, sys; c = json.load(open(sys.argv[1])); c["precision"] = "bf16"
json.dump(c, open(sys.argv[2], "w"))' "$cfg" "$out/config.json"
if [ "$mode" = planted ]; then
  GRIT_FAULT_BF16_ACCUM=1 "$dump" "$out/config.json" "$out/dump" 1
  "$py" "$here/compare_bf16.py" "$out/dump" --expect-fail
else
  GRIT_FAULT_BF16_ACCUM= "$dump" "$out/config.json" "$out/dump" 1
  "$py" "$here/compare_bf16.py" "$out/dump"
fi
