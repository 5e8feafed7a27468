#!/usr/bin/python3
"""The nanoGPT anchor, PyTorch's side (bench/bench_nanogpt.c is lookback's; the same recipe).

    /usr/bin/python3 bench/torch_nanogpt.py TEXT [--steps N] [--seed S] [--threads N]
                                            [--eval-batches N] [--model transformer|lstm]

nanoGPT's CPU recipe on a text: character vocabulary (sorted distinct characters,
nanoGPT's prepare.py), 90 % / 10 % split, get_batch (B 12, T 64), the GPT of
bench/torch_reference.py (4 layers, 4 heads, d_model 128, d_ff 512, learned positions,
no biases, tied head, GPT-2 init), AdamW (lr 1e-3, betas (0.9, 0.99), decay 0.1 on the
matrices), clip 1.0, nanoGPT's get_lr (warm-up 100, cosine to 1e-4 at N). --model lstm:
the LSTM language model of bench_nanogpt (embedding 128, nn.LSTM(128, 256), head).
Prints one JSON line as bench_nanogpt.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_reference import GPT  # noqa: E402

B, T = 12, 64


class LSTMLM(torch.nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, 128)
        self.lstm = torch.nn.LSTM(128, 256, batch_first=True)
        self.head = torch.nn.Linear(256, vocab)

    def forward(self, tokens):
        return self.head(self.lstm(self.emb(tokens))[0])

    def optimizer(self):
        decay = [p for p in self.parameters() if p.dim() >= 2]
        rest = [p for p in self.parameters() if p.dim() < 2]
        return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                                 lr=1e-3, betas=(0.9, 0.99))


def get_lr(it, steps, lr=1e-3, min_lr=1e-4, warmup=100):  # nanoGPT's get_lr
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > steps:
        return min_lr
    ratio = (it - warmup) / (steps - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("text")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--eval-batches", type=int, default=200)
    p.add_argument("--model", default="transformer", choices=["transformer", "lstm"])
    o = p.parse_args()
    torch.set_num_threads(o.threads)
    try:
        torch.set_num_interop_threads(o.threads)
    except RuntimeError:
        pass
    torch.manual_seed(o.seed)
    text = open(o.text, encoding="utf-8", errors="replace").read()
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([index[c] for c in text], dtype=torch.long)
    n = int(0.9 * len(data))
    train, val = data[:n], data[n:]
    model = GPT(len(chars), 128, 4, 512, 4, T) if o.model == "transformer" else LSTMLM(len(chars))
    opt = model.optimizer()
    params = list(model.parameters())

    def get_batch(d):
        ix = torch.randint(len(d) - T, (B,))
        return torch.stack([d[i:i + T] for i in ix]), torch.stack([d[i + 1:i + 1 + T] for i in ix])

    walls, cpus, last = [], [], float("nan")
    t0, c0 = time.monotonic(), time.process_time()
    for it in range(o.steps):
        w, c = time.monotonic(), time.process_time()
        for g in opt.param_groups:
            g["lr"] = get_lr(it, o.steps)
        x, y = get_batch(train)
        loss = F.cross_entropy(model(x).reshape(-1, len(chars)), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        last = loss.item()
        walls.append(time.monotonic() - w)
        cpus.append(time.process_time() - c)
    train_wall, train_cpu = time.monotonic() - t0, time.process_time() - c0

    @torch.no_grad()
    def estimate(d):
        model.eval()
        s = 0.0
        for _ in range(o.eval_batches):
            x, y = get_batch(d)
            s += F.cross_entropy(model(x).reshape(-1, len(chars)), y.reshape(-1)).item()
        model.train()
        return s / o.eval_batches

    val_loss, train_loss = estimate(val), estimate(train)
    walls, cpus = sorted(walls[10:]), sorted(cpus[10:])
    print(json.dumps({"impl": "pytorch", "workload": "NANOGPT", "model": o.model, "threads": o.threads,
                      "seed": o.seed, "steps": o.steps, "vocab": len(chars), "n_train": n, "n_val": len(val),
                      "params": sum(q.numel() for q in params), "val_loss": round(val_loss, 4),
                      "train_loss": round(train_loss, 4), "last_batch_loss": round(last, 4),
                      "step_median_s": walls[len(walls) // 2], "step_cpu_median_s": cpus[len(cpus) // 2],
                      "train_wall_s": round(train_wall, 1), "train_cpu_s": round(train_cpu, 1)}), flush=True)


if __name__ == "__main__":
    main()
