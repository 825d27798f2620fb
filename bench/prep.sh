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
#
# Part 2 (ranks): the generated crawl of tests/integration/prep_make_corpus.py
# (FILES x PAGES pages, WARC.gz, planted duplicates) on 1, 2 and 4 MPI ranks of
# one thread each, from local files and from s3:// (a local Swift S3 server,
# scripts/s3-local.sh, when installed), dedup included (MinHash refinedweb):
# pages/s and MB/s per core (pages over the CPU seconds all ranks used, user +
# system, so an oversubscribed run is not flattered) and per wall second, and
# the dedup stage's memory per rank (report.json run.dedup_memory). Goal: >=
# 230 pages/s per core with dedup (10x trafilatura's published ~23).
# Override: THREADS (default 2), GRIT, TOKENIZER, MINHASH ("refinedweb cheap"),
# PART ("stages ranks"), RANKS ("1 2 4"), FILES (16), PAGES (300), REPEAT (3: medians).
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

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
case " ${PART:-stages ranks} " in *" stages "*) ;; *) MINHASH=none ;; esac
for mh in ${MINHASH:-refinedweb cheap}; do
  [ "$mh" = none ] && break
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

# ---- part 2: ranks, local and s3:// input ---------------------------------------
case " ${PART:-stages ranks} " in *" ranks "*) ;; *) exit 0 ;; esac
command -v mpirun >/dev/null || { echo "bench: mpirun missing (openmpi-bin)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
python3 "$root/tests/integration/prep_make_corpus.py" "$tmp/gen" "${FILES:-16}" "${PAGES:-300}"
inputs=("local $tmp/gen/crawl")
S3DIR=
if command -v swift-proxy-server >/dev/null && "$grit" s3 --help >/dev/null 2>&1; then
  S3DIR=$("$root/scripts/s3-local.sh" start "$tmp/s3")
  trap '"$root/scripts/s3-local.sh" stop "$S3DIR" >/dev/null 2>&1; rm -rf "$tmp"' EXIT
  # shellcheck disable=SC1091
  . "$S3DIR/env"
  for f in "$tmp"/gen/crawl/*.warc.gz; do "$grit" s3 put "$f" "s3://ckpt/bench/$(basename "$f")" >/dev/null; done
  inputs+=("s3 s3://ckpt/bench/")
else
  echo "bench: no Swift S3 server installed: s3:// input skipped"
fi
for inp in "${inputs[@]}"; do
  read -r kind src <<<"$inp"
  for n in ${RANKS:-1 2 4}; do
    for rep in $(seq 1 "${REPEAT:-3}"); do
      out=$tmp/r_${kind}_${n}_$rep
      /usr/bin/time -f "%e %U %S" -o "$tmp/time" mpirun --bind-to none -np "$n" "$grit" prep -o "$out" \
        --threads 1 --minhash refinedweb --tokenizer "$TOKENIZER" --quiet "$src"
      echo "$kind $n $(cat "$tmp/time") $out" >> "$tmp/runs"
      [ "$rep" -lt "${REPEAT:-3}" ] && rm -rf "$out"
    done
  done
done
python3 - "$tmp/runs" "$(nproc)" <<'PY'
import json, statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
ncpu = int(sys.argv[2])
print(f"\ngrit prep on MPI ranks (1 thread each, MinHash refinedweb, tokenized), medians of "
      f"{len(rows) // len({(r[0], r[1]) for r in rows})} runs; per core = over CPU seconds used")
print(f"{'input':<6} {'ranks':>5} {'pages':>6} {'MB':>6} {'wall s':>7} {'pages/s':>8} "
      f"{'pages/s/core':>13} {'MB/s/core':>10} {'dedup MB/rank (max)':>20}")
for key in sorted({(r[0], int(r[1])) for r in rows}):
    rs = [r for r in rows if (r[0], int(r[1])) == key]
    wall = statistics.median(float(r[2]) for r in rs)
    cpu = statistics.median(float(r[3]) + float(r[4]) for r in rs)
    rep = json.load(open(rs[-1][5] + "/report.json"))
    pages, mb = rep["stages"]["read"]["docs_in"], rep["stages"]["read"]["bytes_in"] / 1e6
    mem = max(m["dedup_bytes"] for m in rep["run"]["dedup_memory"]) / 1e6
    rss = max(m["peak_rss_bytes"] for m in rep["run"]["dedup_memory"]) / 1e6
    print(f"{key[0]:<6} {key[1]:>5} {pages:>6} {mb:>6.1f} {wall:>7.2f} {pages / wall:>8.0f} "
          f"{pages / cpu:>13.0f} {mb / cpu:>10.2f} {mem:>12.2f} (RSS {rss:.0f})")
print(f"({ncpu} cores: with more ranks than cores the wall rate cannot grow; the per-core rate "
      f"is what a cluster multiplies)")
PY
