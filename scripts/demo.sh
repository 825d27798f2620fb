#!/usr/bin/env bash
# demo.sh - the embedded default job, end to end on this machine:
#  1. prepares a small corpus (the licence texts every Debian system ships) and tokenizes
#     it with the GPT-NeoX-20B tokenizer into a Megatron .bin/.idx dataset;
#  2. grit launch --nodes 4 --spares 1 trains a pythia-14m-shaped model on 4 MPI ranks
#     ("nodes" are slots on this machine), checkpointing every 10 steps;
#  3. injects a node failure (node2 dies at step 20) and, after the recovery, a hung rank
#     (SIGSTOP at step 40); the supervisor detects both, cordons the dead node, swaps in
#     the spare, resumes from the last good checkpoint, and prints the incident table
#     and the goodput;
#  4. with DEMO_VERIFY=1, runs the same job without faults and checks the final weights
#     are bitwise identical (a second full run, so off by default).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
grit=./build/grit
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
grep -q avx512f /proc/cpuinfo || export OPENBLAS_CORETYPE=Haswell
rm -rf runs/demo runs/demo-data runs/demo-ref
mkdir -p runs/demo-data

echo "== 1. corpus: /usr/share/common-licenses -> runs/demo-data/licenses.{bin,idx}"
$grit tokenize /usr/share/common-licenses -o runs/demo-data/licenses \
  --tokenizer tests/data/gpt-neox-20b-tokenizer.json

echo
echo "== 2-3. grit launch --nodes 4 --spares 1, with a node failure at step 20 and a hang at step 40"
$grit launch --nodes 4 --spares 1 --run runs/demo --hang-timeout 5 --backoff 0.2 \
  --price-node-hour 2.5 --grid-gco2-kwh 350 --node-watts 300 \
  --inject kill:node=node2:step=20,hang:rank=1:step=40:attempt=1 \
  -- $grit train examples/demo.json --run-dir runs/demo --quiet

first=$(head -n 1 runs/demo/metrics.jsonl | grep -o '"loss":[0-9.]*' | cut -d: -f2)
last=$(tail -n 1 runs/demo/metrics.jsonl | grep -o '"loss":[0-9.]*' | cut -d: -f2)
echo "== training loss $first -> $last over $(wc -l < runs/demo/metrics.jsonl) steps"
echo "== files: runs/demo/{events.jsonl,metrics.jsonl,cluster.json,logs/,ckpt/}"
$grit ckpt ls runs/demo
echo "== see it: $grit dashboard runs/demo (then open http://127.0.0.1:8787/);"
echo "   tensorboard --logdir runs/demo/tb"
if [ "${DEMO_VERIFY:-0}" = 1 ]; then
  echo "== 4. the same run without faults, for comparison"
  $grit launch --nodes 4 --spares 1 --run runs/demo-ref --quiet \
    -- $grit train examples/demo.json --run-dir runs/demo-ref --quiet
  cmp runs/demo/model.safetensors runs/demo-ref/model.safetensors &&
    echo "demo: final weights bitwise identical to the fault-free run"
fi
