#!/usr/bin/env bash
# health_gpu.sh GRIT FAKE_NVML - `grit health --deep` against a stand-in libnvidia-ml
# (tests/fake/fake_nvml.c) that stages Xid events: a critical Xid makes the run
# unhealthy (exit 1) with the GPU and Xid named; a benign one only warns (exit 0,
# listed as a warning); no events pass. Quick mode does not wait for Xids.
set -euo pipefail
grit=$1 fake=$2
tmp=$(mktemp -d /tmp/grit-health-gpu.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
deep=(--deep --deep-seconds 0.2 --dir "$tmp" --mem-max-bytes 1048576 --disk-bytes 1048576
      --xid-seconds 0.3 --nvml-lib "$fake")
export FAKE_NVML_GPUS=2

# run WANT_RC NAME ARGS...
run() {
  local want=$1 name=$2 rc=0; shift 2
  "$grit" health "$@" >"$tmp/$name" 2>"$tmp/$name.err" || rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL: $name: rc $rc (want $want)"; tail -n 5 "$tmp/$name" "$tmp/$name.err"; fail=1; return 1
  fi
}
has() { grep -qF -- "$2" "$tmp/$1" || { echo "FAIL: $1 lacks: $2"; tail -n 8 "$tmp/$1"; fail=1; }; }

run 0 none "${deep[@]}" && has none "no Xid events in 0.3 s on 2 GPU(s)"
FAKE_NVML_XIDS=79 run 1 crit "${deep[@]}" && {
  has crit "  - gpu.xid: GPU 0: Xid 79 (GPU has fallen off the bus)"
  has crit "UNHEALTHY"
}
FAKE_NVML_XIDS=13 run 0 benign "${deep[@]}" && {
  has benign "HEALTHY"
  has benign "warning: gpu.xid: GPU 0: Xid 13: 1 non-critical Xid event(s)"
}
FAKE_NVML_XIDS=13 run 0 benign.json --json "${deep[@]}" &&
  python3 - "$tmp/benign.json" <<'PY' || fail=1
import json, sys
rep = json.load(open(sys.argv[1]))
x = [c for c in rep["checks"] if c["name"] == "gpu.xid"][0]
assert x["verdict"] == "warn" and rep["healthy"] and rep["failures"] == [], (x, rep["failures"])
PY
# The same library through $GRIT_NVML_LIB; quick mode does not wait.
GRIT_NVML_LIB=$fake FAKE_NVML_XIDS=79 run 0 quick --quick --dir "$tmp" && has quick "quick mode does not wait for Xid events"

[ $fail -eq 0 ] && echo "health_gpu: all checks passed"
exit $fail
