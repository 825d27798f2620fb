#!/usr/bin/env bash
# prep_dist.sh GRIT - grit prep over MPI ranks (mpirun --oversubscribe) on a
# generated crawl of ~2,500 pages in 16 WARC.gz files (prep_make_corpus.py)
# with exact and near duplicates planted in files that land on other ranks:
#   1. one process without MPI, and 1, 2, 4 ranks: byte-identical outputs
#      (docs, dedup decisions with dup_of, tokens, manifest, plan, and the
#      report without its timings and its per-run facts);
#   2. every planted copy is dropped for the planted reason, as a duplicate
#      of its planted original (dup_of resolves to the original's URL), and
#      nothing else is an exact duplicate;
#   3. dedup memory per rank is reported and shrinks with the ranks;
#   4. a rank that dies (injected _exit after its Nth marker: inside the docs
#      stage, right after the dedup marker, inside tokenize; and a real
#      kill -9 of one rank while the docs stage runs) and a rerun, on the
#      same or another number of ranks, converge to the same bytes.
set -euo pipefail
grit=$1
here=$(cd "$(dirname "$0")" && pwd)
tok=$here/../data/gpt-neox-20b-tokenizer.json
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found (make deps installs openmpi-bin)"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
mpid=
cleanup() { [ -n "$mpid" ] && kill -9 "$mpid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail=0
python3 "$here/prep_make_corpus.py" "$tmp" 16 150
args=(--threads 1 --minhash cheap --tokenizer "$tok" --quiet)
prep() { # prep RANKS OUT [env...]: RANKS 0 = one process without mpirun
  local n=$1 out=$2; shift 2
  if [ "$n" = 0 ]; then env "$@" "$grit" prep -o "$out" "${args[@]}" "$tmp/crawl"
  else mpirun --bind-to none -np "$n" $(for e in "$@"; do printf -- '-x %s ' "$e"; done) \
         "$grit" prep -o "$out" "${args[@]}" "$tmp/crawl"; fi
}
digest() { # every output, and the report less its timings and run facts
  (cd "$1" && find tokens docs dedup plan.json manifest.json -type f | sort | xargs sha256sum
   python3 -c "
import json; r = json.load(open('report.json')); del r['run']
for s in r['stages'].values(): s.pop('seconds', None)
print(json.dumps(r, sort_keys=True))")
}

prep 0 "$tmp/solo"
digest "$tmp/solo" > "$tmp/solo.sum"
for n in 1 2 4; do
  prep $n "$tmp/r$n"
  if cmp -s "$tmp/solo.sum" <(digest "$tmp/r$n"); then echo "prep_dist: $n rank(s): identical"
  else echo "FAIL: $n rank(s) differ from one process:"; diff "$tmp/solo.sum" <(digest "$tmp/r$n") | head; fail=1; fi
done

python3 - "$tmp" <<'PY' || fail=1
import glob, json, sys
tmp = sys.argv[1]
planted = json.load(open(f"{tmp}/planted.json"))
out = f"{tmp}/solo"
urls = [json.loads(l)["url"] for f in sorted(glob.glob(f"{out}/docs/[0-9]*[0-9].jsonl")) for l in open(f)]
drops = {}
for f in sorted(glob.glob(f"{out}/dedup/*.drops.jsonl")):
    for l in open(f):
        d = json.loads(l)
        drops[d["url"]] = (d["reason"], urls[d["dup_of"]])
bad = 0
for kind, reason in (("exact", "exact_dup"), ("near", "near_dup")):
    for copy, orig in planted[kind]:
        if drops.get(copy) != (reason, orig):
            print(f"FAIL: {copy}: expected ({reason}, {orig}), got {drops.get(copy)}"); bad = 1
exact = {u for u, (r, _) in drops.items() if r == "exact_dup"}
if exact != {c for c, _ in planted["exact"]}:
    print(f"FAIL: exact duplicates {sorted(exact ^ {c for c, _ in planted['exact']})} unplanted or missed"); bad = 1
solo = json.load(open(f"{out}/report.json"))["run"]["dedup_memory"]
four = json.load(open(f"{tmp}/r4/report.json"))["run"]["dedup_memory"]
if len(solo) != 1 or len(four) != 4:
    print(f"FAIL: dedup memory for {len(solo)} and {len(four)} ranks, want 1 and 4"); bad = 1
elif max(m["dedup_bytes"] for m in four) * 2 > solo[0]["dedup_bytes"]:
    print(f"FAIL: dedup bytes per rank with 4 ranks {[m['dedup_bytes'] for m in four]} "
          f"not under half of one process's {solo[0]['dedup_bytes']}"); bad = 1
print(f"prep_dist: {len(planted['exact'])} exact and {len(planted['near'])} near copies found "
      f"with their originals; dedup bytes per rank: 1 rank {solo[0]['dedup_bytes']}, "
      f"4 ranks {[m['dedup_bytes'] for m in four]}")
sys.exit(bad)
PY

# injected deaths: rank R ends (_exit 137, no cleanup) after its Nth marker;
# ranks own 4 shards each with 4 ranks (rank 0 writes the dedup marker 5th)
for spec in "4 1 2 2" "4 0 5 4" "4 2 6 1" "2 1 3 4"; do
  read -r n rank at again <<<"$spec"
  out=$tmp/crash_${n}_${rank}_$at
  rc=0
  prep "$n" "$out" GRIT_PREP_CRASH_AFTER="$at" GRIT_PREP_CRASH_RANK="$rank" >/dev/null 2>&1 || rc=$?
  if [ $rc -eq 0 ]; then echo "FAIL: $n ranks, rank $rank dying after marker $at: mpirun exit 0"; fail=1; continue; fi
  markers=$(ls "$out/done" | grep -c '\.json$' || true)
  prep "$again" "$out"
  skipped=$(python3 -c "import json,sys; print(sum(json.load(open(sys.argv[1]))['run']['units_skipped'].values()))" "$out/report.json")
  if ! cmp -s "$tmp/solo.sum" <(digest "$out"); then
    echo "FAIL: $n ranks, rank $rank died after marker $at, rerun on $again: outputs differ"; fail=1
  elif [ "$skipped" -lt 1 ]; then
    echo "FAIL: $n ranks, rank $rank died after marker $at: the rerun skipped nothing"; fail=1
  else
    echo "prep_dist: $n ranks, rank $rank died after its marker $at ($markers markers left), rerun on $again ranks: identical, $skipped units skipped"
  fi
done

# a real kill -9 of one rank while the docs stage runs
out=$tmp/kill
mpirun --bind-to none -np 2 "$grit" prep -o "$out" "${args[@]}" "$tmp/crawl" >/dev/null 2>&1 &
mpid=$!
killed=
for _ in $(seq 1 3000); do
  n=$( (ls "$out/done" 2>/dev/null || true) | grep -c '^docs' || true)
  if [ "$n" -ge 2 ]; then
    victim=$(pgrep -P "$mpid" | tail -1 || true)
    [ -n "$victim" ] && kill -9 "$victim" 2>/dev/null && killed=$victim
    break
  fi
  kill -0 "$mpid" 2>/dev/null || break
  sleep 0.01
done
wait "$mpid" 2>/dev/null || true
mpid=
if [ -z "$killed" ]; then
  echo "FAIL: the run ended before a rank could be killed"; fail=1
else
  left=$(ls "$out/done" | grep -c '^docs' || true)
  prep 2 "$out"
  if cmp -s "$tmp/solo.sum" <(digest "$out"); then
    echo "prep_dist: kill -9 of a rank with $left docs markers done, rerun identical"
  else echo "FAIL: kill -9 of a rank, rerun: outputs differ"; fail=1; fi
fi
[ $fail -eq 0 ] && echo "prep_dist: all checks passed"
exit $fail
