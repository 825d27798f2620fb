#!/usr/bin/env bash
# bench/serve.sh [GRIT] [TOKENIZER_JSON] - grit serve under load on loopback: requests/s,
# completion tokens/s and p50/p99 latency for 1, 4 and 8 concurrent clients (a bounded client
# loop: each client sends REQS greedy requests of 32 new tokens after a 16-token prompt), on
# the pythia-70m shape (weights from 1 training step; speed does not depend on their values).
# One request generates at a time today, so concurrency adds queueing, not throughput.
# Env: THREADS (compute threads, default 4), REQS (requests per client, default 8).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
grit=${1:-$root/build/grit}
tok=${2:-$root/tests/data/gpt-neox-20b-tokenizer.json}
threads=${THREADS:-4} reqs=${REQS:-8}
tmp=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 143' INT TERM
cat > "$tmp/cfg.json" <<JSON
{"model": "pythia-70m", "optim": {"micro_batch": 1, "grad_accum": 1, "seq_len": 64, "total_steps": 1},
 "data": {"synthetic_vocab": 50000}, "checkpoint": {"interval_steps": 1}, "seed": 1, "threads": $threads}
JSON
"$grit" train "$tmp/cfg.json" --run-dir "$tmp/run" --quiet
GRIT_SERVE_TOKEN=bench-token-0123456789 "$grit" serve "$tmp/run" --tokenizer "$tok" --port 0 \
  --threads "$threads" --quiet 2> "$tmp/serve.log" &
pid=$!
port=""
for _ in $(seq 1 600); do
  port=$(sed -n 's|.*on http://127.0.0.1:\([0-9]*\)/v1.*|\1|p' "$tmp/serve.log"); [ -n "$port" ] && break; sleep 0.1
done
[ -n "$port" ] || { cat "$tmp/serve.log"; exit 1; }
echo "grit serve, pythia-70m shape, $threads threads, $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
python3 - "$port" "$reqs" <<'PY'
import json, sys, threading, time, urllib.request
port, reqs = int(sys.argv[1]), int(sys.argv[2])
def one(i):
    body = json.dumps({"prompt": "The quick brown fox jumps over the lazy dog and then some " + str(i),
                       "max_tokens": 32, "temperature": 0}).encode()
    rq = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body, method="POST",
                                headers={"Authorization": "Bearer bench-token-0123456789"})
    t0 = time.time()
    with urllib.request.urlopen(rq, timeout=600) as r:
        n = json.loads(r.read())["usage"]["completion_tokens"]
    return time.time() - t0, n
one(0)  # warm up
print("| clients | requests | requests/s | tokens/s | p50 latency s | p99 latency s |")
print("|---|---|---|---|---|---|")
for clients in (1, 4, 8):
    lat, toks = [], [0]
    lock = threading.Lock()
    def client(c):
        for k in range(reqs):
            dt, n = one(c * 1000 + k)
            with lock:
                lat.append(dt); toks[0] += n
    t0 = time.time()
    ts = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    [t.start() for t in ts]; [t.join() for t in ts]
    wall = time.time() - t0
    lat.sort()
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
    print(f"| {clients} | {len(lat)} | {len(lat) / wall:.2f} | {toks[0] / wall:.1f} | {p(0.5):.3f} | {p(0.99):.3f} |")
PY
