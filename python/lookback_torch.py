"""lookback checkpoints as PyTorch modules, and PyTorch modules as lookback checkpoints.

Plain h5py + torch (Debian: python3-torch, python3-h5py, python3-numpy); nothing to build.

    import lookback_torch
    model = lookback_torch.load("runs/att/checkpoint.h5")   # a torch.nn.Module
    logits = model(tokens=torch.as_tensor(tokens), lengths=torch.as_tensor(lengths))
    lookback_torch.save(model, model.config, "init.h5")     # lookback train --init-from init.h5

load(path) builds a LookbackModel of the checkpoint's family (transformer with any
position kind, local attention, LSTM, conv, Mamba) holding the checkpoint's weights; its forward
computes what lookback's model forward computes (in eval mode). save(module, config,
path) writes a checkpoint that `lookback eval`, `lookback train --init-from` and the
library's lb_checkpoint_load_params accept. LookbackModel(config) alone builds a model
with PyTorch's default initialisation, e.g. to train in PyTorch first.

Parameter names: the module's state_dict uses lookback's parameter names, with ".weight"
appended to the attention projections (w_q -> w_q.weight). lookback stores linear weights
as [in, out] (it computes x @ W); PyTorch's nn.Linear stores [out, in]. So the weights of
input, head, ffn.fc1, ffn.fc2, attn.w_q/w_k/w_v/w_o and Mamba's in_proj, x_proj, dt_proj
and out_proj are transposed on the way in and out; everything else (embedding,
pos_embedding, norms, LSTM, Conv1d, A_log, D, biases) keeps its layout. The full table is in docs/pytorch.md.
"""
import math
import os
import stat
import tempfile

try:
    import h5py
    import numpy as np
    import torch
    import torch.nn.functional as F
    from torch import nn
except ModuleNotFoundError as missing:  # one clear line instead of a traceback
    raise SystemExit(
        f"lookback_torch needs the Python module '{missing.name}': "
        "apt-get install python3-torch python3-h5py python3-numpy"
    ) from None

FORMAT = "lookback-checkpoint"
FORMAT_VERSION = 1

# Every model config field lookback stores as a root attribute "model.<field>", with
# lookback's defaults for the transformer (lb_model_config_default).
CONFIG_DEFAULTS = {
    "kind": "transformer",
    "dtype": "float32",
    "vocab_size": 0,
    "input_features": 0,
    "num_classes": 0,
    "head": "last",
    "max_seq_len": 1024,
    "n_layers": 2,
    "d_model": 64,
    "n_heads": 4,
    "n_kv_heads": 0,
    "d_ff": 128,
    "pos": "none",
    "window": 0,
    "causal": 1,
    "dropout": 0.0,
    "hidden_size": 128,
    "forget_bias": 0.0,
    "kernel_size": 3,
    "seed": 1,
    "length_scale": "none",
    "bias": 1,
    "tie_embeddings": 0,
    "init": "default",
    "d_state": 16,
    "d_conv": 4,
    "expand": 2,
    "dt_rank": 0,
    "decay": 0,
    "norm": "layernorm",
    "norm_position": "pre",
    "ffn": "gelu",
}
# Fields a checkpoint written before they existed lacks: it loads with their defaults.
_LATER_FIELDS = ("length_scale", "n_kv_heads", "d_state", "d_conv", "expand", "dt_rank", "decay", "norm",
                 "norm_position", "ffn")
_STRING_FIELDS = ("kind", "dtype", "head", "pos", "length_scale", "init", "norm", "norm_position", "ffn")
_REAL_FIELDS = ("dropout", "forget_bias")
KINDS = ("transformer", "local", "lstm", "conv", "linear", "mamba")
# The families whose body is pre-norm blocks (attention, or linear attention in "linear").
_BLOCK_KINDS = ("transformer", "local", "linear")
POSITIONS = ("none", "sinusoidal", "learned", "rotary", "alibi")
LENGTH_SCALES = ("none", "log-n", "scalable")
NORMS = ("layernorm", "rmsnorm")
NORM_POSITIONS = ("pre", "post")
FFNS = ("gelu", "swiglu", "geglu")
# The accepted range of every number field: the min and max columns of lookback's field
# list (layers/model_fields.def). tests/test_torch_roundtrip.c compares this table with the
# library's (lb_model_fields), so the two cannot drift apart.
FIELD_RANGES = {
    "vocab_size": (0, 2**31 - 1),
    "input_features": (0, 1 << 20),
    "num_classes": (0, 2**31 - 1),
    "max_seq_len": (1, 2**31 - 1),
    "n_layers": (1, 64),
    "d_model": (1, 65536),
    "n_heads": (1, 1024),
    "n_kv_heads": (0, 1024),
    "d_ff": (1, 1 << 20),
    "window": (0, 1 << 30),
    "causal": (0, 1),
    "dropout": (0.0, 0.99),
    "bias": (0, 1),
    "tie_embeddings": (0, 1),
    "hidden_size": (1, 65536),
    "forget_bias": (-100.0, 100.0),
    "kernel_size": (1, 1024),
    "d_state": (1, 4096),
    "d_conv": (1, 1024),
    "expand": (1, 64),
    "dt_rank": (0, 65536),
    "decay": (0, 1),
    "seed": (0, 2**63 - 1),
}
# The fields each family uses (the families column); the others are not range-checked.
_FAMILY_FIELDS = {
    "max_seq_len": ("transformer", "local"), "n_heads": _BLOCK_KINDS, "d_ff": _BLOCK_KINDS,
    "pos": ("transformer", "local"), "window": ("local",), "causal": ("transformer", "local"),
    "length_scale": ("transformer", "local"), "dropout": ("transformer", "local"), "hidden_size": ("lstm",),
    "forget_bias": ("lstm",), "kernel_size": ("conv",), "bias": _BLOCK_KINDS, "decay": ("linear",),
    "init": ("transformer", "local"), "n_kv_heads": ("transformer", "local"),
    "d_state": ("mamba",), "d_conv": ("mamba",), "expand": ("mamba",), "dt_rank": ("mamba",),
    "norm": ("transformer", "local"), "norm_position": ("transformer", "local"), "ffn": ("transformer", "local"),
}
# Fields that only change the initial parameters: a module may differ from its config in them.
_INIT_FIELDS = ("seed", "forget_bias", "init")
LAYER_NORM_EPS = 1e-5  # LB_NORM_EPS, LayerNorm's and RMSNorm's
RMS_NORM_EPS = 1e-5  # Mamba's RMSNorm (layers/family_mamba.c)
ROTARY_BASE = 10000.0


