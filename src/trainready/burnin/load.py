"""The load each rank runs for the burn-in: BF16 GEMM, an HBM copy and an all_reduce over every rank, in turn,
for the duration; one JSON line per interval (its figures) in OUT/rank<R>.jsonl.

One interval is about `tick_s` (1 s on a GPU): GEMM ~60% of it (the GPU at full power), the copy ~20%, the
all_reduce ~20%, each timed on its own (CUDA events on a GPU).  A GPU's TFLOP/s is its own GEMM time's figure,
so a GPU waiting on a slow peer in the all_reduce is not itself slow.  After each interval a 2-element
all_reduce carries the stop flag (rank 0 decides when the duration is up, so every rank stops at the same
interval) and a checksum (rank r adds r+1: the sum must be N(N+1)/2).  On a CPU the same loop runs with fp32
GEMM and gloo.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

# Shares of one interval (GEMM, copy, all_reduce): GEMM most of the time, so each GPU runs near its power limit.
SHARES = (0.6, 0.2, 0.2)


@dataclass(frozen=True)
class LoadPlan:
    """What every rank runs (passed to the ranks as keyword arguments)."""

    duration_s: float
    """Seconds of load, from the first interval's start (rank 0 decides)."""
    out_dir: str
    """Where each rank writes rank<R>.jsonl."""
    tick_s: float
    """Target seconds per interval (one line each)."""
    gemm_n: int
    """M = N = K of each GEMM (8192 on a GPU: 2·8192³ = 1.1 TFLOP, ~1.6 ms on an H200)."""
    copy_bytes: int
    """Bytes of each device-to-device copy (1 GiB on a GPU: many times the 50 MB L2, so HBM is what is timed)."""
    reduce_bytes: int
    """Bytes of each all_reduce (256 MiB on a GPU: the bandwidth-bound end of an nccl-tests sweep)."""
    slow_rank: int = -1
    """Planted (burnin.slow): this rank's GEMM batches run `slow_factor` times, counted once."""
    slow_after_s: float = -1.0
    """Planted: from this many seconds into the load."""
    slow_factor: int = 50
    """Planted: how many times the slow rank repeats each GEMM batch."""
    fingerprint_every_s: float = 0.0
    """Seconds between runs of the fingerprint battery (one per window: burnin.first_s); 0 = none."""
    fingerprint_size: str = "cpu"
    """The battery's size (fingerprint/ops.py SIZES): quick on a GPU, cpu on a CPU."""
    fingerprint_flip_rank: int = -1
    """Planted (fingerprint.bitflip): from its second battery on, this rank's bf16 GEMM has a flipped last bit."""


def plan_for(gpu: bool, duration_s: float, out_dir: str, slow: tuple[int, float] | None, window_s: float = 0.0,
             flip_rank: int = -1) -> LoadPlan:
    """A GPU's sizes (above), or small CPU sizes (a few ms each on one core; a 32 MiB copy: past the caches); an interval of 1 s, shorter on a
    run of seconds (at least 20 intervals to judge)."""
    tick = min(1.0, max(0.1, duration_s / 40))
    sizes = (8192, 1 << 30, 256 << 20) if gpu else (192, 32 << 20, 1 << 20)
    rank, after = slow if slow is not None else (-1, -1.0)
    return LoadPlan(duration_s, out_dir, tick, *sizes, slow_rank=rank, slow_after_s=after, fingerprint_every_s=window_s,
                    fingerprint_size="quick" if gpu else "cpu", fingerprint_flip_rank=flip_rank)


class _Timer:
    """Seconds of `k` calls of fn: CUDA events on a GPU (the device's own time), perf_counter on a CPU."""

    def __init__(self, device: Any) -> None:
        import torch

        self.cuda = device.type == "cuda"
        self.torch = torch

    def run(self, fn: Callable[[], object], k: int) -> float:
        if not self.cuda:
            t0 = time.perf_counter()
            for _ in range(k):
                fn()
            return time.perf_counter() - t0
        start, end = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(k):
            fn()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3  # elapsed_time is in ms


