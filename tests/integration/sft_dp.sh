#!/usr/bin/env bash
# sft_dp.sh GRIT PYTHON - SFT under data parallelism (mpirun --oversubscribe): the loss is the
# mean over the answer tokens of the whole global batch, so 1 rank x 2 micro-batches of 2 rows
# and 2 ranks x 1 micro-batch of 2 rows (the same global batch of 4 packed rows, whose answer
# tokens the ranks hold generally differ in number) give the same per-step loss and gradient norm and
# the same weights up to float summation order (tests/integration/dp_compare.py). The same
# for tensor parallel 2 (2 ranks, each with half the heads and a vocabulary slice: the
# vocabulary-parallel loss must leave the masked prompt tokens out exactly as the whole one).
set -euo pipefail
grit=$1 py=$2
here=$(cd "$(dirname "$0")" && pwd)
command -v mpirun >/dev/null || { echo "FAIL: mpirun not found (make deps installs openmpi-bin)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
"$py" "$here/sft_make.py" "$tmp" > /dev/null
"$grit" tokenize --sft --quiet --tokenizer "$tmp/tok/tokenizer.json" "$tmp/chat.jsonl" -o "$tmp/d"
"$py" - "$tmp" <<'PY'
import json, sys
t = sys.argv[1]
c = json.load(open(f"{t}/hf.train.json"))
c["optim"] = {"micro_batch": 2, "global_batch": 4, "seq_len": 128, "lr": 1e-3, "min_lr": 1e-4,
              "warmup_steps": 2, "total_steps": 5}
c["data"] = {"source": "sft", "paths": [f"{t}/d"], "split": "90,10,0", "pack": True}
c["threads"] = 1
json.dump(c, open(f"{t}/sft.json", "w"), indent=1)
c["parallel"] = {"tensor": 2}
json.dump(c, open(f"{t}/sft_tp2.json", "w"), indent=1)
PY
"$grit" train "$tmp/sft.json" --run-dir "$tmp/np1" --quiet
mpirun -np 2 "$grit" train "$tmp/sft.json" --run-dir "$tmp/np2" --quiet
mpirun -np 2 "$grit" train "$tmp/sft_tp2.json" --run-dir "$tmp/tp2" --quiet
fail=0
"$py" "$here/dp_compare.py" metrics "$tmp/np2" "$tmp/np1" 1e-5 || fail=1
"$py" "$here/dp_compare.py" weights "$tmp/np2" "$tmp/np1" 1e-4 || fail=1
[ $fail -eq 0 ] && echo "sft_dp: 2 ranks match 1 rank (answer-token mean over the global batch)"
"$py" "$here/dp_compare.py" metrics "$tmp/tp2" "$tmp/np1" 1e-5 || fail=1
"$py" "$here/dp_compare.py" weights "$tmp/tp2" "$tmp/np1" 1e-4 || fail=1
[ $fail -eq 0 ] && echo "sft_dp: tensor parallel 2 matches 1 rank (masked vocabulary-parallel loss)"
exit $fail
