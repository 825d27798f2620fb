#!/usr/bin/env bash
# serve.sh GRIT PYTHON TOKENIZER_JSON - `grit serve` as a real process on loopback:
# trains a tiny GPT-NeoX, starts the server (port 0, a token file it creates), runs
# serve_client.py against it (auth, greedy = grit generate, seeds, stop, concurrency, bad
# requests, slow clients, streaming, chat = grit generate --chat zephyr, malformed chats,
# metrics histograms, the secret kept out of logs) and serve_batch.py (continuous batching:
# 32 concurrent streams equal their solo answers and grit generate, a seeded sample alone and
# batched, the KV-cache budget on a second server with a tiny one), ends both by PID with
# SIGTERM (clean exit 0); then a server without a secret, and with a bad checkpoint, must
# refuse to start with a clear error.
set -uo pipefail
grit=$1 py=$2 neox=$3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
pid="" pid2=""
cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
  [ -n "$pid2" ] && kill -9 "$pid2" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
cat > "$tmp/cfg.json" <<JSON
{"model": {"hidden_size": 32, "num_layers": 2, "num_heads": 4, "intermediate_size": 64,
           "vocab_size": 50277, "rotary_pct": 0.25, "max_positions": 64},
 "optim": {"micro_batch": 2, "grad_accum": 1, "seq_len": 32, "total_steps": 3},
 "data": {"source": "synthetic", "synthetic_vocab": 50000},
 "checkpoint": {"interval_steps": 100}, "seed": 1, "threads": 2}
JSON
"$grit" train "$tmp/cfg.json" --run-dir "$tmp/run" --quiet || { echo "FAIL: training"; exit 1; }
step=$tmp/run/ckpt/$(ls "$tmp/run/ckpt" | grep '^step_' | tail -1)

# port_of LOG PID: the port a server started with LOG prints (empty when it did not start)
port_of() {
  local p=""
  for _ in $(seq 1 300); do
    p=$(sed -n 's|.*on http://127.0.0.1:\([0-9]*\)/v1.*|\1|p' "$1")
    [ -n "$p" ] && break
    kill -0 "$2" 2>/dev/null || break
    sleep 0.1
  done
  echo "$p"
}
env -u GRIT_SERVE_TOKEN "$grit" serve "$step" --tokenizer "$neox" --token-file "$tmp/token" \
  --port 0 --threads 2 --chat zephyr 2> "$tmp/serve.log" &
pid=$!
port=$(port_of "$tmp/serve.log" "$pid")
if [ -z "$port" ]; then
  echo "FAIL: the server did not start: $(cat "$tmp/serve.log")"; exit 1
fi
# the same model with a KV-cache budget of 0.018 MiB: two 15-position requests fit, three do not
small_mib=0.018
env -u GRIT_SERVE_TOKEN "$grit" serve "$step" --tokenizer "$neox" --token-file "$tmp/token" \
  --port 0 --threads 1 --max-batch 8 --kv-budget-mib $small_mib --quiet 2> "$tmp/small.log" &
pid2=$!
port2=$(port_of "$tmp/small.log" "$pid2")
if [ -z "$port2" ]; then
  echo "FAIL: the small-budget server did not start: $(cat "$tmp/small.log")"; exit 1
fi
"$py" "$here/serve_client.py" "$port" "$tmp/token" "$grit" "$step" "$neox" "$tmp/serve.log" ||
  fail "client checks (above)"
"$py" "$here/serve_batch.py" "$port" "$tmp/token" "$grit" "$step" "$neox" "$port2" $small_mib ||
  fail "batching checks (above)"
kill -TERM "$pid2"
wait "$pid2"; rc=$?
pid2=""
[ $rc -eq 0 ] || fail "SIGTERM of the small-budget server: exit $rc: $(tail -3 "$tmp/small.log")"
kill -TERM "$pid"
wait "$pid"; rc=$?
pid=""
[ $rc -eq 0 ] || fail "SIGTERM: exit $rc, expected 0: $(tail -3 "$tmp/serve.log")"
grep -q "SIGTERM, stopping" "$tmp/serve.log" || fail "no clean stop in the log"

env -u GRIT_SERVE_TOKEN "$grit" serve "$step" --tokenizer "$neox" --port 0 > "$tmp/nosecret.out" 2>&1 &&
  fail "a server without a secret started"
grep -q "GRIT_SERVE_TOKEN or give --token-file" "$tmp/nosecret.out" || fail "no clear error without a secret: $(cat "$tmp/nosecret.out")"
GRIT_SERVE_TOKEN=short "$grit" serve "$step" --tokenizer "$neox" --port 0 > "$tmp/short.out" 2>&1 &&
  fail "a 5-character token was accepted"
grep -q "16 to 255 characters" "$tmp/short.out" || fail "no clear error for a short token: $(cat "$tmp/short.out")"
GRIT_SERVE_TOKEN=0123456789abcdef0123 "$grit" serve "$tmp/nothing" --tokenizer "$neox" --port 0 > "$tmp/bad.out" 2>&1 &&
  fail "a missing checkpoint was accepted"
grep -q "$tmp/nothing" "$tmp/bad.out" || fail "the error does not name the checkpoint: $(cat "$tmp/bad.out")"
GRIT_SERVE_TOKEN=0123456789abcdef0123 "$grit" serve "$step" --tokenizer "$neox" --port 0 --kv-budget-mib 0 > "$tmp/budget.out" 2>&1 &&
  fail "a zero KV budget was accepted"
grep -q "kv-budget-mib: expected" "$tmp/budget.out" || fail "no clear error for a zero KV budget: $(cat "$tmp/budget.out")"
[ $fails -eq 0 ] && echo "serve: all checks passed"
exit $((fails > 0))
