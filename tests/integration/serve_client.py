#!/usr/bin/env python3
"""serve_client.py PORT TOKEN_FILE GRIT CHECKPOINT TOKENIZER LOG - checks a running
`grit serve --chat zephyr` over loopback (tests/integration/serve.sh starts and ends it).

  - /health without the token; /v1/* refuse a missing or wrong token (401, OpenAI error body);
  - greedy completions equal `grit generate` (bytes decoded as UTF-8 with replacement);
  - the same seed gives the same sample, another seed another; stop strings cut the text;
  - 8 concurrent clients each get their solo greedy answer;
  - malformed JSON, unknown fields, wrong types, a prompt past the context, a body past the
    limit, a missing prompt, wrong methods and routes: the right 4xx with an error body;
  - a client that trickles its request is cut off by the deadline while others are served;
  - "stream": true: the server-sent events concatenate to the non-streaming greedy answer
    (= grit generate); 8 concurrent streaming clients each get their solo answer; clients that
    close mid-stream disturb no one and the server keeps serving;
  - /v1/chat/completions equals grit generate --chat zephyr (whole and streamed); malformed
    messages get a 400 naming the field;
  - /metrics: the latency and time-to-first-token histograms parse, are cumulative, and their
    _count is the number of generation requests made; the log never holds the token.
Exits 1 on the first failed group, printing what differs."""
import http.client
import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

PORT, TOKEN_FILE, GRIT, CKPT, TOK, LOG = sys.argv[1:7]
BASE = f"http://127.0.0.1:{PORT}"
TOKEN = open(TOKEN_FILE).read().strip()
fails = 0
made = 0  # generation requests the server must count (all but the 413s, answered before routing)


def fail(msg):
    global fails
    fails += 1
    print("FAIL:", msg)


def call(method, path, body=None, token=TOKEN, raw=None, timeout=60):
    global made
    if path in ("/v1/completions", "/v1/chat/completions"):
        made += 1
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(BASE + path, data=data, method=method)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read()) if "json" in r.headers.get("Content-Type", "") else None
    except urllib.error.HTTPError as e:
        text = e.read()
        try:
            return e.code, json.loads(text)
        except ValueError:
            return e.code, text


def error_of(status, body, want_status, want_type=None, want_param=None, want_text=None):
    if status != want_status or not isinstance(body, dict) or "error" not in body:
        return f"status {status} body {body!r}, expected {want_status} with an error body"
    e = body["error"]
    if want_type and e.get("type") != want_type:
        return f"error type {e.get('type')}, expected {want_type}"
    if want_param and e.get("param") != want_param:
        return f"error param {e.get('param')}, expected {want_param}"
    if want_text and want_text not in e.get("message", ""):
        return f"message {e.get('message')!r} lacks {want_text!r}"
    return None


def complete(prompt, **kw):
    body = dict(prompt=prompt, **kw)
    return call("POST", "/v1/completions", body)


def generate(prompt, n, chat=None):
    out = subprocess.run([GRIT, "generate", "--checkpoint", CKPT, "--tokenizer", TOK, "--threads", "2",
                          "--max-tokens", str(n), "--quiet"] + (["--chat", chat] if chat else []) + [prompt],
                         capture_output=True, check=True).stdout
    if chat:  # only the answer
        return out[:-1].decode("utf-8", errors="replace")
    assert out.startswith(prompt.encode()) and out.endswith(b"\n"), out
    return out[len(prompt.encode()):-1].decode("utf-8", errors="replace")


