#!/usr/bin/env python3
"""hf_family_ref.py - Hugging Face folders of Llama and Falcon models, made and checked by PyTorch.

    hf_family_ref.py make CASE OUT      a reference model (decoder_ref, random weights) saved the
                                        way save_pretrained lays it out: config.json in
                                        LlamaConfig/FalconConfig form (written here, not by
                                        grit), weights in HF names as safetensors in the case's
                                        dtype (F32/F16/BF16), sharded with
                                        model.safetensors.index.json when the case says so;
                                        plus OUT.train.json, a grit training config for the same
                                        model with init_from = OUT.
    hf_family_ref.py logits HF DUMP     PyTorch (float64) loads HF (config.json read with
                                        Hugging Face's defaults, weights from the single file or
                                        the shards), runs DUMP's micro-batch 0 and must match
                                        the logits grit-parity-dump wrote (1e-5 relative).
    hf_family_ref.py same HF EXPORT     EXPORT (grit ckpt export) holds every tensor of HF bit
                                        for bit (widened to F32) and a config.json that reads
                                        back to the same model; a tied head stays absent.
Exits 1 on any mismatch.
"""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decoder_ref as ref  # noqa: E402
import safetensors_io as st  # noqa: E402

CASES = {
    # Llama 3 style: GQA, theta 500000, llama3 rope scaling; 3 BF16 shards
    "llama3": dict(family="llama", hidden_size=64, num_layers=2, num_heads=8, num_kv_heads=2,
                   intermediate_size=96, vocab_size=200, max_positions=64, rotary_base=500000.0,
                   layer_norm_eps=1e-5, rope_scaling={"type": "llama3", "factor": 8.0,
                                                      "low_freq_factor": 1.0,
                                                      "high_freq_factor": 4.0,
                                                      "original_max_position_embeddings": 32},
                   dtype="BF16", shards=3),
    # tied Llama with attention and MLP biases, F32, one file
    "llama_tied": dict(family="llama", hidden_size=48, num_layers=2, num_heads=4,
                       num_kv_heads=4, intermediate_size=80, vocab_size=150, max_positions=64,
                       layer_norm_eps=1e-6, tie_embeddings=True, qkv_bias=True, dense_bias=True,
                       mlp_bias=True, rope_scaling={"type": "linear", "factor": 2.0},
                       dtype="F32", shards=1),
    # Falcon 7B style: multi-query, one norm, parallel; F16, 2 shards
    "falcon7b": dict(family="falcon", hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=1,
                     intermediate_size=256, vocab_size=180, max_positions=64, norm="layernorm",
                     mlp="gelu", qkv_layout="split", parallel_residual=True, norms_per_block=1,
                     tie_embeddings=True, dtype="F16", shards=2),
    # Falcon 40B style: new_decoder_architecture, grouped qkv, two norms, biases, untied
    "falcon40b": dict(family="falcon", hidden_size=64, num_layers=2, num_heads=8,
                      num_kv_heads=2, intermediate_size=128, vocab_size=180, max_positions=64,
                      norm="layernorm", mlp="gelu", qkv_layout="grouped",
                      parallel_residual=True, norms_per_block=2, qkv_bias=True,
                      dense_bias=True, mlp_bias=True, dtype="F32", shards=2),
}


# ----------------------------------------------------------------------------- HF config

