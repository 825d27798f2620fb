#!/usr/bin/env bash
# bench/serve.sh [GRIT] [TOKENIZER_JSON] - grit serve under load on loopback, continuous batching
# (--max-batch 32) against one request at a time (--max-batch 1) on the same load: requests/s,
# completion tokens/s and p50/p99 latency for 1, 8 and 32 concurrent clients (a bounded client
# loop: max(clients, MIN_REQS) greedy requests per level, split among the clients, each a
# distinct prompt of 12-13 tokens and MAX_TOKENS new tokens), on the pythia-70m and ~70M Llama
# (llama-70m) shapes
# (weights from 1 training step; speed does not depend on their values; the Llama shape, vocab
# 32000, is sent token ids). Both servers run at once, idle in turn: each repeat loads one then
# the other, so a change in machine load hits both; the table shows the median repeat (by
# tokens/s). Every batched answer must equal the one-at-a-time answer to the same request
# (greedy), else the bench fails.
# Env: THREADS (compute threads per server, default 2), MIN_REQS (default 8),
# MAX_TOKENS (default 16), REPEATS (default 3), MODELS (default "pythia-70m llama-70m").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
grit=${1:-$root/build/grit}
tok=${2:-$root/tests/data/gpt-neox-20b-tokenizer.json}
threads=${THREADS:-2} total=${MIN_REQS:-8} max_tokens=${MAX_TOKENS:-16} repeats=${REPEATS:-3}
models=${MODELS:-pythia-70m llama-70m}
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 143' INT TERM
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) online;" \
  "flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx|avx2|fma|avx512f|avx512_bf16|amx_bf16)$' | tr '\n' ' ')"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $threads compute threads per server," \
  "max(clients, $total) requests of $max_tokens tokens per level, median of $repeats repeats"
for model in $models; do
  vocab=50000; [ "${model#llama}" != "$model" ] && vocab=32000
  cat > "$tmp/$model.json" <<JSON
{"model": "$model", "optim": {"micro_batch": 1, "grad_accum": 1, "seq_len": 64, "total_steps": 1},
 "data": {"synthetic_vocab": $vocab}, "checkpoint": {"interval_steps": 1}, "seed": 1, "threads": $threads}
JSON
  "$grit" train "$tmp/$model.json" --run-dir "$tmp/run-$model" --quiet
  ports=()
  for mb in 32 1; do
    GRIT_SERVE_TOKEN=bench-token-0123456789 "$grit" serve "$tmp/run-$model" --tokenizer "$tok" --port 0 \
      --threads "$threads" --max-batch $mb --quiet 2> "$tmp/serve-$model-$mb.log" &
    pids+=($!)
    port=""
    for _ in $(seq 1 600); do
      port=$(sed -n 's|.*on http://127.0.0.1:\([0-9]*\)/v1.*|\1|p' "$tmp/serve-$model-$mb.log"); [ -n "$port" ] && break; sleep 0.1
    done
    [ -n "$port" ] || { cat "$tmp/serve-$model-$mb.log"; exit 1; }
    ports+=("$port")
  done
  echo
  echo "$model shape:"
  /usr/bin/python3 - "${ports[0]}" "${ports[1]}" "$total" "$max_tokens" "$repeats" "$vocab" <<'PY'
import json, statistics, sys, threading, time, urllib.request
batched, single, total, max_tokens, repeats, vocab = (int(a) for a in sys.argv[1:7])
def one(port, i):
    # a distinct prompt per request: token ids (every shape's vocabulary has them)
    body = json.dumps({"prompt": [(7 * i + 3 * k + 11) % (vocab - 1) + 1 for k in range(12 + i % 2)],
                       "max_tokens": max_tokens, "temperature": 0}).encode()
    rq = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body, method="POST",
                                headers={"Authorization": "Bearer bench-token-0123456789"})
    t0 = time.time()
    with urllib.request.urlopen(rq, timeout=900) as r:
        b = json.loads(r.read())
    return time.time() - t0, b["usage"]["completion_tokens"], b["choices"][0]["text"]
def level(port, clients, texts):
    lat, toks, lock = [], [0], threading.Lock()
    def client(c):
        for k in range(c, max(clients, total), clients):
            dt, n, text = one(port, k)
            with lock:
                lat.append(dt); toks[0] += n; texts[k] = text
    t0 = time.time()
    ts = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    [t.start() for t in ts]; [t.join() for t in ts]
    wall = time.time() - t0
    lat.sort()
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
    return dict(rps=len(lat) / wall, tps=toks[0] / wall, p50=p(0.5), p99=p(0.99))
one(batched, 0); one(single, 0)  # warm up
print("| clients | mode | requests | requests/s | tokens/s | p50 latency s | p99 latency s | batched / one-at-a-time (tokens/s) |")
print("|---|---|---|---|---|---|---|---|")
same, compared = True, 0
for clients in (1, 8, 32):
    runs = {"batched": [], "one-at-a-time": []}
    tb, ts1 = {}, {}
    for _ in range(repeats):
        runs["batched"].append(level(batched, clients, tb))
        runs["one-at-a-time"].append(level(single, clients, ts1))
    same &= tb == ts1
    compared += len(tb)
    med = {m: sorted(r, key=lambda x: x["tps"])[len(r) // 2] for m, r in runs.items()}
    for m in ("one-at-a-time", "batched"):
        x = med[m]
        ratio = f"{med['batched']['tps'] / med['one-at-a-time']['tps']:.2f}x" if m == "batched" else ""
        print(f"| {clients} | {m} | {max(clients, total)} | {x['rps']:.2f} | {x['tps']:.1f} | {x['p50']:.3f} | {x['p99']:.3f} | {ratio} |")
print(f"batched answers equal one-at-a-time answers: {'yes' if same else 'NO'} ({compared} requests compared)")
sys.exit(0 if same else 1)
PY
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null || true; done
  pids=()
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
