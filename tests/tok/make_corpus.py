#!/usr/bin/env python3
"""make_corpus.py - builds the tokenizer parity corpus from Debian documentation.

    make_corpus.py OUTDIR BYTES_PER_LANGUAGE

Writes OUTDIR/<lang>.raw for en de fr es ru zh ja: text extracted (HTML tags
stripped, script/style dropped) from debian-handbook, then installation-guide,
then the manual pages of that language, in sorted file order, until
BYTES_PER_LANGUAGE is reached; and OUTDIR/adversarial.raw, a fixed set of
hard cases (whitespace runs, emoji, combining marks, invalid UTF-8,
contractions, digits, U+FEFF, U+0085, ...). Deterministic for a given set of
installed packages. Needs the packages named in scripts/install-deps.sh.
"""
import glob
import gzip
import html.parser
import os
import sys

LANGS = {
    "en": ("en-US", "en", "man"),
    "de": ("de-DE", "de", "man/de"),
    "fr": ("fr-FR", "fr", "man/fr"),
    "es": ("es-ES", "es", "man/es"),
    "ru": ("ru-RU", "ru", "man/ru"),
    "zh": ("zh-CN", "zh_CN", "man/zh_CN"),
    "ja": ("ja-JP", "ja", "man/ja"),
}


class Strip(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out, self.skip = [], 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self.skip += 1
        elif tag in ("p", "div", "br", "li", "h1", "h2", "h3", "pre", "tr"):
            self.out.append("\n")

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self.skip:
            self.skip -= 1

    def handle_data(self, data):
        if not self.skip:
            self.out.append(data)


def html_text(path):
    p = Strip()
    p.feed(open(path, encoding="utf-8", errors="replace").read())
    return "".join(p.out).encode("utf-8")


def sources(hb, ig, man):
    for f in sorted(glob.glob(f"/usr/share/doc/debian-handbook/html/{hb}/*.html")):
        yield html_text(f)
    for f in sorted(glob.glob(f"/usr/share/doc/installation-guide-amd64/{ig}/*.html")):
        yield html_text(f)
    for f in sorted(glob.glob(f"/usr/share/{man}/man*/*.gz")):
        try:
            yield gzip.open(f).read()
        except OSError:
            continue


def adversarial():
    parts = [
        b"Hello world! It's a test. I'm sure they'll say we've done what you'd do, don't they're?",
        b"CAPS CONTRACTIONS: IT'S WE'VE I'M YOU'LL HE'D THEY'RE DON'T 'S 'T 'RE x'sy ''s '''",
        b"a" + b" " * 1 + b"b" + b" " * 2 + b"c" + b" " * 3 + b"d" + b" " * 25 + b"e" + b" " * 100 + b"f",
        b"tabs\t\tand\t \t mixed \n\n\n   \r\n\r\n  \x0b\x0c end   ",
        b"trailing spaces at the very end        ",
        "emoji 😀😃🎉 family 👨‍👩‍👧‍👦 flags 🇩🇪🇫🇷 skin 👍🏽 keycap 1️⃣".encode(),
        "combining: e\u0301 a\u0300 n\u0303 o\u0308\u0304 Zalgo Z\u0351\u036b\u0343a\u0352l\u036ag\u0363o\u0310".encode(),
        "precomposed vs decomposed: é e\u0301 Å A\u030a ﬁ Ω Ω Å".encode(),
        "hangul 한국어 jamo \u1100\u1161\u11a8 compat ㄱㅏ".encode(),
        b"digits 0 12 345 6789 1234567890123 3.14159 1,000,000 0x1F 1e10 v2.0.1 \xd9\xa3\xd9\xa4 \xe2\x85\xa0\xe2\x85\xa1",
        "bom \ufeffat start \ufeff\ufeff and NEL \u0085here\u0085\u0085 and NBSP\u00a0x \u2003em \u3000ideo \u2028ls \u2029ps".encode(),
        b"invalid utf8: \xff\xfe \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x82 trunc \x80\x80 lone \xc3 end",
        b"world\xffhello \xf0\x9f\x98 \xe0\x80\x80 \xf8\x88\x80\x80\x80 \xef\xbf\xbd\xc2",
        b"control \x00\x01\x1f\x7f chars",
        "punct!!! ??? ... --- *** ((( ))) [[[ ]]] {{{ }}} ''' \"\"\" ``` ~~~ «» „“ ‚‘ ¿¡ …".encode(),
        "mixed scripts: Москва Tōkyō 東京 北京 Ελληνικά العربية עברית हिन्दी ไทย".encode(),
        b"<|endoftext|> is just text here <|padding|>",
        b"look-alikes: <s>x</s> <s> </s>  </s>  y <unk> < s> <s </s > <<s>> <S> <|begin_of_text|>hi<|end_of_text|> "
        b"<|eot_id|>\n<|start_header_id|>user<|end_header_id|> <|reserved_special_token_3|> <|begin_of_text <|x|>",
        "\u2581 already metaspace \u2581\u2581x \u2581 <0x41> <0xE5> \u00bc\u00bd 1\u00bc 12345\u0663\u0664\u0665".encode(),
        b"code: for (int i = 0; i < n; i++) { x += a[i] * b[i]; }  // comment\n    return x;\n",
        b"url https://www.debian.org/doc/manuals/debian-handbook/index.en.html?x=1&y=2#frag",
        b"     leading spaces and \n\n\n\n\n\n\n\n newlines",
        b"x" * 3000 + b" " + "é".encode() * 500 + b" " + "中".encode() * 1000,
        b"'s's's's 't't 're're 'll'll 'd'd 'm'm 've've",
    ]
    return b"\n\n".join(parts) + b"\n"


def main():
    outdir, per = sys.argv[1], int(sys.argv[2])
    os.makedirs(outdir, exist_ok=True)
    for lang, (hb, ig, man) in LANGS.items():
        buf, n = [], 0
        for text in sources(hb, ig, man):
            buf.append(text)
            n += len(text) + 2
            if n >= per:
                break
        data = b"\n\n".join(buf)[:per]
        # Do not cut inside a UTF-8 sequence.
        while data and (data[-1] & 0xC0) == 0x80:
            data = data[:-1]
        if data and data[-1] >= 0xC0:
            data = data[:-1]
        if len(data) < per // 4:
            sys.exit(f"make_corpus: {lang}: only {len(data)} bytes of text found; install the doc packages "
                     "(scripts/install-deps.sh)")
        open(os.path.join(outdir, f"{lang}.raw"), "wb").write(data)
    open(os.path.join(outdir, "adversarial.raw"), "wb").write(adversarial())


if __name__ == "__main__":
    main()
