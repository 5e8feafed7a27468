#!/usr/bin/python3
"""PyTorch reference of lookback's streaming benchmark (bench/bench_stream.c); bench/run
runs both.

    /usr/bin/python3 bench/torch_stream.py FAMILY [--threads N] [--warmup N] [--reps N]
                                           [--quick] [--budget S]
    FAMILY: transformer | local | lstm | conv

The same models as bench_stream.c (token inputs, vocab 32, d_model 64, 8 classes read
at the new event, float32, random weights), each run the way a PyTorch user writes a
per-event loop under torch.no_grad():
  transformer  2 pre-norm blocks, 4 heads, d_ff 128; a hand-written key-value cache per
               layer, preallocated [B, H, capacity, d_head]: the new key and value are
               written at row T, the query attends to rows 0..T (q @ Kᵀ, softmax, @ V)
  local        the same with a ring buffer of the last 128 keys and values
  lstm         torch.nn.LSTM(64, 128, num_layers=2, batch_first=True) with (h, c) carried
  conv         4 causal conv layers (kernel 3, dilation 1, 2, 4, 8), each keeping its
               last (K-1)·dilation inputs and calling F.conv1d on them and the new event
For B = 1 and 16 streams and contexts T = 1k, 4k, 16k, 64k one event per stream is timed
(median). The transformer's cache is filled with random keys and values up to T, as in
bench_stream.c; the bounded families' state does not depend on T (their buffers are
filled with random values). One JSON line per (B, T) with the fields of bench_stream.c.
"""
import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_reference as ref  # noqa: E402  (time_it, emit, allocator settings)

CONTEXTS = [1024, 4096, 16384, 65536]
BATCHES = [1, 16]
D, VOCAB, CLASSES = 64, 32, 8


class Block(ref.Block):
    """torch_reference.py's transformer block (the same parameters) with a cached step."""

    def step(self, x, cache_k, cache_v, row, rows):
        """x [B, 1, d]; writes this event's key and value at `row` of the caches
        [B, H, capacity, dh] and attends over rows 0 .. rows-1."""
        b, _, d = x.shape
        nh, dh = self.n_heads, d // self.n_heads
        h = self.ln1(x)
        q = self.w_q(h).view(b, 1, nh, dh).transpose(1, 2)  # [B, H, 1, dh]
        cache_k[:, :, row] = self.w_k(h).view(b, nh, dh)
        cache_v[:, :, row] = self.w_v(h).view(b, nh, dh)
        k, v = cache_k[:, :, :rows], cache_v[:, :, :rows]
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(dh), dim=-1)
        x = x + self.w_o((weights @ v).transpose(1, 2).reshape(b, 1, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Attention(torch.nn.Module):
    def __init__(self, window):
        super().__init__()
        self.window = window
        self.embedding = torch.nn.Embedding(VOCAB, D)
        self.blocks = torch.nn.ModuleList([Block(D, 4, 128) for _ in range(2)])
        self.ln_f = torch.nn.LayerNorm(D)
        self.head = torch.nn.Linear(D, CLASSES)

    def new_state(self, b, context, capacity):
        rows = self.window if self.window else capacity
        shape = (b, 4, rows, D // 4)
        return {"k": [torch.randn(shape) for _ in self.blocks], "v": [torch.randn(shape) for _ in self.blocks],
                "t": context}

    def state_bytes(self, s):
        held = min(s["t"], self.window) if self.window else s["t"]
        return 2 * len(self.blocks) * held * D * 4

    def step(self, s, tokens):
        x = self.embedding(tokens).unsqueeze(1)  # [B, 1, D]
        t = s["t"]
        row = t % self.window if self.window else t
        rows = min(t + 1, self.window) if self.window else t + 1
        for blk, k, v in zip(self.blocks, s["k"], s["v"]):
            x = blk.step(x, k, v, row, rows)
        s["t"] = t + 1
        return self.head(self.ln_f(x))[:, 0]


class LSTM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(VOCAB, D)
        self.lstm = torch.nn.LSTM(D, 128, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(128, CLASSES)

    def new_state(self, b, context, capacity):
        return {"hc": (torch.randn(2, b, 128), torch.randn(2, b, 128))}

    def state_bytes(self, s):
        return 2 * 2 * 128 * 4

    def step(self, s, tokens):
        out, s["hc"] = self.lstm(self.embedding(tokens).unsqueeze(1), s["hc"])
        return self.head(out[:, 0])


class Conv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(VOCAB, D)
        self.convs = torch.nn.ModuleList([torch.nn.Conv1d(D, D, 3, dilation=2 ** i) for i in range(4)])
        self.head = torch.nn.Linear(D, CLASSES)

    def new_state(self, b, context, capacity):  # channels-first histories [B, D, (K-1)·dilation]
        return {"hist": [torch.randn(b, D, 2 * 2 ** i) for i in range(4)]}

    def state_bytes(self, s):
        return sum(2 * 2 ** i for i in range(4)) * D * 4

    def step(self, s, tokens):
        x = self.embedding(tokens).unsqueeze(2)  # [B, D, 1]
        for i, conv in enumerate(self.convs):
            ext = torch.cat([s["hist"][i], x], dim=2)  # [B, D, R + 1]
            s["hist"][i] = ext[:, :, 1:]
            x = x + F.gelu(conv(ext))  # the unpadded conv of R + 1 inputs is the new output
        return self.head(x[:, :, 0])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("family", choices=["transformer", "local", "lstm", "conv"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=-1)
    p.add_argument("--reps", type=int, default=-1)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--budget", type=float, default=40.0)
    o = p.parse_args()
    ref.keep_freed_memory()
    ref.BUDGET_S = o.budget
    torch.set_num_threads(o.threads)
    torch.manual_seed(5)
    warmup = o.warmup if o.warmup >= 0 else 3
    reps = o.reps if o.reps > 0 else (20 if o.quick else 40)
    model = {"transformer": lambda: Attention(0), "local": lambda: Attention(128), "lstm": LSTM,
             "conv": Conv}[o.family]().eval()
    with torch.no_grad():
        for b in BATCHES:
            tokens = torch.arange(b) % VOCAB
            for t in CONTEXTS:
                print(f"torch_stream: {o.family} B={b} T={t}", file=sys.stderr)
                s = model.new_state(b, t, t + warmup + reps + 64)
                base = ref.current_rss_mib()
                r = ref.time_it(lambda: model.step(s, tokens), warmup, reps)
                read = 2.0 * 2 * t * D * 4 * b if o.family == "transformer" else 0.0
                allocated = sum(x.numel() * 4 for v in s.values() if isinstance(v, (list, tuple)) for x in v)
                ref.emit(f"S-{o.family}", o.threads, r, base, family=o.family, batch=b, context=t,
                         state_bytes=model.state_bytes(s), allocated_bytes=allocated, read_bytes=read,
                         shape=f"d_model 64, B={b}, T={t}")
                del s


if __name__ == "__main__":
    main()
