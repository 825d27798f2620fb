# ckpt_lib.sh GRIT - setup and helpers for the checkpoint integration tests (sourced).
# Sets grit (the binary), cfg (tests/configs/ckpt.json) and tmp (a scratch directory
# removed when the test exits, whatever happens).
grit=$1
cfg=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/configs/ckpt.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
metrics_core() { sed -E 's/,"tokens_per_s".*//' "$1"; }

# reference: the uninterrupted run every other run must equal bit for bit
run_reference() {
  "$grit" train "$cfg" --run-dir "$tmp/ref" --quiet
}

# same_as_reference DIR NAME: final weights and the loss curve equal the reference's
same_as_reference() {
  local d=$1 name=$2
  cmp -s "$tmp/ref/model.safetensors" "$d/model.safetensors" ||
    fail "$name: final weights differ from the uninterrupted run"
  diff -q <(metrics_core "$tmp/ref/metrics.jsonl") <(metrics_core "$d/metrics.jsonl") >/dev/null ||
    fail "$name: metrics.jsonl (step, loss, grad_norm, lr, tokens) differs from the uninterrupted run"
  if ls "$d/ckpt" | grep '\.tmp$' > /dev/null; then fail "$name: a .tmp entry was left in $d/ckpt"; fi
  "$grit" ckpt verify "$d" >/dev/null || fail "$name: grit ckpt verify failed after the run"
}

# flip_byte FILE: xor the byte in the middle of FILE with 0x01
flip_byte() {
  python3 - "$1" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 1
open(p, "wb").write(bytes(b))
PY
}

finish() {
  if [ "$fails" -eq 0 ]; then echo "$1: all cases passed"; else echo "$1: $fails failure(s)"; fi
  [ "$fails" -eq 0 ]
}
