"""Independent PyTorch reference implementation of GPT-NeoX training, per docs/parity.md.

This is the yardstick the C trainer is compared against (tests/reference/compare.py) and
the PyTorch baseline for speed comparisons (bench/torch_train.py).  It is written from the
semantics in docs/parity.md, not from Hugging Face code, but its module tree mirrors
GPTNeoXForCausalLM so that `state_dict()` names are exactly the Hugging Face names:

    gpt_neox.embed_in.weight, gpt_neox.layers.{l}.{input_layernorm, post_attention_layernorm,
    attention.query_key_value, attention.dense, mlp.dense_h_to_4h, mlp.dense_4h_to_h}.*,
    gpt_neox.final_layer_norm.*, embed_out.weight

The compute dtype is a constructor argument: float64 when used as the ground truth for
parity checks, float32 for benchmarking.  Everything is plain autograd; attention is an
explicit matmul + masked softmax (torch 1.13 has no fused attention on CPU).

Main entry points:
    ModelConfig.from_dict(cfg["model"]), GPTNeoXForCausalLM(mcfg, dtype)
    init_weights_(model, seed), load_weights_(model, {name: np.ndarray})
    make_optimizer(model, optim_cfg), lr_at(step, optim_cfg)
    train_step(model, optimizer, micro_batches, step, optim_cfg)
    run_reference(cfg, weights, tokens, steps, dtype): the whole parity computation
    AdamEnvelope: how far the final weights can move if every step's gradients err by a bound
"""

import dataclasses
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# Modules whose `.weight` gets weight decay (parity.md); every bias and layer norm gets none.
DECAY_MODULES = frozenset(
    {"embed_in", "query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h", "embed_out"})


def configure_torch(threads=None):
    """Deterministic CPU torch; optionally fix the intra-op thread count."""
    torch.use_deterministic_algorithms(True)
    torch.autograd.set_detect_anomaly(False)
    if threads is not None:
        torch.set_num_threads(int(threads))


# ----------------------------------------------------------------------------- config

