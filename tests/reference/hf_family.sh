#!/usr/bin/env bash
# hf_family.sh GRIT DUMP PYTHON - Hugging Face Llama and Falcon folders in and out:
#  1. a PyTorch model saves HF-named weights (F32, F16 or BF16; sharded with
#     model.safetensors.index.json for three of the four cases) and a config.json in
#     LlamaConfig/FalconConfig form; grit trains from it (init_from) and its step-0
#     logits match PyTorch's float64 forward of the same folder to 1e-5;
#  2. grit ckpt import -> export gives every tensor bit for bit and a config.json that
#     reads back to the same model; import of the export -> export again is byte-identical;
#  3. bad folders (an unsupported or unknown config field, a shard missing, a tensor in the
#     wrong shard) are refused with errors naming the file and the field or tensor.
set -euo pipefail
grit=$1 dump=$2 py=$3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

for case in llama3 llama_tied falcon7b falcon40b; do
  hf=$tmp/$case
  "$py" "$here/hf_family_ref.py" make $case "$hf"
  "$dump" "$hf.train.json" "$tmp/dump-$case" 1 >/dev/null
  "$py" "$here/hf_family_ref.py" logits "$hf" "$tmp/dump-$case" || fail=1
  "$grit" ckpt import "$hf" "$tmp/imp-$case" >/dev/null
  "$grit" ckpt export "$tmp/imp-$case" 0 "$tmp/exp-$case" >/dev/null
  "$py" "$here/hf_family_ref.py" same "$hf" "$tmp/exp-$case" || fail=1
  "$grit" ckpt import "$tmp/exp-$case" "$tmp/imp2-$case" >/dev/null
  "$grit" ckpt export "$tmp/imp2-$case" 0 "$tmp/exp2-$case" >/dev/null
  for f in model.safetensors config.json; do
    cmp "$tmp/exp-$case/$f" "$tmp/exp2-$case/$f" || { echo "FAIL: $case: re-export $f differs"; fail=1; }
  done
done

expect_refusal() { # what folder pattern
  local what=$1 dir=$2 pat=$3 rc=0 out
  out=$("$grit" ckpt import "$dir" "$tmp/imp-bad" 2>&1) || rc=$?
  if [ $rc -eq 0 ] || ! grep -qF -- "$pat" <<<"$out"; then
    echo "FAIL: $what: rc=$rc, expected an error with: $pat"; echo "  got: $out"; fail=1
  else
    echo "refused as expected ($what): $out"
  fi
  rm -rf "$tmp/imp-bad"
}
bad=$tmp/bad
cp -r "$tmp/llama3" "$bad"
sed -i 's/"rope_type": "llama3"/"rope_type": "yarn"/' "$bad/config.json"
expect_refusal "rope_scaling yarn" "$bad" "$bad/./config.json: field 'rope_scaling.rope_type': \"yarn\" is not supported"
cp "$tmp/llama3/config.json" "$bad/config.json"
sed -i 's/"hidden_act": "silu"/"hidden_act": "silu", "sliding_window": 4096/' "$bad/config.json"
expect_refusal "unknown field" "$bad" "field 'sliding_window': not a field grit knows"
cp "$tmp/llama3/config.json" "$bad/config.json"
rm "$bad/model-00002-of-00003.safetensors"
expect_refusal "missing shard" "$bad" "model-00002-of-00003.safetensors: missing"
rm -rf "$bad"; cp -r "$tmp/falcon40b" "$bad"
sed -i 's/"alibi": false/"alibi": true/' "$bad/config.json"
expect_refusal "alibi" "$bad" "field 'alibi': ALiBi is not supported"
cp "$tmp/falcon40b/config.json" "$bad/config.json"
sed -i 's/"transformer.ln_f.weight": "model-00002-of-00002.safetensors"/"transformer.ln_f.weight": "model-00001-of-00002.safetensors"/' "$bad/model.safetensors.index.json"
expect_refusal "tensor in the wrong shard" "$bad" "tensor 'transformer.ln_f.weight' is in model-00002-of-00002.safetensors, the index says model-00001-of-00002.safetensors"
rm -rf "$bad"; cp -r "$tmp/falcon40b" "$bad"
sed -i 's/"tie_word_embeddings": false/"tie_word_embeddings": true/' "$bad/config.json"
expect_refusal "tied config, separate head" "$bad" "tensor 'lm_head.weight': this model ties the LM head"
[ $fail -eq 0 ] && echo "hf_family: all checks passed"
exit $fail
