#!/usr/bin/python3
"""PyTorch reference workloads of lookback's benchmark suite (bench/run runs them).

    /usr/bin/python3 bench/torch_reference.py WORKLOAD [--threads N] [--warmup N]
                                              [--reps N] [--quick] [--budget S]
                                              [--default-malloc]

Run it with Debian's /usr/bin/python3 (python3-torch, torch 1.13). Each call runs one
workload in this fresh process and prints one JSON line on stdout, with the same
fields as bench/bench_lookback.c:
    {"impl":"pytorch","workload":..,"threads":..,"median_s":..,"min_s":..,"max_s":..,
     "reps":..,"peak_rss_mib":..,"base_rss_mib":..}
peak_rss_mib is ru_maxrss of the whole process, interpreter and torch included;
base_rss_mib is the resident size after `import torch` and the workload's setup;
cpu_util is process CPU time / wall time over the timed runs; others_cpu the CPUs other
processes kept busy meanwhile (see bench/harness.h); load1 the 1-minute load average at
the end. torch.set_num_threads(N) sets the intra-op pool (bench/run also
sets OMP_NUM_THREADS=N).

Allocator: bench_lookback calls lb_keep_freed_memory() (glibc keeps freed memory instead
of returning it to the system each step); this script applies the same two mallopt
settings unless --default-malloc is given, so both sides run with the same allocator.

Workloads (the same math as lookback's, see bench/bench_lookback.c):
  W1a, W1b  the source article's scaled_dot_product_attention(x, w_q, w_k, w_v,
            causal=True), copied verbatim, forward + backward to w_q, w_k, w_v
            (B=8 T=512, and B=4 T=2048; d_model = d_k = d_v = 64)
  W2        a hand-written 2-layer pre-norm causal transformer equal to lookback's
            model (embedding, x + MHA(LN(x)) without projection biases,
            x + FFN(LN(x)) with exact GELU, final LN, linear head on every position,
            cross-entropy), AdamW step; B=16 T=1024 vocab 32
  LM        nanoGPT's CPU recipe (4 layers, 4 heads, d_model 128, d_ff 512, T 64, B 12,
            vocab 65, learned positions, no biases, tied head, GPT-2 init) written as
            nanoGPT writes it: its get_batch on a fixed random token stream,
            cross-entropy, clip_grad_norm_(1), AdamW(lr 1e-3, betas (0.9, 0.99), weight
            decay 0.1 on the matrices only); cpu_s_per_rep = process CPU seconds per step
  GEN,      greedy generation on that model from an empty context, one token at a time
  GEN1K     with a key-value cache per layer (inference_mode): 64 tokens (GEN) and, with
            1,024 learned positions, 1,024 tokens (GEN1K); tokens/s
  W3        torch.nn.LSTM(64, 128, batch_first=True), MSE on every hidden state,
            AdamW step; B=16 T=1024
  W4        W1's layer training step (MSE, AdamW) at B=1 T=16384 d=64: the full
            [T, T] scores are materialized (1 GiB each); skipped with a note when
            MemAvailable is under 6 GiB (it peaks at ~3.6 GiB)
  LIN       causal linear attention forward + backward on q, k, v [1, 4, 4096, 64], chunked
  K1        causal attention forward + backward on q, k, v [1, 4, 4096, 64] leaves,
            article-style (materialized) and, if torch has it,
            torch.nn.functional.scaled_dot_product_attention(is_causal=True)
            (torch 1.13 does not: it arrived in 2.0). FLOPs as in bench_lookback.c:
            7 T^2 d per (B, H).
  PRODUCT   one training step of a study recipe's model, built by python/lookback_torch.py
            from the initial checkpoint bench_product wrote (--checkpoint CK.h5,
            --recipe NAME, --seq-len T, --batch B): the identical model and parameters;
            cross-entropy on random tokens and targets of the data's vocabulary and
            classes (head last or every, as the checkpoint says), clipping to norm 1,
            torch.optim.AdamW (lr 1e-3, weight decay 0.01), as lookback's trainer step.
"""
import argparse
import ctypes
import json
import math
import os
import resource
import sys
import time

import torch
import torch.nn.functional as F


