#!/usr/bin/python3
"""The PyTorch side of tests/test_torch_roundtrip.c (needs python3-torch and python3-h5py).

    torch_roundtrip.py forward CK.h5 DATA.h5 OUT.h5 [CK DATA OUT ...]
        loads each lookback checkpoint with lookback_torch.load and writes its outputs on
        the test split of DATA as OUT.h5 /logits (float64).

    torch_roundtrip.py step SRC.h5 DATA.h5 OPTIM LR WEIGHT_DECAY INIT.h5 STEPPED.h5 [...]
        builds a model with SRC's config and PyTorch's own initialisation (seeded), saves it
        as INIT.h5 with lookback_torch.save, takes one optimizer step (torch.optim SGD with
        momentum 0.9, Adam or AdamW) on the whole train split of DATA with lookback's
        training loss (cross-entropy from logits ignoring -100, or MSE), and saves the
        result as STEPPED.h5.
"""
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import lookback_torch  # noqa: E402


def split_inputs(path, split):
    """(model kwargs, targets) of a lookback data file's split."""
    with h5py.File(path, "r") as f:
        g = f[split]
        x = torch.from_numpy(np.asarray(g["inputs"]))
        kwargs = {"tokens": x.long()} if x.dtype == torch.int32 else {"features": x}
        if "lengths" in g:
            kwargs["lengths"] = torch.from_numpy(np.asarray(g["lengths"])).long()
        targets = torch.from_numpy(np.asarray(g["targets"]))
    return kwargs, targets


def task_loss(output, targets):
    if targets.dtype == torch.int32:
        return F.cross_entropy(output.reshape(-1, output.shape[-1]), targets.reshape(-1).long(), ignore_index=-100)
    return F.mse_loss(output, targets.to(output.dtype))


def forward(args):
    for ck, data, out in zip(args[0::3], args[1::3], args[2::3]):
        model = lookback_torch.load(ck)
        kwargs, _ = split_inputs(data, "test")
        with torch.no_grad():
            logits = model(**kwargs)
        with h5py.File(out, "w") as f:
            f.create_dataset("logits", data=logits.double().numpy())


def step(args):
    for i in range(0, len(args), 7):
        src, data, optim, lr, wd, init, stepped = args[i:i + 7]
        lr, wd = float(lr), float(wd)
        torch.manual_seed(1000 + i)
        model = lookback_torch.LookbackModel(lookback_torch.read_config(src))
        lookback_torch.save(model, model.config, init)
        params = list(model.parameters())
        if optim == "sgd":
            opt = torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=wd)
        elif optim == "adam":
            opt = torch.optim.Adam(params, lr=lr, weight_decay=wd)
        else:
            opt = torch.optim.AdamW(params, lr=lr, weight_decay=wd)
        kwargs, targets = split_inputs(data, "train")
        model.train()
        opt.zero_grad()
        task_loss(model(**kwargs), targets).backward()
        opt.step()
        lookback_torch.save(model, model.config, stepped)


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in ("forward", "step"):
        sys.exit(__doc__)
    {"forward": forward, "step": step}[sys.argv[1]](sys.argv[2:])
