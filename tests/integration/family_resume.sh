#!/usr/bin/env bash
# family_resume.sh GRIT - determinism and crash-resume for the Llama and Falcon families:
# for each of Llama (GQA, llama3 rope scaling, tied), Falcon 7B-style (multi-query, one
# norm) and Falcon 40B-style (grouped qkv, two norms): two runs of the same config end
# bitwise identical, another seed differs (so the comparison can fail), and a run killed
# (SIGKILL after step 5; synchronous checkpoints every 3 steps, so step 3 is committed) then
# resumed ends bitwise equal to the
# uninterrupted one, with a checkpoint whose config.json is the family's HF form.
set -euo pipefail
grit=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
core() { sed -E 's/,"tokens_per_s".*//' "$1"; }

declare -A models=(
  [llama]='{"family": "llama", "hidden_size": 64, "num_layers": 2, "num_heads": 4, "num_kv_heads": 2,
            "intermediate_size": 96, "vocab_size": 300, "max_positions": 128, "rotary_base": 500000,
            "tie_embeddings": true, "rope_scaling": {"type": "llama3", "factor": 8, "low_freq_factor": 1,
            "high_freq_factor": 4, "original_max_position_embeddings": 32}}'
  [falcon7b]='{"preset": "falcon-tiny", "vocab_size": 300}'
  [falcon40b]='{"preset": "falcon-tiny-new", "vocab_size": 300, "num_heads": 8, "num_kv_heads": 2}'
)
declare -A want_type=([llama]=llama [falcon7b]=falcon [falcon40b]=falcon)
for name in llama falcon7b falcon40b; do
  cfg=$tmp/$name.json
  cat > "$cfg" <<JSON
{"model": ${models[$name]},
 "optim": {"micro_batch": 2, "grad_accum": 2, "seq_len": 32, "lr": 3e-3, "min_lr": 3e-4,
           "warmup_steps": 2, "total_steps": 9},
 "data": {"source": "synthetic", "synthetic_vocab": 300},
 "checkpoint": {"interval_steps": 3, "keep_last": 2, "async": false},
 "seed": 42, "threads": 2}
JSON
  "$grit" train "$cfg" --run-dir "$tmp/$name-a" --quiet
  "$grit" train "$cfg" --run-dir "$tmp/$name-b" --quiet
  "$grit" train "$cfg" --run-dir "$tmp/$name-seed" --seed 43 --quiet
  cmp -s "$tmp/$name-a/model.safetensors" "$tmp/$name-b/model.safetensors" ||
    fail "$name: two identical runs give different weights"
  diff -q <(core "$tmp/$name-a/metrics.jsonl") <(core "$tmp/$name-b/metrics.jsonl") >/dev/null ||
    fail "$name: two identical runs give different metrics"
  cmp -s "$tmp/$name-a/model.safetensors" "$tmp/$name-seed/model.safetensors" &&
    fail "$name: another seed gives the same weights (the check cannot fail)"
  rc=0
  GRIT_FAULTS=kill:step=5 "$grit" train "$cfg" --run-dir "$tmp/$name-k" --quiet 2>/dev/null || rc=$?
  [ $rc -eq 137 ] || fail "$name: expected the injected SIGKILL (137), got $rc"
  "$grit" train "$cfg" --run-dir "$tmp/$name-k" --quiet
  grep -q '"event":"resume"' "$tmp/$name-k/events.jsonl" || fail "$name: the second run did not resume"
  cmp -s "$tmp/$name-a/model.safetensors" "$tmp/$name-k/model.safetensors" ||
    fail "$name: killed and resumed run ends with different weights"
  diff -q <(core "$tmp/$name-a/metrics.jsonl") <(core "$tmp/$name-k/metrics.jsonl") >/dev/null ||
    fail "$name: killed and resumed run has different metrics"
  "$grit" ckpt verify "$tmp/$name-k" >/dev/null || fail "$name: grit ckpt verify failed"
  last=$(ls -d "$tmp/$name-k"/ckpt/step_* | tail -1)
  grep -q "\"model_type\": \"${want_type[$name]}\"" "$last/config.json" ||
    fail "$name: $last/config.json is not the ${want_type[$name]} HF form"
  echo "ok   $name: deterministic ($(sha256sum < "$tmp/$name-a/model.safetensors" | cut -c1-12)), other seed differs, kill at step 5 + resume bitwise equal"
done
[ $fails -eq 0 ] && echo "family_resume: all cases passed"
[ $fails -eq 0 ]