def keep_freed_memory():
    """The same glibc settings as lookback's lb_keep_freed_memory() (tensor/tensor.c),
    which bench_lookback calls at start: blocks below 512 MiB come from the heap, and
    the heap is trimmed only past 1 GiB free. Both sides of every comparison then run
    with the same allocator behaviour. Returns True when applied."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3
        return libc.mallopt(m_mmap_threshold, 512 << 20) == 1 and libc.mallopt(m_trim_threshold, 1 << 30) == 1
    except (OSError, AttributeError):
        return False


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def current_rss_mib():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1024.0 * 1024.0)
    except OSError:
        return 0.0


BUDGET_S = 40.0  # --budget: see time_it


def time_it(fn, warmup, reps):
    """warmup untimed runs, then reps timed ones (median/min/max). As bench_time in
    bench/harness.c: when the last warm-up run says the timed runs would exceed
    BUDGET_S seconds, reps drops to max(3, BUDGET_S / warm-up time)."""
    last = 0.0
    for _ in range(warmup):
        t0 = time.monotonic()
        fn()
        last = time.monotonic() - t0
    if last > 0 and last * reps > BUDGET_S:
        cut = max(3, int(BUDGET_S / last))
        if cut < reps:
            print(f"torch_reference: {last:.2f} s per run, {cut} repetitions instead of {reps} "
                  f"(budget {BUDGET_S:.0f} s)", file=sys.stderr)
            reps = cut
    times = []
    cpu0, busy0 = time.process_time(), machine_busy_seconds()
    for _ in range(reps):
        t0 = time.monotonic()
        fn()
        times.append(time.monotonic() - t0)
    cpu, busy1 = time.process_time() - cpu0, machine_busy_seconds()
    wall = sum(times)
    others = (busy1 - busy0 - cpu) / wall if wall > 0 and busy0 >= 0 and busy1 >= 0 else -1.0
    if -0.2 < others < 0:  # tick rounding
        others = 0.0
    times.sort()
    n = len(times)
    median = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
    return {"median_s": median, "min_s": times[0], "max_s": times[-1], "reps": n,
            "cpu_util": round(cpu / wall, 2) if wall > 0 else 0.0, "others_cpu": round(others, 2),
            "cpu_s_per_rep": cpu / n if n else 0.0}


def machine_busy_seconds():
    """Machine-wide busy CPU seconds (user, nice, system, irq, softirq, steal) from
    /proc/stat, or -1: with this process's CPU time it gives others_cpu, the CPUs other
    processes kept busy during the timed runs (as bench/harness.c)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return -1.0


def load1():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return -1.0


IMPL = "pytorch"  # "pytorch-default-malloc" with --default-malloc


def emit(workload, threads, result, base, **extra):
    line = {"impl": IMPL, "workload": workload, "threads": threads}
    line.update(result)
    line["peak_rss_mib"] = round(peak_rss_mib(), 1)
    line["base_rss_mib"] = round(base, 1)
    line["load1"] = load1()
    line.update(extra)
    print(json.dumps(line), flush=True)


# ---- the source article's implementation, verbatim ----
def scaled_dot_product_attention(x, w_q, w_k, w_v, causal=False):
    # x: [batch, tokens, model_width]
    q = x @ w_q  # [batch, tokens, d_k]
    k = x @ w_k  # [batch, tokens, d_k]
    v = x @ w_v  # [batch, tokens, d_v]

    scores = q @ k.transpose(-2, -1)
    scores = scores / math.sqrt(q.size(-1))

    if causal:
        tokens = scores.size(-1)
        future = torch.triu(
            torch.ones(tokens, tokens, dtype=torch.bool, device=x.device),
            diagonal=1,
        )
        scores = scores.masked_fill(future, float("-inf"))

    weights = torch.softmax(scores, dim=-1)
    output = weights @ v
    return output, weights


def attention_params(d, gen):
    bound = math.sqrt(6.0 / (d + d))  # Xavier uniform, as lookback
    return [((torch.rand(d, d, generator=gen) * 2 - 1) * bound).requires_grad_() for _ in range(3)]


