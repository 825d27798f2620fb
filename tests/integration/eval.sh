#!/usr/bin/env bash
# eval.sh GRIT PYTHON TOKENIZER_JSON - `grit eval` against the PyTorch reference
# (tests/reference/eval_ref.py): a tiny GPT-NeoX is trained on tokenized text with three
# checkpoints; then its logits (--dump-logits), its windowed perplexity on the Megatron
# dataset, and every item of generated multiple-choice and cloze task files (with the
# accuracy and its standard error) must equal the reference's; --all must tabulate every
# checkpoint (CSV equal to the per-step JSON, an SVG plot that parses); bad task files
# must be clear errors naming the file, the line and the field.
set -uo pipefail
grit=$1 py=$2 neox=$3
ref=$(cd "$(dirname "$0")/../reference" && pwd)/eval_ref.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

"$py" - "$tmp/corpus.jsonl" <<'PY' || exit 1
import json, sys
paras = [p for f in ("GPL-3", "Apache-2.0", "GFDL-1.3") for p in
         open("/usr/share/common-licenses/" + f).read().split("\n\n") if len(p.split()) > 20]
with open(sys.argv[1], "w") as out:
    for p in paras:
        out.write(json.dumps({"text": " ".join(p.split())}) + "\n")
PY
"$grit" tokenize "$tmp/corpus.jsonl" -o "$tmp/corpus" --tokenizer "$neox" --threads 2 --quiet || exit 1
cat > "$tmp/train.json" <<JSON
{"model": {"hidden_size": 32, "num_layers": 2, "num_heads": 4, "intermediate_size": 64,
           "vocab_size": 50277, "rotary_pct": 0.25, "max_positions": 96},
 "optim": {"micro_batch": 2, "grad_accum": 1, "seq_len": 64, "lr": 1e-2, "min_lr": 1e-3,
           "warmup_steps": 2, "total_steps": 12},
 "data": {"source": "megatron", "paths": ["$tmp/corpus"], "split": "100,0,0"},
 "checkpoint": {"interval_steps": 4, "keep_last": 10}, "seed": 5, "threads": 2}
JSON
"$grit" train "$tmp/train.json" --run-dir "$tmp/run" --quiet || { echo "FAIL: training"; exit 1; }
step=$tmp/run/ckpt/step_00000012
ev() { "$grit" eval --checkpoint "$step" --threads 2 --quiet "$@"; }

# logits of a sequence (more than one forward piece of 128 positions would need a longer
# context: 90 tokens in one piece, the whole context)
ids=$("$py" -c 'import random; r=random.Random(1); print(",".join(str(r.randrange(50277)) for _ in range(90)))')
ev --ids "$ids" --dump-logits "$tmp/logits.npy" > "$tmp/ids.txt" || fail "--ids"
"$py" "$ref" logits "$step" "$ids" "$tmp/logits.npy" || fail "logits differ from the reference"
[ "$(wc -l < "$tmp/ids.txt")" = 92 ] || fail "--ids printed $(wc -l < "$tmp/ids.txt") lines, expected a header, 90 tokens and the total"

# windowed perplexity: 3 full windows of 40 and a short one
ev --data "$tmp/corpus" --seq-len 40 --max-tokens 150 --json > "$tmp/ppl.json" || fail "--data"
"$py" "$ref" ppl "$step" "$tmp/corpus" 40 150 "$tmp/ppl.json" || fail "perplexity differs from the reference"

# zero-shot tasks
"$py" "$ref" make-tasks "$tmp/corpus.jsonl" "$tmp" || exit 1
for kind in mc cloze; do
  ev --tokenizer "$neox" --task "$tmp/$kind.jsonl" --task-type $kind --details "$tmp/$kind.det" \
    --json > "$tmp/$kind.json" || { fail "--task $kind"; continue; }
  "$py" "$ref" task "$step" "$tmp/$kind.jsonl" $kind "$tmp/$kind.det" "$tmp/$kind.json" ||
    fail "$kind scores differ from the reference"