def hf_config(c):
    """The config.json save_pretrained writes for this model."""
    rs = None
    if c.rope_scaling:
        rs = dict(c.rope_scaling)
        rs["rope_type"] = rs.pop("type")
    if c.family == "llama":
        return {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                "vocab_size": c.vocab_size, "hidden_size": c.hidden_size,
                "intermediate_size": c.intermediate_size, "num_hidden_layers": c.num_layers,
                "num_attention_heads": c.num_heads, "num_key_value_heads": c.kv_heads,
                "hidden_act": "silu", "max_position_embeddings": c.max_positions,
                "initializer_range": 0.02, "rms_norm_eps": c.layer_norm_eps,
                "pretraining_tp": 1, "use_cache": True, "tie_word_embeddings": c.tie_embeddings,
                "rope_theta": c.rotary_base, "rope_scaling": rs, "attention_bias": c.qkv_bias,
                "attention_dropout": 0.0, "mlp_bias": c.mlp_bias, "bos_token_id": 1,
                "eos_token_id": 2, "torch_dtype": "bfloat16", "transformers_version": "4.44.0"}
    return {"architectures": ["FalconForCausalLM"], "model_type": "falcon",
            "vocab_size": c.vocab_size, "hidden_size": c.hidden_size,
            "num_hidden_layers": c.num_layers, "num_attention_heads": c.num_heads,
            "num_kv_heads": c.kv_heads, "layer_norm_epsilon": c.layer_norm_eps,
            "initializer_range": 0.02, "use_cache": True, "hidden_dropout": 0.0,
            "attention_dropout": 0.0, "alibi": False,
            "new_decoder_architecture": c.qkv_layout == "grouped",
            "multi_query": c.qkv_layout == "split", "parallel_attn": c.parallel_residual,
            "bias": c.qkv_bias, "max_position_embeddings": c.max_positions,
            "rope_theta": c.rotary_base, "rope_scaling": rs,
            "ffn_hidden_size": c.intermediate_size, "activation": "gelu",
            "tie_word_embeddings": c.tie_embeddings, "bos_token_id": 11, "eos_token_id": 11,
            "torch_dtype": "float16", "transformers_version": "4.44.0"}


def from_hf(hf):
    """DecoderConfig from a config.json with LlamaConfig / FalconConfig defaults."""
    g = hf.get
    rs = g("rope_scaling")
    if rs:
        rs = dict(rs)
        rs["type"] = rs.pop("rope_type", None) or rs.get("type")
        rs.pop("rope_type", None)
    if hf["model_type"] == "llama":
        heads = g("num_attention_heads", 32)
        return ref.DecoderConfig(
            family="llama", hidden_size=g("hidden_size", 4096), num_layers=g("num_hidden_layers", 32),
            num_heads=heads, num_kv_heads=g("num_key_value_heads") or heads,
            intermediate_size=g("intermediate_size", 11008), vocab_size=g("vocab_size", 32000),
            max_positions=g("max_position_embeddings", 2048), rotary_base=g("rope_theta", 10000.0),
            layer_norm_eps=g("rms_norm_eps", 1e-6), qkv_bias=g("attention_bias", False),
            dense_bias=g("attention_bias", False), mlp_bias=g("mlp_bias", False),
            tie_embeddings=g("tie_word_embeddings", False), rope_scaling=rs)
    assert hf["model_type"] == "falcon", hf["model_type"]
    newarch, mq = g("new_decoder_architecture", False), g("multi_query", True)
    heads, par = g("num_attention_heads", 71), g("parallel_attn", True)
    hidden = g("hidden_size", 4544)
    nln = g("num_ln_in_parallel_attn") or (2 if newarch else 1)
    kv = (g("num_kv_heads") or heads) if newarch else (1 if mq else heads)
    return ref.DecoderConfig(
        family="falcon", hidden_size=hidden, num_layers=g("num_hidden_layers", 32),
        num_heads=heads, num_kv_heads=kv, intermediate_size=g("ffn_hidden_size") or 4 * hidden,
        vocab_size=g("vocab_size", 65024), max_positions=g("max_position_embeddings", 2048),
        rotary_base=g("rope_theta", 10000.0), layer_norm_eps=g("layer_norm_epsilon", 1e-5),
        norm="layernorm", mlp="gelu",
        qkv_layout="grouped" if newarch else ("split" if mq else "neox"),
        parallel_residual=newarch or par, norms_per_block=nln if newarch else (1 if par else 2),
        qkv_bias=g("bias", False), dense_bias=g("bias", False), mlp_bias=g("bias", False),
        tie_embeddings=g("tie_word_embeddings", True), rope_scaling=rs)


# ----------------------------------------------------------------------------- safetensors