def _dtype(config):
    return torch.float64 if config["dtype"] == "float64" else torch.float32


def check_config(config):
    """Returns a complete config dict (defaults filled in); ValueError names a bad field."""
    unknown = sorted(set(config) - set(CONFIG_DEFAULTS))
    if unknown:
        raise ValueError(f"lookback_torch: model config field(s) {unknown} are not known to this module "
                         f"(known: {sorted(CONFIG_DEFAULTS)})")
    c = dict(CONFIG_DEFAULTS)
    c.update(config)
    for k in _STRING_FIELDS:
        if not isinstance(c[k], (str, bytes)):
            raise ValueError(f"lookback_torch: {k} = {c[k]!r} must be a string")
        c[k] = c[k].decode() if isinstance(c[k], bytes) else c[k]
    for k in CONFIG_DEFAULTS:
        if k in _STRING_FIELDS:
            continue
        v = c[k]
        v = v.item() if isinstance(v, np.generic) else v
        # numbers only: "16" or True is not a width (lookback reads numbers, not text)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"lookback_torch: {k} = {c[k]!r} must be a number, not {type(c[k]).__name__}")
        if k in _REAL_FIELDS:
            c[k] = float(v)
        else:
            if isinstance(v, float) and not v.is_integer():
                raise ValueError(f"lookback_torch: {k} = {v!r} must be a whole number")
            c[k] = int(v)
    if c["kind"] not in KINDS:
        raise ValueError(f"lookback_torch: kind = {c['kind']!r} is not one of {KINDS}")
    if c["pos"] not in POSITIONS:
        raise ValueError(f"lookback_torch: pos = {c['pos']!r} is not one of {POSITIONS}")
    if c["dtype"] not in ("float32", "float64"):
        raise ValueError(f"lookback_torch: dtype = {c['dtype']!r} is neither float32 nor float64")
    if c["length_scale"] not in LENGTH_SCALES:
        raise ValueError(f"lookback_torch: length_scale = {c['length_scale']!r} is not one of {LENGTH_SCALES}")
    if c["head"] not in ("last", "every"):
        raise ValueError(f"lookback_torch: head = {c['head']!r} is neither last nor every")
    if (c["vocab_size"] > 0) == (c["input_features"] > 0):
        raise ValueError("lookback_torch: set exactly one of vocab_size and input_features")
    if c["kind"] in _BLOCK_KINDS and c["d_model"] % c["n_heads"] != 0:
        raise ValueError(f"lookback_torch: d_model = {c['d_model']} is not divisible by n_heads = {c['n_heads']}")
    if c["kind"] in ("transformer", "local") and c["n_kv_heads"] > 0 and c["n_heads"] % c["n_kv_heads"] != 0:
        raise ValueError(f"lookback_torch: n_kv_heads = {c['n_kv_heads']} does not divide n_heads = {c['n_heads']}")
    if c["kind"] == "local" and c["window"] < 1:
        raise ValueError(f"lookback_torch: window = {c['window']} must be >= 1 for local attention")
    if c["init"] not in ("default", "gpt2"):
        raise ValueError(f"lookback_torch: init = {c['init']!r} is neither default nor gpt2")
    for k, names in (("norm", NORMS), ("norm_position", NORM_POSITIONS), ("ffn", FFNS)):
        if c[k] not in names:
            raise ValueError(f"lookback_torch: {k} = {c[k]!r} is not one of {names}")
    if c["kind"] == "linear" and c["bias"] == 0:
        raise ValueError("lookback_torch: linear-attention models without biases (bias = 0) are not supported by "
                         "this module")
    if c["tie_embeddings"] == 1:
        width = c["hidden_size"] if c["kind"] == "lstm" else c["d_model"]
        if c["vocab_size"] == 0 or c["num_classes"] != c["vocab_size"] or width != c["d_model"]:
            raise ValueError("lookback_torch: tie_embeddings = 1 needs token inputs, num_classes = vocab_size and a "
                             "body width equal to d_model (the head's weight is the token embedding)")
    for k, (lo, hi) in FIELD_RANGES.items():
        if c["kind"] in _FAMILY_FIELDS.get(k, KINDS) and not lo <= c[k] <= hi:
            raise ValueError(f"lookback_torch: {k} = {c[k]} must be in [{lo}, {hi}] for a {c['kind']} model")
    if c["kind"] in ("transformer", "local") and c["pos"] == "rotary" and (c["d_model"] // c["n_heads"]) % 2 != 0:
        raise ValueError(f"lookback_torch: rotary positions need an even head width; d_model / n_heads = "
                         f"{c['d_model']} / {c['n_heads']} = {c['d_model'] // c['n_heads']}")
    return c


def sinusoidal_table(seq_len, d_model, dtype):
    """PE[t, 2i] = sin(t / 10000^(2i/D)), PE[t, 2i+1] = cos(...) (lb_sinusoidal_table)."""
    pos = torch.arange(seq_len, dtype=torch.float64)[:, None]
    c = torch.arange(d_model)
    angle = pos / torch.pow(torch.tensor(10000.0, dtype=torch.float64), (c - c % 2).double() / d_model)
    return torch.where(c % 2 == 0, torch.sin(angle), torch.cos(angle)).to(dtype)


def rotary(x, base=ROTARY_BASE):
    """Half-split rotary positions of GPT-NeoX on x [B, H, T, d] at positions 0..T-1 (lb_rotary)."""
    t, d = x.shape[-2], x.shape[-1]
    h = d // 2
    i = torch.arange(h, dtype=torch.float64)
    angle = torch.arange(t, dtype=torch.float64)[:, None] * torch.pow(torch.tensor(base, dtype=torch.float64),
                                                                      -2.0 * i / d)
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def kv_heads(config):
    """The key/value heads of an attention model: n_kv_heads, or n_heads when 0 (lb_model_kv_heads)."""
    return config["n_kv_heads"] if config["n_kv_heads"] > 0 else config["n_heads"]


def alibi_slopes(n_heads):
    """ALiBi's head slopes (Press et al. 2022; lb_alibi_slopes): 2^(-8h/n) for h = 1..n when n_heads
    = n is a power of two; otherwise those of the largest power of two n below n_heads, then the
    first n_heads - n of the odd-numbered slopes (h = 1, 3, ...) of 2n heads."""
    n = 1 << (n_heads.bit_length() - 1)
    slopes = [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]
    return slopes + [2.0 ** (-8.0 * (2 * e + 1) / (2 * n)) for e in range(n_heads - n)]


def alibi_bias(n_heads, t, dtype):
    """[1, H, T, T]: -m_h |i - j| for query i and key j (lookback's ALiBi, symmetric without a
    causal mask like x-transformers' AlibiPositionalBias)."""
    i = torch.arange(t, dtype=torch.float64)
    distance = (i[:, None] - i[None, :]).abs()
    slopes = torch.tensor(alibi_slopes(n_heads), dtype=torch.float64).view(-1, 1, 1)
    return (-slopes * distance).to(dtype)[None]


def attention_allowed(t, lengths, causal, window, device=None):
    """Boolean [B, 1, T, T] (or [1, 1, T, T]): True = query i may attend key j (lb_attn_mask)."""
    i = torch.arange(t, device=device)[:, None]
    j = torch.arange(t, device=device)[None, :]
    allowed = torch.ones(t, t, dtype=torch.bool, device=device)
    if causal or window > 0:
        allowed = allowed & (j <= i)
    if window > 0:
        allowed = allowed & (j > i - window)
    allowed = allowed[None, None]
    if lengths is not None:
        allowed = allowed & (j[None, None] < lengths.view(-1, 1, 1, 1))
    return allowed


def log_key_counts(t, lengths, causal, window):
    """ln(n) [B or 1, 1, T, 1]: n the keys query i may see by the causal, window and
    padding limits (lookback's length scaling, layers/attention.h); 0 where n <= 1."""
    i = torch.arange(t, dtype=torch.float64)
    n = i + 1 if (causal or window > 0) else torch.full((t,), float(t), dtype=torch.float64)
    if window > 0:
        n = torch.clamp(n, max=window)
    n = n[None, :]
    if lengths is not None:
        n = torch.minimum(n, lengths.double()[:, None])
    return torch.where(n > 1, torch.log(n), torch.zeros_like(n))[:, None, :, None]


class Attention(nn.Module):
    """lb_mha without biases: per head softmax(f q kᵀ / sqrt(d_head) + bias + mask) v, then w_o,
    with f = 1, or lookback's length scaling f = ln(n) / ln(N) ("log-n") or
    f = softmax_scale[h] ln(n) ("scalable", SSMax); bias ALiBi's -m_h |i - j| (alibi) or 0.
    n_kv_heads < n_heads: grouped-query attention, w_k and w_v project to n_kv_heads heads and
    query head h reads key/value head h // (n_heads / n_kv_heads) (repeat_interleave, as
    scaled_dot_product_attention(enable_gqa=True) in later PyTorch)."""

    def __init__(self, d_model, n_heads, rotary, length_scale="none", reference_keys=2, n_kv_heads=None,
                 alibi=False):
        super().__init__()
        self.n_heads, self.rotary, self.length_scale = n_heads, rotary, length_scale
        self.n_kv_heads, self.alibi = n_kv_heads or n_heads, alibi
        self.log_reference = math.log(reference_keys)
        d_kv = d_model // n_heads * self.n_kv_heads
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, d_kv, bias=False)
        self.w_v = nn.Linear(d_model, d_kv, bias=False)
        self.w_o = nn.Linear(d_model, d_model, bias=False)
        if length_scale == "scalable":
            self.softmax_scale = nn.Parameter(torch.full((n_heads,), 1.0 / self.log_reference))

    def forward(self, x, allowed, log_n=None):
        b, t, d = x.shape
        h = self.n_heads

        def heads(y):  # [B, T, n * d_head] -> [B, n, T, d_head]
            return y.view(b, t, -1, d // h).transpose(1, 2)

        q, k, v = heads(self.w_q(x)), heads(self.w_k(x)), heads(self.w_v(x))
        group = h // self.n_kv_heads
        if self.rotary:
            q, k = rotary(q), rotary(k)
        if self.length_scale == "log-n":
            q = q * (log_n / self.log_reference).to(q.dtype)
        elif self.length_scale == "scalable":
            q = q * (log_n.to(q.dtype) * self.softmax_scale.view(1, h, 1, 1))
        if group > 1:
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // h)
        if self.alibi:
            scores = scores + alibi_bias(h, t, scores.dtype).to(scores.device)
        scores = scores.masked_fill(~allowed, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        # A query with no allowed key gets zero weights (lookback), not NaN (PyTorch).
        weights = torch.where(allowed.any(dim=-1, keepdim=True), weights, torch.zeros_like(weights))
        out = (weights @ v).transpose(1, 2).reshape(b, t, d)
        return self.w_o(out)


class LinearAttention(nn.Module):
    """Causal linear attention (Katharopoulos et al. 2020, eq. 4-6, phi(x) = elu(x) + 1), per head
    y_i = sum_{j<=i} g^(i-j) (phi(q_i).phi(k_j)) v_j / (sum_{j<=i} g^(i-j) phi(q_i).phi(k_j) + 1e-6),
    g = 1 - 2^(-5-h) for head h with decay (RetNet, Sun et al. 2023), else 1; then w_o. Written
    in the quadratic form (the definition), which lookback computes in chunks and recurrently."""

    def __init__(self, d_model, n_heads, decay):
        super().__init__()
        self.n_heads, self.decay = n_heads, decay
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, d_model, bias=False)
        self.w_v = nn.Linear(d_model, d_model, bias=False)
        self.w_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        h = self.n_heads

        def heads(y):  # [B, T, D] -> [B, H, T, d_head]
            return y.view(b, t, h, d // h).transpose(1, 2)

        q, k, v = F.elu(heads(self.w_q(x))) + 1, F.elu(heads(self.w_k(x))) + 1, heads(self.w_v(x))
        i = torch.arange(t)
        distance = (i.view(t, 1) - i.view(1, t)).to(x.dtype)
        gamma = (1 - 2.0 ** (-5.0 - torch.arange(h, dtype=x.dtype))) if self.decay else torch.ones(h, dtype=x.dtype)
        weights = gamma.view(h, 1, 1) ** distance.clamp(min=0) * (distance >= 0).to(x.dtype)  # [H, T, T]
        a = (q @ k.transpose(-1, -2)) * weights
        out = (a @ v) / (a.sum(dim=-1, keepdim=True) + 1e-6)
        return self.w_o(out.transpose(1, 2).reshape(b, t, d))


class RMSNorm(nn.Module):
    """torch.nn.RMSNorm(d, eps) (torch >= 2.4) for torch 1.13: x / sqrt(mean(x^2) + eps) * weight
    (Zhang & Sennrich 2019; lb_rms_norm), no bias."""

    def __init__(self, d, eps=LAYER_NORM_EPS):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def make_norm(c):
    """The block's norm: nn.LayerNorm (with or without bias) or RMSNorm."""
    if c["norm"] == "rmsnorm":
        return RMSNorm(c["d_model"])
    norm = nn.LayerNorm(c["d_model"], eps=LAYER_NORM_EPS)
    if not c["bias"]:  # torch 1.13's LayerNorm has no bias=False: a zero bias that is no parameter
        del norm.bias
        norm.register_buffer("bias", None)
    return norm


class FeedForward(nn.Module):
    """fc2(act(fc1(x))) for gelu; fc2(act(a) * b) with [a, b] = fc1(x) split in halves for the gated
    kinds (swiglu: silu, geglu: gelu; Shazeer 2020): lb_ffn."""

    def __init__(self, d_model, d_ff, kind="gelu", bias=True):
        super().__init__()
        self.kind = kind
        self.fc1 = nn.Linear(d_model, d_ff if kind == "gelu" else 2 * d_ff, bias=bias)
        self.fc2 = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x):
        h = self.fc1(x)
        if self.kind == "gelu":
            return self.fc2(F.gelu(h))
        a, b = h.chunk(2, dim=-1)
        return self.fc2((F.silu(a) if self.kind == "swiglu" else F.gelu(a)) * b)


class Block(nn.Module):
    """Pre-norm block: x + dropout(attn(ln1(x))), then + dropout(ffn(ln2(x)));
    post-norm: ln1(x + dropout(attn(x))), then ln2(x + dropout(ffn(x)))."""

    def __init__(self, c):
        super().__init__()
        self.post = c["norm_position"] == "post"
        self.ln1 = make_norm(c)
        self.linear = c["kind"] == "linear"
        self.attn = LinearAttention(c["d_model"], c["n_heads"], c["decay"]) if self.linear else Attention(c["d_model"], c["n_heads"], c["pos"] == "rotary", c["length_scale"], c["max_seq_len"],
                              kv_heads(c), c["pos"] == "alibi")
        self.ln2 = make_norm(c)
        self.ffn = FeedForward(c["d_model"], c["d_ff"], c["ffn"], bool(c["bias"]))
        self.dropout = nn.Dropout(c["dropout"])

    def forward(self, x, allowed, log_n=None):
        if self.post:
            x = self.ln1(x + self.dropout(self.attn(x, allowed, log_n)))
            return self.ln2(x + self.dropout(self.ffn(x)))
        a = self.attn(self.ln1(x)) if self.linear else self.attn(self.ln1(x), allowed, log_n)
        x = x + self.dropout(a)
        return x + self.dropout(self.ffn(self.ln2(x)))


def dt_rank(c):
    """Mamba's rank of the step-size projection: dt_rank, or ceil(d_model / 16) when 0."""
    return c["dt_rank"] if c["dt_rank"] > 0 else -(-c["d_model"] // 16)


def selective_scan(u, delta, A, B, C, D):
    """Mamba's selective scan one step at a time (Gu & Dao 2023, Algorithm 2; the
    authors' selective_scan_ref with delta_softplus applied by the caller), time before
    channels: u, delta [b, t, d] (delta after softplus), A [d, n], B, C [b, t, n], D [d]
    -> y [b, t, d]:  h_t = exp(delta_t A) h_{t-1} + delta_t B_t u_t,  y_t = C_t h_t + D u_t."""
    delta_a = torch.exp(torch.einsum("btd,dn->btdn", delta, A))
    delta_b_u = torch.einsum("btd,btn,btd->btdn", delta, B, u)
    h = u.new_zeros(u.shape[0], u.shape[2], A.shape[1])
    ys = []
    for t in range(u.shape[1]):
        h = delta_a[:, t] * h + delta_b_u[:, t]
        ys.append(torch.einsum("bdn,bn->bd", h, C[:, t]))
    return torch.stack(ys, dim=1) + u * D


class MambaBlock(nn.Module):
    """x + Mamba(RMSNorm(x)): the block of Gu & Dao 2023 (section 3.4, Figure 3) as
    layers/family_mamba.c computes it."""

    def __init__(self, c):
        super().__init__()
        d, n, k, r = c["d_model"], c["d_state"], c["d_conv"], dt_rank(c)
        di = c["expand"] * d
        self.d_inner, self.d_state, self.rank = di, n, r
        self.norm = RMSNorm(d)
        self.in_proj = nn.Linear(d, 2 * di, bias=False)
        self.conv1d = nn.Conv1d(di, di, k, groups=di, padding=k - 1)
        self.x_proj = nn.Linear(di, r + 2 * n, bias=False)
        self.dt_proj = nn.Linear(r, di)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, n + 1, dtype=torch.float32)).repeat(di, 1))
        self.D = nn.Parameter(torch.ones(di))
        self.out_proj = nn.Linear(di, d, bias=False)

    def forward(self, h):
        t = h.shape[1]
        x, z = self.in_proj(self.norm(h)).chunk(2, dim=-1)
        x = F.silu(self.conv1d(x.transpose(1, 2))[..., :t].transpose(1, 2))
        dt, B, C = self.x_proj(x).split([self.rank, self.d_state, self.d_state], dim=-1)
        delta = F.softplus(self.dt_proj(dt))
        y = selective_scan(x, delta, -torch.exp(self.A_log), B, C, self.D)
        return h + self.out_proj(y * F.silu(z))


