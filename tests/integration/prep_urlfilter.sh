#!/usr/bin/env bash
# prep_urlfilter.sh GRIT - grit prep's URL block-list stage (RefinedWeb's first
# filter): domains with their subdomains, exact URLs, allow-listed domains,
# strict words (substrings), hard words (whole URL words) and soft words (a
# threshold of distinct ones) reject exactly the documents they should, for
# the reason they should, before extraction; the report counts them; the
# rules are part of the plan (another list on the same output is refused);
# a malformed list is an error naming file:line.
set -euo pipefail
grit=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/block.txt" <<'LIST'
# a UT1-style bare domain, and the spelled-out forms
casino.example
domain Spam.Example          # lower-cased
url https://news.example/2024/bad-article
allow good.spam.example
strict xxx
hard adult
soft free
soft win
soft prize
soft_threshold 3
LIST
python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
cases = {  # url: expected drop reason, or None when kept
    "https://casino.example/": "url_domain",
    "http://www.casino.example:8080/play": "url_domain",
    "https://user:pw@CASINO.example/x": "url_domain",
    "https://notcasino.example/": None,               # another domain, not a subdomain
    "https://casino.example.org/": None,              # casino.example is not its suffix
    "https://a.b.spam.example/page": "url_domain",
    "https://good.spam.example/page": None,           # allow-listed
    "https://news.example/2024/bad-article": "url_listed",
    "https://news.example/2024/bad-article-2": None,
    "https://shop.example/XXXtra-large": "url_strict_word",
    "https://adult.example/": "url_hard_word",
    "https://shop.example/adulthood-stories": None,  # not a whole word
    "https://free.example/win/prize": "url_soft_words",
    "https://free.example/win/win": None,             # 2 distinct soft words
    "https://shop.example/free-shipping": None,
}
with open(f"{tmp}/in.jsonl", "w") as f:
    for i, u in enumerate(cases):
        f.write(json.dumps({"url": u, "text": f"Document number {i} with some ordinary words in it."}) + "\n")
json.dump(cases, open(f"{tmp}/cases.json", "w"))
PY
args=(--languages all --min-lang-score 0 --no-filters --minhash off --quiet)
"$grit" prep -o "$tmp/out" --url-blocklist "$tmp/block.txt" "${args[@]}" "$tmp/in.jsonl"
python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
cases = json.load(open(f"{tmp}/cases.json"))
kept = {json.loads(l)["url"] for l in open(f"{tmp}/out/docs/00000.jsonl")}
drops = {d["url"]: (d["stage"], d["reason"]) for d in map(json.loads, open(f"{tmp}/out/docs/00000.drops.jsonl"))}
bad = 0
for u, want in cases.items():
    got = None if u in kept else drops.get(u, ("?", "missing"))[1]
    if got != want or (want and drops[u][0] != "url"):
        print(f"FAIL: {u}: expected {want}, got {got}"); bad = 1
rep = json.load(open(f"{tmp}/out/report.json"))
st = rep["stages"]["url"]
n_drop = sum(1 for w in cases.values() if w)
if st["docs_in"] != len(cases) or st["docs_out"] != len(cases) - n_drop:
    print(f"FAIL: report url stage {st}"); bad = 1
if rep["stages"]["extract"]["docs_in"] != len(cases) - n_drop:
    print("FAIL: blocked documents reached extraction"); bad = 1
print(f"prep_urlfilter: {n_drop} of {len(cases)} URLs rejected as expected: "
      + ", ".join(f"{k} {v}" for k, v in sorted(rep["drops"].items())))
sys.exit(bad)
PY
# another list on the same output directory is refused
echo "more.example" >> "$tmp/block.txt"
rc=0
msg=$("$grit" prep -o "$tmp/out" --url-blocklist "$tmp/block.txt" "${args[@]}" "$tmp/in.jsonl" 2>&1) || rc=$?
[ $rc -eq 1 ] && grep -q "made from other inputs or settings" <<<"$msg" ||
  { echo "FAIL: a changed block-list on the same output: rc $rc: $msg"; exit 1; }
# a malformed list names the file and line
printf 'ok.example\nsoft_threshold many\n' > "$tmp/bad.txt"
rc=0
msg=$("$grit" prep -o "$tmp/bad" --url-blocklist "$tmp/bad.txt" "${args[@]}" "$tmp/in.jsonl" 2>&1) || rc=$?
[ $rc -eq 1 ] && grep -q "bad.txt:2: soft_threshold" <<<"$msg" ||
  { echo "FAIL: malformed list: rc $rc: $msg"; exit 1; }
echo "prep_urlfilter: all checks passed"
