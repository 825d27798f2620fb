#!/usr/bin/env bash
# run_bad_files.sh - broken tokenizer files are refused by `grit tokenize`
# with a message naming the file and the field, exit 1, and nothing written.
#
#   run_bad_files.sh GRIT WORKDIR
#
# The files come from tests/tok/variants.py (a small valid tokenizer.json and
# copies broken in one field each); the valid one must tokenize.
set -euo pipefail
grit=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
python3 "$here/variants.py" - - "$work"
printf '{"text": "ab ba abab"}\n' > "$work/in.jsonl"
rc=0
expect() { # FILE FIELD-REGEX
  local f=$work/$1 out
  set +e
  out=$("$grit" tokenize "$work/in.jsonl" -o "$work/out_$1" --tokenizer "$f" --eod a --quiet 2>&1)
  local code=$?
  set -e
  if [ $code -ne 1 ] || ! grep -qF "$f" <<< "$out" || ! grep -qE "$2" <<< "$out"; then
    echo "FAIL $1: exit $code, expected 1 and a message naming $f and /$2/; got: $out"
    rc=1
  elif ls "$work"/out_"$1"* >/dev/null 2>&1; then
    echo "FAIL $1: output files were left behind"
    rc=1
  else
    echo "ok   $1: $out"
  fi
}
expect bad_model.json 'model\.type: expected "BPE".*Unigram'
expect bad_merge.json "model\.merges\[1\]: token 'zz' is not in model\.vocab"
expect bad_merged.json "model\.merges\[0\]: the merged token 'ba' is not in model\.vocab"
expect bad_regex.json 'pre_tokenizer\.pretokenizers\[0\]\.pattern\.Regex: invalid regex'
expect bad_normalizer.json "normalizer\.type: unknown normalizer 'Precompiled'"
expect bad_pretok.json "pre_tokenizer\.pretokenizers\[2\]\.type: unknown pre-tokenizer 'UnicodeScripts'"
expect bad_syntax.json ':1:[0-9]+:'
expect bad.model 'not a SentencePiece model'
if "$grit" tokenize "$work/in.jsonl" -o "$work/good" --tokenizer "$work/good.json" --eod a --quiet; then
  echo "ok   good.json tokenizes"
else
  echo "FAIL good.json: the valid file was refused"
  rc=1
fi
exit $rc