@dataclasses.dataclass(frozen=True)
class ModelConfig:
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    vocab_size: int
    rotary_pct: float = 0.25
    rotary_base: float = 10000.0
    max_positions: int = 2048
    layer_norm_eps: float = 1e-5
    activation: str = "gelu"
    parallel_residual: bool = True

    @classmethod
    def from_dict(cls, d):
        """Build from the "model" section of a grit config; unknown keys are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        missing = [f.name for f in dataclasses.fields(cls)
                   if f.default is dataclasses.MISSING and f.name not in d]
        if missing:
            raise KeyError(f"model config lacks {missing}")
        cfg = cls(**{k: v for k, v in d.items() if k in names})
        cfg.validate()
        return cfg

    @property
    def head_dim(self):
        return self.hidden_size // self.num_heads

    @property
    def rotary_dim(self):
        return int(self.head_dim * self.rotary_pct)

    def validate(self):
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} not divisible by "
                             f"num_heads {self.num_heads}")
        if self.rotary_dim % 2:
            raise ValueError(f"rotary dim int({self.head_dim} * {self.rotary_pct}) = "
                             f"{self.rotary_dim} is odd; rotate_half needs it even")
        if self.activation not in ("gelu", "gelu_tanh"):
            raise ValueError(f"activation {self.activation!r} is not gelu or gelu_tanh")


# ----------------------------------------------------------------------------- model

def rotary_tables(cfg, dtype):
    """cos, sin of shape [max_positions, rotary_dim], computed in float64 then cast."""
    rot = cfg.rotary_dim
    inv_freq = 1.0 / (cfg.rotary_base ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))
    t = torch.arange(cfg.max_positions, dtype=torch.float64)
    freqs = torch.outer(t, inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_rotary(x, cos, sin, rot):
    """Rotate the first `rot` dims of x [B, H, T, hd] (GPT-NeoX "rotate_half" convention)."""
    if rot == 0:
        return x
    x_rot, x_pass = x[..., :rot], x[..., rot:]
    x1, x2 = x_rot[..., : rot // 2], x_rot[..., rot // 2:]
    rotated = torch.cat([-x2, x1], dim=-1)
    return torch.cat([x_rot * cos + rotated * sin, x_pass], dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        c = cfg.hidden_size
        self.num_heads = cfg.num_heads
        self.head_dim = cfg.head_dim
        self.rot = cfg.rotary_dim
        self.query_key_value = nn.Linear(c, 3 * c, dtype=dtype)
        self.dense = nn.Linear(c, c, dtype=dtype)

    def forward(self, x, cos, sin, mask):
        b, t, c = x.shape
        h, hd = self.num_heads, self.head_dim
        # qkv rows are laid out [heads, 3 (q, k, v), head_dim]
        qkv = self.query_key_value(x).view(b, t, h, 3 * hd).transpose(1, 2)  # [B, H, T, 3hd]
        q, k, v = qkv.split(hd, dim=-1)
        q = apply_rotary(q, cos, sin, self.rot)
        k = apply_rotary(k, cos, sin, self.rot)
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(hd))
        scores = scores.masked_fill(mask, float("-inf"))
        probs = torch.softmax(scores, dim=-1)  # in the compute dtype (fp32 or fp64)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(b, t, c)
        return self.dense(out)


class MLP(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        self.dense_h_to_4h = nn.Linear(cfg.hidden_size, cfg.intermediate_size, dtype=dtype)
        self.dense_4h_to_h = nn.Linear(cfg.intermediate_size, cfg.hidden_size, dtype=dtype)
        self.approximate = "tanh" if cfg.activation == "gelu_tanh" else "none"

    def forward(self, x):
        return self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(x), approximate=self.approximate))


class Layer(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        c, eps = cfg.hidden_size, cfg.layer_norm_eps
        self.parallel_residual = cfg.parallel_residual
        self.input_layernorm = nn.LayerNorm(c, eps=eps, dtype=dtype)
        self.post_attention_layernorm = nn.LayerNorm(c, eps=eps, dtype=dtype)
        self.attention = Attention(cfg, dtype)
        self.mlp = MLP(cfg, dtype)

    def forward(self, x, cos, sin, mask):
        attn = self.attention(self.input_layernorm(x), cos, sin, mask)
        if self.parallel_residual:
            return x + attn + self.mlp(self.post_attention_layernorm(x))
        x = x + attn
        return x + self.mlp(self.post_attention_layernorm(x))


class GPTNeoXModel(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        self.cfg = cfg
        self.embed_in = nn.Embedding(cfg.vocab_size, cfg.hidden_size, dtype=dtype)
        self.layers = nn.ModuleList([Layer(cfg, dtype) for _ in range(cfg.num_layers)])
        self.final_layer_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps,
                                             dtype=dtype)
        cos, sin = rotary_tables(cfg, dtype)
        # Not persistent: state_dict() holds exactly the Hugging Face parameter names.
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, tokens):
        t = tokens.shape[1]
        if t > self.cfg.max_positions:
            raise ValueError(f"sequence length {t} exceeds max_positions {self.cfg.max_positions}")
        cos, sin = self.rope_cos[:t], self.rope_sin[:t]
        mask = torch.ones(t, t, dtype=torch.bool, device=tokens.device).triu(1)  # True = hidden
        x = self.embed_in(tokens)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.final_layer_norm(x)


class GPTNeoXForCausalLM(nn.Module):
    def __init__(self, cfg, dtype=torch.float32):
        super().__init__()
        self.cfg = cfg
        self.dtype = dtype
        self.gpt_neox = GPTNeoXModel(cfg, dtype)
        self.embed_out = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False, dtype=dtype)

    def forward(self, tokens):
        """tokens [B, T] int64 -> logits [B, T, V] in the model dtype."""
        return self.embed_out(self.gpt_neox(tokens))


def loss_fn(logits, targets):
    """Mean cross-entropy over all B*T positions."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


