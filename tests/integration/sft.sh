#!/usr/bin/env bash
# sft.sh GRIT PYTHON - supervised fine-tuning end to end (docs/sft.md):
#  1. grit tokenize --sft renders chat and prompt/response JSONL with the template found in
#     tokenizer_config.json (ChatML) into tokens + a uint8 loss mask; a Python decoder checks
#     every example's text and that exactly the answers (with their end token) are masked in;
#  2. bad lines and an unrecognised chat_template are refused naming file:line and field;
#  3. fine-tuning from a Hugging Face Llama folder (PyTorch-written, sharded BF16) with packed
#     rows is deterministic; under grit launch with a kill injected at step 5 it resumes from
#     its checkpoint and ends bitwise equal to the uninterrupted run (weights and metrics);
#  4. the padded variant (pack false) runs and gives other weights (the comparison can fail);
#  5. the fine-tuned Llama runs through grit generate (deterministic greedy) and grit eval.
set -euo pipefail
grit=$1 py=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
core() { sed -E 's/,"tokens_per_s".*//' "$1"; }

"$py" "$here/sft_make.py" "$tmp"
"$grit" tokenize --sft --tokenizer "$tmp/tok/tokenizer.json" "$tmp/chat.jsonl" -o "$tmp/d" \
  2> "$tmp/tok.out" || { cat "$tmp/tok.out"; fail "grit tokenize --sft failed"; }
grep -q "template chatml" "$tmp/tok.out" || fail "auto template did not resolve to chatml: $(cat "$tmp/tok.out")"
"$py" "$here/sft_make.py" check "$tmp" "$tmp/d" || fail "tokens or mask differ from the ChatML rendering"

refuse() { # WHAT PATTERN ARGS...
  local what=$1 pat=$2 rc=0 out; shift 2
  out=$("$grit" tokenize --sft --tokenizer "$tmp/tok/tokenizer.json" -o "$tmp/bad" "$@" 2>&1) || rc=$?
  if [ $rc -eq 0 ] || ! grep -qF -- "$pat" <<<"$out"; then
    fail "$what: rc=$rc, expected an error with: $pat; got: $out"
  else
    echo "ok   refused ($what): $out"
  fi
  [ ! -e "$tmp/bad.bin" ] || fail "$what: output written despite the error"
}
printf '{"prompt": "a", "response": "b"}\n{"messages": [{"role": "robot", "content": "x"}]}\n' > "$tmp/bad1.jsonl"
refuse "bad role" "$tmp/bad1.jsonl:2: messages[0].role: expected \"system\", \"user\" or \"assistant\"" "$tmp/bad1.jsonl"
printf '{"prompt": "a"}\n' > "$tmp/bad2.jsonl"
refuse "no response" "$tmp/bad2.jsonl:1: expected \"messages\" (a list) or \"prompt\" and \"response\"" "$tmp/bad2.jsonl"
printf '{"messages": [{"role": "user", "content": "a"}]}\n' > "$tmp/bad3.jsonl"
refuse "no answer" "$tmp/bad3.jsonl:1: messages: expected at least one \"assistant\"" "$tmp/bad3.jsonl"
refuse "unknown template" "template 'jinja': expected one of auto, plain" --template jinja "$tmp/chat.jsonl"
cp "$tmp/tok/tokenizer_config.json" "$tmp/tc.json"
echo '{"chat_template": "{{ messages }}"}' > "$tmp/tok/tokenizer_config.json"
refuse "unrecognised chat_template" "$tmp/tok/tokenizer_config.json: chat_template: not one of the formats" "$tmp/chat.jsonl"
cp "$tmp/tc.json" "$tmp/tok/tokenizer_config.json"

# fine-tuning config: the HF folder's model, the SFT data, synchronous checkpoints every 3 steps
"$py" - "$tmp" <<'PY'
import json, sys
t = sys.argv[1]
c = json.load(open(f"{t}/hf.train.json"))
c["optim"] = {"micro_batch": 2, "grad_accum": 1, "seq_len": 128, "lr": 1e-3, "min_lr": 1e-4,
              "warmup_steps": 2, "total_steps": 8}
