#!/usr/bin/env python3
"""Cost model of one data-parallel training step at N = 2..256 processes (docs/distributed.md).

    step(N) = compute + allreduce(N)
    allreduce(N) = 2 (N - 1) / N * bytes / bandwidth + 2 (N - 1) * latency     (ring allreduce)

compute is the measured time of one step on one process's share of the batch
(bench/run_distributed); bytes the gradient bytes per step (float32 parameters x 4).
Weak scaling keeps each process's batch (the global batch grows with N); strong scaling
keeps the global batch and divides it (compute shrinks as 1/N, here with a floor at one
example per process). Without overlap the two add; with the reduction overlapped with the
backward pass (buckets reduced as their gradients are ready) at most the backward time
(about 2/3 of compute) hides communication.

    bench/distributed_model.py --compute 1.25 --batch 16 --bytes 419840
"""
import argparse

NETWORKS = [  # name, bandwidth (bytes/s), latency (s): assumed figures, see docs/distributed.md
    ("shared memory (one host)", 5e9, 1e-6),
    ("10 Gb/s Ethernet, TCP", 1.1e9, 25e-6),
    ("100 Gb/s InfiniBand", 11e9, 2e-6),
]


def ring(n, size, bandwidth, latency):
    return 2 * (n - 1) / n * size / bandwidth + 2 * (n - 1) * latency


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--compute", type=float, required=True, help="seconds per step for --batch examples on one process")
    ap.add_argument("--batch", type=int, required=True, help="examples per process in the measured step")
    ap.add_argument("--bytes", type=float, required=True, help="gradient bytes reduced per step")
    a = ap.parse_args()
    size, compute = a.bytes, a.compute
    ns = [2, 4, 8, 16, 32, 64, 128, 256]
    print(f"compute {compute:.4g} s per step for {a.batch} examples per process, {size / 2**20:.3g} MiB of gradients")
    for name, bw, lat in NETWORKS:
        print(f"\n{name}: {bw / 1e9:g} GB/s, {lat * 1e6:g} us")
        print("     N   allreduce_ms   weak efficiency: plain  overlapped   strong (global batch 256): step_s  speed-up  efficiency")
        for n in ns:
            comm = ring(n, size, bw, lat)
            weak = compute / (compute + comm)
            overlapped = compute / (compute + max(0.0, comm - 2 / 3 * compute))
            per_proc = max(256 / n, 1)
            strong_compute = compute * per_proc / a.batch
            strong_step = strong_compute + comm
            one = compute * 256 / a.batch
            speedup = one / strong_step
            print(f"{n:6d}   {comm * 1e3:12.3f}   {weak * 100:20.1f} %  {overlapped * 100:9.1f} %   "
                  f"{strong_step:26.4f}  {speedup:8.1f}  {speedup / n * 100:9.1f} %")


if __name__ == "__main__":
    main()
