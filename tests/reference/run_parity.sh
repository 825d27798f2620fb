#!/usr/bin/env bash
# run_parity.sh DUMP_BIN PYTHON CONFIG - dump grit's numbers for CONFIG and check
# them against the PyTorch reference (compare.py exits non-zero on any mismatch).
set -euo pipefail
dump=$1 py=$2 cfg=$3
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$dump" "$cfg" "$out" 10
"$py" "$here/compare.py" "$out"