def write_st(path, tensors, dtype):
    """Torch tensors -> safetensors in F32, F16 or BF16 (an independent writer)."""
    tdt = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}[dtype]
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        raw = t.detach().to(tdt).contiguous()
        b = (raw.view(torch.int16) if dtype != "F32" else raw).numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def read_st(path):
    """{name: float64 torch tensor} from a safetensors file with F32/F16/BF16 tensors."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        b, e = h["data_offsets"]
        raw = np.frombuffer(data[b:e], dtype={"F32": "<f4", "F16": "<f2", "BF16": "<i2"}[h["dtype"]])
        t = torch.from_numpy(raw.copy())
        if h["dtype"] == "BF16":
            t = t.view(torch.bfloat16)
        out[name] = (t.to(torch.float64).reshape(h["shape"]), h["dtype"])
    return out


def read_hf(folder):
    idx = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(idx):
        files = sorted(set(json.load(open(idx))["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    out = {}
    for f in files:
        out.update(read_st(os.path.join(folder, f)))
    return out


# ----------------------------------------------------------------------------- commands

def cmd_make(case, out):
    spec = dict(CASES[case])
    dtype, shards = spec.pop("dtype"), spec.pop("shards")
    cfg = ref.DecoderConfig(**spec)
    torch.manual_seed(sum(map(ord, case)))
    model = ref.DecoderForCausalLM(cfg, torch.float32)
    ref.init_weights_(model, seed=sum(map(ord, case)), randomize_affine=True)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(hf_config(cfg), f, indent=2)
    state = model.state_dict()
    names = list(state)
    if shards == 1:
        write_st(os.path.join(out, "model.safetensors"), state, dtype)
    else:
        per = -(-len(names) // shards)
        wmap, total = {}, 0
        for s in range(shards):
            fn = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            part = {n: state[n] for n in names[s * per:(s + 1) * per]}
            write_st(os.path.join(out, fn), part, dtype)
            wmap.update({n: fn for n in part})
            total += sum(t.numel() * (4 if dtype == "F32" else 2) for t in part.values())
        with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": wmap}, f, indent=2)
    grit_model = {k: v for k, v in spec.items() if k != "family"}
    grit_model.update(family=cfg.family, make_vocab_size_divisible_by=1,
                      tie_embeddings=cfg.tie_embeddings)
    train = {"model": grit_model,
             "optim": {"micro_batch": 2, "grad_accum": 1, "seq_len": 40, "lr": 1e-3,
                       "min_lr": 1e-4, "warmup_steps": 1, "total_steps": 4},
             "data": {"synthetic_vocab": cfg.vocab_size}, "seed": 5, "threads": 2,
             "init_from": out}
    with open(out + ".train.json", "w") as f:
        json.dump(train, f, indent=1)
    print(f"{case}: {cfg.family}, {dtype}, {shards} shard(s), {len(names)} tensors -> {out}")
    return 0


def cmd_logits(folder, dump):
    cfg = from_hf(json.load(open(os.path.join(folder, "config.json"))))
    model = ref.DecoderForCausalLM(cfg, torch.float64)
    w = {k: v.numpy() for k, (v, _) in read_hf(folder).items()}
    ref.load_weights_(model, w, folder)
    tok = st.load(os.path.join(dump, "batches.safetensors"))["tokens"]
    mb = json.load(open(os.path.join(dump, "config.json")))["optim"]["micro_batch"]
    with torch.no_grad():
        want = model(torch.from_numpy(tok[:mb, :-1].astype(np.int64)))
    got = torch.from_numpy(st.load(os.path.join(dump, "step0.safetensors"))["logits"]).double()
    err = ((got - want).abs().max() / want.abs().max()).item()
    ok = err <= 1e-5
    print(f"logits of {folder} ({cfg.family}) vs grit: relative error {err:.3e} "
          f"(tol 1e-5): {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


def cmd_same(hf, exp):
    a, b = read_hf(hf), read_hf(exp)
    bad = []
    for name, (t, _) in a.items():
        if name not in b:
            bad.append(f"{name}: missing from the export")
        elif b[name][1] != "F32" or not torch.equal(t, b[name][0]):
            bad.append(f"{name}: differs (export dtype {b[name][1]})")
    bad += [f"{n}: not in the original" for n in b if n not in a]
    ca, cb = from_hf(json.load(open(os.path.join(hf, "config.json")))), \
        from_hf(json.load(open(os.path.join(exp, "config.json"))))
    if ca != cb:
        bad.append(f"config.json reads back as {cb}, expected {ca}")
    for m in bad:
        print("FAIL:", m)
    print(f"export of {hf}: {len(a)} tensors, config: {'PASS' if not bad else 'FAIL'}")
    return 1 if bad else 0


def main(argv):
    torch.set_num_threads(2)
    if len(argv) == 3 and argv[0] == "make":
        return cmd_make(argv[1], argv[2])
    if len(argv) == 3 and argv[0] == "logits":
        return cmd_logits(argv[1], argv[2])
    if len(argv) == 3 and argv[0] == "same":
        return cmd_same(argv[1], argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
