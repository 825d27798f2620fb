#!/usr/bin/env bash
# rate.sh GRIT PYTHON TOKENIZER_JSON - grit rate end to end (docs/rate.md).
#
# Trains a tiny GPT-NeoX with two checkpoints; init (and bad prompt files), batch over
# both checkpoints with a webhook (a local Python receiver) announcing it; a greedy
# answer equals `grit generate`; two raters added; serve; rater alice rates 3 answers in
# Chromium with the keyboard, the server is killed with SIGKILL and the database holds
# exactly those 3 ratings; served again, alice finishes and bob rates every answer (his
# order differs from alice's); the webhook announces the rated batch; results equal an
# independent Python computation from the database (rate_check.py); exports equal the
# database; bad requests get their 4xx.
set -euo pipefail
grit=$1 py=$2 tokjson=$3
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
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
[ -x /usr/bin/chromium ] || { echo "FAIL: /usr/bin/chromium not found (make deps)"; exit 1; }
command -v node >/dev/null || { echo "FAIL: node not found (make deps)"; exit 1; }
bash "$root/scripts/npm-once.sh" "$root/web" rate playwright-core/package.json uplot/package.json

"$grit" train "$root/tests/configs/rate_tiny.json" --run-dir "$tmp/run" --quiet
ck2=$tmp/run/ckpt/step_00000002 ck4=$tmp/run/ckpt/step_00000004
[ -d "$ck2" ] && [ -d "$ck4" ] || { echo "FAIL: no checkpoints: $(ls "$tmp/run/ckpt")"; exit 1; }

# --- the webhook receiver: appends "Content-Type<TAB>body" per POST to hooks.jsonl
"$py" "$here/webhook_receiver.py" "$tmp/hooks.jsonl" "$tmp/hookport" & pids+=($!)
for _ in $(seq 1 100); do [ -s "$tmp/hookport" ] && break; sleep 0.1; done
hook="http://127.0.0.1:$(cat "$tmp/hookport")/services/T000/B000/secret"

# --- init: bad files are clear errors; then the prompt set
db=$tmp/r.db
printf '{"id":"a","prompt":"x"}\n{"id":"b"}\n' > "$tmp/bad1.jsonl"
rc=0; out=$("$grit" rate init "$tmp/bad.db" --prompts "$tmp/bad1.jsonl" 2>&1) || rc=$?
{ [ $rc -eq 1 ] && grep -q "bad1.jsonl:2: field 'prompt': expected a string" <<<"$out"; } ||
  fail "missing prompt field: rc=$rc $out"
printf '{"id":"a","prompt":"x"}\n{"id":"a","prompt":"y"}\n' > "$tmp/bad2.jsonl"
rc=0; out=$("$grit" rate init "$tmp/bad2.db" --prompts "$tmp/bad2.jsonl" 2>&1) || rc=$?
{ [ $rc -eq 1 ] && grep -q "bad2.jsonl:2: field 'id': 'a' appears twice" <<<"$out"; } ||
  fail "duplicate id: rc=$rc $out"
cat > "$tmp/prompts.jsonl" <<'JSONL'
{"id": "cat", "prompt": "The cat sat"}
{"id": "story", "prompt": "Once upon a time"}
{"id": "quote", "prompt": "He said \"hello\" and"}
{"id": "math", "prompt": "Two plus two is"}
JSONL
out=$("$grit" rate init "$db" --prompts "$tmp/prompts.jsonl")
ver=$(sha256sum "$tmp/prompts.jsonl" | cut -d' ' -f1)
grep -q "4 prompts, version $ver" <<<"$out" || fail "init: $out (expected version $ver)"
echo '{"id":"z","prompt":"other"}' > "$tmp/other.jsonl"
rc=0; out=$("$grit" rate init "$db" --prompts "$tmp/other.jsonl" 2>&1) || rc=$?
{ [ $rc -eq 1 ] && grep -q "holds prompt set version" <<<"$out"; } || fail "second prompt set: $out"

