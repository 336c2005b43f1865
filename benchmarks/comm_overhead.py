"""Overhead of trainready's reported collective time vs a bare loop of the same call, same run.

For one large all_reduce size, each repetition runs (a) `trainready comm`'s rank function
(sweep_rank: exact-value check, warm-up, barrier, timed loop; its reported time is the mean
over ranks of loop time / iters) and then (b) a bare loop of the same `dist.all_reduce` on a
buffer of the same size, timed the same way (CUDA events around the loop on a GPU, wall clock
on CPU), mean over ranks.  Prints both medians and the ratio; the target is <= 1.03.

    PYTHONPATH=src python3 benchmarks/comm_overhead.py                 # GPUs if visible, else 8 gloo ranks
    PYTHONPATH=src python3 benchmarks/comm_overhead.py --size 256M --reps 7
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # so ranks can import this module


def overhead_rank(ctx: Any, size: int, iters: int, warmup: int, reps: int, op: str = "all_reduce") -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    from trainready.comm.rankdata import SweepPlan
    from trainready.comm.sweep import sweep_rank

    ours, bare = [], []
    if op == "all_gather":  # S = the gathered output (nccl-tests' definition)
        buf = torch.ones(size // 4 // ctx.world_size, dtype=torch.float32, device=ctx.device)
        gathered = torch.empty(size // 4, dtype=torch.float32, device=ctx.device)

        def call() -> None:
            dist.all_gather_into_tensor(gathered, buf)
    else:
        buf = torch.ones(size // 4, dtype=torch.float32, device=ctx.device)

        def call() -> None:
            dist.all_reduce(buf)
    for _ in range(reps):
        out = sweep_rank(ctx, SweepPlan((op,), (size,), ("float",), warmup, iters, pair_bytes=4, pair_iters=1))
        if ctx.rank == 0:
            e = out["entries"][0]
            assert sum(e["wrong"]) == 0
            ours.append(sum(e["time_s"]) / len(e["time_s"]))
        for _ in range(warmup):
            call()
        dist.barrier()
        if buf.is_cuda:
            torch.cuda.synchronize(ctx.device)
            s, t = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(iters):
                call()
            t.record()
            t.synchronize()
            mine = s.elapsed_time(t) / 1e3 / iters
        else:
            t0 = time.perf_counter()
            for _ in range(iters):
                call()
            mine = (time.perf_counter() - t0) / iters
        x = torch.tensor([mine], dtype=torch.float64, device=ctx.device)
        dist.all_reduce(x)
        bare.append(float(x.item()) / ctx.world_size)
        buf.fill_(1.0)
    return {"ours": ours, "bare": bare}


def main() -> int:
    from trainready.devices.world import cuda_count
    from trainready.hardware.collectives import bandwidths, parse_size
    from trainready.ranks.launch import launch

    gpus = cuda_count()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="1G" if gpus else "4M", help="all_reduce size S (default 1G on GPUs, 4M on CPU)")
    ap.add_argument("--iters", type=int, default=20 if gpus else 10)
    ap.add_argument("--warmup", type=int, default=5 if gpus else 2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--world-size", type=int, default=gpus or 8)
    ap.add_argument("--op", choices=("all_reduce", "all_gather"), default=None,
                    help="default all_reduce; all_gather at world size 1, where NCCL's in-place all_reduce is a no-op")
    a = ap.parse_args()
    size = parse_size(a.size, "--size")
    backend = "nccl" if gpus else "gloo"
    op = a.op or ("all_gather" if a.world_size == 1 else "all_reduce")
    res = launch("comm_overhead:overhead_rank", a.world_size, backend,
                 {"size": size, "iters": a.iters, "warmup": a.warmup, "reps": a.reps, "op": op}, timeout_s=600.0)
    if not res.ok:
        print(f"failed: {res.describe()}")
        return 1
    v = res.values[0]
    ours, bare = statistics.median(v["ours"]), statistics.median(v["bare"])
    ratios = [o / b for o, b in zip(v["ours"], v["bare"])]
    n = a.world_size
    print(f"{op} S={size} B, {n} x {backend}, {a.iters} iters x {a.reps} reps (alternating)")
    print(f"  trainready reported: {ours * 1e6:10.1f} us   busbw {bandwidths(op, size, ours, n)[1]:8.2f} GB/s")
    print(f"  bare loop          : {bare * 1e6:10.1f} us   busbw {bandwidths(op, size, bare, n)[1]:8.2f} GB/s")
    print(f"  ratio reported/bare: {ours / bare:.4f} (median of per-rep ratios {statistics.median(ratios):.4f}; "
          f"target <= 1.03)")
    print(f"  per-rep ratios     : {min(ratios):.4f} .. {max(ratios):.4f} (spread = measurement noise of this machine)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