# ----------------------------------------------------------------------------- weights

@torch.no_grad()
def init_weights_(model, seed, randomize_affine=False):
    """Deterministic init: N(0, 0.02) matrices/embeddings, zero biases, unit layer norms.

    randomize_affine=True also draws biases and layer-norm parameters at random so that a
    parity test exercises every term of the backward pass.
    """
    g = torch.Generator().manual_seed(int(seed))
    for name, p in model.named_parameters():
        is_ln = "layernorm" in name or "layer_norm" in name
        if name.endswith(".weight") and not is_ln:
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.02)
        elif not randomize_affine:
            p.fill_(1.0 if is_ln and name.endswith(".weight") else 0.0)
        elif is_ln and name.endswith(".weight"):
            p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g, dtype=torch.float64))
        else:
            p.copy_(0.02 * torch.randn(p.shape, generator=g, dtype=torch.float64))


def expected_shapes(model):
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


@torch.no_grad()
def load_weights_(model, arrays, source="weights"):
    """Copy {name: np.ndarray} into the model (cast to its dtype); names and shapes must match."""
    want = expected_shapes(model)
    missing = sorted(set(want) - set(arrays))
    extra = sorted(set(arrays) - set(want))
    bad = sorted(k for k in set(want) & set(arrays) if tuple(arrays[k].shape) != want[k])
    problems = []
    if missing:
        problems.append(f"missing {missing}")
    if extra:
        problems.append(f"unexpected {extra}")
    for k in bad:
        problems.append(f"{k}: shape {list(arrays[k].shape)} != expected {list(want[k])}")
    for k in sorted(set(want) & set(arrays)):
        if arrays[k].dtype.kind != "f":
            problems.append(f"{k}: dtype {arrays[k].dtype} is not floating point")
    if problems:
        raise ValueError(f"{source} do not match the model: " + "; ".join(problems))
    state = model.state_dict()
    for k, t in state.items():
        t.copy_(torch.from_numpy(np.ascontiguousarray(arrays[k])).to(t.dtype))


def state_numpy(model, dtype=np.float32):
    """Parameters as {Hugging Face name: np.ndarray}."""
    return {k: v.detach().cpu().numpy().astype(dtype) for k, v in model.state_dict().items()}


# ----------------------------------------------------------------------------- optimiser

def lr_at(step, optim):
    """Learning rate at 0-based optimiser step `step`: linear warmup, then cosine to min_lr."""
    lr, min_lr = float(optim["lr"]), float(optim["min_lr"])
    warmup, total = int(optim["warmup_steps"]), int(optim["total_steps"])
    if step < warmup:
        return lr * (step + 1) / warmup
    p = (step - warmup) / max(1, total - warmup)
    p = min(1.0, max(0.0, p))
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * p))


def param_groups(model, weight_decay):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        module = name.split(".")[-2] if "." in name else ""
        (decay if name.endswith(".weight") and module in DECAY_MODULES else no_decay).append(p)
    return [{"params": decay, "weight_decay": float(weight_decay)},
            {"params": no_decay, "weight_decay": 0.0}]


def make_optimizer(model, optim):
    """torch.optim.AdamW with a decay and a no-decay group (single-tensor code path)."""
    return torch.optim.AdamW(
        param_groups(model, optim["weight_decay"]), lr=float(optim["lr"]),
        betas=(float(optim["beta1"]), float(optim["beta2"])), eps=float(optim["eps"]),
        foreach=False)


@torch.no_grad()
def clip_grads_(params, grad_clip):
    """Global L2 norm of all gradients (returned, before clipping); scales grads by
    min(1, grad_clip / (norm + 1e-6)) unless grad_clip <= 0."""
    grads = [p.grad for p in params if p.grad is not None]
    norm = torch.sqrt(sum((g * g).sum() for g in grads))
    if grad_clip > 0:
        coef = min(1.0, float(grad_clip) / (norm.item() + 1e-6))
        for g in grads:
            g.mul_(coef)
    return norm.item()


