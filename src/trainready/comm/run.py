"""Run a comm sweep: spawn local ranks (launch) or act as one rank of an external launcher."""

from __future__ import annotations

import datetime as dt
import re
import socket
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Mapping

from trainready import __version__
from trainready.comm.defaults import SWEEP_DEFAULTS
from trainready.comm.evaluate import OpTable, judge_all_ops, judge_efficiency, judge_op, judge_pairs, op_table
from trainready.comm.rankdata import SweepFaults, SweepPlan, rank_pair
from trainready.comm.remeasure import merge, needs_remeasure
from trainready.ranks.env import ExternalRank
from trainready.ranks.launch import LaunchResult, launch
from trainready.records import CheckResult, Level, Outcome, Report, Status
from trainready.spec.load import spec_to_json
from trainready.spec.model import NodeSpec

# Planted faults of the sweep (rankdata.SweepFaults) with their types: `--plant comm.NAME=VALUE`, for
# planted-fault tests only (names and values are checked first, against suite/plants.py).
SWEEP_FAULTS: dict[str, Callable[[str], Any]] = {
    "slow_rank": int, "slow_ms": float, "slow_link": rank_pair, "transient_link": rank_pair, "slow_pct": float, "hang_rank": int,
    "wrong_rank": int, "die_rank": int, "fault_step": int, "once": lambda v: True}  # once: a flag, present = on (plants.validate_values refuses "off")
STARTUP_S = 60.0  # launch's start-up allowance (process start + rendezvous on a loaded host), as launch's default
SLOW_MS_DEFAULT = 20.0  # how long a planted slow rank sleeps per op when comm.slow_ms is not given


def sweep_faults(plants: Mapping[str, str]) -> dict[str, Any]:
    """The comm plants among `plants` ('comm.NAME' or 'NAME' → text) as SweepFaults fields."""
    out: dict[str, Any] = {}
    for key, value in plants.items():
        name = key.removeprefix("comm.")
        if name in SWEEP_FAULTS:
            out[name] = SWEEP_FAULTS[name](value)
    if {"slow_rank", "slow_link", "transient_link"} & set(out):
        out.setdefault("slow_ms", SLOW_MS_DEFAULT)
    return out


