#!/usr/bin/env bash
# prep_mix.sh GRIT - the data mix: a web source (a generated crawl) and a
# curated one (handbook chapters, weight 2) with mix.curated_fraction 0.2:
#   - the report's per-source token counts after dedup (each document once,
#     and as written with the weight) equal the tokens in each source's
#     .bin files, and mix.curated_fraction is curated / (web + curated);
#   - data_mix.json is a trainer "data" object whose weights give the
#     curated shards 0.2 and the web shards 0.8, each in proportion to its
#     tokens, and grit train accepts it as is and trains on it;
#   - without a target the weights follow the tokens produced.
set -euo pipefail
grit=$1
here=$(cd "$(dirname "$0")" && pwd)
tok=$here/../data/gpt-neox-20b-tokenizer.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$here/prep_make_corpus.py" "$tmp" 4 40 >/dev/null
python3 "$here/prep_make_books.py" "$tmp/books.jsonl" 30 >/dev/null
mk() { # NAME MIX
  cat > "$tmp/$1.json" <<JSON
{"output": "$tmp/$1", "threads": 2, "dedup": {"minhash": "cheap"}, "tokenizer": "$tok", $2
 "sources": [{"name": "web", "inputs": ["$tmp/crawl"]},
             {"name": "books", "kind": "curated", "inputs": ["$tmp/books.jsonl"], "weight": 2}]}
JSON
  "$grit" prep "$tmp/$1.json" --quiet
}
mk target '"mix": {"curated_fraction": 0.2},'
mk natural ''
python3 - "$tmp" <<'PY'
import json, os, sys
tmp = sys.argv[1]
bad = 0
for name, target in (("target", 0.2), ("natural", None)):
    out = f"{tmp}/{name}"
    rep = json.load(open(f"{out}/report.json"))
    man = json.load(open(f"{out}/manifest.json"))
    bins = {}  # tokens in each source's .bin files (u16 tokens)
    for sh in man["shards"]:
        n = os.path.getsize(f"{out}/{sh['prefix']}.bin") // 2
        bins[sh["source"]] = bins.get(sh["source"], 0) + n
    src = rep["sources"]
    for s in ("web", "books"):
        if src[s]["tokens_written"] != bins[s]:
            print(f"FAIL: {name}: {s}: report tokens_written {src[s]['tokens_written']}, .bin files {bins[s]}"); bad = 1
    if src["books"]["tokens"] * 2 != src["books"]["tokens_written"] or src["web"]["tokens"] != src["web"]["tokens_written"]:
        print(f"FAIL: {name}: unique vs written tokens {src}"); bad = 1
    mix = rep["mix"]
    want = src["books"]["tokens"] / (src["books"]["tokens"] + src["web"]["tokens"])
    if abs(mix["curated_fraction"] - want) > 1e-6 or mix["curated"] != src["books"]["tokens"]:
        print(f"FAIL: {name}: mix {mix}, want curated fraction {want}"); bad = 1
    dm = json.load(open(f"{out}/data_mix.json"))
    kind = {f"{out}/{sh['prefix']}": sh["source"] for sh in man["shards"]}
    tokof = {f"{out}/{sh['prefix']}": sh["tokens"] for sh in man["shards"]}
    per = {"web": 0.0, "books": 0.0}
    for p, w in zip(dm["paths"], dm["weights"]):
        per[kind[p]] += w
    tot = {k: sum(tokof[p] for p in dm["paths"] if kind[p] == k) for k in per}
    if target is not None:
        if abs(per["books"] - target) > 1e-6 or abs(per["web"] - (1 - target)) > 1e-6:
            print(f"FAIL: {name}: weights by source {per}, want books {target}"); bad = 1
        for p, w in zip(dm["paths"], dm["weights"]):
            share = (target if kind[p] == "books" else 1 - target) * tokof[p] / tot[kind[p]]
            if abs(w - share) > 1e-6:
                print(f"FAIL: {name}: {p}: weight {w}, want {share}"); bad = 1
    else:
        T = sum(tot.values())
        for p, w in zip(dm["paths"], dm["weights"]):
            if abs(w - tokof[p] / T) > 1e-6:
                print(f"FAIL: {name}: {p}: weight {w}, want {tokof[p] / T}"); bad = 1
    print(f"prep_mix: {name}: tokens web {src['web']['tokens']}, books {src['books']['tokens']} "
          f"(written x2: {src['books']['tokens_written']}), curated fraction produced "
          f"{mix['curated_fraction']:.3f}; data_mix weights web {per['web']:.3f}, books {per['books']:.3f}")
sys.exit(bad)
PY
# the trainer takes data_mix.json as its "data" object
cat > "$tmp/train.json" <<JSON
{"model": {"hidden_size": 32, "num_layers": 2, "num_heads": 4, "intermediate_size": 64,
           "vocab_size": 50277, "rotary_pct": 0.25, "max_positions": 64},
 "optim": {"micro_batch": 2, "grad_accum": 1, "seq_len": 32, "lr": 3e-3, "min_lr": 3e-4,
           "warmup_steps": 1, "total_steps": 3},
 "data": $(cat "$tmp/target/data_mix.json"),
 "checkpoint": {"interval_steps": 100}, "seed": 1, "threads": 2}
JSON
"$grit" train "$tmp/train.json" --run-dir "$tmp/run" --quiet
[ "$(grep -c '"loss"' "$tmp/run/metrics.jsonl")" -ge 3 ] || { echo "FAIL: training on data_mix.json"; exit 1; }
echo "prep_mix: grit train ran on data_mix.json; all checks passed"
