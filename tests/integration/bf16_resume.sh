#!/usr/bin/env bash
# bf16_resume.sh GRIT - "precision": "bf16" keeps grit's determinism and exact resume
# (docs/precision.md). For GPT-NeoX and Llama (GQA, tied embeddings) with the GEMM
# backend this CPU picks (oneDNN on AVX512-BF16), and for GPT-NeoX also with
# GRIT_BF16_GEMM=fp32 (the path of CPUs without it): the bf16 run's weights differ from
# the fp32 run's (so bf16 is really in use and the comparisons can fail); a run killed after step 5 (synchronous checkpoints every 3 steps) and resumed
# ends bitwise equal to the uninterrupted one (two processes each side of the kill, so
# this is also the run-to-run determinism check), with float32 master weights in its
# checkpoint; and resuming that bf16 run's checkpoint as fp32 is refused (the config
# fingerprint covers the precision). GPT-NeoX with oneDNN runs 2 threads, the other cases
# 1 (quicker on a busy machine; bitwise claims hold per thread count).
set -euo pipefail
grit=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
core() { sed -E 's/,"tokens_per_s".*//' "$1"; }

declare -A models=(
  [neox]='{"hidden_size": 64, "num_layers": 2, "num_heads": 4, "intermediate_size": 256,
           "vocab_size": 300, "rotary_pct": 0.25, "max_positions": 128}'
  [llama]='{"family": "llama", "hidden_size": 64, "num_layers": 2, "num_heads": 4, "num_kv_heads": 2,
            "intermediate_size": 96, "vocab_size": 300, "max_positions": 128, "tie_embeddings": true}'
)
for name in neox llama; do
  for prec in fp32 bf16; do
    cat > "$tmp/$name-$prec.json" <<JSON
{"model": ${models[$name]},
 "optim": {"micro_batch": 2, "grad_accum": 2, "seq_len": 32, "lr": 3e-3, "min_lr": 3e-4,
           "warmup_steps": 2, "total_steps": 9},
 "data": {"source": "synthetic", "synthetic_vocab": 300},
 "checkpoint": {"interval_steps": 3, "keep_last": 2, "async": false},
 "precision": "$prec", "seed": 42, "threads": 2}
JSON
  done
  cfg=$tmp/$name-bf16.json
  "$grit" train "$tmp/$name-fp32.json" --run-dir "$tmp/$name-fp32" --threads 1 --quiet
  gemms="auto fp32"
  [ $name = neox ] || gemms=auto # the fallback's numerics do not depend on the family
  for gemm in $gemms; do
    r=$tmp/$name-$gemm
    export GRIT_BF16_GEMM=$gemm
    th=1
    [ $name/$gemm = neox/auto ] && th=2
    "$grit" train "$cfg" --run-dir "$r-a" --threads $th --quiet
    cmp -s "$r-a/model.safetensors" "$tmp/$name-fp32/model.safetensors" &&
      fail "$name/$gemm: the bf16 run ends with the fp32 run's weights (bf16 not in use?)"
    rc=0
    GRIT_FAULTS=kill:step=5 "$grit" train "$cfg" --run-dir "$r-k" --threads $th --quiet 2>/dev/null || rc=$?
    [ $rc -eq 137 ] || fail "$name/$gemm: expected the injected SIGKILL (137), got $rc"
    "$grit" train "$cfg" --run-dir "$r-k" --threads $th --quiet
    grep -q '"event":"resume"' "$r-k/events.jsonl" || fail "$name/$gemm: the second run did not resume"
    cmp -s "$r-a/model.safetensors" "$r-k/model.safetensors" ||
      fail "$name/$gemm: killed and resumed bf16 run ends with different weights"
    diff -q <(core "$r-a/metrics.jsonl") <(core "$r-k/metrics.jsonl") >/dev/null ||
      fail "$name/$gemm: killed and resumed bf16 run has different metrics"
    last=$(ls -d "$r-k"/ckpt/step_* | tail -1)
    python3 - "$last/model.safetensors" <<'PY' || fail "$name/$gemm: checkpoint weights are not all F32"
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    head = json.loads(f.read(n))
bad = [k for k, v in head.items() if k != "__metadata__" and v["dtype"] != "F32"]
sys.exit(1 if bad or len(head) < 2 else 0)
PY
    echo "ok   $name/$gemm: bf16 differs from fp32, kill at step 5 + resume bitwise equal ($(sha256sum < "$r-a/model.safetensors" | cut -c1-12)), F32 master weights"
  done
  unset GRIT_BF16_GEMM
  cp -r "$tmp/$name-auto-k" "$tmp/$name-switch"
  sed -i 's/"total_steps": 9/"total_steps": 12/' "$tmp/$name-fp32.json"
  out=$("$grit" train "$tmp/$name-fp32.json" --run-dir "$tmp/$name-switch" --quiet 2>&1) && rc=0 || rc=$?
  [ $rc -ne 0 ] && grep -qi fingerprint <<<"$out" ||
    fail "$name: resuming a bf16 checkpoint as fp32 was not refused (rc=$rc: $out)"
done
[ $fails -eq 0 ] && echo "bf16_resume: all cases passed"
[ $fails -eq 0 ]