def stream(path, body, close_after=None):
    """POSTs body with "stream": true; returns (status, text, finish_reason, events, err). Reads
    the server-sent events to data: [DONE]; close_after=k closes the socket after k events."""
    global made
    made += 1
    conn = http.client.HTTPConnection("127.0.0.1", int(PORT), timeout=60)
    conn.request("POST", path, json.dumps(dict(body, stream=True)),
                 {"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        st, b = r.status, r.read()
        conn.close()
        return st, None, None, 0, b
    if not r.getheader("Content-Type", "").startswith("text/event-stream"):
        conn.close()
        return r.status, None, None, 0, f"Content-Type {r.getheader('Content-Type')}"
    text, finish, events, done, chat = [], None, 0, False, path.endswith("chat/completions")
    while True:
        line = r.readline()
        if not line:
            break
        line = line.decode().rstrip("\n")
        if not line:
            continue
        if not line.startswith("data: "):
            conn.close()
            return 200, None, None, events, f"not an event line: {line!r}"
        data = line[6:]
        if data == "[DONE]":
            done = True
            break
        ev = json.loads(data)
        events += 1
        want = "chat.completion.chunk" if chat else "text_completion"
        if ev.get("object") != want or len(ev["choices"]) != 1:
            conn.close()
            return 200, None, None, events, f"event shape: {ev}"
        c = ev["choices"][0]
        if chat and (events == 1) != (c["delta"].get("role") == "assistant"):
            conn.close()
            return 200, None, None, events, f"role only in the first delta: {ev}"
        piece = c["delta"].get("content", "") if chat else c["text"]
        text.append(piece)
        if c.get("finish_reason"):
            finish = c["finish_reason"]
        if close_after and events >= close_after:
            conn.sock.shutdown(socket.SHUT_RDWR)
            conn.close()
            return 200, "".join(text), None, events, "closed"
    conn.close()
    if not done:
        return 200, None, None, events, "no data: [DONE]"
    return 200, "".join(text), finish, events, None


# --- auth -------------------------------------------------------------------------------------
st, b = call("GET", "/health", token=None)
if st != 200 or b.get("status") != "ok":
    fail(f"/health: {st} {b}")
for tok, what in ((None, "no token"), ("x" * 64, "a wrong token"), (TOKEN[:-1], "a truncated token")):
    for m, p in (("GET", "/v1/models"), ("POST", "/v1/completions")):
        st, b = call(m, p, {"prompt": "x"} if m == "POST" else None, token=tok)
        e = error_of(st, b, 401, "authentication_error")
        if e:
            fail(f"{m} {p} with {what}: {e}")
st, b = call("GET", "/v1/models")
if st != 200 or b["data"][0]["id"] != os.path.basename(CKPT.rstrip("/")):
    fail(f"/v1/models: {st} {b}")
print("ok   auth: /health open; /v1 routes refuse no, wrong and truncated tokens")

# --- greedy equals grit generate ----------------------------------------------------------------
prompts = ["The cat sat", "Once upon a time", "grit serves"]
solo = {}
for p in prompts:
    st, b = complete(p, max_tokens=12, temperature=0)
    want = generate(p, 12)
    got = b["choices"][0]["text"] if st == 200 else None
    solo[p] = got
    if got != want:
        fail(f"greedy {p!r}: serve {got!r} != generate {want!r} ({st} {b})")
    elif b["usage"]["completion_tokens"] > 12 or b["object"] != "text_completion":
        fail(f"greedy {p!r}: usage/object {b}")
print(f"ok   greedy equals grit generate for {len(prompts)} prompts, e.g. {solo[prompts[0]]!r}")

# --- sampling, seeds, stop --------------------------------------------------------------------
kw = dict(max_tokens=16, temperature=0.9, top_k=40, top_p=0.95)
a = complete("The cat sat", seed=3, **kw)[1]["choices"][0]["text"]
b2 = complete("The cat sat", seed=3, **kw)[1]["choices"][0]["text"]
c = complete("The cat sat", seed=4, **kw)[1]["choices"][0]["text"]
if a != b2 or a == c:
    fail(f"sampling: seed 3 twice {a!r} / {b2!r}, seed 4 {c!r}")
full = solo["Once upon a time"]
if full and len(full) > 6:
    cut = full[3:6]
    st, b = complete("Once upon a time", max_tokens=12, temperature=0, stop=[cut, "never-in-this-text"])
    got = b["choices"][0] if st == 200 else {"text": None, "error": b}
    if got["text"] != full[:full.index(cut)] or got["finish_reason"] != "stop":
        fail(f"stop {cut!r}: {got} from {full!r}")
else:
    fail(f"greedy text too short for the stop test: {full!r}")
print("ok   seeded sampling repeats, another seed differs; stop strings cut the text")

# --- concurrent clients -----------------------------------------------------------------------
results = {}


def worker(i):
    p = prompts[i % len(prompts)]
    st, b = complete(p, max_tokens=12, temperature=0)
    results[i] = (p, st, b["choices"][0]["text"] if st == 200 else b)


threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
bad = [(i, r) for i, r in results.items() if r[1] != 200 or r[2] != solo[r[0]]]
if bad or len(results) != 8:
    fail(f"concurrent: {bad[:3]}")
print("ok   8 concurrent clients each got their solo greedy answer")

# --- bad requests -----------------------------------------------------------------------------
cases = [
    ("malformed JSON", dict(raw=b'{"prompt": "x",'), 400, "invalid_request_error", None, "malformed JSON"),
    ("not an object", dict(raw=b'[1,2]'), 400, None, None, "JSON object"),
    ("unknown field", dict(body={"prompt": "x", "temprature": 1}), 400, None, "temprature", "unknown field"),
    ("wrong type", dict(body={"prompt": "x", "temperature": "hot"}), 400, None, "temperature", None),
    ("out of range", dict(body={"prompt": "x", "top_p": 0}), 400, None, "top_p", None),
    ("missing prompt", dict(body={"max_tokens": 3}), 400, None, "prompt", "missing"),
    ("prompt past the context", dict(body={"prompt": [1] * 70}), 400, None, "prompt", "context"),
    ("token id past the vocabulary", dict(body={"prompt": [1, 99999999]}), 400, None, "prompt", None),
    ("stream not a boolean", dict(body={"prompt": "x", "stream": "yes"}), 400, None, "stream", None),
    ("huge body", dict(body={"prompt": "word " * 40000}), 413, None, None, "limit"),
]
made -= 1  # the huge body: a 413 before routing
for name, args, code, typ, param, text in cases:
    st, b = call("POST", "/v1/completions", **args)
    e = error_of(st, b, code, typ, param, text)
    if e:
        fail(f"{name}: {e}")
for m, p, code in (("GET", "/v1/completions", 405), ("GET", "/nope", 404), ("POST", "/v1/models", 405)):
    st, b = call(m, p, {} if m == "POST" else None)
    e = error_of(st, b, code)
    if e:
        fail(f"{m} {p}: {e}")
st, _ = call("GET", "/health", token=None)
if st != 200:
    fail("the server did not survive the bad requests")
print(f"ok   {len(cases) + 3} bad requests: the right 4xx with an OpenAI error body")

# --- slow clients -----------------------------------------------------------------------------
slow = []
for _ in range(4):
    s = socket.create_connection(("127.0.0.1", int(PORT)))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
    slow.append(s)
t0, closed_at = time.time(), [None] * len(slow)
served = 0
while time.time() - t0 < 16 and None in closed_at:
    for i, s in enumerate(slow):
        if closed_at[i] is None:
            try:
                s.sendall(b"X")  # one byte now and then: an idle timeout would never fire
                s.settimeout(0.01)
                if s.recv(1) == b"":
                    closed_at[i] = time.time() - t0
            except socket.timeout:
                pass
            except OSError:
                closed_at[i] = time.time() - t0
    if call("GET", "/health", token=None, timeout=5)[0] == 200:
        served += 1
    time.sleep(0.5)
for s in slow:
    s.close()
if None in closed_at or max(closed_at) > 13 or served < 5:
    fail(f"slow clients: closed after {closed_at} s (deadline 10 s), {served} health checks served meanwhile")
else:
    print(f"ok   4 trickling clients cut off after {max(closed_at):.1f} s; {served} requests served meanwhile")

# --- streaming --------------------------------------------------------------------------------
for p in prompts:
    st, text, finish, events, err = stream("/v1/completions", dict(prompt=p, max_tokens=12, temperature=0))
    if err or text != solo[p] or finish not in ("stop", "length") or events < 2:
        fail(f"stream {p!r}: {st} {text!r} (finish {finish}, {events} events, {err}) != {solo[p]!r}")
if full and len(full) > 6:  # a stop string: streamed pieces hold back what it could still cut
    st, text, finish, events, err = stream("/v1/completions", dict(prompt="Once upon a time", max_tokens=12,
                                                                   temperature=0, stop=[cut, "never-in-this-text"]))
    if err or text != full[:full.index(cut)] or finish != "stop":
        fail(f"stream with stop {cut!r}: {text!r} {finish} {err} from {full!r}")
print(f"ok   streamed greedy text equals the whole answer and grit generate for {len(prompts)} prompts")

sres = {}


def sworker(i, close):
    p = prompts[i % len(prompts)]
    sres[i] = (p, close) + stream("/v1/completions", dict(prompt=p, max_tokens=40 if close else 12,
                                                          temperature=0), close_after=2 if close else None)


threads = [threading.Thread(target=sworker, args=(i, i in (3, 9))) for i in range(10)]
for t in threads:
    t.start()
for t in threads:
    t.join()
bad = [(i, r) for i, r in sres.items() if not r[1] and (r[2] != 200 or r[3] != solo[r[0]] or r[6])]
if bad or len(sres) != 10:
    fail(f"concurrent streams: {bad[:3]}")
st, text, _, _, err = stream("/v1/completions", dict(prompt=prompts[0], max_tokens=12, temperature=0))
if err or text != solo[prompts[0]] or call("GET", "/health", token=None)[0] != 200:
    fail(f"after clients closed mid-stream: {st} {text!r} {err}")
print("ok   8 concurrent streaming clients got their solo answers beside 2 that closed mid-stream; "
      "the server serves on")

# --- chat --------------------------------------------------------------------------------------
for p in prompts[:2]:
    want = generate(p, 12, chat="zephyr")
    st, b = call("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": p}],
                                                  "max_tokens": 12, "temperature": 0})
    ch = b["choices"][0] if st == 200 else {}
    if st != 200 or b.get("object") != "chat.completion" or ch["message"] != {"role": "assistant", "content": want} \
            or ch["finish_reason"] not in ("stop", "length") or b["usage"]["completion_tokens"] > 12:
        fail(f"chat {p!r}: {st} {b} != grit generate --chat zephyr {want!r}")
    st, text, finish, events, err = stream("/v1/chat/completions", {"messages": [{"role": "user", "content": p}],
                                                                     "max_tokens": 12, "temperature": 0})
    if err or text != want:
        fail(f"streamed chat {p!r}: {st} {text!r} {err} != {want!r}")
two = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
       {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "The cat sat"}]
mfile = os.path.join(os.path.dirname(LOG), "messages.json")
with open(mfile, "w") as f:
    json.dump(two, f)
out = subprocess.run([GRIT, "generate", "--checkpoint", CKPT, "--tokenizer", TOK, "--threads", "2",
                      "--max-tokens", "8", "--quiet", "--chat", "zephyr", "--messages", mfile],
                     capture_output=True, check=True).stdout
want = out[:-1].decode("utf-8", errors="replace")
st, b = call("POST", "/v1/chat/completions", {"messages": two, "max_tokens": 8, "temperature": 0})
if st != 200 or b["usage"]["prompt_tokens"] <= 8 or b["choices"][0]["message"]["content"] != want:
    fail(f"multi-turn chat: {st} {b} != grit generate --messages {want!r}")
print(f"ok   chat completions equal grit generate --chat zephyr (whole, streamed, and a system + "
      f"3-turn conversation via --messages: {want!r})")
M = "/v1/chat/completions"
chat_cases = [
    ("no messages", {"max_tokens": 3}, "messages", "missing"),
    ("empty list", {"messages": []}, "messages", "non-empty"),
    ("not a list", {"messages": "hi"}, "messages", None),
    ("missing role", {"messages": [{"content": "hi"}]}, "messages[0].role", None),
    ("unknown role", {"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role", "wizard" and "user"),
    ("missing content", {"messages": [{"role": "user"}]}, "messages[0].content", None),
    ("content not a string", {"messages": [{"role": "user", "content": 3}]}, "messages[0].content", None),
    ("message not an object", {"messages": ["hi"]}, "messages[0]", None),
    ("system not first", {"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "b"}]},
     "messages[1].role", "system"),
    ("assistant last", {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]},
     "messages[1].role", "last"),
    ("prompt on chat", {"messages": [{"role": "user", "content": "a"}], "prompt": "x"}, "prompt", "unknown field"),
]
for name, body, param, text in chat_cases:
    st, b = call("POST", M, body)
    e = error_of(st, b, 400, "invalid_request_error", param, text)
    if e:
        fail(f"chat {name}: {e}")
print(f"ok   {len(chat_cases)} malformed chat bodies: 400 naming the field")

# --- metrics, the secret ----------------------------------------------------------------------
def histogram(prom, name):
    le, count, total = [], None, None
    for l in prom.splitlines():
        if l.startswith(name + "_bucket{le=\""):
            bound = l.split('"')[1]
            le.append((float("inf") if bound == "+Inf" else float(bound), float(l.split()[1])))
        elif l.startswith(name + "_count "):
            count = float(l.split()[1])
        elif l.startswith(name + "_sum "):
            total = float(l.split()[1])
    if f"# TYPE {name} histogram" not in prom or not le or count is None or total is None:
        return None, f"{name}: missing"
    if [b for b, _ in le] != sorted(b for b, _ in le) or [c for _, c in le] != sorted(c for _, c in le) \
            or le[-1] != (float("inf"), count):
        return None, f"{name}: buckets not cumulative or +Inf != _count: {le} {count}"
    return count, None


for _ in range(20):  # a stream closed mid-way is counted when the server notices
    with urllib.request.urlopen(BASE + "/metrics", timeout=10) as r:
        prom = r.read().decode()
    lat, e1 = histogram(prom, "grit_serve_request_seconds")
    if lat == made:
        break
    time.sleep(0.25)
ttft, e2 = histogram(prom, "grit_serve_time_to_first_token_seconds")
by_status = sum(float(l.split()[1]) for l in prom.splitlines() if l.startswith("grit_serve_requests_total{"))
if e1 or e2 or lat != made or by_status != made or not 0 < ttft <= made:
    fail(f"/metrics: {e1} {e2}: request_seconds_count {lat}, requests_total {by_status}, ttft count {ttft}; "
         f"made {made} requests")
vals = {l.split()[0]: float(l.split()[1]) for l in prom.splitlines() if l and not l.startswith("#")}
if vals.get('grit_serve_requests_total{route="/v1/completions",code="200"}', 0) < 20 or \
        vals.get('grit_serve_requests_total{route="/v1/chat/completions",code="400"}', 0) != len(chat_cases) or \
        vals.get("grit_serve_completion_tokens_total", 0) < 12 * 10 or "grit_serve_queue_depth" not in vals:
    fail(f"/metrics: {prom[:1500]}")
if TOKEN in open(LOG, errors="replace").read():
    fail("the token appears in the server log")
if stat.S_IMODE(os.stat(TOKEN_FILE).st_mode) != 0o600:
    fail(f"token file mode {oct(os.stat(TOKEN_FILE).st_mode)}")
print(f"ok   /metrics: histograms count all {made} generation requests (ttft {ttft:.0f}), by status too; "
      f"{vals.get('grit_serve_streams_cancelled_total', 0):.0f} streams cancelled; the token is in no log "
      "line; token file 0600")
sys.exit(1 if fails else 0)
