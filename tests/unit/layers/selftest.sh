#!/usr/bin/env bash
# selftest.sh CHECK LAYERS - scripts/check-layers.sh fails on planted violations
# (an include pointing up, one between siblings, a folder missing from the list,
# the angle-bracket form) and passes the same tree without them: the layer check
# of src/ (ctest unit.layers) can fail.
set -euo pipefail
check=$1
layers=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
mk() { mkdir -p "$tmp/src/$(dirname "$1")"; printf '%s\n' "${@:2}" > "$tmp/src/$1"; }
expect() { # expect RC PATTERN: run the check, compare exit status, grep output
  local rc=0 out
  out=$("$check" "$tmp/src" "$layers" 2>&1) || rc=$?
  if [ "$rc" -ne "$1" ] || ! grep -q -- "$2" <<<"$out"; then
    echo "FAIL: expected exit $1 and '$2', got exit $rc:"; echo "$out"; fail=1
  fi
}
reset() {
  rm -rf "$tmp/src"
  for m in $(grep -v '^#' "$layers"); do mkdir -p "$tmp/src/$m"; done
  mk core/error.h '#include <stdio.h>'
  mk tensor/ops.c '#include "core/error.h"' '#include "ops.h"' '#include <sys/stat.h>'
  mk train/train.c '#include "model/x.h"' '#include "heartbeat/hb.h"' '#include "obs/tb.h"'
  mk cli/main.c '#include "train/train.h"' '#include <supervise/sup.h>'
}
reset
expect 0 "module includes"
mk heartbeat/hb.c '#include "core/error.h"' '  #  include "obs/meter.h"'
expect 1 'src/heartbeat/hb.c:2: includes "obs/meter.h": heartbeat (layer 1) may not include obs'
reset
mk obs/view.c '#include "ckpt/ckpt.h"'
expect 1 'obs and ckpt are siblings'
reset
mk core/x.c '#include <train/train.h>'
expect 1 'src/core/x.c:1: includes "train/train.h"'
reset
mkdir -p "$tmp/src/newmod"
expect 1 'src/newmod/ is not in'
[ $fail -eq 0 ] && echo "layers selftest: 4 planted violations caught, the clean tree passes"
exit $fail
