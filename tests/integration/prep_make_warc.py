#!/usr/bin/env python3
"""prep_make_warc.py OUTDIR - builds the synthetic crawl for prep_warc.sh.

Writes OUTDIR/crawl.warc.gz (one gzip member per record, as Common Crawl
does) and OUTDIR/extra.warc (plain), with known duplicates, known bad pages
and known languages, and OUTDIR/expected.json: {"kept": [urls],
"drops": {url: reason}}. Page text is real prose from the Debian
installation guide in several languages (paragraphs of one page each), so
language ID and the quality filters see natural text.
"""
import gzip, html, json, os, re, sys

IG = "/usr/share/doc/installation-guide-amd64"
out = sys.argv[1]


def paras(lang, page, n=None):
    src = open(f"{IG}/{lang}/{page}", encoding="utf-8").read()
    ps = []
    for m in re.finditer(r"<p>(.*?)</p>", src, re.S):
        t = html.unescape(re.sub(r"<[^>]+>", "", m.group(1)))
        t = " ".join(t.split())
        if len(t.split()) >= 20 or len(t) >= 80:  # (Japanese has no spaces)
            ps.append(t)
    return ps[:n] if n else ps


def page(title, ps, nav=True, footer="Copyright the Debian project"):
    body = "".join(f"<p>{html.escape(p)}</p>\n" for p in ps)
    navbar = ('<nav><a href="/">Home</a> | <a href="/news">News</a> | '
              '<a href="/about">About</a></nav>') if nav else ""
    return (f"<!DOCTYPE html><html><head><title>{html.escape(title)}</title>"
            f"<script>var tracking = 1;</script><style>p {{ margin: 0 }}</style></head>"
            f"<body>{navbar}<h1>{html.escape(title)}</h1>\n{body}"
            f"<footer>{html.escape(footer)}</footer></body></html>")


def record(rtype, url, payload, ctype="text/html; charset=utf-8"):
    if rtype == "response":
        body = payload.encode("utf-8") if isinstance(payload, str) else payload
        http = (f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    else:
        http = payload.encode("utf-8")
    hdr = (f"WARC/1.0\r\nWARC-Type: {rtype}\r\nWARC-Target-URI: {url}\r\n"
           f"WARC-Date: 2024-01-01T00:00:00Z\r\n"
           f"WARC-Record-ID: <urn:uuid:{abs(hash(url + rtype)) % 10**12:012d}>\r\n"
           f"Content-Length: {len(http)}\r\n\r\n").encode()
    return hdr + http + b"\r\n\r\n"


en = paras("en", "ch01s01.html") + paras("en", "ch01s02.html")
en2 = paras("en", "ch06s01.html")
en3 = paras("en", "ch03s01.html")
de = paras("de", "ch01s01.html")
ja = paras("ja", "ch01s01.html")
assert len(en) >= 6 and len(en2) >= 3 and len(en3) >= 3 and len(de) >= 3 and len(ja) >= 2

expected = {"kept": [], "drops": {}}
recs = []


def add(url, html_text, fate, rtype="response", ctype="text/html; charset=utf-8"):
    recs.append(record(rtype, url, html_text, ctype))
    if fate == "kept":
        expected["kept"].append(url)
    elif fate:
        expected["drops"][url] = fate


add("http://example.org/", "software=grit", None, rtype="warcinfo")
add("http://a.example/intro", page("About Debian", en[0:3]), "kept")
add("http://a.example/intro", "GET /intro HTTP/1.1\r\n\r\n", None, rtype="request")
add("http://a.example/logo.png", b"\x89PNG\r\n\x1a\n" + bytes(range(256)), None,
    ctype="image/png")
add("http://b.example/install", page("Installer", en2), "kept")
# the same text under other markup and another URL: an exact duplicate
add("http://mirror.example/about",
    "<html><body><div class='menu'><a href=x>Menu</a></div><h1>About Debian</h1>"
    + "".join(f"<div><p>{html.escape(p)}</p></div>" for p in en[0:3])
    + "<footer>Copyright the Debian project</footer></body></html>", "exact_dup")
# a page re-crawled at the same URL with other content: a URL duplicate
add("http://b.example/install", page("Installer (again)", en3), "url_dup")
# a long page and the same page with another footer paragraph: near duplicates
long_ps = en[0:6] + en2[0:2]
add("http://c.example/long", page("Long page", long_ps), "kept")
add("http://copy.example/long",
    page("Long page", long_ps + ["Mirrored by Copy Example Ltd. All rights reserved."]),
    "near_dup")
add("http://de.example/", page("Über Debian", de), "kept")
add("http://ja.example/", page("Debian について", ja), "lang")
add("http://empty.example/", "<html><head><script>x()</script></head><body><nav>"
    "<a href=/>Home</a></nav></body></html>", "empty_text")
add("http://short.example/", page("Short", ["Debian is a free operating system."]),
    "word_count")
add("http://spam.example/", page("Repeated", [en[0]] + ["Buy cheap software now."] * 12),
    "dup_lines")
add("http://tags.example/", page("Tags", en3[0:2] + [
    " ".join(f"#{w}" for w in "debian linux free software install guide boot kernel "
             "package mirror archive release stable testing unstable security apt dpkg "
             "grub netinst firmware driver desktop server laptop".split())]),
    "symbol_ratio")

with open(os.path.join(out, "crawl.warc.gz"), "wb") as f:
    for r in recs:
        f.write(gzip.compress(r))

# a second, uncompressed file: one new page and a cross-file exact duplicate
extra = [record("response", "http://d.example/boot", page("Boot", en3)),
         record("response", "http://e.example/install-copy", page("Installer", en2))]
expected["kept"].append("http://d.example/boot")
expected["drops"]["http://e.example/install-copy"] = "exact_dup"
with open(os.path.join(out, "extra.warc"), "wb") as f:
    for r in extra:
        f.write(r)
json.dump(expected, open(os.path.join(out, "expected.json"), "w"), indent=1)
