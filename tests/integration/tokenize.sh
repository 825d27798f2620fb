#!/usr/bin/env bash
# tokenize.sh GRIT TOK_CHECK PYTHON TOKENIZER_JSON - `grit tokenize` end to end.
#
# A small corpus (JSONL with an empty and a special-token document, plain
# text files, a subdirectory, non-ASCII text) is tokenized on 2 threads, then:
#  - the files are read back by the Python reader that follows Megatron's code
#    path (tests/reference/indexed_megatron.py);
#  - every document ends with the eod token (0 for GPT-NeoX-20B) and its other
#    ids equal encoding that document on its own (grit-tok-check, whose
#    tokenizer is parity-tested against Hugging Face's);
#  - 1 thread gives byte-identical files (the output keeps input order);
#  - bad inputs fail with file:line and what was wrong, leaving no output.
set -euo pipefail
grit=$1 check=$2 py=$3 neox=$4
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

mkdir -p "$tmp/corpus/sub" "$tmp/docs"
"$py" - "$tmp/corpus" <<'PY'
import json, random, sys
d = sys.argv[1]
random.seed(7)
words = ("the quick brown fox jumps over a lazy dog , . ! Grüße naïve café 日本語のテキスト "
         "русский текст 12345 3.14 it's we'll 🎉 \t\n  ").split(" ")
def text(n):
    return " ".join(random.choice(words) for _ in range(n))
with open(d + "/b.jsonl", "w") as f:
    for i in range(400):
        t = text(random.randint(1, 120))
        if i == 5: t = ""
        if i == 9: t = "before<|endoftext|>after"
        f.write(json.dumps({"id": i, "text": t}, ensure_ascii=(i % 2 == 0)) + "\n")
        if i == 17: f.write("\n")
open(d + "/a.txt", "w").write(text(3000))
open(d + "/sub/c.txt", "w").write("second level\n" + text(50))
open(d + "/sub/empty.txt", "w").write("")
open(d + "/.hidden.txt", "w").write("never read")
PY
out=$("$grit" tokenize "$tmp/corpus" -o "$tmp/out" --tokenizer "$neox" --threads 2 2>&1) ||
  { echo "$out"; exit 1; }
echo "$out" | tail -1
grep -q "MB/s" <<<"$out" || fail "no MB/s in the output"

# documents as Python sees them, in grit's order: names sorted, dot-files skipped
ndocs=$("$py" - "$tmp/corpus" "$tmp/docs" <<'PY'
import json, os, sys
src, out = sys.argv[1], sys.argv[2]
docs = []
def walk(p):
    for name in sorted(os.listdir(p), key=lambda s: s.encode()):
        if name.startswith("."): continue
        q = os.path.join(p, name)
        if os.path.isdir(q): walk(q)
        elif name.endswith(".jsonl") or name.endswith(".json"):
            for line in open(q, encoding="utf-8"):
                if line.strip(): docs.append(json.loads(line)["text"].encode())
        else:
            docs.append(open(q, "rb").read())
walk(src)
docs = [d for d in docs if d]
for i, d in enumerate(docs):
    open(f"{out}/doc{i}.txt", "wb").write(d)
print(len(docs))
PY
)
grep -q "$ndocs documents" <<<"$out" || fail "summary: expected $ndocs documents: $out"
"$py" "$here/../reference/indexed_megatron.py" dump "$tmp/out" > "$tmp/dump.spec"
"$py" - "$tmp/dump.spec" "$tmp/docs" "$ndocs" <<'PY' || fail "Megatron-path reader: layout or eod wrong"
import numpy as np, sys
lines = open(sys.argv[1]).read().split("\n")
seqs = [l for l in lines if l.startswith("S")]
ends = sum(1 for l in lines if l == "D")
n = int(sys.argv[3])
assert len(seqs) == n, f"{len(seqs)} sequences, expected {n}"
assert ends == n, f"{ends} document ends"
for i, l in enumerate(seqs):
    ids = [int(x) for x in l[1:].split()]
    assert ids[-1] == 0, f"document {i} does not end with eod (0): {ids[-3:]}"
    np.array(ids[:-1], dtype="<u4").tofile(f"{sys.argv[2]}/doc{i}.neox.ids")
print(f"ok   Megatron-path reader: {n} documents, each ending with eod")
PY
bases=()
for i in $(seq 0 $((ndocs - 1))); do bases+=("doc$i"); done
if "$check" check neox "$neox" "$tmp/docs" "${bases[@]}" > "$tmp/check.log" 2>&1; then
  echo "ok   ids equal per-document encoding + eod ($ndocs documents)"
