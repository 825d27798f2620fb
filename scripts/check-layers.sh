#!/usr/bin/env bash
# check-layers.sh [SRC_DIR [LAYERS_FILE]] - fails (exit 1) when an #include in
# SRC_DIR breaks the layer order in LAYERS_FILE (default: src/ and
# scripts/layers.txt of this checkout), naming the file, the line, the include and
# both layers; also when a folder of SRC_DIR is missing from the list.
# Includes are "module/file.h" or <module/file.h> where module is a folder of
# SRC_DIR; a bare "file.h" (the same folder) and system headers are not checked.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${1:-$here/../src}
layers=${2:-$here/layers.txt}
[ -d "$src" ] || { echo "check-layers: $src: no such directory"; exit 2; }
[ -r "$layers" ] || { echo "check-layers: $layers: cannot read"; exit 2; }

declare -A level
n=0
while read -r line; do
  line=${line%%#*}
  [ -z "${line// }" ] && continue
  for m in $line; do
    [ -n "${level[$m]:-}" ] && { echo "check-layers: $layers: module '$m' listed twice"; exit 2; }
    level[$m]=$n
  done
  n=$((n + 1))
done < "$layers"

bad=0
for d in "$src"/*/; do
  m=$(basename "$d")
  if [ -z "${level[$m]:-}" ]; then
    echo "check-layers: src/$m/ is not in $layers: add it to the layer it belongs to"
    bad=1
  fi
done

checked=0
while IFS= read -r hit; do
  # hit: path:line:text
  file=${hit%%:*}; rest=${hit#*:}; lineno=${rest%%:*}; text=${rest#*:}
  rel=${file#"$src"/}
  from=${rel%%/*}
  # Pure bash (no fork per line): a sed per include took minutes on a loaded machine.
  [[ $text =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*[\"\<]([^\">]*)[\"\>] ]] || continue
  inc=${BASH_REMATCH[1]}
  case $inc in */*) ;; *) continue ;; esac
  to=${inc%%/*}
  [ -d "$src/$to" ] || continue # a system header such as <sys/stat.h>
  checked=$((checked + 1))
  [ "$to" = "$from" ] && continue
  lf=${level[$from]:-}; lt=${level[$to]:-}
  [ -z "$lf" ] || [ -z "$lt" ] && continue # reported above
  if [ "$lt" -gt "$lf" ]; then
    echo "check-layers: src/$rel:$lineno: includes \"$inc\": $from (layer $lf) may not include $to (layer $lt, higher)"
    bad=1
  elif [ "$lt" -eq "$lf" ]; then
    echo "check-layers: src/$rel:$lineno: includes \"$inc\": $from and $to are siblings (layer $lf) and may not include each other"
    bad=1
  fi
done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]' "$src" \
           --include='*.c' --include='*.h' --include='*.cc' --include='*.cu' --include='*.cuh' || true)

if [ $bad -ne 0 ]; then
  echo "check-layers: FAIL: the layer order is in $layers (docs/architecture.md explains it)"
  exit 1
fi
echo "check-layers: $checked module includes in $src follow $layers ($n layers)"
