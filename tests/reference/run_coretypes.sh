#!/usr/bin/env bash
# run_coretypes.sh DUMP PYTHON CONFIG - the parity check of CONFIG once per OpenBLAS x86-64
# kernel family this CPU can run (OPENBLAS_CORETYPE=...), so a tolerance that judges the BLAS
# kernel rather than grit fails here and not on a newcomer's machine (docs/parity.md).
# A family is skipped, with the reason, when the CPU lacks its instructions or this OpenBLAS
# cannot be forced to it (the dump reports the core OpenBLAS really ran); exit 77 if none ran.
set -euo pipefail
dump=$1 py=$2 cfg=$3
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f; do [[ $flags == *" $f "* ]] || return 1; done; }

declare -A need=(
  [Prescott]="pni" [Core2]="ssse3" [Nehalem]="sse4_2 popcnt" [Sandybridge]="avx"
  [Haswell]="avx2 fma" [Zen]="avx2 fma" [SkylakeX]="avx512f avx512bw avx512dq avx512vl avx512cd"
  [Cooperlake]="avx512f avx512bw avx512dq avx512vl avx512_bf16"
  [SapphireRapids]="avx512f avx512bw avx512_bf16 amx_bf16 amx_tile")
dirs=() ran=()
for core in Prescott Core2 Nehalem Sandybridge Haswell Zen SkylakeX Cooperlake SapphireRapids; do
  # shellcheck disable=SC2086
  if ! has ${need[$core]}; then
    echo "SKIP $core: this CPU lacks ${need[$core]}"
    continue
  fi
  log="$out/$core.log"
  if ! OPENBLAS_CORETYPE=$core "$dump" "$cfg" "$out/$core" 10 >"$log" 2>&1; then
    cat "$log"
    echo "FAIL $core: grit-parity-dump failed"
    exit 1
  fi
  got=$(sed -n 's/.*OpenBLAS core \([A-Za-z0-9_]*\).*/\1/p' "$log")
  if [[ ${got,,} != "${core,,}" ]]; then
    echo "SKIP $core: this OpenBLAS cannot be forced to it (it ran ${got:-?})"
    rm -rf "${out:?}/$core"
    continue
  fi
  echo "ran $core: $(tail -1 "$log")"
  dirs+=("$out/$core") ran+=("$core")
done
if [[ ${#dirs[@]} -eq 0 ]]; then
  echo "SKIP: no OpenBLAS core type could be run"
  exit 77
fi
echo "== checking ${#dirs[@]} core types: ${ran[*]}"
"$py" "$here/compare.py" "${dirs[@]}" | grep -E '^(/|worst|largest|[0-9]+ (passed|of))|FAIL'
exit "${PIPESTATUS[0]}"
