#!/usr/bin/env bash
# obs_slow_clients.sh GRIT PYTHON - the dashboard server keeps answering while 200 clients
# trickle their requests a byte at a time and 100 connect and say nothing, and it closes
# every one of them at its request deadline (src/obs/http.c).
set -uo pipefail
grit=$1 py=$2
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/run"
echo '{"event":"train_start","ts":1}' > "$tmp/run/events.jsonl"
"$grit" dashboard "$tmp/run" --port 0 --port-file "$tmp/port" 2> "$tmp/dash.log" &
pids+=($!)
for _ in $(seq 1 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
[ -s "$tmp/port" ] || { echo "FAIL: grit dashboard did not start: $(cat "$tmp/dash.log")"; exit 1; }
"$py" "$(dirname "$0")/obs_slow_clients.py" "$(cat "$tmp/port")"
rc=$?
kill -0 "${pids[0]}" 2>/dev/null || { echo "FAIL: grit dashboard died: $(cat "$tmp/dash.log")"; rc=1; }
exit $rc
