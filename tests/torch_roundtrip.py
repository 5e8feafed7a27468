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

    torch_roundtrip.py refusals CK.h5 DATA.h5 DIR
        what lookback_torch refuses, one line each, "refused NAME: message" (or
        "ACCEPTED NAME" and exit 1): a config that is not the module's (n_heads, n_layers,
        d_model), an existing data file, /dev/null, strings and out-of-range numbers,
        rotary positions with an odd head width, lengths of 0. It also writes DIR/saved.h5
        (the checkpoint loaded and saved again, data_task kept) and DIR/overwritten.h5
        (saved twice, the second time with overwrite=True).

    torch_roundtrip.py ranges
        prints lookback_torch.FIELD_RANGES, one "field min max" line each.
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


def refusals(args):
    ck, data, folder = args
    model = lookback_torch.load(ck)
    base = dict(model.config)
    accepted = []

    def expect(name, error, call):
        try:
            call()
        except error as e:
            print(f"refused {name}: {e}")
            return
        print(f"ACCEPTED {name}")
        accepted.append(name)

    out = os.path.join(folder, "refused.h5")
    expect("n_heads", ValueError, lambda: lookback_torch.save(model, dict(base, n_heads=base["n_heads"] * 2), out))
    expect("n_layers", ValueError, lambda: lookback_torch.save(model, dict(base, n_layers=base["n_layers"] - 1), out))
    expect("d_model", ValueError, lambda: lookback_torch.save(model, dict(base, d_model=base["d_model"] * 2), out))
    expect("causal", ValueError, lambda: lookback_torch.save(model, dict(base, causal=1 - base["causal"]), out))
    plain = lookback_torch.LookbackModel(base)
    del plain.config  # a module without its config: the attention layers still tell
    expect("attention heads", ValueError,
           lambda: lookback_torch.save(plain, dict(base, n_heads=base["n_heads"] * 2), out))
    expect("existing file", FileExistsError, lambda: lookback_torch.save(model, base, data))
    expect("device", ValueError, lambda: lookback_torch.save(model, base, "/dev/null", overwrite=True))
    expect("folder", ValueError, lambda: lookback_torch.save(model, base, folder, overwrite=True))
    expect("string number", ValueError, lambda: lookback_torch.check_config(dict(base, d_model="16")))
    expect("bool number", ValueError, lambda: lookback_torch.check_config(dict(base, n_layers=True)))
    expect("fraction", ValueError, lambda: lookback_torch.check_config(dict(base, n_layers=1.5)))
    expect("range", ValueError, lambda: lookback_torch.check_config(dict(base, n_layers=65)))
    expect("dropout range", ValueError, lambda: lookback_torch.check_config(dict(base, dropout=1.0)))
    expect("odd head width", ValueError,
           lambda: lookback_torch.check_config(dict(base, pos="rotary", d_model=6, n_heads=2)))
    kwargs = {"tokens": torch.ones(2, 5, dtype=torch.long), "lengths": torch.tensor([5, 0])}
    expect("length 0", ValueError, lambda: model(**kwargs))
    kwargs = {"tokens": torch.ones(2, 5, dtype=torch.long), "lengths": torch.tensor([6, 5])}
    expect("length past T", ValueError, lambda: model(**kwargs))
    if os.path.exists(out):
        print(f"ACCEPTED nothing written: {out} exists")
        accepted.append("nothing written")
    saved = os.path.join(folder, "saved.h5")
    lookback_torch.save(model, base, saved)
    with h5py.File(saved, "r") as f:
        print(f"data_task {f.attrs.get('data_task')!s} (loaded: {model.data_task})")
    twice = os.path.join(folder, "overwritten.h5")
    lookback_torch.save(model, base, twice)
    expect("second save", FileExistsError, lambda: lookback_torch.save(model, base, twice))
    lookback_torch.save(model, base, twice, overwrite=True)
    print("overwrite=True: saved")
    sys.exit(1 if accepted else 0)


def ranges(args):
    for name, (lo, hi) in lookback_torch.FIELD_RANGES.items():
        print(f"{name} {lo!r} {hi!r}")


if __name__ == "__main__":
    modes = {"forward": forward, "step": step, "refusals": refusals, "ranges": ranges}
    if len(sys.argv) < 2 or sys.argv[1] not in modes:
        sys.exit(__doc__)
    modes[sys.argv[1]](sys.argv[2:])