def run_w1(name, b, t, opts):
    gen = torch.Generator().manual_seed(1234)
    d = 64
    w_q, w_k, w_v = attention_params(d, gen)
    x = torch.randn(b, t, d, generator=gen)
    grad_out = torch.randn(b, t, d, generator=gen)

    def step():
        out, _ = scaled_dot_product_attention(x, w_q, w_k, w_v, causal=True)
        out.backward(grad_out)
        for w in (w_q, w_k, w_v):
            w.grad = None

    base = current_rss_mib()
    warmup, reps = (2, 15) if t <= 512 else (1, 7)
    r = time_it(step, opts.warm(warmup), opts.rep(reps))
    emit(name, opts.threads, r, base, shape=f"B={b} T={t} d_model=d_k=d_v=64 causal")


def run_w4(opts):
    need_gib = 6.0  # it peaks at ~3.6 GiB
    avail = mem_available_gib()
    if avail < need_gib:
        print(json.dumps({"impl": IMPL, "workload": "W4", "threads": opts.threads, "skipped":
                          f"MemAvailable {avail:.1f} GiB < {need_gib} GiB"}), flush=True)
        return
    gen = torch.Generator().manual_seed(1234)
    b, t, d = 1, 16384, 64
    w_q, w_k, w_v = attention_params(d, gen)
    x = torch.randn(b, t, d, generator=gen)
    target = torch.randn(b, t, d, generator=gen)
    opt = torch.optim.AdamW([w_q, w_k, w_v], lr=1e-3)

    def step():
        out, _ = scaled_dot_product_attention(x, w_q, w_k, w_v, causal=True)
        loss = F.mse_loss(out, target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    base = current_rss_mib()
    r = time_it(step, opts.warm(1), opts.rep(1))
    emit("W4", opts.threads, r, base, shape="B=1 T=16384 d_model=d_k=d_v=64 causal (training step)")


def mem_available_gib():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / (1024.0 * 1024.0)
    except OSError:
        pass
    return 0.0


# ---- W2: the same math as lookback's model (layers/model.c, layers/transformer.h) ----
class Block(torch.nn.Module):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.n_heads = n_heads
        self.ln1 = torch.nn.LayerNorm(d_model)
        self.w_q = torch.nn.Linear(d_model, d_model, bias=False)
        self.w_k = torch.nn.Linear(d_model, d_model, bias=False)
        self.w_v = torch.nn.Linear(d_model, d_model, bias=False)
        self.w_o = torch.nn.Linear(d_model, d_model, bias=False)
        self.ln2 = torch.nn.LayerNorm(d_model)
        self.fc1 = torch.nn.Linear(d_model, d_ff)
        self.fc2 = torch.nn.Linear(d_ff, d_model)

    def attention(self, h, future):
        b, t, d = h.shape
        nh, dh = self.n_heads, d // self.n_heads
        q = self.w_q(h).view(b, t, nh, dh).transpose(1, 2)  # [B, H, T, dh]
        k = self.w_k(h).view(b, t, nh, dh).transpose(1, 2)
        v = self.w_v(h).view(b, t, nh, dh).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(dh)
        scores = scores.masked_fill(future, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        heads = weights @ v  # [B, H, T, dh]
        return self.w_o(heads.transpose(1, 2).reshape(b, t, d))

    def forward(self, x, future):
        x = x + self.attention(self.ln1(x), future)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Transformer(torch.nn.Module):
    def __init__(self, vocab, d_model, n_heads, d_ff, n_layers, classes):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab, d_model)
        self.blocks = torch.nn.ModuleList(Block(d_model, n_heads, d_ff) for _ in range(n_layers))
        self.ln_f = torch.nn.LayerNorm(d_model)
        self.head = torch.nn.Linear(d_model, classes)

    def forward(self, tokens):
        t = tokens.size(1)
        future = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        x = self.embedding(tokens)
        for blk in self.blocks:
            x = blk(x, future)
        return self.head(self.ln_f(x))


def run_w2(opts):
    torch.manual_seed(99)
    b, t, vocab = 16, 1024, 32
    model = Transformer(vocab, 64, 4, 256, 2, vocab)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, vocab, (b, t))
    targets = torch.randint(0, vocab, (b, t))

    def step():
        logits = model(tokens)
        loss = F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    base = current_rss_mib()
    r = time_it(step, opts.warm(1), opts.rep(5))
    emit("W2", opts.threads, r, base, shape="B=16 T=1024 L=2 d_model=64 H=4 d_ff=256",
         params=sum(p.numel() for p in model.parameters()))


