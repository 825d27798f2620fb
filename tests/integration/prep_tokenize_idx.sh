#!/usr/bin/env bash
# prep_tokenize_idx.sh GRIT PYTHON - grit prep and grit tokenize write the same dataset for the
# same documents, byte for byte (.bin and .idx), in the layout of Megatron's preprocess_data:
# one sequence per document, its end-of-document token appended to it (read back with the
# Megatron-style reader, tests/reference/indexed_megatron.py). prep's clean-text output (no
# tokenizer) gives the documents; tokenizing them with grit tokenize must reproduce prep's
# tokens/NNNNN.{bin,idx} shard by shard.
set -euo pipefail
grit=$1 py=$2
here=$(cd "$(dirname "$0")" && pwd)
tok=$here/../data/gpt-neox-20b-tokenizer.json
hb=/usr/share/doc/debian-handbook/html/en-US
[ -d "$hb" ] || { echo "prep_tokenize_idx: $hb missing (make deps installs debian-handbook)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(--threads 2 --files-per-shard 48 --minhash cheap --quiet)
"$grit" prep -o "$tmp/text" "${args[@]}" "$hb"
"$grit" prep -o "$tmp/tok" "${args[@]}" --tokenizer "$tok" "$hb"
n=0 fail=0 docs=0
for j in "$tmp"/text/text/*.jsonl; do
  s=$(basename "$j" .jsonl)
  [ -s "$j" ] || continue
  "$grit" tokenize "$j" -o "$tmp/t$s" --tokenizer "$tok" --threads 2 --quiet
  for ext in bin idx; do
    if ! cmp "$tmp/t$s.$ext" "$tmp/tok/tokens/$s.$ext"; then
      echo "FAIL shard $s: grit tokenize's .$ext differs from grit prep's"; fail=1
    fi
  done
  k=$("$py" "$here/../reference/indexed_megatron.py" dump "$tmp/tok/tokens/$s" | "$py" -c '
import sys
groups = [g for g in sys.stdin.read().split("D\n") if g]
for i, g in enumerate(groups):
    lines = g.splitlines()
    if len(lines) != 1 or not lines[0].startswith("S ") or lines[0].split()[-1] != "0":
        sys.exit(f"document {i}: {len(lines)} sequences, expected one ending in the eod id 0")
print(len(groups))') || { echo "FAIL shard $s: not one sequence per document"; fail=1; continue; }
  want=$(grep -c . "$j")
  [ "$k" = "$want" ] || { echo "FAIL shard $s: $k documents in the .idx, $want in the text"; fail=1; }
  docs=$((docs + k)) n=$((n + 1))
done
[ "$n" -ge 2 ] || { echo "FAIL: expected at least 2 non-empty shards, got $n"; exit 1; }
[ $fail -eq 0 ] && echo "ok   $n shards, $docs documents: prep and tokenize byte-identical, one sequence per document"
exit $fail
