"""Makes the inputs of tests/integration/sft.sh in OUT:

  OUT/hf/                     a Hugging Face Llama folder (GQA, llama3 rope, BF16, 3 shards with
                              model.safetensors.index.json) written by PyTorch through
                              hf_family_ref.py, with vocab 300 and 256 positions; OUT/hf.train.json its grit model
  OUT/tok/tokenizer.json      a byte-level BPE tokenizer: the 256 byte tokens, a few merges and
                              the ChatML special tokens <|endoftext|>, <|im_start|>, <|im_end|>
  OUT/tok/tokenizer_config.json  with a ChatML chat_template (for --template auto)
  OUT/chat.jsonl              chat examples ({"messages": ...}, some with a system message,
                              some multi-turn) and prompt/response examples, lengths varied

usage: sft_make.py OUT
       sft_make.py check OUT PREFIX   decode PREFIX.bin/.idx and PREFIX.mask.bin/.idx written by
                                      grit tokenize --sft from OUT/chat.jsonl and check them against
                                      a ChatML rendering of every line written here: the whole
                                      example decodes to the rendering, and the tokens with mask 1
                                      decode to exactly the assistant contents, each with its
                                      <|im_end|>
"""

import json
import os
import random
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "reference"))
import hf_family_ref  # noqa: E402


def byte_map():
    """GPT-2's bytes -> printable characters table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + \
        list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def tokenizer(out):
    bm = byte_map()
    vocab = {bm[b]: b for b in range(256)}
    merges = []
    for a, b in [("t", "h"), ("th", "e"), ("a", "n"), ("Ġ", "t"), ("e", "r"), ("i", "n")]:
        vocab[a + b] = len(vocab)
        merges.append(f"{a} {b}")
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    added = []
    for s in specials:
        added.append({"id": len(vocab), "content": s, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True})
        vocab[s] = len(vocab)
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                             "use_regex": True},
           "post_processor": None,
           "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                       "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None,
                     "continuing_subword_prefix": None, "end_of_word_suffix": None,
                     "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                     "merges": merges}}
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump(tok, f)
    chatml = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
              "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}")
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": "<|im_end|>", "chat_template": chatml}, f)
    return len(vocab)


def data(path, n=48):
    rng = random.Random(7)
    words = "the cat sat on a mat and then ran into the garden where an otter slept".split()

    def text(k):
        return " ".join(rng.choice(words) for _ in range(k))
    with open(path, "w") as f:
        for i in range(n):
            kind = i % 3
            if kind == 0:
                ex = {"prompt": text(rng.randint(1, 5)), "response": text(rng.randint(1, 6))}
            elif kind == 1:
                ex = {"messages": [{"role": "system", "content": "be brief"},
                                   {"role": "user", "content": text(rng.randint(1, 4))},
                                   {"role": "assistant", "content": text(rng.randint(1, 5))}]}
            else:
                ex = {"messages": [{"role": "user", "content": text(rng.randint(1, 4))},
                                   {"role": "assistant", "content": text(rng.randint(1, 4))},
                                   {"role": "user", "content": text(rng.randint(1, 4))},
                                   {"role": "assistant", "content": text(rng.randint(1, 4))}]}
            f.write(json.dumps(ex) + "\n")
            if i == 5:
                f.write("\n")  # blank lines are skipped


def main(out):
    v = tokenizer(os.path.join(out, "tok"))
    case = dict(hf_family_ref.CASES["llama3"])
    case["vocab_size"] = 300
    case["max_positions"] = 256
    assert v <= 300
    hf_family_ref.CASES["sft_llama"] = case
    hf_family_ref.cmd_make("sft_llama", os.path.join(out, "hf"))
    data(os.path.join(out, "chat.jsonl"))
    return 0


def read_idx(prefix):
    """Megatron .idx/.bin -> list of sequences (lists of ints)."""
    import struct
    with open(prefix + ".idx", "rb") as f:
        b = f.read()
    if b[:9] != b"MMIDIDX\x00\x00":
        raise ValueError(f"{prefix}.idx: bad magic")
    code = b[17]
    n = struct.unpack_from("<Q", b, 18)[0]
    sizes = struct.unpack_from(f"<{n}i", b, 34)
    ptrs = struct.unpack_from(f"<{n}q", b, 34 + 4 * n)
    fmt, isz = {1: ("B", 1), 8: ("H", 2), 4: ("i", 4)}[code]
    with open(prefix + ".bin", "rb") as f:
        data = f.read()
    return [list(struct.unpack_from(f"<{sz}{fmt}", data, p)) for sz, p in zip(sizes, ptrs)], code


def check(out, prefix):
    with open(os.path.join(out, "tok", "tokenizer.json")) as f:
        vocab = json.load(f)["model"]["vocab"]
    inv = {i: t for t, i in vocab.items()}
    for a in [("<|endoftext|>", 256 + 6), ("<|im_start|>", 256 + 7), ("<|im_end|>", 256 + 8)]:
        inv[a[1]] = a[0]
    unb = {c: b for b, c in byte_map().items()}

    def dec(ids):
        out_b = bytearray()
        for i in ids:
            t = inv[i]
            if t.startswith("<|"):
                out_b += t.encode()
            else:
                out_b += bytes(unb[c] for c in t)
        return out_b.decode()
    toks, code = read_idx(prefix)
    masks, mcode = read_idx(prefix + ".mask")
    if mcode != 1:
        raise SystemExit(f"FAIL: {prefix}.mask.idx dtype {mcode}, expected 1 (uint8)")
    lines = [json.loads(x) for x in open(os.path.join(out, "chat.jsonl")) if x.strip()]
    if len(lines) != len(toks) or len(masks) != len(toks):
        raise SystemExit(f"FAIL: {len(toks)} token sequences, {len(masks)} masks, "
                         f"{len(lines)} examples")
    for k, (ex, ids, m) in enumerate(zip(lines, toks, masks)):
        msgs = ex.get("messages") or [{"role": "user", "content": ex["prompt"]},
                                      {"role": "assistant", "content": ex["response"]}]
        want = "".join(f"<|im_start|>{x['role']}\n{x['content']}<|im_end|>\n" for x in msgs)
        answers = "".join(x["content"] + "<|im_end|>" for x in msgs if x["role"] == "assistant")
        got = dec(ids)
        got_ans = dec([i for i, mm in zip(ids, m) if mm])
        if got != want:
            raise SystemExit(f"FAIL: example {k}: decodes to {got!r}, expected {want!r}")
        if got_ans != answers:
            raise SystemExit(f"FAIL: example {k}: mask-1 tokens decode to {got_ans!r}, "
                             f"expected {answers!r}")
        if set(m) - {0, 1}:
            raise SystemExit(f"FAIL: example {k}: mask values {sorted(set(m))}")
    print(f"ok   {len(toks)} examples: ChatML rendering and answer mask as expected")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3]))
    sys.exit(main(sys.argv[1]))
