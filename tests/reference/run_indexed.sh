#!/usr/bin/env bash
# run_indexed.sh - grit's MMIDIDX files vs Megatron's code path (numpy).
#
#   run_indexed.sh GRIT_IDX_TOOL PYTHON WORKDIR
#
# For uint16 (GPT-2/NeoX vocabularies) and int32 (a 128k vocabulary): makes a
# random spec, writes it with grit and with the Python (Megatron) writer,
# requires the two .idx and the two .bin to be byte-identical, then reads
# grit's files with the Python reader and Python's with grit, both dumps
# equal to the spec.
set -euo pipefail
tool=$1 py=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
fail=0
for cfg in "8 50277 11" "4 128256 12"; do
  set -- $cfg; code=$1 vocab=$2 seed=$3
  spec=$work/d$code.spec
  "$py" "$here/indexed_megatron.py" spec "$seed" 300 "$vocab" "$spec"
  "$tool" write "$spec" "$work/grit$code" "$code"
  "$py" "$here/indexed_megatron.py" write "$spec" "$work/mega$code" "$code"
  for ext in idx bin; do
    if cmp "$work/grit$code.$ext" "$work/mega$code.$ext"; then
      echo "ok   dtype $code: grit and Megatron .$ext byte-identical ($(stat -c %s "$work/grit$code.$ext") bytes)"
    else
      echo "FAIL dtype $code: .$ext differs"; fail=1
    fi
  done
  "$py" "$here/indexed_megatron.py" dump "$work/grit$code" > "$work/grit$code.py.dump"
  "$tool" dump "$work/mega$code" > "$work/mega$code.grit.dump"
  for d in grit$code.py mega$code.grit; do
    if cmp -s "$spec" "$work/$d.dump"; then echo "ok   dtype $code: $d reader sees the spec"
    else echo "FAIL dtype $code: $d reader differs from the spec"; diff "$spec" "$work/$d.dump" | head -5; fail=1; fi
  done
done
exit $fail