class LookbackModel(nn.Module):
    """lookback's lb_model in PyTorch: input -> body -> head (layers/model.h).

    forward(tokens=None, features=None, lengths=None):
      tokens int64 [B, T] (vocab_size > 0) or features [B, T, F] (input_features > 0);
      lengths [B] in [1, T] (positions >= length are padding) or None = all T.
      head "last":  logits [B, C] read at position lengths[b] - 1 (regression: [B]);
      head "every": logits [B, T, C] (regression: [B, T]).
    """

    def __init__(self, config):
        super().__init__()
        c = check_config(config)
        self.config = c
        d = c["d_model"]
        if c["vocab_size"] > 0:
            self.embedding = nn.Embedding(c["vocab_size"], d)
        else:
            self.input = nn.Linear(c["input_features"], d)
        width = d
        if c["kind"] in ("transformer", "local"):
            if c["pos"] == "learned":
                self.pos_embedding = nn.Parameter(torch.randn(c["max_seq_len"], d))
            self.embed_dropout = nn.Dropout(c["dropout"])
            self.blocks = nn.ModuleList(Block(c) for _ in range(c["n_layers"]))
            if c["norm_position"] == "pre":
                self.ln_f = make_norm(c)
        elif c["kind"] == "linear":
            self.blocks = nn.ModuleList(Block(c) for _ in range(c["n_layers"]))
            self.ln_f = nn.LayerNorm(d, eps=LAYER_NORM_EPS)
        elif c["kind"] == "lstm":
            self.lstm = nn.LSTM(d, c["hidden_size"], num_layers=c["n_layers"], batch_first=True)
            if c["forget_bias"] != 0:
                h = c["hidden_size"]
                with torch.no_grad():
                    for k in range(c["n_layers"]):
                        getattr(self.lstm, f"bias_ih_l{k}")[h:2 * h] += c["forget_bias"]
            width = c["hidden_size"]
        elif c["kind"] == "mamba":
            self.layers = nn.ModuleList(MambaBlock(c) for _ in range(c["n_layers"]))
            self.norm_f = RMSNorm(d)
        else:
            self.conv = nn.ModuleList(
                nn.Conv1d(d, d, c["kernel_size"], dilation=2 ** i) for i in range(c["n_layers"]))
        head_bias = c["kind"] not in ("transformer", "local") or bool(c["bias"])
        if c["tie_embeddings"]:  # the head reads h @ embedding.weight^T; only its bias is its own
            self.head = nn.Module()
            if head_bias:
                self.head.bias = nn.Parameter(torch.zeros(c["num_classes"]))
        else:
            self.head = nn.Linear(width, max(c["num_classes"], 1), bias=head_bias)
        self.to(_dtype(c))

    def forward(self, tokens=None, features=None, lengths=None):
        c = self.config
        if c["vocab_size"] > 0:
            if tokens is None:
                raise ValueError("LookbackModel: this model reads tokens (vocab_size > 0)")
            x = self.embedding(torch.as_tensor(tokens).long())
        else:
            if features is None:
                raise ValueError("LookbackModel: this model reads features (input_features > 0)")
            x = self.input(torch.as_tensor(features).to(_dtype(c)))
        b, t = x.shape[0], x.shape[1]
        if lengths is not None:
            lengths = torch.as_tensor(lengths).long()
            if tuple(lengths.shape) != (b,):
                raise ValueError(f"LookbackModel: lengths has shape {tuple(lengths.shape)}, expected ({b},)")
            bad = ((lengths < 1) | (lengths > t)).nonzero()
            if len(bad) > 0:  # lookback refuses them too (an empty sequence has no last position)
                i = int(bad[0])
                raise ValueError(f"LookbackModel: lengths[{i}] = {int(lengths[i])} is outside [1, seq_len = {t}]")
        if c["kind"] in ("transformer", "local"):
            if c["pos"] == "sinusoidal":
                x = x + sinusoidal_table(t, c["d_model"], x.dtype)
            elif c["pos"] == "learned":
                x = x + self.pos_embedding[:t]
            x = self.embed_dropout(x)
            window = c["window"] if c["kind"] == "local" else 0
            allowed = attention_allowed(t, lengths, c["causal"], window, x.device)
            log_n = log_key_counts(t, lengths, c["causal"], window) if c["length_scale"] != "none" else None
            for block in self.blocks:
                x = block(x, allowed, log_n)
            h = self.ln_f(x) if c["norm_position"] == "pre" else x
        elif c["kind"] == "linear":  # causal by construction: padding after a length changes nothing before it
            for block in self.blocks:
                x = block(x, None)
            h = self.ln_f(x)
        elif c["kind"] == "lstm":
            h, _ = self.lstm(x)
        elif c["kind"] == "mamba":
            h = x
            for layer in self.layers:
                h = layer(h)
            h = self.norm_f(h)
        else:
            h = x
            for conv in self.conv:
                pad = conv.dilation[0] * (conv.kernel_size[0] - 1)
                y = conv(F.pad(h.transpose(1, 2), (pad, 0))).transpose(1, 2)
                h = h + F.gelu(y)
        if c["head"] == "last":
            last = (lengths - 1) if lengths is not None else torch.full((b,), t - 1, dtype=torch.long)
            h = h[torch.arange(b), last.to(h.device)]
        if c["tie_embeddings"]:
            y = h @ self.embedding.weight.t()
            if getattr(self.head, "bias", None) is not None:
                y = y + self.head.bias
        else:
            y = self.head(h)
        return y.squeeze(-1) if c["num_classes"] == 0 else y


