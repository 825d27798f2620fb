#!/usr/bin/env bash
# rate_watch.sh GRIT TOKENIZER_JSON - grit rate watch (docs/rate.md): a batch for each new
# checkpoint of a training run, from outside the processes.
#  - a run with checkpoints at steps 2 and 4; step 4 held back: watch --once batches step 2
#    (the answers equal a plain `grit rate batch` of that step), a second poll makes nothing;
#  - step 4 appears (renamed in, as the trainer does): the next poll batches it together
#    with --baseline, and announces it to a webhook receiver (Slack-shaped JSON);
#  - a newer step whose weights are corrupt is skipped (said on the log), never batched;
#  - a watcher restarted on the same DB repeats nothing;
#  - grit rate serve posts its "batch is rated" webhooks off the request thread: against a
#    receiver that takes 3 s per post, every rating request still answers within 1.5 s, and
#    both announcements arrive, the second after SIGTERM (queued posts go out at close);
#  - the loop (--every 1) stops on SIGTERM between polls with exit 0, and a bad --every or
#    a missing run is a clear error.
set -euo pipefail
grit=$1 tokjson=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
py=/usr/bin/python3
"$grit" train "$here/../configs/rate_tiny.json" --run-dir "$tmp/run" --quiet
ck=$tmp/run/ckpt
mv "$ck/step_00000004" "$tmp/held"
printf '{"id":"a","prompt":"Hello"}\n{"id":"b","prompt":"The sky is"}\n{"id":"c","prompt":"1, 2, 3,"}\n' > "$tmp/p.jsonl"
"$grit" rate init "$tmp/db" --prompts "$tmp/p.jsonl" > /dev/null
cp "$tmp/db" "$tmp/ref"
w=(--tokenizer "$tokjson" --max-tokens 8 --threads 2)
q() { "$py" -c 'import sqlite3,sys; print("\n".join("|".join(map(str, r)) for r in sqlite3.connect(sys.argv[1]).execute(sys.argv[2])))' "$@"; }

out=$("$grit" rate watch "$tmp/db" --run "$tmp/run" --once "${w[@]}" 2>&1) || fail "watch 1: $out"
grep -q "watch: 1 new batch" <<<"$out" || fail "watch 1 made no batch: $out"
[ "$(q "$tmp/db" "select batch, step, count(*) from answers group by batch, step")" = "1|2|3" ] ||
  fail "watch 1: answers $(q "$tmp/db" "select batch, step, count(*) from answers group by batch, step")"
"$grit" rate batch "$tmp/ref" --checkpoint "$ck/step_00000002" "${w[@]}" > /dev/null 2>&1
[ "$(q "$tmp/db" "select prompt, text from answers order by id")" = "$(q "$tmp/ref" "select prompt, text from answers order by id")" ] ||
  fail "watch's answers differ from grit rate batch's"
out=$("$grit" rate watch "$tmp/db" --run "$tmp/run" --once "${w[@]}" 2>&1) || fail "watch 2: $out"
grep -q "watch: 0 new batch" <<<"$out" || fail "watch 2 repeated a batch: $out"

# a webhook receiver: "Content-Type<TAB>body" per POST
"$py" "$here/webhook_receiver.py" "$tmp/hooks" "$tmp/hookport" & pids+=($!)
for _ in $(seq 100); do [ -s "$tmp/hookport" ] && break; sleep 0.1; done
hook=http://127.0.0.1:$(cat "$tmp/hookport")/hook

mv "$tmp/held" "$ck/step_00000004"
out=$("$grit" rate watch "$tmp/db" --run "$tmp/run" --once --baseline "$ck/step_00000002" --webhook "$hook" "${w[@]}" 2>&1) ||
  fail "watch 3: $out"
[ "$(q "$tmp/db" "select batch, step, count(*) from answers where batch = 2 group by step order by step")" = $'2|2|3\n2|4|3' ] ||
  fail "watch 3: batch 2 should hold step 4 and the baseline: $(q "$tmp/db" "select batch, step, count(*) from answers group by batch, step")"
"$py" - "$tmp/hooks" <<'PY' || fail "webhook: $(cat "$tmp/hooks" 2>/dev/null)"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1, lines
t = json.loads(lines[0].split("\t", 1)[1])["text"]
assert "batch 2 is ready: 6 answers from new checkpoint" in t and "step_00000004" in t, t
PY

