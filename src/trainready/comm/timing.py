"""Timing one collective: `iters` calls back to back, one sync at the end (nccl-tests style).

Shared by the sweep (comm/sweep.py) and the pairwise matrix (comm/straggler.py).
"""

from __future__ import annotations

import time
from typing import Any, Callable


def time_loop(call: Callable[[], Any], iters: int, device: Any, group: Any, slow_s: float = 0.0,
              slow_frac: float = 0.0) -> float:
    """Seconds per op: `iters` calls back to back, one sync at the end (nccl-tests style).
    Planted faults only: `slow_s` sleeps before each call; `slow_frac` makes the loop take that
    fraction longer (a sleep of slow_frac x the loop's own time inside the timed region)."""
    import torch
    import torch.distributed as dist

    dist.barrier(group=group)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            if slow_s:
                time.sleep(slow_s)
            call()
        end.record()
        end.synchronize()
        took = float(start.elapsed_time(end)) / 1e3  # elapsed_time is in ms
        return took * (1.0 + slow_frac) / iters  # planted: the sleep cannot sit between CUDA events
    t0 = time.perf_counter()
    for _ in range(iters):
        if slow_s:
            time.sleep(slow_s)
        call()
    if slow_frac:
        time.sleep((time.perf_counter() - t0) * slow_frac)  # planted: this collective is slow_frac slower
    return (time.perf_counter() - t0) / iters


def warm_then_time(ctx: Any, group: Any, call: Callable[[], None] | None, iters: int, slow_s: float) -> float:
    """One pairwise timed loop (straggler matrix and its solo re-measurement): a warm-up call first (it connects
    the pair), then time_loop; a rank without a peer this time joins the loop's barrier with nothing to do."""
    work = call if call is not None else (lambda: None)
    work()
    return time_loop(work, iters, ctx.device, group, slow_s)
