#!/usr/bin/env python3
"""prep_make_corpus.py OUTDIR [FILES] [PAGES_PER_FILE] - a generated crawl for
prep_dist.sh and bench/prep.sh.

Writes OUTDIR/crawl/NN.warc.gz (one gzip member per record, as Common Crawl
does; each file is a shard of grit prep, so file i lands on rank i mod N)
and OUTDIR/planted.json: {"exact": [[copy_url, original_url]...],
"near": [[copy_url, original_url]...]}. Pages are 3 to 6 paragraphs of real
English prose (the Debian installation guide), drawn with a fixed seed, so
language ID and the quality filters see natural text and two unplanted pages
share little. Planted duplicates sit in a later file than their original,
chosen so that original and copy are on different ranks for 2 and 4 ranks:
exact copies (same text, other URL, other markup) and near copies (two
words of one paragraph changed). Deterministic for given arguments.
"""
import gzip, html, json, os, random, re, sys

IG = "/usr/share/doc/installation-guide-amd64/en"
out = sys.argv[1]
n_files = int(sys.argv[2]) if len(sys.argv) > 2 else 16
per_file = int(sys.argv[3]) if len(sys.argv) > 3 else 150

pool = []
for name in sorted(os.listdir(IG)):
    if not name.endswith(".html"):
        continue
    src = open(os.path.join(IG, name), encoding="utf-8").read()
    for m in re.finditer(r"<p>(.*?)</p>", src, re.S):
        t = " ".join(html.unescape(re.sub(r"<[^>]+>", "", m.group(1))).split())
        if len(t.split()) >= 25:
            pool.append(t)
pool = sorted(set(pool))
assert len(pool) >= 300, f"only {len(pool)} paragraphs in {IG}"


def page(title, ps, variant=0):
    body = "".join(f"<p>{html.escape(p)}</p>\n" for p in ps)
    nav = ('<nav><a href="/">Home</a> | <a href="/docs">Docs</a></nav>' if variant == 0
           else '<div class="menu"><a href="/index">Start</a></div>')
    return (f"<!DOCTYPE html><html><head><title>{html.escape(title)}</title></head>"
            f"<body>{nav}<h1>{html.escape(title)}</h1>\n{body}"
            f"<footer>Page {variant}</footer></body></html>")


def record(url, payload):
    body = payload.encode("utf-8")
    http = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    hdr = (f"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: {url}\r\n"
           f"WARC-Date: 2024-01-01T00:00:00Z\r\n"
           f"Content-Length: {len(http)}\r\n\r\n").encode()
    return hdr + http + b"\r\n\r\n"


rng = random.Random(24)
files = [[] for _ in range(n_files)]
texts = {}
for f in range(n_files):
    for i in range(per_file):
        url = f"https://site{f}.example/page/{i}"
        ps = rng.sample(pool, rng.randint(4, 6))
        texts[url] = ps
        files[f].append((url, page(f"Page {f}-{i}", ps)))

planted = {"exact": [], "near": []}
# pairs of files whose ranks differ for 2 and 4 ranks: (i, i + 1), (i, i + 3) ...
for k in range(min(40, per_file // 3)):
    src = (2 * k) % n_files
    dst = (src + 1 + 2 * (k % 2)) % n_files  # +1 or +3: odd distance, never the same rank
    if dst <= src:
        dst = src + 1
    orig = f"https://site{src}.example/page/{k}"
    # an exact copy: the same paragraphs, other URL and markup
    url = f"https://mirror{dst}.example/copy/{k}"
    files[dst].append((url, page(f"Page {src}-{k}", texts[orig], 1)))
    planted["exact"].append([url, orig])
    # a near copy: two words of the middle paragraph changed (5-gram Jaccard ~0.9)
    ps = list(texts[orig])
    w = ps[len(ps) // 2].split()
    w[2], w[9] = "altered", "revised"
    ps[len(ps) // 2] = " ".join(w)
    url = f"https://near{dst}.example/copy/{k}"
    files[dst].append((url, page(f"Page {src}-{k}", ps, 1)))
    planted["near"].append([url, orig])

os.makedirs(f"{out}/crawl", exist_ok=True)
for f, recs in enumerate(files):
    with open(f"{out}/crawl/{f:02d}.warc.gz", "wb") as fh:
        for url, p in recs:
            fh.write(gzip.compress(record(url, p), mtime=0))
json.dump(planted, open(f"{out}/planted.json", "w"), indent=1)
print(f"prep_make_corpus: {sum(len(r) for r in files)} pages in {n_files} files, "
      f"{len(planted['exact'])} exact and {len(planted['near'])} near copies planted")
