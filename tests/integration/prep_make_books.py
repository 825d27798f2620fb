#!/usr/bin/env python3
"""prep_make_books.py OUT.jsonl N - N curated documents (JSONL) for prep_mix.sh: the
Debian Administrator's Handbook (debian-handbook, en-US), one chapter page per line."""
import html, json, os, re, sys
d = "/usr/share/doc/debian-handbook/html/en-US"
n = 0
with open(sys.argv[1], "w") as f:
    for name in sorted(os.listdir(d)):
        if not name.endswith(".html") or n >= int(sys.argv[2]): continue
        t = open(os.path.join(d, name), encoding="utf-8").read()
        ps = [" ".join(html.unescape(re.sub(r"<[^>]+>", "", m)).split()) for m in re.findall(r"<p[^>]*>(.*?)</p>", t, re.S)]
        text = "\n\n".join(p for p in ps if len(p.split()) > 8)
        if len(text.split()) > 100:
            f.write(json.dumps({"url": f"book:{name}", "text": text}) + "\n"); n += 1
print(n)
