"""What a sweep rank is told (SweepPlan, SweepFaults) and what each of its steps reports (StepRow).

A StepRow crosses ranks as one float64 vector (one all_gather for the whole sweep); `vector` and
`from_vector` are the only places that know the order, everything else reads fields by name.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable


def rank_pair(text: str) -> tuple[int, int]:
    """'I-J' (two different ranks, 0-based) → (I, J); ValueError otherwise."""
    a, sep, b = text.partition("-")
    pair = (int(a), int(b)) if sep else (-1, -1)
    if min(pair) < 0 or pair[0] == pair[1]:
        raise ValueError(f"expected I-J, two different ranks >= 0: {text!r}")
    return pair


@dataclass(frozen=True)
class SweepFaults:
    """Planted faults, for tests only (`--plant comm.NAME=VALUE`, suite/plants.py); -1 / 0 = none."""

    slow_rank: int = -1
    """This rank sleeps `slow_ms` before every timed op (a straggler)."""
    slow_ms: float = 0.0
    """Milliseconds the slow rank (or each end of the slow link) sleeps per op."""
    slow_link: tuple[int, int] = (-1, -1)
    """These two ranks sleep `slow_ms` before every pairwise exchange with each other (a slow link)."""
    transient_link: tuple[int, int] = (-1, -1)
    """As slow_link, in the pairwise matrix only: measured alone the pair is as fast as any (not a fault)."""
    slow_pct: float = 0.0
    """Every rank's timed collective loops take this % longer; the ring reference does not."""
    hang_rank: int = -1
    """This rank stops at step `fault_step` (a hang)."""
    wrong_rank: int = -1
    """This rank contributes wrong elements."""
    die_rank: int = -1
    """This rank's process exits at step `fault_step`."""
    fault_step: int = 0
    """The sweep step (op x size, from 0) at which hang/die happen."""
    once: bool = False
    """slow_rank and slow_pct hold in the first sweep only: a sweep measured again is healthy (a transient)."""

    def after_first(self) -> "SweepFaults":
        """The faults of a sweep measured again: a planted transient (`once`) is over."""
        return replace(self, slow_rank=-1, slow_pct=0.0) if self.once else self


@dataclass(frozen=True)
class SweepPlan:
    """Everything one rank of a sweep runs (comm/run.CommOptions.rank_plan builds it)."""

    ops: tuple[str, ...]
    """Collectives, in order."""
    sizes: tuple[int, ...]
    """Message sizes S, bytes (nccl-tests' S)."""
    dtypes: tuple[str, ...] = ("float",)
    """Element types."""
    warmup: int = 5
    """Untimed ops before each timed loop (nccl-tests -w)."""
    iters: int = 20
    """Timed ops per loop (nccl-tests -n)."""
    group_timeout_s: float = 90.0
    """torch.distributed's per-collective timeout: a backstop behind the launcher's stall deadline."""
    pair_bytes: int = 1 << 20
    """Message size of the pairwise send/recv matrix, bytes."""
    pair_iters: int = 5
    """Exchanges per peer in the matrix; 0 = no matrix."""
    step_budget_s: float | None = None
    """Shorten a step's timed loop to about this many seconds; None = always `iters`."""
    loops: int = 1
    """Timed loops per step, the fastest kept."""
    eff_loops: int = 0
    """Alternating (op, ring) loop pairs of comm.efficiency's reference per judged size; 0 = none."""
    eff_from: int = 0
    """The reference is measured on sizes >= this, bytes."""
    eff_min_loop_s: float = 0.0
    """With a reference: each timed loop at least this long, seconds."""
    cpu_bind: bool = False
    """Pin each local gloo rank to a fixed share of the cores."""
    faults: SweepFaults = field(default_factory=SweepFaults)
    """Planted faults (tests)."""


_SCALARS = ("time_s", "wrong", "nbytes", "count", "iters", "wall_s", "ring_bytes")


