#!/usr/bin/env bash
# ckpt_hf.sh GRIT DUMP PYTHON - checkpoints as Hugging Face tools see them:
#  1. safetensors validity of every checkpoint file (stand-alone checker);
#  2. PyTorch loads model.safetensors by HF names with the HF config.json and reproduces
#     grit's logits computed from the same checkpoint;
#  3. import of an HF folder (F32 and F16, with HF buffers) -> export gives the same tensors
#     bit for bit, and a corrupt or mismatched HF folder is refused with a clear error.
set -euo pipefail
grit=$1 dump=$2 py=$3
here=$(cd "$(dirname "$0")" && pwd)
cfg=$here/../configs/ckpt.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

"$grit" train "$cfg" --run-dir "$tmp/run" --quiet
step="$tmp/run/ckpt/step_00000012"
"$py" "$here/check_ckpt.py" valid "$step/model.safetensors" "$step/optimizer.safetensors" || fail=1

sed "s#\"seed\": 42#\"seed\": 42, \"init_from\": \"$step\"#" "$cfg" > "$tmp/from_ckpt.json"
"$dump" "$tmp/from_ckpt.json" "$tmp/dump" 1 >/dev/null
"$py" "$here/check_ckpt.py" logits "$step" "$tmp/dump" || fail=1

for kind in f32 f16; do
  "$py" "$here/check_ckpt.py" make-hf "$step" "$tmp/hf-$kind" $kind
  "$grit" ckpt import "$tmp/hf-$kind" "$tmp/imp-$kind"
  "$grit" ckpt export "$tmp/imp-$kind" 0 "$tmp/exp-$kind"
  "$py" "$here/check_ckpt.py" same-tensors "$tmp/hf-$kind/model.safetensors" "$tmp/exp-$kind/model.safetensors" || fail=1
done

# a wrong shape in an HF folder is refused, naming the tensor
sed -i 's/"intermediate_size": 256/"intermediate_size": 128/' "$tmp/hf-f32/config.json"
rc=0; out=$("$grit" ckpt import "$tmp/hf-f32" "$tmp/imp-bad" 2>&1) || rc=$?
if [ $rc -ne 1 ] || ! grep -q "tensor 'gpt_neox.layers.0.mlp.dense_h_to_4h.weight': shape \[256, 64\] in the file, the model needs \[128, 64\]" <<<"$out"; then
  echo "FAIL: mismatched HF folder: rc=$rc: $out"; fail=1
fi
[ $fail -eq 0 ] && echo "ckpt_hf: all checks passed"
exit $fail
