"""Independent PyTorch references for the Llama and Falcon families (docs/models.md, docs/parity.md).

Written from the published architectures (Llama: Touvron et al. 2023 and Hugging Face's
LlamaForCausalLM module tree; Falcon: Almazrouei et al. 2023 and FalconForCausalLM), not from
grit's C code and not from transformers (which is not installable here).  Module trees mirror
the Hugging Face classes so that `state_dict()` names are exactly the Hugging Face names:

  llama:  model.embed_tokens.weight, model.layers.{l}.{input_layernorm, post_attention_layernorm
          (RMSNorm weights), self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj}.*,
          model.norm.weight, lm_head.weight (absent when tied)
  falcon: transformer.word_embeddings.weight, transformer.h.{l}.{input_layernorm | ln_attn,
          ln_mlp | input_layernorm, post_attention_layernorm}.*,
          self_attention.{query_key_value, dense}.*, mlp.{dense_h_to_4h, dense_4h_to_h}.*,
          transformer.ln_f.*, lm_head.weight (absent when tied)

The fused Falcon query_key_value is split as Hugging Face's FalconAttention._split_heads does:
multi-query [heads + 2, hd]; new_decoder_architecture [kv, heads/kv + 2, hd] (each group's
queries, then its key and value); otherwise [heads, 3, hd].  Rotary embedding is rotate_half
over the first rot = head_dim * rotary_pct dims with Hugging Face's rope_scaling kinds
(linear, dynamic NTK, llama3) computed in float64.

This module also re-exports gptneox_ref, and its run_reference / ModelConfig.from_dict
dispatch on the config's "family", so compare.py checks every family through one interface.
"""

import dataclasses
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import gptneox_ref as neox
from gptneox_ref import (clip_grads_, configure_torch, init_weights_, load_weights_,  # noqa: F401
                         loss_fn, lr_at, split_batches, state_numpy, GPTNeoXForCausalLM)


# ----------------------------------------------------------------------------- config

@dataclasses.dataclass(frozen=True)
class DecoderConfig:
    family: str
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    vocab_size: int
    num_kv_heads: int = 0
    rotary_pct: float = 1.0
    rotary_base: float = 10000.0
    max_positions: int = 2048
    layer_norm_eps: float = 1e-5
    activation: str = "gelu"
    parallel_residual: bool = False
    norm: str = "rmsnorm"
    mlp: str = "swiglu"
    qkv_layout: str = "split"
    qkv_bias: bool = False
    dense_bias: bool = False
    mlp_bias: bool = False
    tie_embeddings: bool = False
    norms_per_block: int = 2
    rope_scaling: dict = None

    @property
    def head_dim(self):
        return self.hidden_size // self.num_heads

    @property
    def kv_heads(self):
        return self.num_kv_heads or self.num_heads

    @property
    def rotary_dim(self):
        return int(self.head_dim * self.rotary_pct)

    def validate(self):
        if self.family not in ("llama", "falcon"):
            raise ValueError(f"family {self.family!r} is not llama or falcon")
        if self.hidden_size % self.num_heads or self.num_heads % self.kv_heads:
            raise ValueError("head counts do not divide")
        if self.rotary_dim % 2:
            raise ValueError("odd rotary dim")


def _from_dict(d):
    fam = d.get("family", "gpt_neox")
    if fam == "gpt_neox":
        return neox.ModelConfig.from_dict(d)
    names = {f.name for f in dataclasses.fields(DecoderConfig)}
    cfg = DecoderConfig(**{k: v for k, v in d.items() if k in names})
    cfg.validate()
    return cfg


class ModelConfig:
    """ModelConfig.from_dict(cfg["model"]): gptneox_ref's config or a DecoderConfig."""
    from_dict = staticmethod(_from_dict)


# ----------------------------------------------------------------------------- pieces

def inv_freq(cfg, seq_len):
    """Rotary inverse frequencies with Hugging Face's rope_scaling, in float64."""
    rot, base = cfg.rotary_dim, float(cfg.rotary_base)
    rs = cfg.rope_scaling or {}
    kind, factor = rs.get("type"), float(rs.get("factor", 1.0))
    if kind == "dynamic" and seq_len > cfg.max_positions:
        base = base * (factor * seq_len / cfg.max_positions - (factor - 1)) ** (rot / (rot - 2))
    inv = 1.0 / (base ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))
    if kind == "linear":
        inv = inv / factor
    elif kind == "llama3":
        old = float(rs["original_max_position_embeddings"])
        low, high = float(rs["low_freq_factor"]), float(rs["high_freq_factor"])
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > old / low, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < old / high) & ~(wavelen > old / low)
        inv = torch.where(medium, smoothed, scaled)
    return inv


def rope_tables(cfg, t, dtype):
    freqs = torch.outer(torch.arange(t, dtype=torch.float64), inv_freq(cfg, t))
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


class RMSNorm(nn.Module):
    def __init__(self, c, eps, dtype):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c, dtype=dtype))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def make_norm(cfg, dtype):
    c, eps = cfg.hidden_size, cfg.layer_norm_eps
    if cfg.norm == "rmsnorm":
        return RMSNorm(c, eps, dtype)
    return nn.LayerNorm(c, eps=eps, dtype=dtype)