def _buffers(plan: LoadPlan, device: Any) -> dict[str, Any]:
    import torch

    gpu = device.type == "cuda"
    dtype = torch.bfloat16 if gpu else torch.float32
    g = torch.Generator(device=device).manual_seed(1000)
    n = plan.gemm_n
    return {"a": torch.randn(n, n, device=device, dtype=dtype, generator=g),
            "b": torch.randn(n, n, device=device, dtype=dtype, generator=g),
            "c": torch.empty(n, n, device=device, dtype=dtype),
            "src": torch.ones(plan.copy_bytes, dtype=torch.uint8, device=device),
            "dst": torch.empty(plan.copy_bytes, dtype=torch.uint8, device=device),
            "red": torch.ones(plan.reduce_bytes // 4, dtype=torch.float32, device=device),
            "flag": torch.zeros(3, dtype=torch.float64, device=device)}


def _ops(buf: dict[str, Any]) -> tuple[Callable[[], object], ...]:
    import torch
    import torch.distributed as dist

    return (lambda: torch.matmul(buf["a"], buf["b"], out=buf["c"]), lambda: buf["dst"].copy_(buf["src"]),
            lambda: dist.all_reduce(buf["red"]))


def _calibrate(timer: _Timer, ops: tuple[Callable[[], object], ...], plan: LoadPlan, device: Any) -> list[int]:
    """Calls of each op per interval (SHARES of tick_s), agreed over the ranks (the largest: every rank must
    make as many all_reduce calls)."""
    import torch
    import torch.distributed as dist

    for op in ops:  # warm-up: cuBLAS heuristics, NCCL's first communicator, page faults
        timer.run(op, 2)
    counts = [max(1.0, share * plan.tick_s / max(timer.run(op, 3) / 3, 1e-6)) for op, share in zip(ops, SHARES)]
    t = torch.tensor(counts, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [int(x) for x in t.tolist()]


def _interval(timer: _Timer, ops: tuple[Callable[[], object], ...], counts: list[int], plan: LoadPlan,
              rank: int, world: int, elapsed: float) -> dict[str, float]:
    """One interval's figures: GEMM TFLOP/s, copy GB/s (read + write), all_reduce busbw GB/s (nccl-tests:
    algbw x 2(n-1)/n)."""
    slow = plan.slow_factor if rank == plan.slow_rank and 0 <= plan.slow_after_s <= elapsed else 1
    g = timer.run(ops[0], counts[0] * slow)
    c = timer.run(ops[1], counts[1])
    r = timer.run(ops[2], counts[2])
    n = plan.gemm_n
    return {"gemm_tflops": 2.0 * n**3 * counts[0] / g / 1e12,
            "copy_gbps": 2.0 * plan.copy_bytes * counts[1] / c / 1e9,
            "busbw_gbps": plan.reduce_bytes * counts[2] / r / 1e9 * 2 * (world - 1) / world}


def burnin_rank(ctx: Any, **kw: Any) -> dict[str, Any]:
    """Runs in each rank (ranks.launch): the load until rank 0 says the duration is up; returns counts."""
    import torch.distributed as dist

    plan = LoadPlan(**kw)
    buf = _buffers(plan, ctx.device)
    ops, timer = _ops(buf), _Timer(ctx.device)
    ctx.stage("calibrating")
    counts = _calibrate(timer, ops, plan, ctx.device)
    dist.barrier()
    t0 = time.time()
    expected, wrong, k, window = ctx.world_size * (ctx.world_size + 1) / 2, 0, 0, 0
    with open(Path(plan.out_dir) / f"rank{ctx.rank}.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps({"start": t0, "counts": counts, "device": str(ctx.device)}) + "\n")
        while True:
            t_prev = time.time()
            fig = _interval(timer, ops, counts, plan, ctx.rank, ctx.world_size, t_prev - t0)
            buf["flag"][0] = 1.0 if ctx.rank == 0 and time.time() - t0 >= plan.duration_s else 0.0
            buf["flag"][1] = float(ctx.rank + 1)
            due = plan.fingerprint_every_s > 0 and time.time() - t0 >= window * plan.fingerprint_every_s
            buf["flag"][2] = 1.0 if ctx.rank == 0 and due else 0.0  # rank 0 decides: every rank runs it together
            dist.all_reduce(buf["flag"])
            stop, total, battery = buf["flag"].tolist()
            wrong += int(total != expected)
            k += 1
            out.write(json.dumps({"t0": t_prev, "t": time.time(), **fig, "sum_ok": total == expected}) + "\n")
            out.flush()
            ctx.stage(f"interval {k}")
            # the battery runs cold (window 0) and again hot before the end, however few intervals a loaded host
            # allowed: a hot fault is judged against the cold digests (every rank has the same `window`)
            last_hot = stop > 0 and window == 1 and plan.fingerprint_every_s > 0
            if (battery > 0 and stop == 0) or last_hot:
                out.write(json.dumps(_battery(plan, ctx, window)) + "\n")
                out.flush()
                window += 1
            if stop > 0:
                break
    return {"intervals": k, "wrong_sums": wrong, "counts": counts, "seconds": time.time() - t0}


def _battery(plan: LoadPlan, ctx: Any, window: int) -> dict[str, Any]:
    """The fingerprint battery once on this rank's device (hot from the load): each entry's digest."""
    import torch

    from trainready.fingerprint.battery import Plants, run_battery

    flip = "gemm-bf16/random-7" if ctx.rank == plan.fingerprint_flip_rank and window >= 1 else ""
    threads = torch.get_num_threads()
    if ctx.device.type == "cpu":
        torch.set_num_threads(1)  # as the fingerprint check: one reduction order on every rank
    try:
        res = run_battery(ctx.device, plan.fingerprint_size, 1, Plants(flip=flip), ratios=False)  # digests only
    finally:
        torch.set_num_threads(threads)
    return {"t": time.time(), "window": window, "fp": {e["id"]: e["digest"] for e in res["entries"]}}