else
  tail -20 "$tmp/check.log"; fail "ids differ from encoding each document on its own"
fi

"$grit" tokenize "$tmp/corpus" -o "$tmp/one" --tokenizer "$neox" --threads 1 --quiet
if cmp -s "$tmp/out.bin" "$tmp/one.bin" && cmp -s "$tmp/out.idx" "$tmp/one.idx"; then
  echo "ok   1 and 2 threads byte-identical"
else
  fail "1 thread and 2 threads give different files"
fi

# --field and --format
printf '{"body": "hello world"}\n{"body": "again"}\n' > "$tmp/f.data"
"$grit" tokenize "$tmp/f.data" -o "$tmp/f" --tokenizer "$neox" --format jsonl --field body --quiet ||
  fail "--format jsonl --field body refused"
[ "$("$py" "$here/../reference/indexed_megatron.py" dump "$tmp/f" | grep -c '^S')" = 2 ] ||
  fail "--field body: expected 2 documents"

# errors: file:line and what, exit 1, no output files
expect_error() { # name pattern args...
  local name=$1 pat=$2; shift 2
  local o rc=0
  o=$("$grit" tokenize "$@" -o "$tmp/bad" --tokenizer "$neox" --quiet 2>&1) || rc=$?
  if [ "$rc" -ne 1 ] || ! grep -qF -- "$pat" <<<"$o"; then
    fail "$name: rc=$rc, expected '$pat' in: $o"
  elif ls "$tmp" | grep '^bad\.' > /dev/null; then
    fail "$name: output files left behind"
  else
    echo "ok   $name: $o"
  fi
}
printf '{"text": "fine"}\n{"text": "fine"}\n{"text": broken}\n' > "$tmp/bad1.jsonl"
expect_error "bad JSON" "bad1.jsonl:3: not valid JSON" "$tmp/bad1.jsonl"
printf '{"text": "fine"}\n{"txt": "x"}\n' > "$tmp/bad2.jsonl"
expect_error "missing field" 'bad2.jsonl:2: expected a field "text"' "$tmp/bad2.jsonl"
printf '{"text": 5}\n' > "$tmp/bad3.jsonl"
expect_error "not a string" 'bad3.jsonl:1: field "text": expected a string' "$tmp/bad3.jsonl"
printf '[1, 2]\n' > "$tmp/bad4.jsonl"
expect_error "not an object" "bad4.jsonl:1: expected a JSON object" "$tmp/bad4.jsonl"
expect_error "missing file" "nope.txt: No such file" "$tmp/nope.txt"
# invalid UTF-8: U+FFFD by default (counted in the summary, same ids as the replaced text);
# --byte-exact refuses a byte NeoX has no token for, naming file and byte, writing nothing
printf 'world\xffhello \xe2\x82 end' > "$tmp/inv.txt"
printf 'world\xef\xbf\xbdhello \xef\xbf\xbd end' > "$tmp/rep.txt"
o=$("$grit" tokenize "$tmp/inv.txt" -o "$tmp/inv" --tokenizer "$neox" --threads 1 2>&1) ||
  fail "invalid UTF-8 refused by default: $o"
grep -q "3 bytes of invalid UTF-8 encoded as U+FFFD" <<<"$o" || fail "no replaced-bytes count in: $o"
"$grit" tokenize "$tmp/rep.txt" -o "$tmp/rep" --tokenizer "$neox" --threads 1 --quiet
cmp -s "$tmp/inv.bin" "$tmp/rep.bin" && echo "ok   invalid UTF-8 tokenized as U+FFFD, counted" ||
  fail "invalid UTF-8: ids differ from the U+FFFD-replaced text"
expect_error "byte-exact, byte without token" "inv.txt: byte 0xFF at offset 5 has no token" \
  "$tmp/inv.txt" --byte-exact
o=$("$grit" tokenize "$tmp/corpus" -o "$tmp/x" --tokenizer "$tmp/none.json" 2>&1) && fail "missing tokenizer accepted"
grep -q "none.json" <<<"$o" || fail "missing tokenizer: message lacks the file: $o"

if [ "$fails" -eq 0 ]; then echo "tokenize: all checks passed"; else echo "tokenize: $fails failure(s)"; fi
[ "$fails" -eq 0 ]
