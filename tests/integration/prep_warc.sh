#!/usr/bin/env bash
# prep_warc.sh GRIT - grit prep on a synthetic crawl with known duplicates, bad
# pages and languages (built by prep_make_warc.py): every expected drop
# happens, for the expected reason, and nothing else is dropped; the report
# counts agree; the tokenized output holds exactly the kept documents; source
# weights repeat or leave out documents; a malformed WARC is a clean error.
set -euo pipefail
grit=$1
here=$(cd "$(dirname "$0")" && pwd)
tok=$here/../data/gpt-neox-20b-tokenizer.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$here/prep_make_warc.py" "$tmp"
"$grit" prep -o "$tmp/out" --threads 2 --minhash cheap --quiet \
  "$tmp/crawl.warc.gz" "$tmp/extra.warc"
"$grit" prep -o "$tmp/tok" --threads 2 --minhash cheap --quiet --tokenizer "$tok" \
  "$tmp/crawl.warc.gz" "$tmp/extra.warc"
# source mixing from a config file: the crawl twice, the extra file not at all
cat > "$tmp/mix.json" <<JSON
{"output": "$tmp/mix", "threads": 2, "dedup": {"minhash": "cheap"},
 "sources": [{"name": "crawl", "inputs": ["$tmp/crawl.warc.gz"], "weight": 2},
             {"name": "extra", "inputs": ["$tmp/extra.warc"], "weight": 0}]}
JSON
"$grit" prep "$tmp/mix.json" --quiet
# a malformed WARC is an error naming the file and record, with no output left
printf 'WARC/1.0\r\nWARC-Type: response\r\n\r\n' > "$tmp/bad.warc"
rc=0
msg=$("$grit" prep -o "$tmp/bad" --quiet "$tmp/bad.warc" 2>&1) || rc=$?
if [ $rc -ne 1 ] || ! grep -q "bad.warc: record 1: missing Content-Length" <<<"$msg" ||
   [ -n "$(ls "$tmp/bad/docs")" ]; then
  echo "FAIL: malformed WARC: rc $rc: $msg"; exit 1
fi
python3 - "$tmp" <<'PY'
import glob, json, struct, sys
tmp = sys.argv[1]
exp = json.load(open(f"{tmp}/expected.json"))
got = {}
for f in sorted(glob.glob(f"{tmp}/out/docs/*.drops.jsonl")) + sorted(glob.glob(f"{tmp}/out/dedup/*.drops.jsonl")):
    for line in open(f):
        d = json.loads(line)
        # a URL can be dropped twice (the url_dup copy); key by url+reason
        got.setdefault(d["url"], []).append(d["reason"])
kept = [json.loads(l)["url"] for f in sorted(glob.glob(f"{tmp}/out/text/*.jsonl")) for l in open(f)]
fail = 0
for url, reason in exp["drops"].items():
    if reason not in got.get(url, []):
        print(f"FAIL: {url}: expected drop '{reason}', got {got.get(url)}"); fail = 1
for url, reasons in got.items():
    for r in reasons:
        if exp["drops"].get(url) != r:
            print(f"FAIL: {url}: unexpected drop '{r}'"); fail = 1
if sorted(kept) != sorted(exp["kept"]):
    print(f"FAIL: kept {sorted(kept)}\n  expected {sorted(exp['kept'])}"); fail = 1
rep = json.load(open(f"{tmp}/out/report.json"))
want = {}
for r in exp["drops"].values():
    want[r] = want.get(r, 0) + 1
if rep["drops"] != want:
    print(f"FAIL: report drops {rep['drops']} != {want}"); fail = 1
st = rep["stages"]
if st["read"]["docs_in"] != len(exp["kept"]) + len(exp["drops"]):
    print(f"FAIL: read {st['read']['docs_in']} documents"); fail = 1
if st["dedup"]["docs_out"] != len(exp["kept"]) or st["tokenize"]["docs_out"] != len(exp["kept"]):
    print(f"FAIL: dedup/tokenize out {st['dedup']['docs_out']}/{st['tokenize']['docs_out']}"); fail = 1
if rep["input"]["skipped_records"] != 3:  # warcinfo, request, image
    print(f"FAIL: skipped records {rep['input']['skipped_records']}"); fail = 1
for lang in ("en", "de", "ja"):
    if lang not in rep["languages"]:
        print(f"FAIL: language {lang} missing from {rep['languages']}"); fail = 1
if rep["clusters"] != {"2": 1}:
    print(f"FAIL: clusters {rep['clusters']}"); fail = 1
# tokenized run: one document per kept page, in the idx
ndocs = 0
for idx in glob.glob(f"{tmp}/tok/tokens/*.idx"):
    b = open(idx, "rb").read()
    assert b[:9] == b"MMIDIDX\x00\x00", idx
    n, m = struct.unpack("<QQ", b[18:34])
    ndocs += m - 1
if ndocs != len(exp["kept"]):
    print(f"FAIL: {ndocs} tokenized documents, expected {len(exp['kept'])}"); fail = 1
rt = json.load(open(f"{tmp}/tok/report.json"))
if rt["output"]["tokens"] <= 0:
    print("FAIL: no tokens"); fail = 1
mix = json.load(open(f"{tmp}/mix/report.json"))
crawl_kept = [u for u in exp["kept"] if u != "http://d.example/boot"]
if mix["stages"]["tokenize"]["docs_out"] != 2 * len(crawl_kept):
    print(f"FAIL: mixing: {mix['stages']['tokenize']['docs_out']} documents out, want {2 * len(crawl_kept)}"); fail = 1
print("prep_warc: %s (%d kept, %d drops)" % ("FAILED" if fail else "all checks passed",
                                          len(kept), sum(len(v) for v in got.values())))
sys.exit(fail)
PY