@dataclass(frozen=True)
class StepRow:
    """One step (op, dtype, size) on one rank."""

    time_s: float
    """Seconds per op of the kept timed loop."""
    wrong: int
    """Output elements that differ from the exact expected value."""
    nbytes: int
    """Bytes S of the op at this size."""
    count: int
    """Elements per rank."""
    iters: int
    """Ops in each timed loop (after the step budget)."""
    wall_s: float
    """The whole step on this rank (buffers, check, warm-up, timed loops), seconds."""
    ring_bytes: float = math.nan
    """Bytes of the ring reference; NaN where none was measured."""
    op_loops_s: tuple[float, ...] = ()
    """Seconds per op of each alternating op loop (eff_loops of them, or none)."""
    ring_loops_s: tuple[float, ...] = ()
    """Seconds per exchange of each ring loop."""

    def vector(self, eff_loops: int) -> list[float]:
        """The row as floats, for the all_gather: scalars in _SCALARS order, then the loops (NaN if none)."""
        loops = [*self.op_loops_s, *self.ring_loops_s] if self.op_loops_s else [math.nan] * (2 * eff_loops)
        return [float(getattr(self, name)) for name in _SCALARS] + loops

    @classmethod
    def from_vector(cls, v: list[float], eff_loops: int) -> StepRow:
        head = dict(zip(_SCALARS, v))
        loops = v[len(_SCALARS):]
        measured = not math.isnan(head["ring_bytes"])
        ints = {f.name for f in fields(cls) if f.type in ("int", int)}
        return cls(**{k: int(x) if k in ints else x for k, x in head.items()},
                   op_loops_s=tuple(loops[:eff_loops]) if measured else (),
                   ring_loops_s=tuple(loops[eff_loops:2 * eff_loops]) if measured else ())

    @staticmethod
    def width(eff_loops: int) -> int:
        return len(_SCALARS) + 2 * eff_loops


def entry(op: str, dtype: str, size: int, rows: list[StepRow]) -> dict[str, Any]:
    """The record's entry of one step from every rank's row (rank order): per-rank times and wrong counts,
    the slowest rank's wall time, and the ring reference as the ranks' mean per loop (nccl-tests' per-op time
    is the ranks' mean too)."""
    first = rows[0]
    out: dict[str, Any] = {"op": op, "dtype": dtype, "size": size, "bytes": first.nbytes, "count": first.count,
                           "iters": first.iters, "time_s": [r.time_s for r in rows],
                           "wrong": [r.wrong for r in rows], "wall_s": max(r.wall_s for r in rows)}
    if first.op_loops_s:
        n = len(rows)
        op_s = [sum(r.op_loops_s[j] for r in rows) / n for j in range(len(first.op_loops_s))]
        ring_s = [sum(r.ring_loops_s[j] for r in rows) / n for j in range(len(first.ring_loops_s))]
        out["ref"] = {"ring_bytes": int(first.ring_bytes), "op_s": op_s, "ring_s": ring_s}
    return out


HANG_S = 3600.0  # planted hang: far beyond any timeout


def planted_delay(faults: SweepFaults, rank: int, alone: bool = False) -> Callable[[int], float]:
    """Planted faults only: seconds this rank sleeps before each pairwise exchange with `peer` (the slow rank
    with everyone, the two ends of a slow link with each other; the two ends of a transient link only in the
    matrix, not when their pair is measured `alone`)."""
    links = [faults.slow_link] + ([] if alone else [faults.transient_link])

    def delay(peer: int) -> float:
        slow = rank == faults.slow_rank or any(rank in ln and peer in ln and rank != peer for ln in links)
        return faults.slow_ms / 1e3 if slow else 0.0
    return delay


def plant_hang_or_death(faults: SweepFaults, rank: int, step_no: int) -> None:
    """Planted faults only: this rank never reaches the step's collectives, or its process dies."""
    if rank == faults.hang_rank and step_no == faults.fault_step:
        time.sleep(HANG_S)
    if rank == faults.die_rank and step_no == faults.fault_step:
        os._exit(17)
