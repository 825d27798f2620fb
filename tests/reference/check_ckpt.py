#!/usr/bin/env python3
"""check_ckpt.py - a grit checkpoint read the way Hugging Face tools read it.

    check_ckpt.py logits STEP_DIR DUMP_DIR   PyTorch loads STEP_DIR/model.safetensors by HF
                                             names and STEP_DIR/config.json (HF GPTNeoX form),
                                             runs DUMP_DIR's micro-batch 0 and must reproduce
                                             grit's logits (DUMP_DIR/step0.safetensors, written
                                             by grit-parity-dump from the same checkpoint).
    check_ckpt.py valid FILE...              stand-alone safetensors validity: header JSON,
                                             __metadata__.format == "pt", known dtypes, shapes
                                             matching byte ranges, ranges contiguous to EOF.
    check_ckpt.py make-hf STEP_DIR OUT [f16] an HF-style folder from a checkpoint: config.json
                                             and model.safetensors plus the buffers HF files
                                             carry (attention.bias, masked_bias, inv_freq),
                                             optionally as F16.
    check_ckpt.py same-tensors A B           every tensor of B equals A's bit for bit (A's HF
                                             buffers excepted; F16 in A compared after widening).
Exits 1 on any mismatch, printing what differs.
"""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gptneox_ref as ref  # noqa: E402
import safetensors_io as st  # noqa: E402

BUFFERS = ("attention.bias", "attention.masked_bias", "rotary_emb.inv_freq")


def hf_to_model_cfg(hf):
    act = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}
    assert hf["model_type"] == "gpt_neox", hf["model_type"]
    assert hf["architectures"] == ["GPTNeoXForCausalLM"], hf["architectures"]
    return ref.ModelConfig(hidden_size=hf["hidden_size"], num_layers=hf["num_hidden_layers"],
                           num_heads=hf["num_attention_heads"],
                           intermediate_size=hf["intermediate_size"], vocab_size=hf["vocab_size"],
                           rotary_pct=hf["rotary_pct"], rotary_base=hf["rotary_emb_base"],
                           max_positions=hf["max_position_embeddings"],
                           layer_norm_eps=hf["layer_norm_eps"], activation=act[hf["hidden_act"]],
                           parallel_residual=hf["use_parallel_residual"])


def raw_header(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(n))


def cmd_valid(files):
    bad = 0
    for p in files:
        try:
            st.load(p)  # strict: dtypes, shapes vs ranges, contiguity, EOF
            meta = raw_header(p).get("__metadata__", {})
            if meta.get("format") != "pt":
                raise ValueError(f"__metadata__.format is {meta.get('format')!r}, expected 'pt'")
            print(f"valid   {p}")
        except Exception as e:  # noqa: BLE001 - report every kind of failure
            print(f"INVALID {p}: {e}")
            bad += 1
    return 1 if bad else 0


def cmd_logits(step_dir, dump_dir):
    hf = json.load(open(os.path.join(step_dir, "config.json")))
    cfg = hf_to_model_cfg(hf)
    model = ref.GPTNeoXForCausalLM(cfg, dtype=torch.float64)
    ref.load_weights_(model, st.load(os.path.join(step_dir, "model.safetensors")), step_dir)
    dump_cfg = json.load(open(os.path.join(dump_dir, "config.json")))
    b = dump_cfg["optim"]["micro_batch"]
    tokens = st.load(os.path.join(dump_dir, "batches.safetensors"))["tokens"][:b, :-1]
    with torch.no_grad():
        want = model(torch.from_numpy(tokens.astype(np.int64)))
    got = torch.from_numpy(st.load(os.path.join(dump_dir, "step0.safetensors"))["logits"])
    err = ((got.double() - want).abs().max() / want.abs().max()).item()
    print(f"logits from {step_dir}: PyTorch (HF names, HF config) vs grit: relative error "
          f"{err:.3e} (tolerance 1e-5)")
    return 0 if err <= 1e-5 else 1


def cmd_make_hf(step_dir, out, f16=False):
    os.makedirs(out, exist_ok=True)
    hf = json.load(open(os.path.join(step_dir, "config.json")))
    json.dump(hf, open(os.path.join(out, "config.json"), "w"), indent=2)
    t = st.load(os.path.join(step_dir, "model.safetensors"))
    if f16:
        t = {k: v.astype(np.float16) for k, v in t.items()}
    n = hf["max_position_embeddings"]
    for layer in range(hf["num_hidden_layers"]):
        p = f"gpt_neox.layers.{layer}.attention."
        t[p + "bias"] = np.tril(np.ones((1, 1, n, n), dtype=np.bool_))
        t[p + "masked_bias"] = np.array(-1e9, dtype=np.float32)
        t[p + "rotary_emb.inv_freq"] = np.ones(4, dtype=np.float32)
    st.save(os.path.join(out, "model.safetensors"), t)
    print(f"wrote HF folder {out} ({'F16' if f16 else 'F32'}, with HF buffers)")
    return 0


def cmd_same(a_path, b_path):
    a, b = st.load(a_path), st.load(b_path)
    a = {k: v for k, v in a.items() if not k.endswith(BUFFERS)}
    bad = sorted(set(a) ^ set(b))
    for k in sorted(set(a) & set(b)):
        x = a[k].astype(np.float32) if a[k].dtype == np.float16 else a[k]
        if x.dtype != b[k].dtype or x.shape != b[k].shape or x.tobytes() != b[k].tobytes():
            bad.append(k)
    if bad:
        print(f"tensors differ between {a_path} and {b_path}: {bad[:10]}")
        return 1
    print(f"{len(b)} tensors bit-identical between {a_path} and {b_path}")
    return 0


def main(argv):
    if len(argv) >= 3 and argv[0] == "logits":
        return cmd_logits(argv[1], argv[2])
    if len(argv) >= 2 and argv[0] == "valid":
        return cmd_valid(argv[1:])
    if len(argv) >= 3 and argv[0] == "make-hf":
        return cmd_make_hf(argv[1], argv[2], len(argv) > 3 and argv[3] == "f16")
    if len(argv) == 3 and argv[0] == "same-tensors":
        return cmd_same(argv[1], argv[2])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