def train_step(model, optimizer, micro_batches, step, optim, capture=False):
    """One optimiser step over `micro_batches` (list of int64 [mb, T+1] token tensors).

    Each micro-batch's mean cross-entropy is divided by grad_accum (= len(micro_batches))
    and back-propagated, so the accumulated gradient is the mean over micro-batches.  Then
    global-norm clipping, the scheduled LR is set on every param group, and AdamW steps.

    Returns {"loss", "grad_norm", "lr"}; with capture=True also "logits" (micro-batch 0,
    detached) and "grads" ({name: gradient before clipping}).
    """
    optimizer.zero_grad(set_to_none=True)
    ga = len(micro_batches)
    loss_sum = 0.0
    out = {}
    for i, mb in enumerate(micro_batches):
        logits = model(mb[:, :-1])
        loss = loss_fn(logits, mb[:, 1:])
        (loss / ga).backward()
        loss_sum += loss.item()
        if capture and i == 0:
            out["logits"] = logits.detach()
        del logits, loss
    if capture:
        out["grads"] = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    params = [p for group in optimizer.param_groups for p in group["params"]]
    grad_norm = clip_grads_(params, float(optim["grad_clip"]))
    lr = lr_at(step, optim)
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.step()
    out.update(loss=loss_sum / ga, grad_norm=grad_norm, lr=lr)
    return out


def adam_update_bound(beta1, beta2, t):
    """An upper bound on |m_hat / sqrt(v_hat)| at 1-based step t for any gradient sequence.

    m_t = (1-b1) sum_k b1^(t-k) g_k and v_t = (1-b2) sum_k b2^(t-k) g_k^2, so by Cauchy-Schwarz
    |m_t| <= (1-b1)/sqrt(1-b2) * sqrt(sum_j (b1^2/b2)^j) * sqrt(v_t), j = 0..t-1; bias
    correction divides m by 1-b1^t and v by 1-b2^t.
    """
    s = sum((beta1 * beta1 / beta2) ** j for j in range(t))
    return ((1 - beta1) / (1 - beta1 ** t)) * math.sqrt((1 - beta2 ** t) / (1 - beta2)) \
        * math.sqrt(s)


class AdamEnvelope:
    """Per element, how far a parameter can end up from the reference trajectory when every
    step's gradient is off by up to `rel` times the largest |gradient| of its tensor at that
    step (the bar the step-0 gradients are held to).

    After each optimizer step (update(t, lr)) it propagates bounds on Adam's state:
    |dm| <= b1 |dm| + (1-b1) d (one number per tensor), |dv| <= b2 |dv| + (1-b2)(2|g| d + d^2).
    Over the box |m' - m_hat| <= dm_hat, |v' - v_hat| <= dv_hat the update u = m/(sqrt(v)+eps)
    moves by at most (|m_hat| + dm_hat) / s_lo - |m_hat| / s_hi, s_lo/hi = sqrt(v_hat -/+
    dv_hat) + eps (both signs of u' covered: docs/parity.md), and by at most 2 U_t, where
    U_t = adam_update_bound(t) bounds |u| for any gradients; then
    |dp| <= |dp| (1 - lr wd) + lr |du|.  Where the gradient is large the envelope is tiny
    (Adam is then insensitive); where the gradient is at rounding-noise level the update's sign
    is undetermined and the envelope grows by up to 2 U_t lr per step: exactly the elements
    where any fp32 trainer lands anywhere.  First order in the parameters: a perturbation is
    not followed through the model into later gradients (the step-loss bar covers that).
    Kept in float32 (it is a bound, not a value), in place, to stay cheap beside the model.
    """

    def __init__(self, optimizer, rel):
        self.opt, self.rel = optimizer, float(rel)
        self.dm, self.dv, self.dp = {}, {}, {}

    @torch.no_grad()
    def update(self, t, lr):
        for group in self.opt.param_groups:
            b1, b2 = group["betas"]
            eps, wd = group["eps"], group["weight_decay"]
            bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
            cap = 2 * adam_update_bound(b1, b2, t)
            for p in group["params"]:
                g, st = p.grad, self.opt.state[p]
                d = self.rel * g.abs().max().item()
                dm = b1 * self.dm.get(p, 0.0) + (1 - b1) * d
                self.dm[p] = dm
                dv = self.dv.get(p)
                if dv is None:
                    dv = self.dv[p] = torch.zeros_like(p, dtype=torch.float32)
                    self.dp[p] = torch.zeros_like(p, dtype=torch.float32)
                dv.mul_(b2).add_(g.abs().float(), alpha=(1 - b2) * 2 * d).add_((1 - b2) * d * d)
                vh = st["exp_avg_sq"].to(torch.float32, copy=True).mul_(1 / bc2)
                s_lo = vh.sub(dv, alpha=1 / bc2).clamp_(min=0).sqrt_().add_(eps)
                s_hi = vh.add_(dv, alpha=1 / bc2).sqrt_().add_(eps)
                a = st["exp_avg"].to(torch.float32, copy=True).abs_().mul_(1 / bc1)
                du = a.add(dm / bc1).div_(s_lo).sub_(a.div_(s_hi)).clamp_(max=cap)
                self.dp[p].mul_(1 - lr * wd).add_(du, alpha=lr)

    def bounds(self, model):
        """{name: envelope tensor, float64} for every parameter (zeros before any step)."""
        return {n: (self.dp[p].to(torch.float64) if p in self.dp
                    else torch.zeros_like(p, dtype=torch.float64)).detach()
                for n, p in model.named_parameters()}