@dataclass(frozen=True)
class CommOptions:
    ops: list[str]
    sizes: list[int]
    dtypes: list[str] = field(default_factory=lambda: ["float"])
    # a bare CommOptions times like nccl-tests (-w 5 -n 20, the table's nccl row); callers fill these per
    # backend from comm/defaults.py
    warmup: int = SWEEP_DEFAULTS["nccl"].warmup
    iters: int = SWEEP_DEFAULTS["nccl"].iters
    world_size: int = 8
    backend: str = "gloo"
    timeout_s: float = 60.0  # per step (one op at one size); a hung rank fails after this
    join_s: float = STARTUP_S  # externally launched ranks (srun, torchrun): seconds beyond timeout_s to join
    avg_floor: int | None = None  # bytes; None → max size / 8
    pair_bytes: int = SWEEP_DEFAULTS["gloo"].pair_bytes  # as `backend`'s default
    pair_iters: int = SWEEP_DEFAULTS["nccl"].pair_iters
    step_budget_s: float | None = None  # cap on one step's timed loop (CPU default); None: always `iters`
    deadline_s: float | None = None  # whole sweep, start-up included; None: `default_deadline_s` (per-step bound)
    loops: int = 1  # timed loops per step, the fastest kept (1 = nccl-tests; the node check on gloo: 3)
    # comm.efficiency's point-to-point reference: this many alternating (op, ring send/recv) loop pairs per
    # judged size (sizes >= eff_from; None: the averaging floor); 0 = not measured (evaluate.py)
    eff_loops: int = 0
    eff_from: int | None = None
    eff_min_loop_s: float = 0.0  # with a reference: each timed loop at least this long, seconds (gloo: 0.1)
    cpu_bind: bool = False  # local gloo ranks: pin each to a fixed share of the cores (rankenv.bind_cpus)
    faults: dict[str, Any] = field(default_factory=dict)

    @property
    def floor(self) -> int:
        return self.avg_floor if self.avg_floor is not None else max(min(self.sizes), max(self.sizes) // 8)

    def measured_again(self, **changes: Any) -> CommOptions:
        """These options for a sweep measured again: a planted transient (SweepFaults.once) is over."""
        return replace(self, faults=asdict(SweepFaults(**self.faults).after_first()), **changes)

    def rank_plan(self, group_timeout_s: float) -> SweepPlan:
        """What every rank runs (comm/sweep.sweep_rank)."""
        return SweepPlan(tuple(self.ops), tuple(self.sizes), tuple(self.dtypes), self.warmup, self.iters,
                         group_timeout_s, self.pair_bytes, self.pair_iters, self.step_budget_s, self.loops,
                         self.eff_loops, self.eff_from if self.eff_from is not None else self.floor,
                         self.eff_min_loop_s, self.cpu_bind, SweepFaults(**self.faults))


def _result(name: str, title: str, out: Outcome, seconds: float) -> CheckResult:
    return CheckResult(name, title, Level.STANDARD, out.status, out.message, out.remedy, out.metrics, seconds,
                       out.details)


def launch_failure(res: LaunchResult, opts: CommOptions) -> Outcome:
    return Outcome(
        Status.FAIL,
        f"{res.backend} sweep over {res.world_size} ranks failed (per-step timeout {opts.timeout_s:g} s, "
        f"whole sweep {opts.deadline_s or default_deadline_s(opts):g} s): "
        f"{res.describe()}",
        remedy="Check the named rank's GPU (nvidia-smi -q, dmesg for Xid) and NVLink/NVSwitch (Fabric Manager); "
        "rerun with NCCL_DEBUG=INFO.",
        details={"ranks": [o.__dict__ for o in res.outcomes], "elapsed_s": res.elapsed_s, "timed_out": res.timed_out},
    )


def tables(data: dict[str, Any], opts: CommOptions, window: tuple[int, ...] = ()) -> list[OpTable]:
    """One table per op and dtype; busbw averaged over `window` ([low, high] bytes: the spec's
    comm.expected_sizes_bytes, where the reference measured) or else over sizes >= opts.floor."""
    lo, hi = (window[0], window[1]) if window else (opts.floor, None)
    return [op_table(op, d, data["entries"], opts.world_size, lo, hi) for d in opts.dtypes for op in opts.ops]


def outcomes(data: dict[str, Any], opts: CommOptions, spec: NodeSpec, source: str) -> list[tuple[str, str, Outcome]]:
    """Per-op (and dtype) verdicts plus the straggler verdict, from rank 0's gathered data."""
    n = opts.world_size
    out = []
    ts = tables(data, opts, spec.comm.expected_sizes_bytes)  # the reference's sizes, if recorded
    for t in ts:
        o = judge_op(t, n, opts.backend, spec.comm.expected_busbw_gbps, spec.comm.min_fraction, source,
                     spec.comm.min_fraction_by_op)
        name = f"comm.{t.op}" if len(opts.dtypes) == 1 else f"comm.{t.op}.{t.dtype}"
        out.append((name, f"{t.op} ({t.dtype}) correctness and bus bandwidth", o))
    means = (("all_ops", "bus bandwidth", judge_all_ops, spec.comm.expected_busbw_gbps, spec.comm.min_fraction_all_ops),
             ("efficiency", "busbw against same-run point-to-point", judge_efficiency, spec.comm.expected_efficiency,
              spec.comm.min_fraction_efficiency))
    for kind, what, judge, expected, fraction in means:
        for dtype in opts.dtypes:  # expectations are per op, not per dtype: one mean per dtype
            mean = judge([t for t in ts if t.dtype == dtype], n, opts.backend, expected, fraction, source)
            if mean is not None:
                out.append((f"comm.{kind}" if len(opts.dtypes) == 1 else f"comm.{kind}.{dtype}",
                            f"all ops together ({dtype}): {what}", mean))
    out.append(("comm.pairs", "pairwise send/recv: slow rank or link",
                judge_pairs(data.get("pairs"), n, opts.pair_bytes, opts.backend)))
    return out


def default_deadline_s(opts: CommOptions) -> float:
    """Whole-sweep bound when none is given (`trainready comm`): each step (op x size, plus the two
    pairwise phases) may take up to the per-step timeout, plus 60 s of slack and `STARTUP_S`."""
    steps = len(opts.dtypes) * len(opts.ops) * len(opts.sizes) + 2
    return steps * opts.timeout_s + 60.0 + STARTUP_S


def sweep_local(opts: CommOptions) -> tuple[LaunchResult, float]:
    """Spawn `world_size` local ranks; ends within `opts.deadline_s` (+ the ranks' teardown, a few s),
    and within timeout_s of the last progress from any rank."""
    total = opts.deadline_s if opts.deadline_s is not None else default_deadline_s(opts)
    startup = min(STARTUP_S, total / 4)  # launch's own allowance for start-up + rendezvous
    t0 = time.perf_counter()
    # The group timeout is only a backstop here: the stall deadline (timeout_s) fires first, so
    # survivors are not aborted by NCCL's watchdog before the hung rank is named.
    res = launch("trainready.comm.sweep:sweep_rank", opts.world_size, opts.backend,
                 {"plan": opts.rank_plan(opts.timeout_s + 30.0)}, timeout_s=total - startup, startup_s=startup,
                 stall_s=opts.timeout_s)
    return res, time.perf_counter() - t0


def sweep_external(opts: CommOptions, ext: ExternalRank, report: Callable[[Outcome], int],
                   again: Callable[[dict[str, Any]], bool] | None = None) -> tuple[dict[str, Any] | None, Outcome | None]:
    """This process is one rank of torchrun/srun: join through the env's store, run the sweep, tear down.

    Returns (data, None) on success (data is rank 0's gathered results), or (None, FAIL) when a
    torch.distributed call raised; the FAIL names this rank's stage and the silent peers.  A hang
    never returns: the watchdog calls `report(FAIL)` and exits the process with its code.
    `again` (rank 0's judgement of its data): True = measure the whole sweep once more, in the same group
    (remeasure.py); the second sweep's data is rank 0's data["again"].
    """
    import os

    import torch.distributed as dist

    from trainready.comm import external as xt
    from trainready.comm.sweep import sweep_rank

    os.environ.update(ext.torch_env())
    ctx = xt.context(ext, opts.backend)
    once = xt.Once()
    stop = xt.start_watchdog(ctx, ext, opts.backend, opts.timeout_s, once, report, opts.join_s)
    try:
        xt.join(ctx, ext, opts.backend, opts.timeout_s, opts.join_s)
        plan = opts.rank_plan(opts.timeout_s + xt.BACKSTOP_S)
        data = sweep_rank(ctx, plan)
        if again is not None and agreed(ctx, ext.rank == 0 and again(data)):
            ctx.stage("measured again")
            second = sweep_rank(ctx, replace(plan, faults=plan.faults.after_first()))
            data = {**data, "again": second} if ext.rank == 0 else data
    except (RuntimeError, OSError) as exc:  # DistError, DistBackendError, gloo/NCCL errors, store errors
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        first = re.sub(r"^\[[^\]]*\.(?:cc|cpp|h):\d+\]\s*", "", first)  # drop gloo's "[/path/pair.cc:537] "
        what = f"{type(exc).__name__}: {xt._short(first, 200)}"
        if not once.take():
            threading.Event().wait()  # the watchdog is already reporting; it exits the process
        stop.set()
        return None, xt.failure(ext, opts.backend, ctx, what, opts.timeout_s, raised=True)
    ctx.stage("done")
    stop.set()
    dist.destroy_process_group()
    return data, None


def timing_only(opts: CommOptions, spec: NodeSpec, source: str) -> Callable[[dict[str, Any]], bool]:
    """Rank 0's judgement whether a sweep's data is measured again: every failure a timing (remeasure.py)."""
    return lambda data: needs_remeasure(outcomes(data, opts, spec, source))


def sweep_local_again(opts: CommOptions, spec: NodeSpec, source: str) -> tuple[LaunchResult, float, dict[str, Any] | None]:
    """sweep_local, and where its only failures are timings, once more (a planted transient over): (the launch
    that failed, else the first; seconds; rank 0's data, the second sweep's as its "again", which build_report
    merges: a timing fails only if it failed both times)."""
    res, secs = sweep_local(opts)
    if not res.ok:
        return res, secs, None
    data = res.values[0]
    if timing_only(opts, spec, source)(data):
        again, more = sweep_local(opts.measured_again())
        if not again.ok:
            return again, secs + more, None
        data, secs = {**data, "again": again.values[0]}, secs + more
    return res, secs, data


def agreed(ctx: Any, mine: bool) -> bool:
    """Rank 0's yes or no, known to every rank (one all_reduce of one element over the group)."""
    import torch
    import torch.distributed as dist

    flag = torch.tensor([1.0 if mine else 0.0], device=ctx.device)
    dist.all_reduce(flag)
    return bool(flag.item() > 0)


def _own_seconds(name: str, o: Outcome, data: dict[str, Any], total: float) -> float:
    """The seconds one row of the verdict table took: an op's steps (slowest rank), or the pairwise
    matrix; the whole sweep's time only for data recorded without step times."""
    if name == "comm.pairs":
        own = data.get("pairs_wall_s")
    elif "ratio_by_op" in o.details:  # all ops together (busbw, efficiency): a judgement over the ops' own
        own = 0.0  # figures, no step of its own
    else:
        walls = [r.get("wall_s") for r in o.details.get("rows", [])]
        own = sum(walls) if walls and all(isinstance(w, (int, float)) for w in walls) else None
    return float(own) if isinstance(own, (int, float)) else total


def build_report(opts: CommOptions, spec: NodeSpec, source: str, data: dict[str, Any] | None,
                 failure: Outcome | None, seconds: float, context: dict[str, Any]) -> Report:
    started = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=seconds)
    if failure is not None or data is None:
        results = [_result("comm", "collective sweep", failure or Outcome(Status.ERROR, "no data"), seconds)]
    else:
        verdicts = outcomes(data, opts, spec, source)
        if isinstance(data.get("again"), dict):  # measured again: a timing fails only if it failed both times
            verdicts = merge(verdicts, outcomes(data["again"], opts, spec, source))
        results = [_result(name, title, o, _own_seconds(name, o, data, seconds)) for name, title, o in verdicts]
        context = {**context, "versions": data.get("versions", {})}
    ctx = {"options": {k: v for k, v in asdict(opts).items() if k != "faults"}, "avg_floor_bytes": opts.floor,
           **context}  # a planted run: the caller's context carries "planted" (commands/comm.py)
    return Report("comm", socket.gethostname(), started.isoformat(timespec="seconds"), seconds, __version__,
                  spec_to_json(spec), tuple(results), ctx)
