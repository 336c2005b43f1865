"""The rank function of `trainready comm`: for every op and size, check then time.

Per (op, size) "step", every rank:
1. fills its input with known integers v(r, g) = (r + g) mod m (g = global element
   index), so every output element has one exact expected value;
2. runs the op once and counts output elements != expected (nccl-tests `-c`);
3. runs `warmup` ops, a barrier, then `iters` ops back to back with one sync at the
   end: CUDA events on a GPU (nccl-tests times the same way, around the loop), wall
   clock on CPU.  Time per op = loop time / iters (seconds); with `loops` > 1 (the node
   check on gloo) the loop runs that many times and the fastest is kept;
4. on the judged sizes (>= `eff_from`), with `eff_loops` > 0: that many op loops, each followed
   by a loop of a ring send/recv of the same buffer (the point-to-point reference of
   comm.efficiency, evaluate.row_efficiency); the best of the first `loops` op loops is still
   the op's time.
Per-rank times and wrong counts are all-gathered at the end so rank 0 holds them all;
then the pairwise send/recv matrix (straggler.py) runs.

m is chosen so the largest possible sum m*n stays an exact integer in the dtype
(2^8 for bf16, 2^11 for fp16, 2^24 for fp32).
"""

from __future__ import annotations

import math
import socket
import time
import warnings
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable

from trainready.comm.rankdata import StepRow, SweepPlan, entry, plant_hang_or_death, planted_delay
from trainready.comm.rankenv import bind_cpus, versions
from trainready.comm.timing import time_loop
from trainready.hardware.collectives import DTYPES, EXACT_INT, OPS, counts_for
from trainready.ranks.launch import RankContext