# ---- LM, GEN: nanoGPT's CPU recipe on the same model as bench_lookback's LM ----
class LayerNorm(torch.nn.Module):
    """LayerNorm with an optional bias (nanoGPT's; torch 1.13's has no bias=False)."""

    def __init__(self, d, bias):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))
        self.bias = torch.nn.Parameter(torch.zeros(d)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class GPTBlock(torch.nn.Module):
    def __init__(self, d, n_heads, d_ff, bias):
        super().__init__()
        self.n_heads = n_heads
        self.ln1, self.ln2 = LayerNorm(d, bias), LayerNorm(d, bias)
        self.qkv = torch.nn.Linear(d, 3 * d, bias=False)  # lookback's w_q, w_k, w_v in one product
        self.proj = torch.nn.Linear(d, d, bias=False)
        self.fc1 = torch.nn.Linear(d, d_ff, bias=bias)
        self.fc2 = torch.nn.Linear(d_ff, d, bias=bias)

    def forward(self, x, future):
        b, t, d = x.shape
        nh = self.n_heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, nh, d // nh).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // nh))
        att = torch.softmax(att.masked_fill(future, float("-inf")), dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    def step(self, x, cache, t):
        """One position (x [1, d]) against the key-value cache [2, n_heads, T, dh], filled to t."""
        d = x.shape[-1]
        nh, dh = self.n_heads, d // self.n_heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        cache[0, :, t] = k.view(nh, dh)
        cache[1, :, t] = v.view(nh, dh)
        att = torch.softmax((cache[0, :, :t + 1] @ q.view(nh, dh, 1)).squeeze(-1) * (1.0 / math.sqrt(dh)), dim=-1)
        y = (att.unsqueeze(1) @ cache[1, :, :t + 1]).reshape(1, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(torch.nn.Module):
    """bench_lookback's LM model: learned positions, pre-LN blocks, final LayerNorm, head tied
    to the token embedding, no biases; GPT-2 initialisation as nanoGPT's _init_weights."""

    def __init__(self, vocab, d, n_heads, d_ff, n_layers, max_seq_len, bias=False):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, d)
        self.wpe = torch.nn.Embedding(max_seq_len, d)
        self.blocks = torch.nn.ModuleList(GPTBlock(d, n_heads, d_ff, bias) for _ in range(n_layers))
        self.ln_f = LayerNorm(d, bias)
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * n_layers) if name.endswith(("proj.weight", "fc2.weight")) else 0.02
                torch.nn.init.normal_(p, 0.0, std)

    def forward(self, tokens):
        t = tokens.size(1)
        future = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        x = self.wte(tokens) + self.wpe(torch.arange(t))
        for blk in self.blocks:
            x = blk(x, future)
        return self.ln_f(x) @ self.wte.weight.t()

    def optimizer(self):  # nanoGPT's configure_optimizers: decay on the matrices only
        decay = [p for p in self.parameters() if p.dim() >= 2]
        rest = [p for p in self.parameters() if p.dim() < 2]
        return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                                 lr=1e-3, betas=(0.9, 0.99))


LM_B, LM_T, LM_V, LM_STREAM = 12, 64, 65, 1 << 20
LM_SHAPE = "B=12 T=64 L=4 d_model=128 H=4 d_ff=512 V=65 learned positions, no biases, tied head"


def run_lm(opts):
    torch.manual_seed(1337)
    model = GPT(LM_V, 128, 4, 512, 4, LM_T)
    opt = model.optimizer()
    stream = torch.randint(0, LM_V, (LM_STREAM,))
    params = list(model.parameters())

    def get_batch():  # nanoGPT's get_batch
        ix = torch.randint(LM_STREAM - LM_T - 1, (LM_B,))
        x = torch.stack([stream[i:i + LM_T] for i in ix])
        y = torch.stack([stream[i + 1:i + 1 + LM_T] for i in ix])
        return x, y

    def step():
        x, y = get_batch()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, LM_V), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    base = current_rss_mib()
    r = time_it(step, opts.warm(3), opts.rep(30))
    emit("LM", opts.threads, r, base, shape=LM_SHAPE,
         params=sum(p.numel() for p in params), interop_threads=torch.get_num_interop_threads())


