#!/usr/bin/env bash
# run_spm.sh - SentencePiece .model files (src/data/spm.cc through hftok):
# grit's ids vs Debian's spm_encode and Python sentencepiece, line by line.
#
#   run_spm.sh GRIT_TOK_CHECK PYTHON WORKDIR
#
# Trains two small models in the test with spm_train on the multilingual
# corpus (BPE with byte_fallback, as Llama 2's; and unigram), then encodes
# the adversarial set (invalid UTF-8 included: grit replaces it with U+FFFD,
# the references get the U+FFFD-decoded text) and Japanese text, which the
# models partly do not cover (byte fallback, unk). Also checks BOS from
# BPE_ADD_SPECIAL against spm_encode --extra_options=bos.
set -euo pipefail
check=$1 py=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
for t in spm_train spm_encode; do
  command -v $t >/dev/null || { echo "SKIP: $t not installed (Debian package sentencepiece)"; exit 77; }
done
"$py" -c 'import sentencepiece' 2>/dev/null || { echo "SKIP: $py has no sentencepiece (python3-sentencepiece)"; exit 77; }
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
python3 "$here/make_corpus.py" "$work" 150000
cat "$work"/{en,de,ru,zh}.raw > "$work/train.txt"
cat "$work/adversarial.raw" "$work/ja.raw" > "$work/test.raw"
"$py" - "$work/test.raw" "$work/test.txt" <<'PY'
import sys
open(sys.argv[2], "w", encoding="utf-8").write(open(sys.argv[1], "rb").read().decode("utf-8", "replace"))
PY
rc=0
for kind in bpe unigram; do
  m=$work/$kind
  spm_train --input="$work/train.txt" --model_prefix="$m" --vocab_size=2000 --model_type=$kind \
    --byte_fallback=$([ $kind = bpe ] && echo true || echo false) --character_coverage=0.995 \
    --minloglevel=2 > "$work/train.log" 2>&1 || { cat "$work/train.log"; exit 1; }
  spm_encode --model="$m.model" --output_format=id < "$work/test.txt" > "$work/$kind.spm.ids"
  spm_encode --model="$m.model" --output_format=id --extra_options=bos < "$work/test.txt" > "$work/$kind.spmbos.ids"
  "$py" - "$m.model" "$work/test.txt" "$work/$kind.py.ids" <<'PY'
import sys, sentencepiece
sp = sentencepiece.SentencePieceProcessor(model_file=sys.argv[1])
lines = open(sys.argv[2], encoding="utf-8").read().split("\n")
if lines and lines[-1] == "":
    lines.pop()
with open(sys.argv[3], "w") as f:
    for line in lines:
        f.write(" ".join(map(str, sp.encode(line))) + "\n")
PY
  "$check" lines "$m.model" "$work/test.raw" > "$work/$kind.grit.ids"
  TOK_CHECK_ADD_SPECIAL=1 "$check" lines "$m.model" "$work/test.raw" > "$work/$kind.gritbos.ids"
  for ref in spm py spmbos; do
    g=$work/$kind.grit.ids
    [ $ref = spmbos ] && g=$work/$kind.gritbos.ids
    if cmp -s "$g" "$work/$kind.$ref.ids"; then
      echo "ok   $kind: grit == $ref ($(wc -l < "$g") lines, $(wc -w < "$g") ids)"
    else
      echo "FAIL $kind: grit != $ref; first differing lines:"
      diff "$g" "$work/$kind.$ref.ids" | head -6
      rc=1
    fi
  done
done
exit $rc
