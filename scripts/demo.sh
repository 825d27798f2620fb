#!/usr/bin/env bash
# demo.sh - the embedded default job: trains a small Pythia-shaped model on the
# built-in synthetic stream, showing progress, the per-step metrics file and the
# end-of-run summary. (Multi-node launch with an injected fault and automatic
# recovery joins this demo as `grit launch` lands; see README "Status".)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
grep -q avx512f /proc/cpuinfo || export OPENBLAS_CORETYPE=Haswell
rm -rf runs/demo
./build/grit train examples/demo.json
echo "demo: last metrics line: $(tail -n 1 runs/demo/metrics.jsonl)"
