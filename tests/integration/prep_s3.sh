#!/usr/bin/env bash
# prep_s3.sh GRIT - grit prep reading its inputs from S3 (a real S3 server on
# loopback: OpenStack Swift's S3 API, started by s3_lib.sh):
#   1. s3://crawl/cc/ (16 WARC.gz files and a non-document object, listed 5
#      keys per page so the listing paginates) gives the same outputs as the
#      local copy, in one process and on 2 MPI ranks;
#   2. a wrong secret (403) is a clear error naming the input, nothing written;
#   3. a truncated WARC.gz in the bucket is an error naming its s3:// URL and
#      the shard leaves no output (nothing half-written);
#   4. an object replaced by one of another size while the run reads the
#      bucket is an error naming it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=s3_lib.sh
. "$here/s3_lib.sh"
tok=$root/tests/data/gpt-neox-20b-tokenizer.json
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
python3 "$here/prep_make_corpus.py" "$tmp/c" 16 60 >/dev/null
awsc s3 mb s3://crawl >/dev/null
for f in "$tmp"/c/crawl/*.warc.gz; do "$grit" s3 put "$f" "s3://crawl/cc/$(basename "$f")" >/dev/null; done
echo "p { color: red }" > "$tmp/style.css"
"$grit" s3 put "$tmp/style.css" s3://crawl/cc/style.css >/dev/null
args=(--threads 2 --minhash cheap --tokenizer "$tok" --quiet)
digest() { # outputs other than plan.json (it names the inputs' paths)
  (cd "$1" && find tokens docs dedup manifest.json -type f | sort | xargs sha256sum
   python3 -c "
import json; r = json.load(open('report.json')); del r['run']
for s in r['stages'].values(): s.pop('seconds', None)
print(json.dumps(r, sort_keys=True))")
}

"$grit" prep -o "$tmp/local" "${args[@]}" "$tmp/c/crawl"
digest "$tmp/local" > "$tmp/local.sum"
GRIT_PREP_S3_LIST_PAGE=5 "$grit" prep -o "$tmp/s3" "${args[@]}" s3://crawl/cc/
if cmp -s "$tmp/local.sum" <(digest "$tmp/s3"); then echo "prep_s3: s3:// input: same outputs as the local copy"
else fail "s3:// input differs from the local copy"; diff "$tmp/local.sum" <(digest "$tmp/s3") | head; fi
shards=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['shards'])" "$tmp/s3/plan.json")
[ "$shards" = 16 ] || fail "s3:// listing: $shards shards, want 16 (the .css object is not a document)"
ls "$tmp/s3/docs" | grep -q '\.tmp\.' && fail "spool files left in docs/"
if command -v mpirun >/dev/null; then
  mpirun --bind-to none -np 2 "$grit" prep -o "$tmp/s3mpi" "${args[@]}" --threads 1 s3://crawl/cc
  if cmp -s "$tmp/local.sum" <(digest "$tmp/s3mpi"); then echo "prep_s3: s3:// input on 2 ranks: same outputs"
  else fail "s3:// input on 2 ranks differs from the local copy"; fi
fi

# a wrong secret: the server answers 403
rc=0
msg=$(AWS_SECRET_ACCESS_KEY=wrong "$grit" prep -o "$tmp/denied" "${args[@]}" s3://crawl/cc/ 2>&1) || rc=$?
if [ $rc -ne 1 ] || ! grep -q "s3://crawl/cc/" <<<"$msg" || ! grep -qi "403\|SignatureDoesNotMatch\|denied" <<<"$msg" ||
   [ -e "$tmp/denied/plan.json" ]; then
  fail "wrong secret: rc $rc, message: $msg"
else echo "prep_s3: wrong secret: $msg"; fi

# a truncated WARC.gz among good ones
f=$tmp/c/crawl/03.warc.gz
head -c $(( $(stat -c %s "$f") * 2 / 3 )) "$f" > "$tmp/trunc.warc.gz"
"$grit" s3 put "$tmp/c/crawl/00.warc.gz" s3://crawl/bad/00.warc.gz >/dev/null
"$grit" s3 put "$tmp/trunc.warc.gz" s3://crawl/bad/01.warc.gz >/dev/null
rc=0
msg=$("$grit" prep -o "$tmp/trunc" "${args[@]}" --threads 1 s3://crawl/bad/ 2>&1) || rc=$?
if [ $rc -ne 1 ] || ! grep -q "s3://crawl/bad/01.warc.gz" <<<"$msg" || [ -e "$tmp/trunc/docs/00001.jsonl" ] ||
   [ -e "$tmp/trunc/done/docs.00001.json" ] || ls "$tmp/trunc/docs" | grep -q '\.tmp\.'; then
  fail "truncated WARC.gz: rc $rc, message: $msg; docs/: $(ls "$tmp/trunc/docs")"
else echo "prep_s3: truncated WARC.gz: $msg"; fi

# an object replaced, with another size, while the run is reading the bucket:
# the last of 16 larger files is replaced once the first shard is done
python3 "$here/prep_make_corpus.py" "$tmp/big" 16 250 >/dev/null
for g in "$tmp"/big/crawl/*.warc.gz; do "$grit" s3 put "$g" "s3://crawl/chg/$(basename "$g")" >/dev/null; done
"$grit" prep -o "$tmp/chg" "${args[@]}" --threads 1 s3://crawl/chg/ > "$tmp/chg.log" 2>&1 &
pid=$!
pids+=("$pid")
for _ in $(seq 1 3000); do
  [ -e "$tmp/chg/done/docs.00000.json" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.01
done
"$grit" s3 put "$tmp/c/crawl/00.warc.gz" s3://crawl/chg/15.warc.gz >/dev/null
rc=0
wait "$pid" || rc=$?
msg=$(cat "$tmp/chg.log")
if [ -e "$tmp/chg/done/docs.00015.json" ] && [ $rc -eq 0 ]; then
  fail "changed object: the run read the last shard before it was replaced (machine too slow to test)"
elif [ $rc -ne 1 ] || ! grep -q "s3://crawl/chg/15.warc.gz: the object changed size" <<<"$msg" ||
     [ -e "$tmp/chg/docs/00015.jsonl" ]; then
  fail "changed object: rc $rc, message: $msg"
else echo "prep_s3: object replaced mid-run: $msg"; fi
# results to s3://: the same files as the local run, manifest.json last; a kill
# after 3 shards were published leaves data without a manifest; a rerun completes
awsc s3 mb s3://out >/dev/null
rc=0
GRIT_PREP_CRASH_AFTER=36 "$grit" prep -o s3://out/web/ --work "$tmp/work" "${args[@]}" --threads 1 \
  "$tmp/c/crawl" 2>/dev/null || rc=$?
keys=$("$grit" s3 ls s3://out/web 2>/dev/null | awk '{print $NF}' || true)
if [ $rc -ne 137 ] || grep -q "manifest.json" <<<"$keys" || ! grep -q "tokens/00002.idx" <<<"$keys"; then
  fail "publish killed after 3 shards: rc $rc, bucket holds: $keys"
fi
"$grit" prep -o s3://out/web --work "$tmp/work" "${args[@]}" "$tmp/c/crawl"
"$grit" s3 get s3://out/web/manifest.json "$tmp/pub.manifest.json" >/dev/null
cmp -s "$tmp/pub.manifest.json" "$tmp/local/manifest.json" || fail "published manifest differs from the local run's"
python3 - "$tmp" <<'PY' || fail "published objects differ from the manifest"
import json, subprocess, sys
tmp = sys.argv[1]
m = json.load(open(f"{tmp}/pub.manifest.json"))
for sh in m["shards"]:
    for name, f in sh["files"].items():
        a = open(f"{tmp}/local/{name}", "rb").read()
        if len(a) != f["bytes"]:
            print(f"{name}: local {len(a)} bytes, manifest {f['bytes']}"); sys.exit(1)
PY
for s in 00000 00007 00015; do
  "$grit" s3 get "s3://out/web/tokens/$s.bin" "$tmp/pub.bin" >/dev/null
  cmp -s "$tmp/pub.bin" "$tmp/local/tokens/$s.bin" || fail "s3://out/web/tokens/$s.bin differs from the local run's"
done
echo "prep_s3: results published to s3://out/web (a kill after 3 shards left no manifest; the rerun completed)"

# training reads the shards from s3:// through the local cache: same losses as from the local copy
cfg() { # FILE PATH-PREFIX
  cat > "$1" <<JSON
{"model": {"hidden_size": 32, "num_layers": 2, "num_heads": 4, "intermediate_size": 64,
           "vocab_size": 50277, "rotary_pct": 0.25, "max_positions": 64},
 "optim": {"micro_batch": 2, "grad_accum": 2, "seq_len": 32, "lr": 3e-3, "min_lr": 3e-4,
           "warmup_steps": 2, "total_steps": 8},
 "data": {"source": "megatron", "paths": ["$2/tokens/00000", "$2/tokens/00001"], "weights": [0.6, 0.4]},
 "checkpoint": {"interval_steps": 100}, "seed": 42, "threads": 2}
JSON
}
cfg "$tmp/tl.json" "$tmp/local"
cfg "$tmp/ts.json" "s3://out/web"
losses() { python3 -c "import json,sys; print([json.loads(l)['loss'] for l in open(sys.argv[1]) if 'loss' in json.loads(l)])" "$1"; }
"$grit" train "$tmp/tl.json" --run-dir "$tmp/train_local" --quiet
GRIT_S3_CACHE=$tmp/cache "$grit" train "$tmp/ts.json" --run-dir "$tmp/train_s3" --quiet
a=$(losses "$tmp/train_local/metrics.jsonl"); b=$(losses "$tmp/train_s3/metrics.jsonl")
if [ "$a" != "$b" ] || [ "$a" = "[]" ]; then fail "losses from s3:// $b differ from local $a"
else echo "prep_s3: training from s3:// shards: the same losses as from the local copy"; fi
cmp -s "$tmp/cache/out/web/tokens/00001.idx" "$tmp/local/tokens/00001.idx" || fail "the cache holds another .idx"
ino=$(stat -c %i "$tmp/cache/out/web/tokens/00000.bin")
GRIT_S3_CACHE=$tmp/cache "$grit" train "$tmp/ts.json" --run-dir "$tmp/train_s3b" --quiet
[ "$ino" = "$(stat -c %i "$tmp/cache/out/web/tokens/00000.bin")" ] || fail "a second run fetched the cached shard again"
finish prep_s3