def split_batches(tokens, step, micro_batch, grad_accum):
    """Micro-batches of optimiser step `step` from the [rows, T+1] token table (parity.md)."""
    base = step * grad_accum * micro_batch
    return [tokens[base + i * micro_batch: base + (i + 1) * micro_batch]
            for i in range(grad_accum)]


def run_reference(cfg, weights, tokens, steps, dtype=torch.float64, envelope=None,
                  all_grads=False):
    """The full parity computation in `dtype`, starting from `weights` ({name: np.ndarray}).

    cfg: grit config dict with "model" and "optim"; tokens: int [steps*ga*mb, seq+1].
    Returns {"logits": step-0 micro-batch-0 logits, "loss0", "grads": step-0 grads (mean over
    micro-batches, before clipping), "loss"/"grad_norm"/"lr": per-step lists, "final":
    parameters after `steps` steps}; tensors are torch tensors in `dtype`.  With envelope=REL
    also "envelope": AdamEnvelope(REL) bounds on how far each final parameter may lie; with
    all_grads=True also "step_grads": [{name: gradient before clipping}] for every step.
    """
    mcfg = ModelConfig.from_dict(cfg["model"])
    optim = cfg["optim"]
    mb, ga, seq = int(optim["micro_batch"]), int(optim["grad_accum"]), int(optim["seq_len"])
    need = (steps * ga * mb, seq + 1)
    if tuple(tokens.shape) != need:
        raise ValueError(f"tokens shape {list(tokens.shape)} != expected {list(need)} "
                         f"(steps*grad_accum*micro_batch, seq_len+1)")
    tok = torch.from_numpy(np.ascontiguousarray(tokens).astype(np.int64))
    if tok.numel() and (int(tok.min()) < 0 or int(tok.max()) >= mcfg.vocab_size):
        raise ValueError(f"token ids outside [0, {mcfg.vocab_size})")
    model = GPTNeoXForCausalLM(mcfg, dtype)
    load_weights_(model, weights)
    opt = make_optimizer(model, optim)
    env = AdamEnvelope(opt, envelope) if envelope is not None else None
    res = {"loss": [], "grad_norm": [], "lr": [], "step_grads": []}
    for s in range(steps):
        r = train_step(model, opt, split_batches(tok, s, mb, ga), s, optim,
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