def parameter_map(config):
    """[(lookback name, state_dict name, transposed)] in lookback's parameter order."""
    c = check_config(config)
    rows = []
    if c["vocab_size"] > 0:
        rows.append(("embedding.weight", "embedding.weight", False))
    else:
        rows += [("input.weight", "input.weight", True), ("input.bias", "input.bias", False)]
    if c["kind"] in _BLOCK_KINDS:
        if c["pos"] == "learned" and c["kind"] != "linear":
            rows.append(("pos_embedding", "pos_embedding", False))
        norm_bias = c["bias"] and c["norm"] == "layernorm"

        def norm(name):
            return [(f"{name}.weight", f"{name}.weight", False)] + ([(f"{name}.bias", f"{name}.bias", False)]
                                                                     if norm_bias else [])

        for i in range(c["n_layers"]):
            p = f"blocks.{i}"
            rows += norm(f"{p}.ln1")
            rows += [(f"{p}.attn.{w}", f"{p}.attn.{w}.weight", True) for w in ("w_q", "w_k", "w_v", "w_o")]
            if c["length_scale"] == "scalable" and c["kind"] != "linear":
                rows.append((f"{p}.attn.softmax_scale", f"{p}.attn.softmax_scale", False))
            rows += norm(f"{p}.ln2")
            for fc in ("fc1", "fc2"):
                rows.append((f"{p}.ffn.{fc}.weight", f"{p}.ffn.{fc}.weight", True))
                if c["bias"]:
                    rows.append((f"{p}.ffn.{fc}.bias", f"{p}.ffn.{fc}.bias", False))
        if c["norm_position"] == "pre":
            rows += norm("ln_f")
    elif c["kind"] == "lstm":
        for k in range(c["n_layers"]):
            rows += [(f"lstm.{n}_l{k}", f"lstm.{n}_l{k}", False)
                     for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    elif c["kind"] == "mamba":
        for i in range(c["n_layers"]):
            p = f"layers.{i}"
            for name, transposed in (("norm.weight", False), ("in_proj.weight", True), ("conv1d.weight", False),
                                     ("conv1d.bias", False), ("x_proj.weight", True), ("dt_proj.weight", True),
                                     ("dt_proj.bias", False), ("A_log", False), ("D", False),
                                     ("out_proj.weight", True)):
                rows.append((f"{p}.{name}", f"{p}.{name}", transposed))
        rows.append(("norm_f.weight", "norm_f.weight", False))
    else:
        for i in range(c["n_layers"]):
            rows += [(f"conv.{i}.weight", f"conv.{i}.weight", False), (f"conv.{i}.bias", f"conv.{i}.bias", False)]
    if not c["tie_embeddings"]:
        rows.append(("head.weight", "head.weight", True))
    if c["kind"] not in ("transformer", "local") or c["bias"]:
        rows.append(("head.bias", "head.bias", False))
    return rows


def parameter_shapes(config):
    """{state_dict name: shape in PyTorch's layout} of a module of model config `config`."""
    c = check_config(config)
    d, shapes = c["d_model"], {}
    if c["vocab_size"] > 0:
        shapes["embedding.weight"] = (c["vocab_size"], d)
    else:
        shapes["input.weight"], shapes["input.bias"] = (d, c["input_features"]), (d,)
    width = d
    if c["kind"] in _BLOCK_KINDS:
        if c["pos"] == "learned" and c["kind"] != "linear":
            shapes["pos_embedding"] = (c["max_seq_len"], d)
        fc1 = c["d_ff"] if c["ffn"] == "gelu" else 2 * c["d_ff"]
        for i in range(c["n_layers"]):
            p = f"blocks.{i}"
            d_kv = d // c["n_heads"] * kv_heads(c) if c["kind"] != "linear" else d
            for w in ("w_q", "w_k", "w_v", "w_o"):
                shapes[f"{p}.attn.{w}.weight"] = (d_kv, d) if w in ("w_k", "w_v") else (d, d)
            if c["length_scale"] == "scalable" and c["kind"] != "linear":
                shapes[f"{p}.attn.softmax_scale"] = (c["n_heads"],)
            shapes[f"{p}.ffn.fc1.weight"], shapes[f"{p}.ffn.fc1.bias"] = (fc1, d), (fc1,)
            shapes[f"{p}.ffn.fc2.weight"], shapes[f"{p}.ffn.fc2.bias"] = (d, c["d_ff"]), (d,)
            for name in ("ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias"):
                shapes[f"{p}.{name}"] = (d,)
        shapes["ln_f.weight"], shapes["ln_f.bias"] = (d,), (d,)
    elif c["kind"] == "lstm":
        h = c["hidden_size"]
        for k in range(c["n_layers"]):
            shapes[f"lstm.weight_ih_l{k}"] = (4 * h, d if k == 0 else h)
            shapes[f"lstm.weight_hh_l{k}"] = (4 * h, h)
            shapes[f"lstm.bias_ih_l{k}"] = shapes[f"lstm.bias_hh_l{k}"] = (4 * h,)
        width = h
    elif c["kind"] == "mamba":
        n, k, r = c["d_state"], c["d_conv"], dt_rank(c)
        di = c["expand"] * d
        for i in range(c["n_layers"]):
            p = f"layers.{i}"
            shapes.update({f"{p}.norm.weight": (d,), f"{p}.in_proj.weight": (2 * di, d),
                           f"{p}.conv1d.weight": (di, 1, k), f"{p}.conv1d.bias": (di,),
                           f"{p}.x_proj.weight": (r + 2 * n, di), f"{p}.dt_proj.weight": (di, r),
                           f"{p}.dt_proj.bias": (di,), f"{p}.A_log": (di, n), f"{p}.D": (di,),
                           f"{p}.out_proj.weight": (d, di)})
        shapes["norm_f.weight"] = (d,)
    else:
        for i in range(c["n_layers"]):
            shapes[f"conv.{i}.weight"], shapes[f"conv.{i}.bias"] = (d, d, c["kernel_size"]), (d,)
    out = max(c["num_classes"], 1)
    shapes["head.weight"], shapes["head.bias"] = (out, width), (out,)
    # only what parameter_map lists (biases, ln_f and the head's weight may be absent)
    return {torch_name: shapes[torch_name] for _, torch_name, _ in parameter_map(c)}


def check_module(module, config):
    """Refuses (ValueError) a module that `config` does not describe: a parameter missing,
    of another shape, or left over (e.g. a third block for n_layers = 2); a LookbackModel
    whose own config differs in a field that changes the computation (n_heads, pos, causal,
    window, ...); an attention layer with another head count, position or length scaling.
    Returns the complete config."""
    c = check_config(config)
    state = module.state_dict()
    want = parameter_shapes(c)
    for name, shape in want.items():
        if name not in state:
            raise ValueError(f"save: the module has no parameter '{name}', which the config needs "
                             f"({c['kind']}, n_layers = {c['n_layers']})")
        if tuple(state[name].shape) != shape:
            raise ValueError(f"save: the module's '{name}' has shape {tuple(state[name].shape)}, but the config "
                             f"describes {shape}: the config is not the module's")
    extra = [name for name in state if name not in want and not name.endswith("_tracked")]
    if extra:
        raise ValueError(f"save: the module has parameters the config does not describe ({', '.join(extra[:4])}"
                         f"{', ...' if len(extra) > 4 else ''}): the config is not the module's")
    own = getattr(module, "config", None)
    if isinstance(own, dict):
        own = check_config(own)
        for k in CONFIG_DEFAULTS:
            if k not in _INIT_FIELDS and own[k] != c[k]:
                raise ValueError(f"save: config {k} = {c[k]!r}, but the module was built with {k} = {own[k]!r}: "
                                 f"the checkpoint would evaluate as another model")
    for sub in module.modules():
        if isinstance(sub, Attention):
            scale = sub.length_scale
            if (sub.n_heads != c["n_heads"] or sub.rotary != (c["pos"] == "rotary") or scale != c["length_scale"]
                    or sub.n_kv_heads != kv_heads(c) or sub.alibi != (c["pos"] == "alibi")):
                raise ValueError(f"save: an attention layer of the module has n_heads = {sub.n_heads}, n_kv_heads = "
                                 f"{sub.n_kv_heads}, rotary = {sub.rotary}, alibi = {sub.alibi}, length_scale = "
                                 f"{scale!r}, but the config says n_heads = {c['n_heads']}, n_kv_heads = "
                                 f"{c['n_kv_heads']}, pos = {c['pos']!r}, length_scale = {c['length_scale']!r}")
        if isinstance(sub, FeedForward) and sub.kind != c["ffn"]:
            raise ValueError(f"save: a feed-forward layer of the module is {sub.kind!r}, but the config says "
                             f"ffn = {c['ffn']!r}")
        if isinstance(sub, Block) and sub.post != (c["norm_position"] == "post"):
            raise ValueError(f"save: a block of the module is {'post' if sub.post else 'pre'}-norm, but the config "
                             f"says norm_position = {c['norm_position']!r}")
        if (isinstance(sub, (RMSNorm, nn.LayerNorm)) and c["kind"] in _FAMILY_FIELDS["norm"]
                and isinstance(sub, RMSNorm) != (c["norm"] == "rmsnorm")):  # mamba's norms are always RMSNorm
            raise ValueError(f"save: a norm of the module is {type(sub).__name__}, but the config says "
                             f"norm = {c['norm']!r}")
    return c


def read_config(path):
    """The model config stored in a lookback checkpoint, as a dict."""
    with h5py.File(path, "r") as f:
        return _read_config(f, path)


def _read_config(f, path):
    fmt = f.attrs.get("format")
    fmt = fmt.decode() if isinstance(fmt, bytes) else fmt
    if fmt != FORMAT:
        raise ValueError(f"{path}: not a lookback checkpoint (root attribute 'format' is {fmt!r})")
    if int(f.attrs.get("format_version", -1)) != FORMAT_VERSION:
        raise ValueError(f"{path}: checkpoint format_version {f.attrs.get('format_version')} is not {FORMAT_VERSION}")
    config = {}
    for key, value in f.attrs.items():
        if key.startswith("model."):
            value = value.item() if isinstance(value, np.generic) else value
            # lookback writes fixed-length strings, which h5py reads as bytes
            config[key[len("model."):]] = value.decode() if isinstance(value, bytes) else value
    # absent before they existed: no length scale, every head its own keys and values, Mamba's sizes, today's block
    missing = sorted(set(CONFIG_DEFAULTS) - set(config) - set(_LATER_FIELDS))
    if missing:
        raise ValueError(f"{path}: model config attribute(s) {missing} are missing")
    return check_config(config)


def load(path):
    """A LookbackModel (eval mode) with the weights of lookback checkpoint `path`; its
    data_task attribute is the checkpoint's (the task of the data it was trained on, or
    None), which save() writes back."""
    with h5py.File(path, "r") as f:
        config = _read_config(f, path)
        data_task = f.attrs.get("data_task")
        model = LookbackModel(config)
        state = model.state_dict()
        params = f["params"]
        for lb_name, torch_name, transposed in parameter_map(config):
            if lb_name not in params:
                raise ValueError(f"{path}: dataset /params/{lb_name} is missing")
            value = torch.from_numpy(np.asarray(params[lb_name]))
            if transposed:
                value = value.t()
            if tuple(value.shape) != tuple(state[torch_name].shape):
                raise ValueError(f"{path}: /params/{lb_name} has shape {tuple(params[lb_name].shape)}, "
                                 f"expected {tuple(state[torch_name].t().shape if transposed else state[torch_name].shape)}")
            state[torch_name] = value.to(state[torch_name].dtype).contiguous()
        model.load_state_dict(state)
    model.data_task = data_task.decode() if isinstance(data_task, bytes) else data_task
    return model.eval()


def _check_target(path, overwrite):
    """Refuses a target that is not a regular file (a device such as /dev/null, a FIFO, a
    folder), and an existing file unless overwrite."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a device, FIFO or socket)"
        raise ValueError(f"save: {path} is {kind}; a checkpoint is written to a regular file only")
    if not overwrite:
        raise FileExistsError(f"save: {path} already exists; pass overwrite=True to replace it")


def save(module, config, path, overwrite=False, data_task=None):
    """Writes `module`'s weights as a lookback checkpoint of model config `config`.

    config: the module's config dict (module.config for a LookbackModel; fields left out
    take lookback's transformer defaults). It must describe the module: every parameter of
    parameter_map(config) present with its shape, none left over, and for a LookbackModel
    (or any module built from this file's Attention) the same heads, positions and length
    scaling (check_module); otherwise ValueError, and nothing is written. Numbers must be
    numbers in lookback's ranges (FIELD_RANGES); rotary positions need an even head width.
    path: a new file, or with overwrite=True an existing regular file; never a device, FIFO
    or folder. The file is written beside it and renamed into place, so a failure leaves
    no partial checkpoint. data_task: the task of the data the weights were trained on
    (default: module.data_task, set by load()); `lookback eval` then refuses data of
    another task, as with checkpoints lookback wrote.
    Parameters are stored in the config's dtype. The file holds the model and step 0,
    with no optimizer state: lookback starts a new run from it with
    `lookback train --init-from path` and evaluates it with `lookback eval`."""
    c = check_module(module, config)
    _check_target(path, overwrite)
    if data_task is None:
        data_task = getattr(module, "data_task", None)
    if data_task is not None and not isinstance(data_task, str):
        raise ValueError(f"save: data_task = {data_task!r} must be a task name (a string)")
    state = module.state_dict()
    np_dtype = np.float64 if c["dtype"] == "float64" else np.float32
    values = []
    for lb_name, torch_name, transposed in parameter_map(c):
        value = state[torch_name].detach().cpu()
        if transposed:
            value = value.t()
        value = value.contiguous().numpy().astype(np_dtype)
        if not np.all(np.isfinite(value)):
            raise ValueError(f"save: parameter '{torch_name}' holds NaN or infinite values")
        values.append((lb_name, value))
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    os.close(fd)
    try:
        mask = os.umask(0)  # mkstemp made it private; a checkpoint gets the usual permissions
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        with h5py.File(tmp, "w") as f:
            f.attrs["format"] = FORMAT
            f.attrs["format_version"] = np.int64(FORMAT_VERSION)
            f.attrs["step"] = np.int64(0)
            f.attrs["elapsed_seconds"] = np.float64(0.0)
            if data_task is not None:
                f.attrs["data_task"] = data_task
            for key, value in c.items():
                if key in _STRING_FIELDS:
                    f.attrs["model." + key] = value
                elif key in _REAL_FIELDS:
                    f.attrs["model." + key] = np.float64(value)
                elif key == "seed":
                    f.attrs["model." + key] = np.uint64(value)
                else:
                    f.attrs["model." + key] = np.int64(value)
            params = f.create_group("params")
            for lb_name, value in values:
                params.create_dataset(lb_name, data=value)
        _check_target(path, overwrite)  # nothing appeared there meanwhile
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
