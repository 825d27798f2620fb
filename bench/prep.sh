#!/usr/bin/env bash
# prep.sh - grit prep throughput on the Debian HTML corpus (debian-handbook in
# 26 languages + installation-guide-amd64 in 19: ~4,900 pages, ~86 MB of HTML):
# documents/s and MB/s per stage and end to end on 2 threads, the fraction
# of time in each stage, and extraction speed against trafilatura's published
# figure (~23 documents/s per core, as quoted in datatrove/RefinedWeb write-ups;
# a comparison with a published number, not a same-machine measurement:
# trafilatura cannot be installed here).
#
# Per-stage rates are per core: documents (or input MB) over the thread-seconds
# spent in that stage, summed over both threads. End to end is wall clock.
# Runs twice: MinHash refinedweb (20x450, the default) and cheap (14x8).
# Override: THREADS (default 2), GRIT, TOKENIZER, MINHASH ("refinedweb cheap").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
grit=${GRIT:-$root/build/grit}
THREADS=${THREADS:-2}
TOKENIZER=${TOKENIZER:-$root/tests/data/gpt-neox-20b-tokenizer.json}
corpus=(/usr/share/doc/debian-handbook/html /usr/share/doc/installation-guide-amd64)
for c in "${corpus[@]}"; do
  [ -d "$c" ] || { echo "bench: $c missing: make deps installs debian-handbook and installation-guide-amd64" >&2; exit 1; }
done
tmp=$(mktemp -d /tmp/grit-prep-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

for mh in ${MINHASH:-refinedweb cheap}; do
  out=$tmp/$mh
  # warm the page cache so the first run does not measure the disk
  cat $(find "${corpus[@]}" -name '*.html') > /dev/null
  t0=$(date +%s.%N)
  "$grit" prep -o "$out" --threads "$THREADS" --minhash "$mh" --tokenizer "$TOKENIZER" \
    --quiet "${corpus[@]}"
  t1=$(date +%s.%N)
  python3 - "$out/report.json" "$t0" "$t1" "$THREADS" "$mh" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
wall = float(sys.argv[3]) - float(sys.argv[2])
threads, mh = int(sys.argv[4]), sys.argv[5]
st = rep["stages"]
order = ["read", "extract", "langid", "filter", "signature", "dedup", "tokenize"]
total = sum(st[s]["seconds"] for s in order if s in st)
print(f"\ngrit prep, {threads} threads, MinHash {mh}: {st['read']['docs_in']} pages, "
      f"{st['read']['bytes_in'] / 1e6:.1f} MB in, {rep['output']['tokens']} tokens out")
print(f"{'stage':<10} {'docs in':>8} {'docs out':>8} {'docs/s/core':>12} {'MB/s/core':>10} {'time %':>7}")
for s in order:
    x = st[s]
    sec = x["seconds"]
    print(f"{s:<10} {x['docs_in']:>8} {x['docs_out']:>8} {x['docs_in'] / sec:>12.0f} "
          f"{x['bytes_in'] / 1e6 / sec:>10.2f} {100 * sec / total:>6.1f}%")
n, mb = st["read"]["docs_in"], st["read"]["bytes_in"] / 1e6
print(f"end to end (wall, {threads} threads, incl. tokenizer load and fsyncs): {wall:.2f} s, "
      f"{n / wall:.0f} docs/s, {mb / wall:.2f} MB/s")
ex = st["extract"]["docs_in"] / st["extract"]["seconds"]
print(f"extraction: {ex:.0f} docs/s per core vs trafilatura's published ~23 docs/s per core: "
      f"{ex / 23:.0f}x (published figure, other machine and other pages)")
print("drops:", rep["drops"])
PY
done