def value_modulus(dtype: str, n: int) -> int:
    """m for v(r, g) = (r+g) mod m: sums of n values (+1 planted) stay exact: m*n <= EXACT_INT."""
    return max(2, min(8, EXACT_INT[dtype] // max(n, 1)))


def _coll(name: str) -> Callable[..., Any]:
    import torch.distributed as dist

    # torch >= 2.12 renames these (the old names warn); older torch has only the old ones.
    new = {"ag": "all_gather_single", "rs": "reduce_scatter_single"}[name]
    old = {"ag": "all_gather_into_tensor", "rs": "reduce_scatter_tensor"}[name]
    return getattr(dist, new, None) or getattr(dist, old)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Checked:
    """The correctness run of one step."""

    wrong: int
    """Output elements that differ from the expected value."""
    seconds: float
    """How long the op took, seconds."""


@dataclass(frozen=True)
class Loops:
    """Timed loops of one step: seconds per op of each op loop and of each ring-reference loop."""

    op_s: list[float]
    ring_s: list[float]


class Step:
    """One op at one size on this rank: buffers, the call, and the exact expected output."""

    def __init__(self, op: str, size: int, dtype: str, ctx: RankContext, group: Any, wrong: bool, m: int) -> None:
        import torch
        import torch.distributed as dist

        self.op, self.group, self.ctx = op, group, ctx
        n, r, dev = ctx.world_size, ctx.rank, ctx.device
        tdt = getattr(torch, DTYPES[dtype][0])
        self.count, self.nbytes = counts_for(op, size, n, DTYPES[dtype][2])
        c = self.count
        split = OPS[op].split
        total = c * n if split else c

        def periodic(period: list[int], start: int, length: int) -> Any:
            """period[(start + i) mod m] for i < length, built by tiling (a memcpy, not per-element math)."""
            k = len(period)
            rolled = torch.tensor([period[(start + i) % k] for i in range(k)], dtype=tdt, device=dev)
            return rolled.repeat(length // k + 1)[:length]

        def vals(rank: int, start: int, length: int) -> Any:  # v(rank, g) = (rank + g) mod m, g from start
            return periodic([(rank + i) % m for i in range(m)], start, length)

        inp = vals(r, 0, total)
        if wrong:
            inp = inp + 1  # planted fault: this rank contributes wrong values
        self.inp = inp
        sums = [sum((k + q) % m for q in range(n)) for k in range(m)]  # sum over ranks of v(q, g), g mod m = k
        if op == "all_reduce":
            self.out = inp.clone()
            self.expected = periodic(sums, 0, c)
            self.call = lambda: dist.all_reduce(self.out, group=group)
        elif op == "all_gather":
            self.inp = inp[:c].contiguous()
            self.out = torch.empty(c * n, device=dev, dtype=tdt)
            self.expected = torch.cat([vals(k, 0, c) for k in range(n)])
            fn = _coll("ag")
            self.call = lambda: fn(self.out, self.inp, group=group)
        elif op == "reduce_scatter":
            self.out = torch.empty(c, device=dev, dtype=tdt)
            self.expected = periodic(sums, r * c, c)
            fn = _coll("rs")
            self.call = lambda: fn(self.out, self.inp, group=group)
        elif op == "broadcast":
            self.out = inp.clone()
            self.expected = vals(0, 0, c)
            self.call = lambda: dist.broadcast(self.out, 0, group=group)
        elif op == "all_to_all":
            self.out = torch.empty(c * n, device=dev, dtype=tdt)
            # rank r's block k comes from rank k's block r: v(k, r*c + i)
            self.expected = torch.cat([vals(k, r * c, c) for k in range(n)])
            self.call = lambda: dist.all_to_all_single(self.out, self.inp, group=group)
        elif op == "sendrecv":
            self.out = torch.empty(c, device=dev, dtype=tdt)
            self.expected = vals((r - 1) % n, 0, c)
            self.call = self._sendrecv
        else:  # pragma: no cover - op names are validated by ops.op_names
            raise ValueError(op)
        self.wrong = wrong  # broadcast ignores off-root inputs: check() corrupts the output there

    def _sendrecv(self) -> None:
        import torch.distributed as dist

        n, r = self.ctx.world_size, self.ctx.rank
        ops = [dist.P2POp(dist.isend, self.inp, (r + 1) % n, self.group),
               dist.P2POp(dist.irecv, self.out, (r - 1) % n, self.group)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()

    def check(self) -> Checked:
        """Run once on fresh inputs: the output elements that differ from expected, and the op's seconds."""
        import torch

        if self.op in ("all_reduce", "broadcast"):
            self.out.copy_(self.inp)
        t0 = time.perf_counter()
        self.call()
        if self.out.is_cuda:
            torch.cuda.synchronize(self.out.device)
        took = time.perf_counter() - t0
        if self.wrong and self.op == "broadcast" and self.ctx.rank != 0:
            self.out[0] += 1  # planted fault off-root: a corrupted received element
        return Checked(int((self.out != self.expected).sum().item()), took)


def comm_group(timeout_s: float) -> Any:
    """All ranks, with our own per-collective timeout (backstop; the launcher's stall deadline is first)."""
    import torch.distributed as dist

    return dist.new_group(list(range(dist.get_world_size())), timeout=timedelta(seconds=timeout_s))


def sweep_rank(ctx: RankContext, plan: SweepPlan) -> dict[str, Any]:
    """Runs in each rank: every (dtype, op, size) step, one all_gather of the rows, the pairwise matrix; rank 0
    returns the whole sweep's data.  plan.faults exist only for planted-fault tests."""
    import torch.distributed as dist

    from trainready.comm.straggler import pair_matrix_rank, ratio_floor

    warnings.filterwarnings("ignore", category=FutureWarning, module="torch.distributed")
    n, r, faults = ctx.world_size, ctx.rank, plan.faults
    bound = bind_cpus(r, n) if plan.cpu_bind else None
    group = comm_group(plan.group_timeout_s)
    slow_s = faults.slow_ms / 1e3 if r == faults.slow_rank else 0.0
    steps: list[tuple[str, str, int]] = []
    local: list[StepRow] = []
    every_step = [(d, o, s) for d in plan.dtypes for o in plan.ops for s in plan.sizes]
    for step_no, (dtype, op, size) in enumerate(every_step):
        plant_hang_or_death(faults, r, step_no)
        row = run_step(ctx, group, plan, op, dtype, size, slow_s)
        if row is not None:
            steps.append((op, dtype, size))
            local.append(row)
    ctx.stage("gather results")
    rows = gather_rows(ctx, group, local, plan.eff_loops)
    ctx.stage("pairwise send/recv")
    t_pairs = time.perf_counter()
    # pair_iters 0: no pairwise matrix (a fleet-wide collective: n-1 rounds over thousands of ranks is too long)
    pairs = (pair_matrix_rank(ctx, group, plan.pair_bytes, plan.pair_iters, ratio_floor(dist.get_backend(group)),
                              planted_delay(faults, r), alone_delay=planted_delay(faults, r, alone=True))
             if plan.pair_iters > 0 else None)
    out: dict[str, Any] = {"rank": r, "host": socket.gethostname(), "device": str(ctx.device)}
    if r == 0:
        out["entries"] = [entry(op, dt, size, [rows[k][i] for k in range(n)])
                          for i, (op, dt, size) in enumerate(steps)]
        out.update(pairs=pairs, cpu_bind=bound, pairs_wall_s=time.perf_counter() - t_pairs, versions=versions())
    return out


def run_step(ctx: RankContext, group: Any, plan: SweepPlan, op: str, dtype: str, size: int,
             slow_s: float) -> StepRow | None:
    """Check, warm up and time one op at one size on this rank; None where the step is not run (too small to
    split over the ranks, or a sendrecv with no peer: like nccl-tests)."""
    n, r = ctx.world_size, ctx.rank
    ctx.stage(f"{op} {dtype} {size} B")
    t_step = time.perf_counter()
    c, _ = counts_for(op, size, n, DTYPES[dtype][2])
    if c == 0 or (op == "sendrecv" and n == 1):
        return None
    st = Step(op, size, dtype, ctx, group, r == plan.faults.wrong_rank, value_modulus(dtype, n))
    # The point-to-point reference of `comm.efficiency` (evaluate.py): a ring exchange of the same buffer,
    # timed alternately with the op, on the judged sizes only; sendrecv is that exchange itself.
    ring = (Step("sendrecv", size, dtype, ctx, group, False, value_modulus(dtype, n))
            if plan.eff_loops and size >= plan.eff_from and op != "sendrecv" and n > 1 else None)
    checked = st.check()
    if ring is not None:
        ring.call()  # warm the ring path at this size
    n_iter = warm_up(st, ctx, group, plan, checked.seconds)
    if ring is not None and plan.eff_min_loop_s:  # the ring runs as many exchanges as the op ops (measured: its
        # own count, loops >= 0.1 s each, spread 4.1% against 2.5% with the op's count; 8 runs each)
        n_iter = max(n_iter, loop_length(st, n_iter, ctx, group, plan.eff_min_loop_s))
    ctx.stage(f"{op} {dtype} {size} B timed")
    timed = alternate(st, ring, n_iter, ctx, group, slow_s, plan.faults.slow_pct / 100.0, plan.loops, plan.eff_loops)
    # `loops` timed loops, the fastest kept (gloo: a rank the OS preempted during one loop is not slow); the
    # step's wall time (buffers, check, warm-up, timed loops) is what this op cost the run
    return StepRow(min(timed.op_s[:plan.loops]), checked.wrong, st.nbytes, st.count, n_iter,
                   time.perf_counter() - t_step, float(ring.nbytes) if ring is not None else math.nan,
                   tuple(timed.op_s[:plan.eff_loops]) if ring is not None else (), tuple(timed.ring_s))


def warm_up(st: Step, ctx: RankContext, group: Any, plan: SweepPlan, took: float) -> int:
    """Run the step's warm-up ops; the ops per timed loop.  With a step budget, fewer ops when one op is slow
    (large sizes on CPU), the same on every rank (the slowest rank's check time)."""
    import torch
    import torch.distributed as dist

    n_iter, n_warm = plan.iters, plan.warmup
    if plan.step_budget_s:
        worst = torch.tensor([took], dtype=torch.float64, device=ctx.device)
        dist.all_reduce(worst, op=dist.ReduceOp.MAX, group=group)
        n_iter = max(1, min(plan.iters, int(plan.step_budget_s / max(float(worst.item()), 1e-9))))
        n_warm = min(plan.warmup, n_iter - 1)  # the checked op already warmed this size up
    for _ in range(n_warm):
        st.call()
    return n_iter


def gather_rows(ctx: RankContext, group: Any, local: list[StepRow], eff_loops: int) -> list[list[StepRow]]:
    """Every rank's rows, by rank then step (one all_gather of float64 vectors)."""
    import torch
    import torch.distributed as dist

    width = StepRow.width(eff_loops)
    mine = torch.tensor([row.vector(eff_loops) for row in local] or [[0.0] * width], dtype=torch.float64,
                        device=ctx.device)
    parts = [torch.empty_like(mine) for _ in range(ctx.world_size)]
    dist.all_gather(parts, mine, group=group)
    return [[StepRow.from_vector(v, eff_loops) for v in p.cpu().tolist()] for p in parts]


def loop_length(st: Step, n_iter: int, ctx: RankContext, group: Any, min_loop_s: float) -> int:
    """Ops per timed loop so that one loop lasts >= min_loop_s, from a warm loop of n_iter ops (the slowest
    rank's; every rank must agree).  The first call at a size (allocation, connection set-up) overstates an
    op several times, and on 8 gloo ranks sharing 2 cores a loop of a few ms times the ranks' start skew
    after the barrier (scheduler slices of ~4 ms), not the op: on a 2-core x86 VM the same broadcast's efficiency
    read 1.13 with 12-op loops and 1.52 with 23."""
    import torch
    import torch.distributed as dist

    per_op = torch.tensor([time_loop(st.call, n_iter, ctx.device, group)], dtype=torch.float64, device=ctx.device)
    dist.all_reduce(per_op, op=dist.ReduceOp.MAX, group=group)
    return math.ceil(min_loop_s / max(float(per_op.item()), 1e-9))


def alternate(st: Step, ring: Step | None, n_iter: int, ctx: RankContext, group: Any, slow_s: float,
              slow_frac: float, loops: int, eff_loops: int) -> Loops:
    """Seconds per op of max(loops, eff_loops) timed loops of `n_iter` ops and, with a ring reference, of
    eff_loops ring loops of `n_iter` exchanges, each right after the op's loop (host load in that second hits
    both alike).  A planted slow collective (slow_frac) slows the op, never the point-to-point reference."""
    op_t: list[float] = []
    ring_t: list[float] = []
    for i in range(max(loops, eff_loops if ring is not None else 0)):
        op_t.append(time_loop(st.call, n_iter, ctx.device, group, slow_s, slow_frac))
        if ring is not None and i < eff_loops:
            ring_t.append(time_loop(ring.call, n_iter, ctx.device, group))
    return Loops(op_t, ring_t)

