"""Question 3, first step: do the GPUs exchange results?

Rank r contributes r+1; after a SUM all_reduce every rank must hold
N(N+1)/2 (36 for 8 ranks).  One process per local GPU with
NCCL, or 8 gloo ranks on a CPU node.  A hung or dead rank ends the check
within its timeout with a failure that names the rank.
"""

from __future__ import annotations

import time
from typing import Any

from trainready.devices.world import local_world
from trainready.ranks.launch import RankContext, launch
from trainready.records import Level, Metric, Outcome, Status, Threshold
from trainready.suite.base import Check, CheckContext, register


def allreduce_rank(ctx: RankContext, hang_rank: int = -1, wrong_rank: int = -1, die_rank: int = -1) -> dict[str, Any]:
    """Runs in each rank. Fault knobs exist only for the planted-fault tests."""
    import os

    import torch
    import torch.distributed as dist

    # float64 so sums are exact for any realistic world size; integer-valued.
    value = float(ctx.rank + 1)
    if ctx.rank == wrong_rank:
        value += 0.5  # planted fault: a rank contributing a corrupted value
    t = torch.full((1024,), value, dtype=torch.float64, device=ctx.device)
    ctx.stage("before all_reduce")
    if ctx.rank == hang_rank:
        time.sleep(3600)  # planted fault: never reaches the collective
    if ctx.rank == die_rank:
        os._exit(17)  # planted fault: rank process dies
    ctx.stage("in all_reduce")
    t0 = time.perf_counter()
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    if t.is_cuda:
        torch.cuda.synchronize(ctx.device)
    dt = time.perf_counter() - t0
    ctx.stage("after all_reduce")
    return {"min": float(t.min().item()), "max": float(t.max().item()), "seconds": dt}


@register
class AllReduceCheck(Check):
    name = "allreduce"
    launches_ranks = True
    title = "AllReduce of 1..N gives N(N+1)/2 on every rank"
    level = Level.QUICK
    order = 30
    timeout_s = 300.0

    def run(self, ctx: CheckContext) -> Outcome:
        world, backend = local_world(ctx.spec)
        expected = world * (world + 1) / 2
        faults = {k: int(ctx.fault(f"allreduce.{k}") or -1) for k in ("hang_rank", "wrong_rank", "die_rank")}
        timeout = ctx.spec.comm.timeout_s
        res = launch("trainready.checks.allreduce:allreduce_rank", world, backend, faults, timeout_s=timeout)
        thr = Threshold("==", expected, "1", "N(N+1)/2 with rank r contributing r+1")
        if not res.ok:
            return Outcome(
                Status.FAIL,
                f"{backend} all_reduce over {world} ranks failed (deadline {timeout:.0f} s): {res.describe()}",
                remedy="Check the named rank's GPU (nvidia-smi -q, dmesg for Xid), NVLink/NVSwitch (Fabric Manager), "
                "and rerun with NCCL_DEBUG=INFO.",
                details={"ranks": [o.__dict__ for o in res.outcomes]},
            )
        metrics = []
        wrong = []
        for r, v in enumerate(res.values):
            for end in ("min", "max"):
                if v[end] != expected:
                    wrong.append((r, v[end]))
            metrics.append(Metric.of("allreduce_sum", v["min"], "1", thr, rank=r, backend=backend))
        slowest = max(v["seconds"] for v in res.values)
        metrics.append(Metric.of("allreduce_time", slowest * 1e3, "ms", None, backend=backend, stat="max_over_ranks"))
        if wrong:
            first = ", ".join(f"rank {r} holds {val:g}" for r, val in sorted(set(wrong))[:4])
            return Outcome(
                Status.FAIL,
                f"all_reduce over {world} ranks expected {expected:g} everywhere: {first}",
                tuple(metrics),
                remedy="Silent wrong results: suspect the GPU or link of the named rank; run `trainready comm` for per-op counts.",
            )
        return Outcome(
            Status.PASS,
            f"{backend} all_reduce over {world} ranks: every rank holds {expected:g}",
            tuple(metrics),
        )
