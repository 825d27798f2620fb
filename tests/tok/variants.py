#!/usr/bin/env python3
"""variants.py - tokenizer.json variants built from real files, for parity
cases the shipped files do not cover, and broken files for the error tests.

    variants.py NEOX_JSON LLAMA2_JSON OUTDIR
    variants.py - - OUTDIR          (the broken files only)

Writes OUTDIR/falcon.json (NeoX's vocabulary with Falcon's pre-tokenizer:
Punctuation, ByteLevel, Digits, a Split on three digits), OUTDIR/metaspace.json
(Llama 2's vocabulary with the older Metaspace pre-tokenizer and decoder, as
Mistral and TinyLlama files of that era have, prepend_scheme "first", and an
lstrip/rstrip added token), and OUTDIR/bad_*.json, each broken in one field.
"""
import json
import os
import sys

neox_p, l2_p, out = sys.argv[1:4]
os.makedirs(out, exist_ok=True)


def dump(name, j):
    with open(os.path.join(out, name), "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False)


def parity_variants():
    neox = json.load(open(neox_p, encoding="utf-8"))
    l2 = json.load(open(l2_p, encoding="utf-8"))
    falcon = json.loads(json.dumps(neox))
    falcon["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Punctuation", "behavior": "Contiguous"},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        {"type": "Digits", "individual_digits": False},
        {"type": "Split", "pattern": {"Regex": "[0-9][0-9][0-9]"}, "behavior": "Isolated", "invert": False}]}
    dump("falcon.json", falcon)

    meta = json.loads(json.dumps(l2))
    meta["normalizer"] = None
    meta["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False}
    meta["decoder"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False}
    meta["added_tokens"].append({"id": 2, "content": "</s>", "single_word": False, "lstrip": True, "rstrip": True,
                                 "normalized": False, "special": True})
    meta["added_tokens"] = [a for a in meta["added_tokens"] if not (a["content"] == "</s>" and not a["lstrip"])]
    dump("metaspace.json", meta)


if neox_p != "-":
    parity_variants()

# Broken files: small, each wrong in one field.
base = {"version": "1.0", "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\p{L}+|\\s+"}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]},
        "post_processor": None, "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}}
dump("good.json", base)


def bad(name, f):
    j = json.loads(json.dumps(base))
    f(j)
    dump(name, j)


bad("bad_model.json", lambda j: j["model"].update(type="Unigram"))
bad("bad_merge.json", lambda j: j["model"].update(merges=["a b", "a zz"]))
bad("bad_merged.json", lambda j: j["model"].update(merges=["b a"]))
bad("bad_regex.json", lambda j: j["pre_tokenizer"]["pretokenizers"][0]["pattern"].update(Regex="(\\p{L}+"))
bad("bad_normalizer.json", lambda j: j.update(normalizer={"type": "Precompiled", "precompiled_charsmap": ""}))
bad("bad_pretok.json", lambda j: j["pre_tokenizer"]["pretokenizers"].append({"type": "UnicodeScripts"}))
with open(os.path.join(out, "bad_syntax.json"), "w") as f:
    f.write('{"model": {"type": "BPE",, }')
with open(os.path.join(out, "bad.model"), "wb") as f:
    f.write(b"\x00not a sentencepiece model\xff" * 10)
