#!/usr/bin/env bash
# gen_family.sh GRIT GEN_DUMP PYTHON - greedy generation with the KV cache for every family:
# for Llama (GQA, llama3 rope; tied with biases and linear rope) and Falcon (7B-style
# multi-query with one norm; 40B-style grouped kv with two norms), a PyTorch-written Hugging
# Face folder is imported (grit ckpt import), 12 tokens are generated greedily after a prompt
# and compared with a PyTorch greedy loop (gen_ref.py): the same ids, logits within 1e-5.
set -euo pipefail
grit=$1 dump=$2 py=$3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
for case in llama3 llama_tied falcon7b falcon40b; do
  "$py" "$here/hf_family_ref.py" make $case "$tmp/$case" > /dev/null
  "$grit" ckpt import "$tmp/$case" "$tmp/imp-$case" > /dev/null
  "$dump" "$tmp/imp-$case" "$tmp/$case.gen.safetensors" 12 5 17 3 99 42 1 8
  "$py" "$here/gen_ref.py" "$tmp/$case" "$tmp/$case.gen.safetensors" || fail=1
done
[ $fail -eq 0 ] && echo "gen_family: all families generate as the PyTorch greedy loop"
exit $fail
