#!/usr/bin/env python3
"""serve_batch.py PORT TOKEN_FILE GRIT CHECKPOINT TOKENIZER SMALL_PORT SMALL_BUDGET_MIB - continuous
batching of `grit serve` (tests/integration/serve.sh starts and ends both servers):

  - 32 concurrent streaming clients with different prompts (so different positions) and
    max_tokens each get exactly their solo greedy answer (the same request made alone) and
    `grit generate`'s; /metrics shows decode steps of more than one request;
  - a seeded sampled request gives the same text alone and inside a batch of 31 others;
  - on the server with a tiny KV budget (SMALL_PORT): a request whose cache can never fit is a
    400 naming max_tokens and the budget; requests that fit one at a time but not together
    all get their solo answers (they wait for memory), and the cache gauge returns to 0.
Exits 1 when a check fails, printing what differs."""
import http.client
import json
import subprocess
import sys
import threading
import time

PORT, TOKEN_FILE, GRIT, CKPT, TOK, SMALL_PORT, SMALL_MIB = sys.argv[1:8]
TOKEN = open(TOKEN_FILE).read().strip()
fails = 0


def fail(msg):
    global fails
    fails += 1
    print("FAIL:", msg)



def post(port, body, timeout=120):
    conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=timeout)
    conn.request("POST", "/v1/completions", json.dumps(body),
                 {"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, json.loads(data)


def stream(port, body, timeout=120):
    """The concatenated text of a streamed completion (None and the error on failure)."""
    conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=timeout)
    conn.request("POST", "/v1/completions", json.dumps(dict(body, stream=True)),
                 {"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        return None, f"{r.status} {r.read()!r}"
    text, done = [], False
    for line in r:
        line = line.decode().rstrip("\n")
        if line == "data: [DONE]":
            done = True
            break
        if line.startswith("data: "):
            text.append(json.loads(line[6:])["choices"][0]["text"])
    conn.close()
    return ("".join(text), None) if done else (None, "no [DONE]")


def metrics(port):
    conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    return {l.split()[0]: float(l.split()[1]) for l in text.splitlines() if l and not l.startswith("#")}


def generate(prompt, n):
    out = subprocess.run([GRIT, "generate", "--checkpoint", CKPT, "--tokenizer", TOK, "--threads", "1",
                          "--max-tokens", str(n), "--quiet", prompt], capture_output=True, check=True).stdout
    return out[len(prompt.encode()):-1].decode("utf-8", errors="replace")


def concurrently(fn, args):
    out = [None] * len(args)
    go = threading.Barrier(len(args))

    def run(i):
        go.wait()
        out[i] = fn(*args[i])
    ts = [threading.Thread(target=run, args=(i,)) for i in range(len(args))]
    [t.start() for t in ts]
    [t.join() for t in ts]
    return out


# --- 32 streaming clients, each its solo greedy answer -------------------------------------------
words = "the cat sat on a mat while seven quiet rivers ran past old stone bridges".split()
reqs = [(" ".join(words[: 1 + i % len(words)]) + f" {i}", 4 + (i * 7) % 21) for i in range(32)]
solo = []
for p, n in reqs:
    st, b = post(PORT, dict(prompt=p, max_tokens=n, temperature=0))
    solo.append(b["choices"][0]["text"] if st == 200 else f"<{st} {b}>")
m0 = metrics(PORT)
got = concurrently(lambda p, n: stream(PORT, dict(prompt=p, max_tokens=n, temperature=0)), reqs)
bad = [(i, reqs[i], g, solo[i]) for i, g in enumerate(got) if g[0] != solo[i]]
if bad:
    fail(f"{len(bad)} of 32 concurrent streams differ from their solo answer, e.g. {bad[:2]}")
gen = [generate(p, n) for p, n in reqs]
badg = [(i, solo[i], gen[i]) for i in range(32) if solo[i] != gen[i]]
if badg:
    fail(f"{len(badg)} solo answers differ from grit generate, e.g. {badg[:2]}")
m = metrics(PORT)
# with 32 requests in flight the decode steps must have held several of them on average (one at
# a time, each step holds one)
steps = m.get("grit_serve_batch_size_steps_count", 0) - m0.get("grit_serve_batch_size_steps_count", 0)
made = m.get("grit_serve_batch_size_steps_sum", 0) - m0.get("grit_serve_batch_size_steps_sum", 0)
if not steps or made / steps < 2 or m.get("grit_serve_max_batch") != 32:
    fail(f"/metrics: {steps} decode steps averaging {made / max(steps, 1):.2f} requests, max_batch "
         f"{m.get('grit_serve_max_batch')}: no batching seen")
if m.get("grit_serve_kv_cache_bytes") != 0 or m.get("grit_serve_batch_size") != 0:
    fail(f"/metrics after the batch: kv_cache_bytes {m.get('grit_serve_kv_cache_bytes')}, batch_size "
         f"{m.get('grit_serve_batch_size')}, expected 0")
if not fails:
    print(f"ok   32 concurrent streams (prompts of 2..{max(len(p.split()) for p, _ in reqs)} words, "
          f"max_tokens 4..24) equal their solo answers and grit generate; mean batch "
          f"{made / steps:.1f} over {steps:.0f} steps")

# --- a seeded sample alone and in a batch --------------------------------------------------------
sample = dict(prompt="Once upon a time", max_tokens=20, temperature=0.9, top_k=40, top_p=0.95, seed=11)
st, b = post(PORT, sample)
alone = b["choices"][0]["text"] if st == 200 else None
others = [(dict(prompt=p, max_tokens=n, temperature=0.8, seed=i),) for i, (p, n) in enumerate(reqs[:31])]
both = concurrently(lambda body: post(PORT, body), [(sample,)] + others)
inbatch = both[0][1]["choices"][0]["text"] if both[0][0] == 200 else both[0]
if alone is None or inbatch != alone or any(r[0] != 200 for r in both):
    fail(f"seeded sample: alone {alone!r}, in a batch of 32 {inbatch!r}")
else:
    print(f"ok   a seeded sampled request gives {alone!r} alone and inside a batch of 32")

# --- the KV-cache budget -------------------------------------------------------------------------
st, b = post(SMALL_PORT, dict(prompt="The cat sat", max_tokens=60, temperature=0))
e = b.get("error", {}) if isinstance(b, dict) else {}
if st != 400 or e.get("param") != "max_tokens" or "--kv-budget-mib" not in e.get("message", ""):
    fail(f"a request past the KV budget: {st} {b}, expected a 400 naming max_tokens and the budget")
else:
    print(f"ok   past the budget: 400 {e['message']!r}")
fit = [(f"{w} river", 12) for w in words[:6]]
alone = []
for p, n in fit:
    st, b = post(SMALL_PORT, dict(prompt=p, max_tokens=n, temperature=0))
    alone.append(b["choices"][0]["text"] if st == 200 else f"<{st} {b}>")
together = concurrently(lambda p, n: post(SMALL_PORT, dict(prompt=p, max_tokens=n, temperature=0)), fit)
bad = [(i, t, alone[i]) for i, t in enumerate(together) if t[0] != 200 or t[1]["choices"][0]["text"] != alone[i]]
m = metrics(SMALL_PORT)
if bad or m.get("grit_serve_kv_cache_bytes") != 0 or m.get("grit_serve_kv_budget_bytes") != int(float(SMALL_MIB) * 1048576):
    fail(f"small budget: {bad[:2]}; kv_cache_bytes {m.get('grit_serve_kv_cache_bytes')}, budget "
         f"{m.get('grit_serve_kv_budget_bytes')}")
elif m.get('grit_serve_batch_size_steps_bucket{le="2"}') != m.get("grit_serve_batch_size_steps_count"):
    fail(f"small budget: decode steps held more requests than the budget allows: {m}")
else:
    print(f"ok   {len(fit)} concurrent requests over a {SMALL_MIB} MiB budget waited for memory and "
          "got their solo answers")
sys.exit(1 if fails else 0)