done

# every checkpoint: a table, CSV, plot
"$grit" eval --checkpoint "$tmp/run" --all --data "$tmp/corpus" --seq-len 40 --max-tokens 150 \
  --csv "$tmp/all.csv" --plot "$tmp/all.svg" --threads 2 --quiet > "$tmp/all.txt" || fail "--all"
"$grit" eval --checkpoint "$tmp/run" --all --data "$tmp/corpus" --seq-len 40 --max-tokens 150 \
  --json --threads 2 --quiet > "$tmp/all.json" || fail "--all --json"
"$py" - "$tmp" <<'PY' || fail "--all outputs disagree"
import csv, json, sys, xml.etree.ElementTree as ET
d = sys.argv[1]
rows = list(csv.DictReader(open(d + "/all.csv")))
js = [json.loads(l) for l in open(d + "/all.json")]
assert [int(r["step"]) for r in rows] == [4, 8, 12], rows
assert [j["step"] for j in js] == [4, 8, 12], js
for r, j in zip(rows, js):
    assert abs(float(r["loss"]) - j["loss"]) < 1e-12, (r, j)
last = json.load(open(d + "/ppl.json"))
assert abs(js[-1]["loss"] - last["loss"]) < 1e-12, (js[-1], last)
assert js[0]["loss"] > js[-1]["loss"], "training did not lower the loss"
svg = ET.parse(d + "/all.svg").getroot()
pts = [e for e in svg.iter() if e.tag.endswith("circle")]
assert len(pts) == 3, len(pts)
text = open(d + "/all.txt").read().split("\n")
assert len([l for l in text if l.strip()]) == 4, text
print("--all: 3 checkpoints; CSV, JSON, table and plot agree")
PY

# bad task files
bad() { # NAME CONTENT EXPECTED
  printf '%s\n' "$2" > "$tmp/bad_$1.jsonl"
  if ev --tokenizer "$neox" --task "$tmp/bad_$1.jsonl" --task-type mc > /dev/null 2> "$tmp/bad.err"; then
    fail "bad task '$1' was accepted"
  elif ! grep -qF -- "$3" "$tmp/bad.err"; then
    fail "bad task '$1': expected '$3' in: $(cat "$tmp/bad.err")"
  fi
}
bad notjson '{"context": "a", "choices": ["b", "c"], "gold": 0}
{"context": "a", "choices": ' "bad_notjson.jsonl:2:"
bad nogold '{"context": "a", "choices": ["b", "c"]}' "bad_nogold.jsonl:1: field 'gold'"
bad goldrange '{"context": "a", "choices": ["b", "c"], "gold": 2}' "field 'gold': expected the index of the right choice, 0 to 1"
bad choices '{"context": "a", "choices": "b", "gold": 0}' "field 'choices'"
bad choicetype '{"context": "a", "choices": ["b", 3], "gold": 0}' "field 'choices[1]'"
bad nocontext '{"choices": ["b", "c"], "gold": 0}' "field 'context'"
bad empty '' "no items"
"$grit" eval --checkpoint "$step" --ids 1 2> "$tmp/bad.err" && fail "one token accepted"
grep -q 'at least two tokens' "$tmp/bad.err" || fail "one token: $(cat "$tmp/bad.err")"
"$grit" eval --checkpoint "$step" --ids 1,99999 2> "$tmp/bad.err" && fail "an id past the vocabulary accepted"
grep -q 'below the vocabulary size' "$tmp/bad.err" || fail "big id: $(cat "$tmp/bad.err")"
"$grit" eval --checkpoint "$step" --text hi 2> "$tmp/bad.err"; [ $? = 2 ] || fail "--text without --tokenizer: expected exit 2"

[ $fails = 0 ] && echo "eval: all checks passed"
[ $fails = 0 ]