c["data"] = {"source": "sft", "paths": [f"{t}/d"], "split": "90,10,0", "pack": True}
c["checkpoint"] = {"interval_steps": 3, "keep_last": 2, "async": False}
json.dump(c, open(f"{t}/sft.json", "w"), indent=1)
c["data"]["pack"] = False
json.dump(c, open(f"{t}/pad.json", "w"), indent=1)
PY
"$grit" train "$tmp/sft.json" --run-dir "$tmp/a" --quiet
"$grit" train "$tmp/sft.json" --run-dir "$tmp/b" --quiet
grep -q '"event":"init_from"' "$tmp/a/events.jsonl" || fail "no init_from event: the run did not start from the HF folder"
cmp -s "$tmp/a/model.safetensors" "$tmp/b/model.safetensors" || fail "two identical SFT runs give different weights"
"$grit" launch --nodes 1 --spares 1 --run "$tmp/k" --hang-timeout 30 --backoff 0.1 --straggler-factor 0 \
  --inject kill:step=5 -- "$grit" train "$tmp/sft.json" --run-dir "$tmp/k" --quiet > "$tmp/k.out" 2>&1 ||
  { cat "$tmp/k.out"; fail "grit launch of the SFT run failed"; }
grep -q '"event":"detected"' "$tmp/k/events.jsonl" || fail "the injected kill was not detected"
grep -q '"event":"resume"' "$tmp/k/events.jsonl" || fail "the relaunched run did not resume from a checkpoint"
cmp -s "$tmp/a/model.safetensors" "$tmp/k/model.safetensors" ||
  fail "killed and resumed SFT run ends with different weights"
diff -q <(core "$tmp/a/metrics.jsonl") <(core "$tmp/k/metrics.jsonl") >/dev/null ||
  fail "killed and resumed SFT run has different metrics"
"$grit" train "$tmp/pad.json" --run-dir "$tmp/p" --quiet
cmp -s "$tmp/a/model.safetensors" "$tmp/p/model.safetensors" &&
  fail "padded and packed runs give the same weights (the comparison cannot fail)"
# the fine-tuned Llama through grit generate (KV cache, GQA) and grit eval
g1=$("$grit" generate --checkpoint "$tmp/a" --tokenizer "$tmp/tok/tokenizer.json" --threads 2 \
     --max-tokens 8 --ignore-eod --quiet "the cat") || fail "grit generate on the fine-tuned Llama failed"
g2=$("$grit" generate --checkpoint "$tmp/a" --tokenizer "$tmp/tok/tokenizer.json" --threads 2 \
     --max-tokens 8 --ignore-eod --quiet "the cat") || true
[ "$g1" = "$g2" ] && [[ "$g1" == "the cat"?* ]] || fail "greedy generation: '$g1' then '$g2'"
c1=$("$grit" generate --checkpoint "$tmp/a" --tokenizer "$tmp/tok/tokenizer.json" --threads 2 \
     --max-tokens 8 --chat auto "the cat" 2> "$tmp/chat.err") || { cat "$tmp/chat.err"; fail "generate --chat auto failed"; }
# <|im_start|> u s er \n the Ġ c a t <|im_end|> \n <|im_start|> a s s i s t an t \n
grep -q "prompt 22 tokens" "$tmp/chat.err" || fail "--chat: the ChatML prompt is not the 22 tokens expected: $(cat "$tmp/chat.err")"
rc=0; out=$("$grit" generate --checkpoint "$tmp/a" --tokenizer "$tmp/tok/tokenizer.json" --chat jinja x 2>&1) || rc=$?
{ [ $rc -ne 0 ] && grep -q "template 'jinja'" <<<"$out"; } || fail "--chat jinja accepted: rc=$rc $out"
"$grit" eval --checkpoint "$tmp/a" --data "$tmp/d" --threads 2 > "$tmp/eval.out" 2>&1 ||
  { cat "$tmp/eval.out"; fail "grit eval on the fine-tuned Llama failed"; }
echo "ok   generate: $(tr '\n' ' ' <<<"$g1" | head -c 60); eval: $(grep -io 'perplexity[^,]*' "$tmp/eval.out" | head -1)"
[ $fails -eq 0 ] && echo "ok   SFT from an HF Llama folder: deterministic, kill at step 5 under grit launch + resume bitwise equal, padded variant runs"
[ $fails -eq 0 ]
