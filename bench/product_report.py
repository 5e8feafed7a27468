#!/usr/bin/python3
"""Tables of the PRODUCT and TRAIN rows of a bench/run results file (bench/run prints them).

    bench/product_report.py RESULTS.jsonl

PRODUCT: per study recipe and thread count, lookback's trainer step (bench_product)
against the same model's step in PyTorch (torch_reference.py PRODUCT), and lookback's
1-thread / 2-thread time. TRAIN: the whole `lookback train` command against the library
step measured just before in the same run.
"""
import json
import sys


def fmt(v, spec):
    return format(v, spec) if v is not None else "-"


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    prod = {(r["impl"], r["recipe"], r["threads"]): r for r in rows
            if r.get("workload") == "PRODUCT" and "median_s" in r}
    order = []
    for r in rows:
        if r.get("workload") == "PRODUCT" and r.get("recipe") not in order:
            order.append(r["recipe"])
    threads = sorted({k[2] for k in prod})
    print("PRODUCT: one training step of each study recipe through lb_trainer_step (batch read from the file, "
          "forward, loss, backward, clipping, AdamW) against the same model and parameters in PyTorch "
          "(lookback_torch.load of the recipe's initial checkpoint); no environment variable for lookback's "
          "processes. '(contended)': another process held more than 0.3 CPU during one side's timing")
    print()
    head = "| recipe | shape | "
    head += " | ".join(f"lookback s {t}T | PyTorch s {t}T | ratio {t}T" for t in threads)
    head += " | lookback time 1T / 2T | PyTorch time 1T / 2T |"
    print(head)
    print("|---|---|" + "---|" * (3 * len(threads) + 2))
    worst = {}
    for name in order:
        cells, shape = [], ""
        for t in threads:
            lb, pt = prod.get(("lookback", name, t)), prod.get(("pytorch", name, t))
            shape = shape or (lb or pt or {}).get("shape", "")
            ratio = lb["median_s"] / pt["median_s"] if lb and pt else None
            busy = any(v and v.get("others_cpu", 0) > 0.3 for v in (lb, pt))
            if ratio is not None:
                worst[t] = max(worst.get(t, 0), ratio)
            cells += [fmt(lb and lb["median_s"], ".4f"), fmt(pt and pt["median_s"], ".4f"),
                      fmt(ratio, ".2f") + (" (contended)" if busy else "")]
        sp = [None, None]
        if 1 in threads and 2 in threads:
            for i, impl in enumerate(("lookback", "pytorch")):
                a, b = prod.get((impl, name, 1)), prod.get((impl, name, 2))
                sp[i] = a["median_s"] / b["median_s"] if a and b else None
        print(f"| {name} | {shape} | " + " | ".join(cells) + f" | {fmt(sp[0], '.2f')} | {fmt(sp[1], '.2f')} |")
    if worst:
        print()
        print("largest lookback / PyTorch ratio: " + ", ".join(f"{worst[t]:.2f} at {t} thread(s)" for t in sorted(worst)))
    train = [r for r in rows if r.get("workload") == "TRAIN"]
    if not train:
        return
    print()
    print("TRAIN: the whole `lookback train --init-from <recipe>.h5 --steps N` command (the recipe's batch, learning rate and weight decay) (start-up, data "
          "loading, one validation at the end, checkpoint.h5 and best.h5), run for N and for 2N steps (N about 3 s of the library step, 30 to 300; validation only at the end), against the "
          "library step (PRODUCT, measured just before). Process CPU time, which the machine's load inflates far "
          "less than wall time: the command's own step is (CPU(2N) - CPU(N)) / N, its fixed cost per run CPU(N) - N "
          "× that step; the library step's CPU is its median × its CPU utilisation. Target: the command's step "
          "within 5 % of the library step (ratio <= 1.05)")
    print()
    print("| recipe | threads | N | command wall s (N, 2N) | command CPU s (N, 2N) | command step CPU s "
          "| library step CPU s | command / library step | fixed CPU s per run (share at N) | status |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in train:
        n = r["steps"]
        if "cpu2_s" not in r:
            continue
        step = (r["cpu2_s"] - r["cpu_s"]) / n
        rel = step / r["step_cpu_s"] if r["step_cpu_s"] > 0 else None
        fixed = r["cpu_s"] - n * step
        status = "PASS" if rel is not None and rel <= 1.05 else ("MISS" if rel is not None else "ERROR")
        print(f"| {r['recipe']} | {r['threads']} | {n} | {r['wall_s']:.2f}, {r['wall2_s']:.2f} | "
              f"{r['cpu_s']:.2f}, {r['cpu2_s']:.2f} | {step:.4f} | {r['step_cpu_s']:.4f} | {fmt(rel, '.3f')} | "
              f"{fixed:.2f} ({100 * fixed / r['cpu_s']:.0f} %) | {status} |")


if __name__ == "__main__":
    main()
