#!/usr/bin/env bash
# run_sft.sh DUMP_BIN PYTHON CONFIG [--no-seg] - one SFT micro-batch through grit
# (grit-sft-dump) checked against PyTorch (sft_ref.py, which exits non-zero on any
# mismatch). With --no-seg the dump lets packed examples attend to each other and the
# check must fail.
set -euo pipefail
dump=$1 py=$2 cfg=$3 neg=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if [ "$neg" = "--no-seg" ]; then
  "$dump" "$cfg" "$out" --no-seg
  "$py" "$here/sft_ref.py" "$out" --expect-fail
else
  "$dump" "$cfg" "$out"
  "$py" "$here/sft_ref.py" "$out"
fi