def attention(q, k, v, cos, sin, rot, group):
    """q [B,H,T,hd], k/v [B,KV,T,hd]; causal softmax attention, kv head h // group."""
    q = neox.apply_rotary(q, cos, sin, rot)
    k = neox.apply_rotary(k, cos, sin, rot)
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    t, hd = q.shape[2], q.shape[3]
    mask = torch.ones(t, t, dtype=torch.bool).triu(1)
    s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd)
    p = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
    b, h = q.shape[0], q.shape[1]
    return torch.matmul(p, v).transpose(1, 2).reshape(b, t, h * hd)


# ----------------------------------------------------------------------------- llama

class LlamaAttention(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        c, hd, h, kv = cfg.hidden_size, cfg.head_dim, cfg.num_heads, cfg.kv_heads
        self.cfg = cfg
        self.q_proj = nn.Linear(c, h * hd, bias=cfg.qkv_bias, dtype=dtype)
        self.k_proj = nn.Linear(c, kv * hd, bias=cfg.qkv_bias, dtype=dtype)
        self.v_proj = nn.Linear(c, kv * hd, bias=cfg.qkv_bias, dtype=dtype)
        self.o_proj = nn.Linear(h * hd, c, bias=cfg.dense_bias, dtype=dtype)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        cfg = self.cfg
        hd = cfg.head_dim
        q = self.q_proj(x).view(b, t, cfg.num_heads, hd).transpose(1, 2)
        k = self.k_proj(x).view(b, t, cfg.kv_heads, hd).transpose(1, 2)
        v = self.v_proj(x).view(b, t, cfg.kv_heads, hd).transpose(1, 2)
        out = attention(q, k, v, cos, sin, cfg.rotary_dim, cfg.num_heads // cfg.kv_heads)
        return self.o_proj(out)


class LlamaMLP(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        c, i, bias = cfg.hidden_size, cfg.intermediate_size, cfg.mlp_bias
        self.gate_proj = nn.Linear(c, i, bias=bias, dtype=dtype)
        self.up_proj = nn.Linear(c, i, bias=bias, dtype=dtype)
        self.down_proj = nn.Linear(i, c, bias=bias, dtype=dtype)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaLayer(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        self.input_layernorm = make_norm(cfg, dtype)
        self.self_attn = LlamaAttention(cfg, dtype)
        self.post_attention_layernorm = make_norm(cfg, dtype)
        self.mlp = LlamaMLP(cfg, dtype)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size, dtype=dtype)
        self.layers = nn.ModuleList([LlamaLayer(cfg, dtype) for _ in range(cfg.num_layers)])
        self.norm = make_norm(cfg, dtype)


# ----------------------------------------------------------------------------- falcon

class FalconAttention(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        c, hd, h, kv = cfg.hidden_size, cfg.head_dim, cfg.num_heads, cfg.kv_heads
        self.cfg = cfg
        self.query_key_value = nn.Linear(c, (h + 2 * kv) * hd, bias=cfg.qkv_bias, dtype=dtype)
        self.dense = nn.Linear(c, c, bias=cfg.dense_bias, dtype=dtype)

    def split_heads(self, fused):
        cfg = self.cfg
        b, t, _ = fused.shape
        h, kv, hd = cfg.num_heads, cfg.kv_heads, cfg.head_dim
        if cfg.qkv_layout == "grouped":  # new_decoder_architecture
            g = fused.view(b, t, kv, h // kv + 2, hd)
            q = g[:, :, :, :-2].reshape(b, t, h, hd)
            k, v = g[:, :, :, -2], g[:, :, :, -1]
        elif cfg.qkv_layout == "split":  # multi_query (kv = 1)
            g = fused.view(b, t, h + 2 * kv, hd)
            q, k, v = g[:, :, :h], g[:, :, h:h + kv], g[:, :, h + kv:]
        else:  # [heads, 3, hd]
            g = fused.view(b, t, h, 3, hd)
            q, k, v = g[..., 0, :], g[..., 1, :], g[..., 2, :]
        return (q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))

    def forward(self, x, cos, sin):
        cfg = self.cfg
        q, k, v = self.split_heads(self.query_key_value(x))
        out = attention(q, k, v, cos, sin, cfg.rotary_dim, cfg.num_heads // cfg.kv_heads)
        return self.dense(out)


class FalconMLP(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        c, i, bias = cfg.hidden_size, cfg.intermediate_size, cfg.mlp_bias
        self.dense_h_to_4h = nn.Linear(c, i, bias=bias, dtype=dtype)
        self.dense_4h_to_h = nn.Linear(i, c, bias=bias, dtype=dtype)
        self.approximate = "tanh" if cfg.activation == "gelu_tanh" else "none"

    def forward(self, x):
        return self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(x), approximate=self.approximate))


class FalconLayer(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        self.cfg = cfg
        if cfg.parallel_residual and cfg.norms_per_block == 2:
            self.ln_attn = make_norm(cfg, dtype)
            self.ln_mlp = make_norm(cfg, dtype)
        else:
            self.input_layernorm = make_norm(cfg, dtype)
            if not cfg.parallel_residual:
                self.post_attention_layernorm = make_norm(cfg, dtype)
        self.self_attention = FalconAttention(cfg, dtype)
        self.mlp = FalconMLP(cfg, dtype)

    def forward(self, x, cos, sin):
        cfg = self.cfg
        if cfg.parallel_residual and cfg.norms_per_block == 2:
            a_in, m_in = self.ln_attn(x), self.ln_mlp(x)
        else:
            a_in = self.input_layernorm(x)
            m_in = a_in
        attn = self.self_attention(a_in, cos, sin)
        if not cfg.parallel_residual:
            x = x + attn
            return x + self.mlp(self.post_attention_layernorm(x))
        return x + (self.mlp(m_in) + attn)


class FalconModel(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size, dtype=dtype)
        self.h = nn.ModuleList([FalconLayer(cfg, dtype) for _ in range(cfg.num_layers)])
        self.ln_f = make_norm(cfg, dtype)


# ----------------------------------------------------------------------------- causal LM

class DecoderForCausalLM(nn.Module):
    """LlamaForCausalLM / FalconForCausalLM: tokens [B, T] -> logits [B, T, V]."""

    def __init__(self, cfg, dtype=torch.float32):
        super().__init__()
        self.cfg = cfg
        self.dtype = dtype
        if cfg.family == "llama":
            self.model = LlamaModel(cfg, dtype)
        else:
            self.transformer = FalconModel(cfg, dtype)
        if not cfg.tie_embeddings:
            self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False, dtype=dtype)

    def forward(self, tokens):
        cfg = self.cfg
        t = tokens.shape[1]
        cos, sin = rope_tables(cfg, t, self.dtype)
        if cfg.family == "llama":
            body, emb, layers, norm = self.model, self.model.embed_tokens, self.model.layers, \
                self.model.norm
        else:
            body, emb, layers, norm = self.transformer, self.transformer.word_embeddings, \
                self.transformer.h, self.transformer.ln_f
        del body
        x = emb(tokens)
        for layer in layers:
            x = layer(x, cos, sin)
        h = norm(x)
        w = emb.weight if cfg.tie_embeddings else self.lm_head.weight
        return torch.matmul(h, w.t())


def build(mcfg, dtype):
    if isinstance(mcfg, DecoderConfig):
        return DecoderForCausalLM(mcfg, dtype)
    return neox.GPTNeoXForCausalLM(mcfg, dtype)


# ----------------------------------------------------------------------------- training

def make_optimizer(model, optim):
    """AdamW; weight decay on matrices (linear weights, embeddings), none on biases and norms."""
    decay = [p for p in model.parameters() if p.ndim == 2]
    rest = [p for p in model.parameters() if p.ndim != 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": float(optim["weight_decay"])},
         {"params": rest, "weight_decay": 0.0}], lr=float(optim["lr"]),
        betas=(float(optim["beta1"]), float(optim["beta2"])), eps=float(optim["eps"]),
        foreach=False)


def run_reference(cfg, weights, tokens, steps, dtype=torch.float64, envelope=None,
                  all_grads=False):
    """gptneox_ref.run_reference for any family (same inputs, options and result dict)."""
    mcfg = ModelConfig.from_dict(cfg["model"])
    if not isinstance(mcfg, DecoderConfig):
        return neox.run_reference(cfg, weights, tokens, steps, dtype, envelope=envelope,
                                  all_grads=all_grads)
    optim = cfg["optim"]
    mb, ga, seq = int(optim["micro_batch"]), int(optim["grad_accum"]), int(optim["seq_len"])
    need = (steps * ga * mb, seq + 1)
    if tuple(tokens.shape) != need:
        raise ValueError(f"tokens shape {list(tokens.shape)} != expected {list(need)}")
    tok = torch.from_numpy(np.ascontiguousarray(tokens).astype(np.int64))
    if tok.numel() and (int(tok.min()) < 0 or int(tok.max()) >= mcfg.vocab_size):
        raise ValueError(f"token ids outside [0, {mcfg.vocab_size})")
    model = DecoderForCausalLM(mcfg, dtype)
    load_weights_(model, weights)
    opt = make_optimizer(model, optim)
    env = neox.AdamEnvelope(opt, envelope) if envelope is not None else None
    res = {"loss": [], "grad_norm": [], "lr": [], "step_grads": []}
    for s in range(steps):
        r = neox.train_step(model, opt, split_batches(tok, s, mb, ga), s, optim,
                            capture=(s == 0 or all_grads))
        if all_grads:
            res["step_grads"].append(r["grads"])
        if env is not None:
            env.update(s + 1, r["lr"])
        if s == 0:
            res["logits"], res["grads"], res["loss0"] = r["logits"], r["grads"], r["loss"]
        for k in ("loss", "grad_norm", "lr"):
            res[k].append(r[k])
    res["final"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    if env is not None:
        res["envelope"] = env.bounds(model)
    return res