# --- batch over both checkpoints, announced on the webhook
out=$("$grit" rate batch "$db" --checkpoint "$ck2" --checkpoint "$tmp/run" --tokenizer "$tokjson" \
  --max-tokens 12 --threads 2 --webhook "$hook" 2>"$tmp/batch.err") || { cat "$tmp/batch.err"; exit 1; }
grep -q "batch 1: 8 answers from 2 checkpoint" <<<"$out" || fail "batch: $out"
n=$("$py" -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(c.execute(\"SELECT count(*), count(DISTINCT checkpoint), group_concat(DISTINCT step), min(version=?) FROM answers\", (sys.argv[2],)).fetchone())" "$db" "$ver")
[ "$n" = "(8, 2, '2,4', 1)" ] || fail "answers in the DB: $n (expected 8 rows, steps 2 and 4, version $ver)"
grep -q 'application/json	{"text": *"grit rate: batch 1 is ready: 8 answers' "$tmp/hooks.jsonl" ||
  fail "batch webhook: $(cat "$tmp/hooks.jsonl" 2>/dev/null)"
# byte-level tokens can end inside a UTF-8 sequence: stored answers are valid UTF-8
bad=$("$py" -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.text_factory=bytes
n=0
for (t,) in c.execute('SELECT text FROM answers'):
    try: n += '\ufffd' in t.decode('utf-8')
    except UnicodeDecodeError: print('invalid', t); sys.exit(1)
print(n)" "$db") || fail "an answer is not valid UTF-8: $bad"
# grit generate prints raw token bytes; grit rate stores them with each invalid UTF-8 byte
# as U+FFFD: lossy() applies that rule to generate's output
lossy() { "$py" -c "import codecs,sys; codecs.register_error('per_byte', lambda e: ('\ufffd', e.start + 1)); sys.stdout.write(sys.stdin.buffer.read().decode('utf-8', 'per_byte'))"; }
gen=$("$grit" generate --checkpoint "$ck4" --tokenizer "$tokjson" --threads 2 --max-tokens 12 --quiet "The cat sat" | lossy)
ans=$("$py" -c "import sqlite3,sys; print('The cat sat' + sqlite3.connect(sys.argv[1]).execute(\"SELECT text FROM answers WHERE prompt='cat' AND step=4\").fetchone()[0])" "$db")
[ "$gen" = "$ans" ] || fail "greedy answer differs from grit generate: '$ans' vs '$gen'"
# seeded sampling: the same seed, the same answers; the first prompt's = grit generate's
sampled() { # sampled DB SEED -> the answers, one line each
  "$grit" rate init "$1" --prompts "$tmp/prompts.jsonl" >/dev/null
  "$grit" rate batch "$1" --checkpoint "$ck4" --tokenizer "$tokjson" --max-tokens 12 --threads 2 \
    --temperature 0.9 --seed "$2" >/dev/null 2>&1
  "$py" -c "import sqlite3,sys; [print(repr(t)) for (t,) in sqlite3.connect(sys.argv[1]).execute('SELECT text FROM answers ORDER BY id')]" "$1"
}
s1=$(sampled "$tmp/s1.db" 3) s2=$(sampled "$tmp/s2.db" 3) s3=$(sampled "$tmp/s3.db" 4)
[ "$s1" = "$s2" ] && [ -n "$s1" ] || fail "batch sampling with seed 3 is not reproducible"
[ "$s1" != "$s3" ] || fail "seeds 3 and 4 gave the same answers"
g3=$("$grit" generate --checkpoint "$ck4" --tokenizer "$tokjson" --threads 2 --max-tokens 12 --quiet \
  --temperature 0.9 --seed 3 "The cat sat" | lossy)
a3=$("$py" -c "import sqlite3,sys; print('The cat sat' + sqlite3.connect(sys.argv[1]).execute(\"SELECT text FROM answers WHERE prompt='cat'\").fetchone()[0])" "$tmp/s1.db")
[ "$g3" = "$a3" ] || fail "sampled answer differs from grit generate --seed 3: '$a3' vs '$g3'"
echo "ok   init, batch (8 answers, 2 checkpoints, version recorded), webhook, = grit generate (greedy and seeded)"

# --- raters
alice=$("$grit" rate add-rater "$db" alice)
bob=$("$grit" rate add-rater "$db" bob)
[[ "$alice" =~ ^[0-9a-f]{64}$ ]] && [ "$alice" != "$bob" ] || fail "tokens: '$alice' '$bob'"
if "$py" -c "import sqlite3,sys; d=open(sys.argv[1],'rb').read()+open(sys.argv[1]+'-wal','rb').read() if __import__('os').path.exists(sys.argv[1]+'-wal') else open(sys.argv[1],'rb').read(); sys.exit(0 if sys.argv[2].encode() in d else 1)" "$db" "$alice"; then
  fail "the token is stored in the database"
fi

serve() { # serve PORT LOG
  "$grit" rate serve "$db" --port "$1" --port-file "$tmp/port" --webhook "$hook" --webhook-min 2 \
    2>>"$2" & spid=$!; pids+=($spid)
  for _ in $(seq 1 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
  port=$(cat "$tmp/port")
}
rm -f "$tmp/port"; serve 0 "$tmp/serve.log"
url="http://127.0.0.1:$port/"
node "$root/tests/browser/rate.mjs" "$url" "$alice" alice 3 > "$tmp/alice1.txt" || { cat "$tmp/alice1.txt"; fail "alice's first session"; }
kill -9 "$spid"; wait "$spid" 2>/dev/null || true
got=$("$py" -c "import sqlite3,sys; print(' '.join(str(r[0]) for r in sqlite3.connect(sys.argv[1]).execute('SELECT answer FROM ratings ORDER BY id')))" "$db")
want=$(awk '/^rated/ {printf "%s%s", s, $2; s=" "}' "$tmp/alice1.txt")
[ -n "$want" ] && [ "$got" = "$want" ] || fail "after kill -9: ratings in the DB '$got', submitted '$want'"
echo "ok   kill -9 of the server: the 3 submitted ratings are in the database ($got)"

rm -f "$tmp/port"; serve "$port" "$tmp/serve.log"
node "$root/tests/browser/rate.mjs" "$url" "$alice" alice 100 > "$tmp/alice2.txt" || { cat "$tmp/alice2.txt"; fail "alice's second session"; }
node "$root/tests/browser/rate.mjs" "$url" "$bob" bob 100 > "$tmp/bob.txt" || { cat "$tmp/bob.txt"; fail "bob's session"; }
grep -q '^done' "$tmp/alice2.txt" && grep -q '^done' "$tmp/bob.txt" || fail "a rater did not reach the end"
pos=$(awk '/^rated/ {printf "%s ", $5}' "$tmp/alice1.txt" "$tmp/alice2.txt")
[ "$pos" = "1 2 3 4 5 6 7 8 " ] || fail "alice's positions after the restart: $pos"
oa=$(awk '/^rated/ {printf "%s ", $2}' "$tmp/alice1.txt" "$tmp/alice2.txt")
ob=$(awk '/^rated/ {printf "%s ", $2}' "$tmp/bob.txt")
[ "$(tr ' ' '\n' <<<"$oa" | sort -n | xargs)" = "1 2 3 4 5 6 7 8" ] || fail "alice rated: $oa"
[ "$(tr ' ' '\n' <<<"$ob" | sort -n | xargs)" = "1 2 3 4 5 6 7 8" ] || fail "bob rated: $ob"
[ "$oa" != "$ob" ] || fail "alice and bob saw the same order: $oa"
echo "ok   two raters in Chromium: alice $oa/ bob $ob(orders differ)"
for _ in $(seq 1 50); do grep -q "batch 1 is rated" "$tmp/hooks.jsonl" && break; sleep 0.1; done
grep -q '"grit rate: batch 1 is rated (every answer has at least 2 ratings)' "$tmp/hooks.jsonl" ||
  fail "results webhook: $(cat "$tmp/hooks.jsonl")"
[ "$(grep -c 'is rated' "$tmp/hooks.jsonl")" = 1 ] || fail "the results webhook came more than once"
grep -q "$alice\|$bob" "$tmp/serve.log" && fail "a token is in the server log"

# --- bad requests: 4xx with a message, the server lives on
req() { curl -s -o "$tmp/body" -w '%{http_code}' "$@"; }
c=$(req -H "Authorization: Bearer $bob" "${url}api/rate" -d '{"answer":1,"score":3,"fabrication":false}')
{ [ "$c" = 409 ] && grep -q "already rated" "$tmp/body"; } || fail "second rating: $c $(cat "$tmp/body")"
c=$(req -H "Authorization: Bearer $bob" "${url}api/rate" -d '{"answer":1,"score":9,"fabrication":false}')
{ [ "$c" = 400 ] && grep -q "field 'score'" "$tmp/body"; } || fail "score 9: $c $(cat "$tmp/body")"
c=$(req -H "Authorization: Bearer $bob" "${url}api/rate" -d '{"answer":1,')
[ "$c" = 400 ] || fail "malformed JSON: $c"
c=$(req -H "Authorization: Bearer $bob" "${url}api/rate" --data-binary @<(head -c 100000 /dev/zero | tr '\0' x))
[ "$c" = 413 ] || fail "100 kB body: $c"
c=$(req -H "Authorization: Bearer 00$bob" "${url}api/next"); [ "$c" = 401 ] || fail "bad token: $c"
c=$(req "${url}api/next"); [ "$c" = 401 ] || fail "no token: $c"
c=$(req -H "Authorization: Bearer $bob" "${url}api/next")
{ [ "$c" = 200 ] && grep -q '"done": *true' "$tmp/body"; } || fail "bob's next after all: $c $(cat "$tmp/body")"
c=$(req "${url}../r.db"); [ "$c" = 404 ] || fail "a path outside the routes: $c"
# 70 clients trickling one header byte every 0.3 s hold every slot (64) until their
# absolute deadline (5 s from connecting) cuts them; then a rater gets through
cat > "$tmp/trickle.py" <<'PY'
import socket, sys, time
port = int(sys.argv[1])
socks = []
for _ in range(70):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2); socks.append(s)
    except OSError:
        pass
t0 = time.time()
while time.time() - t0 < 20 and socks:
    for s in list(socks):
        try: s.send(b"G")
        except OSError: socks.remove(s)
    time.sleep(0.3)
print(len(socks))
PY
"$py" "$tmp/trickle.py" "$port" > "$tmp/trickle.out" & tpid=$!; pids+=($tpid)
sleep 1
t0=$(date +%s.%N)
c=000
for _ in $(seq 1 30); do
  c=$(curl -s -m 2 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $bob" "${url}api/next" || true)
  [ "$c" = 200 ] && break; sleep 0.3
done
dt=$(echo "$(date +%s.%N) - $t0" | bc)
wait "$tpid" || true
if [ "$c" = 200 ] && [ "$(echo "$dt < 12" | bc)" = 1 ] && [ "$(cat "$tmp/trickle.out")" = 0 ]; then
  echo "ok   70 trickling clients cut at their deadline; a rater got through after ${dt}s"
else
  fail "trickling clients: a rater got HTTP $c after ${dt}s; $(cat "$tmp/trickle.out") tricklers still connected after 20 s"
fi
kill -0 "$spid" || fail "the server died"
echo "ok   bad requests: 409, 400, 400, 413, 401, 401, 404; the server lives on"
kill "$spid"; wait "$spid" 2>/dev/null || true

# --- results and exports against an independent computation
"$grit" rate results "$db"
"$grit" rate results "$db" --json > "$tmp/results.json"
"$grit" rate export "$db" --csv "$tmp/out.csv"
"$grit" rate export "$db" --jsonl "$tmp/out.jsonl"
"$py" "$here/rate_check.py" "$db" "$tmp/results.json" "$tmp/out.csv" "$tmp/out.jsonl" || fail "rate_check.py"
if [ "$fails" -eq 0 ]; then echo "rate: all checks passed"; else echo "rate: $fails failure(s)"; fi
[ "$fails" -eq 0 ]
