#!/usr/bin/env bash
# train_megatron.sh GRIT PYTHON TOKENIZER_JSON - training on tokenized .bin/.idx data.
#
# Tokenizes two small corpora with `grit tokenize`, trains a tiny GPT-NeoX on
# their 0.7/0.3 blend ("megatron" data source, Megatron's sample order), then
# kills the trainer with SIGKILL when it commits LATEST of its second
# checkpoint (GRIT_CKPT_FAULT=crash:latest@2), resumes, and requires the final
# model.safetensors and the loss curve to equal an uninterrupted run's bit
# for bit; metrics.jsonl must report epochs consumed. A single-prefix run
# also crashes and resumes (crash:latest@1).
set -euo pipefail
grit=$1 py=$2 neox=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
metrics_core() { sed -E 's/,"tokens_per_s":[^,]*,"step_time_s":[^,}]*//; s/,"ckpt_stall_s":[^,}]*//' "$1"; }

"$py" - "$tmp" <<'PY'
import json, random, sys
d = sys.argv[1]
random.seed(3)
a = "the cat sat on the mat and looked at the dog who was asleep by the fire".split()
b = "numbers one two three four five six seven eight nine ten eleven twelve".split()
for name, words, n in (("a", a, 150), ("b", b, 60)):
    with open(f"{d}/{name}.jsonl", "w") as f:
        for i in range(n):
            f.write(json.dumps({"text": " ".join(random.choice(words) for _ in range(random.randint(5, 60)))}) + "\n")
PY
for c in a b; do
  "$grit" tokenize "$tmp/$c.jsonl" -o "$tmp/$c" --tokenizer "$neox" --threads 2 --quiet
done

write_cfg() { # FILE DATA
  cat > "$1" <<JSON
{
  "model": {"hidden_size": 32, "num_layers": 2, "num_heads": 4, "intermediate_size": 64,
            "vocab_size": 50277, "rotary_pct": 0.25, "max_positions": 64},
  "optim": {"micro_batch": 2, "grad_accum": 2, "seq_len": 32, "lr": 3e-3, "min_lr": 3e-4,
            "warmup_steps": 2, "total_steps": 10},
  "data": $2,
  "checkpoint": {"interval_steps": 3, "keep_last": 2},
  "seed": 42,
  "threads": 2
}
JSON
}
write_cfg "$tmp/blend.json" "{\"source\": \"megatron\", \"paths\": [\"$tmp/a\", \"$tmp/b\"], \"weights\": [0.7, 0.3], \"split\": \"98,2,0\"}"
write_cfg "$tmp/one.json" "{\"source\": \"megatron\", \"paths\": [\"$tmp/a\"]}"

for case in "blend crash:latest@2" "one crash:latest@1"; do
  set -- $case; name=$1 fault=$2
  "$grit" train "$tmp/$name.json" --run-dir "$tmp/$name-ref" --quiet
  grep -q '"epochs":' "$tmp/$name-ref/metrics.jsonl" || fail "$name: metrics.jsonl lacks epochs"
  rc=0
  GRIT_CKPT_FAULT=$fault "$grit" train "$tmp/$name.json" --run-dir "$tmp/$name-crash" --quiet 2>"$tmp/err" || rc=$?
  [ $rc -eq 137 ] || { fail "$name: expected the injected SIGKILL (137), got $rc"; cat "$tmp/err"; continue; }
  "$grit" train "$tmp/$name.json" --run-dir "$tmp/$name-crash" --quiet ||
    { fail "$name: resume failed"; continue; }
  grep -q '"event":"resume"' "$tmp/$name-crash/events.jsonl" || fail "$name: the second run did not resume"
  if cmp -s "$tmp/$name-ref/model.safetensors" "$tmp/$name-crash/model.safetensors" &&
     diff -q <(metrics_core "$tmp/$name-ref/metrics.jsonl") <(metrics_core "$tmp/$name-crash/metrics.jsonl") >/dev/null; then
    echo "ok   $name: crashed ($fault), resumed, weights and losses bitwise equal; $(tail -1 "$tmp/$name-ref/metrics.jsonl" | grep -o '"epochs":[0-9.]*')"
  else
    fail "$name: resumed run differs from the uninterrupted one"
    diff <(metrics_core "$tmp/$name-ref/metrics.jsonl") <(metrics_core "$tmp/$name-crash/metrics.jsonl") | head -5
  fi
done
# a different seed gives different data order, hence different losses
"$grit" train "$tmp/one.json" --run-dir "$tmp/seed7" --seed 7 --quiet
cmp -s "$tmp/one-ref/model.safetensors" "$tmp/seed7/model.safetensors" && fail "seed 7 gave the same weights as seed 42"
# a missing prefix is a clear error before anything trains
write_cfg "$tmp/missing.json" "{\"source\": \"megatron\", \"paths\": [\"$tmp/nope\"]}"
rc=0; out=$("$grit" train "$tmp/missing.json" --run-dir "$tmp/missing" --quiet 2>&1) || rc=$?
{ [ $rc -eq 1 ] && grep -q "nope" <<<"$out"; } || fail "missing prefix: rc=$rc, $out"

if [ "$fails" -eq 0 ]; then echo "train_megatron: all checks passed"; else echo "train_megatron: $fails failure(s)"; fi
[ "$fails" -eq 0 ]
