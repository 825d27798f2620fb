#!/usr/bin/env python3
"""prep_make_langs.py OUT.jsonl [MIN_BYTES] - a language-ID test set from the
translations Debian's packages install (/usr/share/locale/*/LC_MESSAGES/*.mo:
GTK, GLib, iso-codes, PAM, coreutils, ...), read with Python's gettext.

One document per language: translated messages of at least 3 words, with
format directives, markup and mnemonics removed, in a fixed order, cut at
about 700 bytes. Locales of one language are merged under CLD2's code for it
(pt_BR -> pt, nb -> no, he -> iw, zh_CN -> zh, zh_TW -> zh-Hant, ...); English
and locales whose language CLD2 cannot name the same way (script variants
such as sr@latin) are left out. A language needs MIN_BYTES (default 300) of
text. Writes {"url": "lang:CODE", "text": ...} lines; prints the count.
"""
import gettext, glob, json, re, sys

out = sys.argv[1]
min_bytes = int(sys.argv[2]) if len(sys.argv) > 2 else 300
CODE = {"he": "iw", "nb": "no", "jv": "jw", "zh_CN": "zh", "zh_Hans": "zh", "zh_TW": "zh-Hant",
        "zh_HK": "zh-Hant", "zh_Hant": "zh-Hant", "fil": "tl", "mo": "ro", "kmr": "ku",
        "ckb": "ku"}
SKIP = ("en", "en_", "en@", "sr@", "be@", "uz@", "tt@", "ca@", "locale")

texts = {}
for d in sorted(glob.glob("/usr/share/locale/*/LC_MESSAGES")):
    loc = d.split("/")[-2]
    if loc.startswith(SKIP):
        continue
    code = CODE.get(loc, CODE.get(loc.split("_")[0], loc.split("_")[0]))
    acc = texts.setdefault(code, [])
    seen = set(acc)
    for mo in sorted(glob.glob(d + "/*.mo")):
        if sum(len(x.encode()) + 2 for x in acc) >= 700:
            break  # enough for this language's document
        try:
            with open(mo, "rb") as f:
                cat = gettext.GNUTranslations(f)._catalog
        except Exception:
            continue
        for k in sorted(cat, key=str):
            v = cat[k]
            if not isinstance(v, str) or v == k or (isinstance(k, str) and v == k.split("\x04")[-1]):
                continue  # untranslated entries are English
            s = re.sub(r"%[-#0-9.lhzj]*[a-zA-Z%]|\$\{?\w+\}?|<[^>]+>|&\w+;|\{\w*\}|_(?=\w)", " ", v)
            s = " ".join(s.split())
            if len(s.split()) >= 3 and s not in seen and not re.search(r"[A-Za-z]+\.[a-z]{2,4}\b", s):
                seen.add(s)
                acc.append(s)
n = 0
with open(out, "w", encoding="utf-8") as f:
    for code in sorted(texts):
        t = ""
        for s in texts[code]:
            if len(t.encode()) >= 700:
                break
            t += s + ". "
        if len(t.encode()) >= min_bytes:
            f.write(json.dumps({"url": f"lang:{code}", "text": t.strip()}, ensure_ascii=False) + "\n")
            n += 1
print(n)
