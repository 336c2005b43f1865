"""What a launch hands each rank (RankContext) and what it returns (RankOutcome, LaunchResult)."""

from __future__ import annotations

from dataclasses import dataclass, field, field
from typing import Any


@dataclass
class RankContext:
    """Handed to the rank function: who am I, and how to report progress."""

    rank: int
    world_size: int
    local_rank: int
    backend: str
    device: Any  # torch.device
    _q: Any = field(repr=False, default=None)
    _stage_no: int = 0

    def stage(self, name: str) -> None:
        """Report progress; the parent names a hung rank by its last stage."""
        self._stage_no += 1
        if self._q is not None:
            self._q.put(("stage", self.rank, (self._stage_no, name)))


@dataclass(frozen=True)
class RankOutcome:
    rank: int
    state: str  # "ok" | "error" | "hung" | "died" | "stuck"
    value: Any = None
    message: str = ""
    last_stage: str = "started"
    stage_no: int = 0
    exitcode: int | None = None


@dataclass(frozen=True)
class LaunchResult:
    world_size: int
    backend: str
    outcomes: tuple[RankOutcome, ...]
    elapsed_s: float
    timed_out: bool
    # Seconds from the launch: "running" every rank in its process group (fork, CUDA, rendezvous), "results"
    # every rank's answer in, "ended" every process gone (its teardown); a phase not reached is absent.
    timing_s: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(o.state == "ok" for o in self.outcomes)

    @property
    def values(self) -> list[Any]:
        return [o.value for o in self.outcomes]

    @property
    def culprits(self) -> tuple[int, ...]:
        """The ranks that caused the failure (not those merely left waiting on them)."""
        bad = [o for o in self.outcomes if o.state in ("died", "error", "hung")]
        return tuple(o.rank for o in bad)

    def describe(self) -> str:
        """One line naming the failing ranks and what each was doing."""
        if self.ok:
            return f"all {self.world_size} ranks finished"
        parts = []
        for o in self.outcomes:
            if o.state == "died":
                parts.append(f"rank {o.rank} died (exit code {o.exitcode}) after '{o.last_stage}'")
            elif o.state == "error":
                parts.append(f"rank {o.rank} raised {o.message}")
            elif o.state == "hung":
                parts.append(f"rank {o.rank} hung at '{o.last_stage}' (no progress before the deadline)")
        stuck = [o.rank for o in self.outcomes if o.state == "stuck"]
        if stuck:
            parts.append(f"ranks {rank_ranges(stuck)} were left waiting on them")
        return "; ".join(parts)


def rank_ranges(ranks: list[int]) -> str:
    out, start, prev = [], None, None
    for r in sorted(ranks) + [None]:  # type: ignore[list-item]
        if start is None:
            start = prev = r
        elif r is not None and r == prev + 1:  # type: ignore[operator]
            prev = r
        else:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = r
    return ",".join(out)
