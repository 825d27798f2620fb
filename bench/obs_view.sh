#!/usr/bin/env bash
# obs_view.sh [STEPS] - how long a /metrics scrape and an /api/run poll take on a long run.
# Every request rebuilds the run view from the files (src/obs/view.c), so the cost grows
# with metrics.jsonl: this writes a synthetic run of STEPS steps (default 100000, about
# 16 MB of metrics.jsonl), serves it with grit dashboard and times 20 requests of each.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
grit=${GRIT:-$root/build/grit}
steps=${1:-100000}
tmp=$(mktemp -d)
srv=""
cleanup() { [ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
python3 - "$tmp/run" "$steps" <<'PY'
import json, math, os, sys
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d)
with open(os.path.join(d, "metrics.jsonl"), "w") as f:
    for s in range(1, n + 1):
        f.write(json.dumps({"step": s, "loss": 10 * math.exp(-s / n) + 0.01 * math.sin(s),
                            "grad_norm": 1 + 0.1 * math.cos(s), "lr": 3e-4, "tokens": s * 4096,
                            "tokens_per_s": 50000.0, "step_time_s": 0.08}, separators=(",", ":")) + "\n")
with open(os.path.join(d, "events.jsonl"), "w") as f:
    f.write('{"ts":1000,"event":"supervisor_start","nodes":4,"spares":1}\n{"ts":1001,"event":"launch"}\n')
PY
"$grit" dashboard "$tmp/run" --port 0 --port-file "$tmp/port" --price-node-hour 2 2>/dev/null &
srv=$!
for _ in $(seq 1 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
url="http://127.0.0.1:$(cat "$tmp/port")"
echo "obs_view: $steps steps, metrics.jsonl $(( $(stat -c %s "$tmp/run/metrics.jsonl") / 1048576 )) MiB"
for path in /metrics /api/run; do
  times=$(for _ in $(seq 1 20); do curl -s -o "$tmp/body" -w '%{time_total}\n' "$url$path"; done | sort -n)
  echo "  GET $path: median $(sed -n 10p <<<"$times") s, max $(tail -1 <<<"$times") s, $(stat -c %s "$tmp/body") bytes"
done
