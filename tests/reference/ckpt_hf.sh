#!/usr/bin/env bash
# ckpt_hf.sh GRIT DUMP PYTHON - checkpoints as Hugging Face tools see them:
#  1. safetensors validity of every checkpoint file (stand-alone checker);
#  2. PyTorch loads model.safetensors by HF names with the HF config.json and reproduces
#     grit's logits computed from the same checkpoint;
#  3. import of an HF folder (F32 and F16, with HF buffers) -> export gives the same tensors
#     bit for bit, and a corrupt or mismatched HF folder is refused with a clear error;
#  4. export --dtype bf16: PyTorch's bfloat16 rounding of every F32 weight, imported back.
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

# export in bf16: every tensor PyTorch's own float32 -> bfloat16 rounding of the F32 master
# weights, config.json says bfloat16, and the folder imports back (widened) to those values
"$grit" ckpt export "$tmp/run" 12 "$tmp/exp-bf16" --dtype bf16 > /dev/null &&
  "$grit" ckpt import "$tmp/exp-bf16" "$tmp/imp-bf16" > /dev/null &&
  "$grit" ckpt export "$tmp/imp-bf16" 0 "$tmp/exp-bf16-f32" > /dev/null &&
  "$py" - "$step/model.safetensors" "$tmp/exp-bf16" "$tmp/exp-bf16-f32/model.safetensors" <<'PY' || fail=1
import json, struct, sys, torch
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    hd = json.loads(b[8:8 + n]); hd.pop("__metadata__", None)
    dt = {"F32": torch.float32, "BF16": torch.bfloat16}
    return {k: torch.frombuffer(bytearray(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]),
                                dtype=dt[v["dtype"]]).reshape(v["shape"]) for k, v in hd.items()}
f32, bf, back = load(sys.argv[1]), load(sys.argv[2] + "/model.safetensors"), load(sys.argv[3])
cfg = json.load(open(sys.argv[2] + "/config.json"))
bad = [k for k in f32 if bf[k].dtype != torch.bfloat16 or not torch.equal(bf[k], f32[k].to(torch.bfloat16))
       or not torch.equal(back[k], bf[k].float())]
ok = not bad and set(bf) == set(f32) and cfg["torch_dtype"] == "bfloat16"
print(f"{'ok  ' if ok else 'FAIL:'} export --dtype bf16: {len(bf)} tensors, each torch's bfloat16 rounding of the F32 "
      f"weights{'' if not bad else ' except ' + ', '.join(bad[:3])}; torch_dtype {cfg['torch_dtype']}; re-imported "
      f"equal to the widened bf16")
sys.exit(0 if ok else 1)
PY
rc=0; out=$("$grit" ckpt export "$tmp/run" 12 "$tmp/exp-x" --dtype fp8 2>&1) || rc=$?
[ $rc -eq 2 ] && grep -q "expected f32 or bf16" <<<"$out" || { echo "FAIL: --dtype fp8: rc $rc: $out"; fail=1; }

# a wrong shape in an HF folder is refused, naming the tensor
sed -i 's/"intermediate_size": 256/"intermediate_size": 128/' "$tmp/hf-f32/config.json"
rc=0; out=$("$grit" ckpt import "$tmp/hf-f32" "$tmp/imp-bad" 2>&1) || rc=$?
if [ $rc -ne 1 ] || ! grep -q "tensor 'gpt_neox.layers.0.mlp.dense_h_to_4h.weight': shape \[256, 64\] in the file, the model needs \[128, 64\]" <<<"$out"; then
  echo "FAIL: mismatched HF folder: rc=$rc: $out"; fail=1
fi
[ $fail -eq 0 ] && echo "ckpt_hf: all checks passed"
exit $fail
