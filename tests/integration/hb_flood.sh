#!/usr/bin/env bash
# hb_flood.sh GRIT PYTHON - a UDP flood of forged heartbeats at grit launch (issue #23,
# point 7): every datagram is rejected and counted, but logged at most once a second, so
# events.jsonl and stderr stay small; the supervisor keeps up (the run is DONE, no false
# hang) and ends bitwise equal to the run without the flood.
set -euo pipefail
grit=$1 py=$2
tmp=$(mktemp -d)
bg=""; fl=""
cleanup() { for p in $bg $fl; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
command -v mpirun >/dev/null || { echo "FAIL: mpirun not found (make deps)"; exit 1; }
. "$(dirname "$0")/sup_lib.sh"
tiny_job "$tmp/job.json" 8 300 100 2
L() { "$grit" launch --nodes 2 --spares 1 --run "$1" --hang-timeout 10 --straggler-factor 0 \
        -- "$grit" train "$tmp/job.json" --run-dir "$1" --quiet > "$1.out" 2>&1; }
L "$tmp/ref" || fail "reference run failed"
L "$tmp/flood" &
bg=$!
for _ in $(seq 1 400); do grep -qs '"step":3,' "$tmp/flood/metrics.jsonl" && break; sleep 0.05; done
addr=$(grep -o '"heartbeat":"[0-9.:]*"' "$tmp/flood/events.jsonl" | head -1 | cut -d'"' -f4)
"$py" - "$addr" > "$tmp/sent" <<'PY' &
import socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
msg = b"HB1 0123456789abcdef rank=0 node=evil step=999999 loss=1 pid=1\n"
n, t0 = 0, time.time()
while time.time() - t0 < 4:
    for _ in range(500):
        s.sendto(msg, (host, int(port)))
    n += 500
print(n)
PY
fl=$!
wait "$fl"; fl=""
rc=0; wait "$bg" || rc=$?; bg=""
sent=$(cat "$tmp/sent")
nev=$(grep -c '"event":"heartbeat_rejected"' "$tmp/flood/events.jsonl" || true)
total=$(grep -o '"event":"heartbeat_rejected".*' "$tmp/flood/events.jsonl" | grep -o '"total":[0-9]*' | tail -1 | cut -d: -f2 || true)
lines=$(grep -c 'rejected a heartbeat' "$tmp/flood.out" || true)
size=$(stat -c %s "$tmp/flood/events.jsonl")
echo "     flood: $sent datagrams sent in 4 s; $nev rejected events, $lines stderr lines, events.jsonl $size bytes"
[ $rc -eq 0 ] || fail "the run under the flood did not finish: rc=$rc $(tail -3 "$tmp/flood.out")"
grep -q '"event":"detected"' "$tmp/flood/events.jsonl" &&
  fail "a failure was detected under the flood: $(grep '"event":"detected"' "$tmp/flood/events.jsonl" | head -1)"
[ "$nev" -ge 1 ] && [ "$nev" -le 12 ] || fail "rejected events: $nev (expected 1..12 for a 4 s flood)"
[ "$lines" -le 12 ] || fail "stderr lines about rejections: $lines"
[ "$size" -lt 100000 ] || fail "events.jsonl grew to $size bytes"
grep -q 'heartbeats rejected' "$tmp/flood.out" || fail "the summary does not count the rejected heartbeats"
grep -q '"suppressed":[1-9]' "$tmp/flood/events.jsonl" || fail "no event says how many were suppressed"
grep -q '"node":"evil"' "$tmp/flood/events.jsonl" && fail "a forged heartbeat was accepted"
cmp -s "$tmp/ref/model.safetensors" "$tmp/flood/model.safetensors" || fail "final weights differ under the flood"
[ "$fails" -eq 0 ] && echo "ok   flood of forged heartbeats: counted (last total $total), logged at 1/s, run DONE and bitwise equal"
if [ "$fails" -eq 0 ]; then echo "hb_flood: all cases passed"; else echo "hb_flood: $fails failure(s)"; fi
[ "$fails" -eq 0 ]