def run_gen(opts, name, t):
    """Greedy generation of t tokens from an empty context with a key-value cache, one
    token at a time (as bench_lookback's GEN)."""
    torch.manual_seed(1337)
    model = GPT(LM_V, 128, 4, 512, 4, t).eval()
    nh, dh = 4, 32
    caches = [torch.zeros(2, nh, t, dh) for _ in model.blocks]
    last = [0.0]

    @torch.inference_mode()
    def generate():
        tok = 0
        for i in range(t):
            t0 = time.monotonic() if i == t - 1 else 0.0
            x = (model.wte.weight[tok] + model.wpe.weight[i]).view(1, -1)
            for blk, cache in zip(model.blocks, caches):
                x = blk.step(x, cache, i)
            logits = model.ln_f(x) @ model.wte.weight.t()
            tok = int(torch.argmax(logits))
            if i == t - 1:
                last[0] = time.monotonic() - t0

    base = current_rss_mib()
    r = time_it(generate, opts.warm(2), opts.rep(5 if t > 256 else 20))
    emit(name, opts.threads, r, base, shape=f"LM model, context {t}, 1 stream, greedy", tokens=t,
         tokens_per_s=t / r["median_s"], last_token_s=last[0])


def run_w3(opts):
    torch.manual_seed(7)
    b, t, n_in, hidden = 16, 1024, 64, 128
    lstm = torch.nn.LSTM(n_in, hidden, batch_first=True)
    opt = torch.optim.AdamW(lstm.parameters(), lr=1e-3)
    x = torch.randn(b, t, n_in)
    target = torch.randn(b, t, hidden) * 0.5

    def step():
        out, _ = lstm(x)
        loss = F.mse_loss(out, target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    base = current_rss_mib()
    r = time_it(step, opts.warm(1), opts.rep(5))
    emit("W3", opts.threads, r, base, shape="B=16 T=1024 input=64 hidden=128")


def run_k1(opts):
    gen = torch.Generator().manual_seed(5)
    b, h, t, d = 1, 4, 4096, 64
    q, k, v = (torch.randn(b, h, t, d, generator=gen).requires_grad_() for _ in range(3))
    grad_out = torch.randn(b, h, t, d, generator=gen)
    fwd_flop = 2.0 * t * t * d * b * h
    step_flop = 3.5 * fwd_flop
    sdpa = getattr(F, "scaled_dot_product_attention", None)

    def materialized(q, k, v):
        scores = q @ k.transpose(-2, -1) / math.sqrt(d)
        future = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v

    attn = (lambda q, k, v: sdpa(q, k, v, is_causal=True)) if sdpa else materialized

    def step():
        attn(q, k, v).backward(grad_out)
        for x in (q, k, v):
            x.grad = None

    def forward():
        with torch.no_grad():
            attn(q, k, v)

    base = current_rss_mib()
    fwd = time_it(forward, opts.warm(1), opts.rep(3))
    r = time_it(step, opts.warm(1), opts.rep(5))
    emit("K1", opts.threads, r, base, shape="B=1 H=4 T=4096 d=64 causal",
         op="F.scaled_dot_product_attention" if sdpa else "materialized (article)",
         has_sdpa=sdpa is not None, gflop=step_flop / 1e9, gflops=step_flop / r["median_s"] / 1e9,
         fwd_median_s=fwd["median_s"], fwd_gflops=fwd_flop / fwd["median_s"] / 1e9)


def run_linear(opts):
    """Causal linear attention (elu + 1 features, Katharopoulos et al. 2020) forward + backward on
    q, k, v [1, 4, 4096, 64] leaves, in the chunked form a PyTorch user writes (chunks of 64: the
    causal products inside a chunk, the carried state S and normaliser z across chunks)."""
    gen = torch.Generator().manual_seed(5)
    b, h, t, d, chunk = 1, 4, 4096, 64, 64
    q, k, v = (torch.randn(b, h, t, d, generator=gen).requires_grad_() for _ in range(3))
    grad_out = torch.randn(b, h, t, d, generator=gen)
    tril = torch.tril(torch.ones(chunk, chunk))

    def linear_attention(q, k, v):
        fq, fk = F.elu(q) + 1, F.elu(k) + 1
        s = torch.zeros(b, h, d, d)
        z = torch.zeros(b, h, d)
        outs = []
        for c0 in range(0, t, chunk):
            qc, kc, vc = fq[:, :, c0:c0 + chunk], fk[:, :, c0:c0 + chunk], v[:, :, c0:c0 + chunk]
            a = (qc @ kc.transpose(-1, -2)) * tril
            num = a @ vc + qc @ s
            den = a.sum(-1) + (qc * z.unsqueeze(2)).sum(-1)
            outs.append(num / (den.unsqueeze(-1) + 1e-6))
            s = s + kc.transpose(-1, -2) @ vc
            z = z + kc.sum(2)
        return torch.cat(outs, dim=2)

    def step():
        linear_attention(q, k, v).backward(grad_out)
        for x in (q, k, v):
            x.grad = None

    base = current_rss_mib()
    r = time_it(step, opts.warm(1), opts.rep(5))
    emit("LIN", opts.threads, r, base, shape="B=1 H=4 T=4096 d=64 causal linear attention",
         op="chunked linear attention (autograd)")


def run_product(opts):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import lookback_torch
    torch.manual_seed(7)
    model = lookback_torch.load(opts.checkpoint).train()
    c = model.config
    b, t, classes = opts.batch, opts.seq_len, max(c["num_classes"], 1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    tokens = torch.randint(0, c["vocab_size"], (b, t))
    targets = torch.randint(0, classes, (b, t) if c["head"] == "every" else (b,))

    def step():
        logits = model(tokens=tokens)
        loss = F.cross_entropy(logits.reshape(-1, classes), targets.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    base = current_rss_mib()
    r = time_it(step, opts.warm(2), opts.rep(10))
    emit("PRODUCT", opts.threads, r, base, recipe=opts.recipe, shape=f"{c['kind']} B={b} T={t}",
         params=sum(p.numel() for p in model.parameters()))


def run_info():
    print(json.dumps({"impl": "pytorch-info", "torch": torch.__version__,
                      "has_sdpa": hasattr(F, "scaled_dot_product_attention"),
                      "parallel_info": torch.__config__.parallel_info().strip().splitlines()[:6],
                      "python": sys.version.split()[0]}), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workload", choices=["W1a", "W1b", "W2", "W3", "LM", "GEN", "GEN1K", "W4", "K1", "LIN", "PRODUCT", "INFO"])
    p.add_argument("--checkpoint", help="PRODUCT: the recipe's initial checkpoint (bench_product)")
    p.add_argument("--recipe", default="", help="PRODUCT: the recipe's name, echoed in the JSON line")
    p.add_argument("--seq-len", type=int, default=0, help="PRODUCT: T")
    p.add_argument("--batch", type=int, default=32, help="PRODUCT: B")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=-1)
    p.add_argument("--reps", type=int, default=-1)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--budget", type=float, default=40.0, help="cap on the timed runs' total, seconds")
    p.add_argument("--default-malloc", action="store_true",
                   help="leave glibc's defaults (by default, apply lookback's lb_keep_freed_memory settings)")
    opts = p.parse_args()
    global IMPL
    if opts.default_malloc:
        IMPL = "pytorch-default-malloc"
    else:
        keep_freed_memory()
    global BUDGET_S
    BUDGET_S = opts.budget
    opts.warm = lambda n: opts.warmup if opts.warmup >= 0 else (min(n, 1) if opts.quick else n)
    opts.rep = lambda n: opts.reps if opts.reps > 0 else (max(n // 2, 1) if opts.quick else n)
    torch.set_num_threads(opts.threads)
    try:  # every pool at the thread count (bench/run also sets OMP_NUM_THREADS, OPENBLAS_NUM_THREADS)
        torch.set_num_interop_threads(opts.threads)
    except RuntimeError:
        pass
    w = opts.workload
    if w == "W1a":
        run_w1("W1a", 8, 512, opts)
    elif w == "W1b":
        run_w1("W1b", 4, 2048, opts)
    elif w == "W2":
        run_w2(opts)
    elif w == "W3":
        run_w3(opts)
    elif w == "LM":
        run_lm(opts)
    elif w == "GEN":
        run_gen(opts, "GEN", LM_T)
    elif w == "GEN1K":
        run_gen(opts, "GEN1K", 1024)
    elif w == "W4":
        run_w4(opts)
    elif w == "K1":
        run_k1(opts)
    elif w == "LIN":
        run_linear(opts)
    elif w == "PRODUCT":
        run_product(opts)
    else:
        run_info()


if __name__ == "__main__":
    main()
