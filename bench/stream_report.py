#!/usr/bin/python3
"""Table, targets and plot of the streaming benchmark (bench_stream.c and torch_stream.py
lines in a results .jsonl file). bench/run calls it; it can be rerun on a kept file:

    /usr/bin/python3 bench/stream_report.py RESULTS.jsonl [--plot docs/streaming.png]

Targets: the transformer's per-event time at 64k context at most 0.5x PyTorch's; the
local, lstm and conv per-event times flat (within 15 % from 1k to 64k) and at most 0.5x
PyTorch's; the transformer's slope (least squares of time against context) in ns per
cached event and stream, next to the memory-bandwidth limit: reading 2 L d_model
float32 per cached event (1 KiB for L = 2, d_model = 64) at the read bandwidth BW
measured in the same run (OpenBLAS sdot over 2 x 256 MiB).
"""
import argparse
import json
import sys

FAMILIES = ["transformer", "local", "lstm", "conv"]
BYTES_PER_CACHED_EVENT = 2 * 2 * 64 * 4


def fit_slope(points):
    """Least-squares slope of (x, y) points."""
    n = len(points)
    if n < 2:
        return None
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else None


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results")
    p.add_argument("--plot", default=None, help="PNG to draw (needs python3-matplotlib)")
    o = p.parse_args()
    rows = [json.loads(l) for l in open(o.results) if l.strip()]
    res = {}
    for r in rows:
        if str(r.get("workload", "")).startswith("S-") and "median_s" in r:
            res[(r["impl"], r["family"], r["threads"], r["batch"], r["context"])] = r
    bw = next((r for r in rows if r.get("workload") == "BW" and "read_gbps" in r), None)
    threads = sorted({k[2] for k in res})
    verdicts = []
    print("Per-event time (median of the timed events, ms) and state per stream (bytes the next event depends on)")
    print("for B streams stepped together; PyTorch 1.13 runs the same per-event loop in the same run.")
    print()
    print("| family | threads | B | context | lookback ms/event | PyTorch ms/event | ratio | lookback state B/stream "
          "| PyTorch state B/stream | lookback CPU util / others' CPUs |")
    print("|" + "---|" * 10)
    for fam in FAMILIES:
        for t in threads:
            for b in (1, 16):
                for ctx in (1024, 4096, 16384, 65536):
                    lb, pt = res.get(("lookback", fam, t, b, ctx)), res.get(("pytorch", fam, t, b, ctx))
                    if not lb and not pt:
                        continue
                    ratio = lb["median_s"] / pt["median_s"] if lb and pt else None
                    print(f"| {fam} | {t} | {b} | {ctx} | {lb['median_s'] * 1e3:.3f} | "
                          f"{pt['median_s'] * 1e3 if pt else float('nan'):.3f} | "
                          f"{ratio if ratio is not None else float('nan'):.2f} | {lb['state_bytes']} | "
                          f"{pt['state_bytes'] if pt else '-'} | {lb.get('cpu_util', 0):.2f} / "
                          f"{lb.get('others_cpu', 0):.2f} |" if lb else f"| {fam} | {t} | {b} | {ctx} | - | - | - | - | - | - |")
    print()
    for t in threads:
        for b in (1, 16):
            lbs = [res.get(("lookback", "transformer", t, b, c)) for c in (1024, 4096, 16384, 65536)]
            pts = [res.get(("pytorch", "transformer", t, b, c)) for c in (1024, 4096, 16384, 65536)]
            if lbs[-1] and pts[-1]:
                ratio = lbs[-1]["median_s"] / pts[-1]["median_s"]
                verdicts.append((f"transformer 64k, B={b}, {t} thread(s)", "ratio <= 0.5",
                                 f"{ratio:.2f}: " + ("PASS" if ratio <= 0.5 else "MISS")))
            pts_l = [(r["context"], r["median_s"]) for r in lbs if r]
            pts_p = [(r["context"], r["median_s"]) for r in pts if r]
            sl, sp = fit_slope(pts_l), fit_slope(pts_p)
            if sl is not None:
                ns = sl * 1e9 / b  # per cached event and stream
                limit = BYTES_PER_CACHED_EVENT / (bw["read_gbps"]) if bw else None  # ns
                txt = f"lookback {ns:.2f} ns per cached event per stream"
                if sp is not None:
                    txt += f", PyTorch {sp * 1e9 / b:.2f}"
                if limit:
                    txt += f"; bandwidth limit {limit:.2f} ns ({BYTES_PER_CACHED_EVENT} B at {bw['read_gbps']:.1f} GB/s): " \
                           f"lookback at {limit / ns * 100:.0f}% of it"
                verdicts.append((f"transformer slope, B={b}, {t} thread(s)", "report", txt))
        for fam in ("local", "lstm", "conv"):
            for b in (1, 16):
                lbs = [res.get(("lookback", fam, t, b, c)) for c in (1024, 4096, 16384, 65536)]
                pts = [res.get(("pytorch", fam, t, b, c)) for c in (1024, 4096, 16384, 65536)]
                if not all(lbs):
                    continue
                change = lbs[-1]["median_s"] / lbs[0]["median_s"] - 1
                verdicts.append((f"{fam} flat 1k->64k, B={b}, {t} thread(s)", "within 15 %",
                                 f"{change * 100:+.0f}%: " + ("PASS" if abs(change) <= 0.15 else "MISS")))
                if all(pts):
                    worst = max(l["median_s"] / q["median_s"] for l, q in zip(lbs, pts))
                    verdicts.append((f"{fam} vs PyTorch, B={b}, {t} thread(s)", "ratio <= 0.5 at every context",
                                     f"worst {worst:.2f}: " + ("PASS" if worst <= 0.5 else "MISS")))
    if bw:
        print(f"read bandwidth (OpenBLAS sdot over 2 x 256 MiB, same run): {bw['read_gbps']:.1f} GB/s")
        print()
    busy = [r for r in res.values() if (r.get("others_cpu") or 0) > 0.3]
    if busy:
        print(f"WARNING: other processes kept more than 0.3 CPU busy during {len(busy)} of {len(res)} measurements "
              f"(up to {max(r['others_cpu'] for r in busy):.1f} CPUs): those times are unreliable")
        print()
    print("| target | required | measured |")
    print("|---|---|---|")
    for name, req, status in verdicts:
        print(f"| {name} | {req} | {status} |")
    if o.plot:
        draw(res, threads, o.plot)


def draw(res, threads, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"no plot: /usr/bin/python3 cannot import matplotlib (sudo apt-get install python3-matplotlib)",
              file=sys.stderr)
        return
    t = threads[0]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = {"transformer": "tab:red", "local": "tab:orange", "lstm": "tab:blue", "conv": "tab:green"}
    for fam in FAMILIES:
        for impl, style in (("lookback", "-o"), ("pytorch", "--x")):
            pts = [res.get((impl, fam, t, 1, c)) for c in (1024, 4096, 16384, 65536)]
            pts = [r for r in pts if r]
            if not pts:
                continue
            xs = [r["context"] for r in pts]
            ax1.plot(xs, [r["median_s"] * 1e3 for r in pts], style, color=colors[fam], label=f"{fam} ({impl})")
            if impl == "lookback":
                ax2.plot(xs, [r["state_bytes"] / 1024.0 for r in pts], style, color=colors[fam], label=fam)
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("context (events seen)")
        ax.grid(True, which="both", alpha=0.3)
    ax1.set_ylabel("time per event (ms), B = 1")
    ax1.set_title("what each event costs")
    ax2.set_ylabel("state per stream (KiB)")
    ax2.set_title("what each stream keeps")
    ax1.legend(fontsize=7)
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