# a newer step whose weights do not match its manifest: skipped, nothing batched
cp -r "$ck/step_00000004" "$ck/step_00000006"
"$py" - "$ck/step_00000006/model.safetensors" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(-16, 2); b = f.read(1); f.seek(-16, 2); f.write(bytes([b[0] ^ 0x40]))
PY
out=$("$grit" rate watch "$tmp/db" --run "$tmp/run" --once "${w[@]}" 2>&1) || fail "watch 4: $out"
grep -q "skipping .*step_00000006" <<<"$out" && grep -q "watch: 0 new batch" <<<"$out" ||
  fail "a corrupt newer checkpoint was not skipped: $out"
rm -rf "$ck/step_00000006"
[ "$(q "$tmp/db" "select count(distinct batch) from answers")" = 2 ] || fail "batches: $(q "$tmp/db" "select count(distinct batch) from answers")"

# the loop: polls every second, SIGTERM between polls ends it with exit 0
"$grit" rate watch "$tmp/db" --run "$tmp/run" --every 1 "${w[@]}" > "$tmp/loop.out" 2> "$tmp/loop.err" & lp=$!; pids+=($lp)
sleep 2.5
kill -TERM "$lp"
rc=0; wait "$lp" || rc=$?
[ $rc -eq 0 ] && grep -q "SIGTERM, stopping" "$tmp/loop.err" && grep -q "watch: 0 new batch" "$tmp/loop.out" ||
  fail "the loop: rc $rc: $(cat "$tmp/loop.err" "$tmp/loop.out")"

# serve with a slow webhook receiver (3 s per post): ratings must not wait for it
"$py" "$here/webhook_receiver.py" "$tmp/slowhooks" "$tmp/slowport" 3 & pids+=($!)
for _ in $(seq 100); do [ -s "$tmp/slowport" ] && break; sleep 0.1; done
tok=$("$grit" rate add-rater "$tmp/db" carol)
"$grit" rate serve "$tmp/db" --port 0 --port-file "$tmp/sport" --webhook-min 1 \
  --webhook "http://127.0.0.1:$(cat "$tmp/slowport")/" 2> "$tmp/serve.err" & sp=$!; pids+=($sp)
for _ in $(seq 100); do [ -s "$tmp/sport" ] && break; sleep 0.1; done
"$py" - "http://127.0.0.1:$(cat "$tmp/sport")" "$tok" <<'PY' || fail "ratings waited for the webhook"
import json, sys, time, urllib.request
base, tok = sys.argv[1], sys.argv[2]
def call(path, body=None):
    r = urllib.request.Request(base + path, data=body, headers={"Authorization": "Bearer " + tok})
    return json.load(urllib.request.urlopen(r, timeout=10))
worst, n = 0.0, 0
while True:
    it = call("/api/next")
    if it.get("done"):
        break
    t0 = time.monotonic()
    call("/api/rate", json.dumps({"answer": it["answer"], "score": 4, "fabrication": False}).encode())
    worst, n = max(worst, time.monotonic() - t0), n + 1
print(f"{n} ratings, slowest request {worst:.2f} s (the receiver takes 3 s per post)")
sys.exit(0 if n == 9 and worst < 1.5 else 1)
PY
kill -TERM "$sp"; rc=0; wait "$sp" || rc=$?
[ $rc -eq 0 ] && [ "$(grep -c "is rated" "$tmp/slowhooks" 2>/dev/null)" = 2 ] ||
  fail "serve: rc $rc, announcements: $(cat "$tmp/slowhooks" 2>/dev/null); $(tail -3 "$tmp/serve.err")"

rc=0; out=$("$grit" rate watch "$tmp/db" --run "$tmp/run" --every 0 2>&1) || rc=$?
[ $rc -eq 2 ] && grep -q -- "--every: expected a number in \[1, 604800\], got '0'" <<<"$out" || fail "--every 0: rc $rc: $out"
rc=0; out=$("$grit" rate watch "$tmp/db" --run "$tmp/nope" --once 2>&1) || rc=$?
[ $rc -eq 1 ] && grep -q "$tmp/nope: No such file or directory (expected a training run directory)" <<<"$out" ||
  fail "missing run: rc $rc: $out"
[ $fails -eq 0 ] && echo "rate_watch: all checks passed"
exit $fails
