"""The check framework: one registry, one lifecycle.

A check subclasses `Check`, sets its class attributes and writes `run(ctx)`
returning an `Outcome` (its own logic only).  `Check.execute` owns the rest:
the skip decision, timing, the timeout, and turning any exception into an
`error` result with a one-line message, so one broken check never ends the run
(the SuperBench `Benchmark.run` pattern).
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping

from trainready.suite.options import CheckOptions
from trainready.ranks import live
from trainready.errors import DuplicateCheckError, GpuUnusable, Interrupted, TrainreadyError, UsageError
from trainready.records import CheckResult, Level, Outcome, Status
from trainready.spec.model import NodeSpec
from trainready.util.signals import raise_pending

REGISTRY: dict[str, type["Check"]] = {}
# Seconds to wait for a check's thread after its ranks were stopped (its launch returns once they are gone).
STOP_JOIN_S = 5.0


def register(cls: type["Check"]) -> type["Check"]:
    """Class decorator: add a check to the one registry. A second name is an error."""
    if not getattr(cls, "name", ""):
        raise DuplicateCheckError(f"{cls.__qualname__} has no name")
    if cls.name in REGISTRY and REGISTRY[cls.name] is not cls:
        raise DuplicateCheckError(
            f"check '{cls.name}' registered twice ({REGISTRY[cls.name].__module__} and {cls.__module__})"
        )
    REGISTRY[cls.name] = cls
    return cls


@dataclass
class CheckContext:
    """What every check may read. Faults are planted by tests (and `--plant`)."""

    spec: NodeSpec
    workdir: Path
    faults: Mapping[str, str] = field(default_factory=dict)
    # The command's options (one typed record, built once by the command): each check reads its own field.
    options: CheckOptions = field(default_factory=CheckOptions)
    # Results of checks that ran before this one, by name (e.g. spec init reads them).
    previous: dict[str, CheckResult] = field(default_factory=dict)
    # Per-check limits in seconds (`--timeout NAME=SECONDS`), overriding each check's `timeout_s`.
    timeouts: Mapping[str, float] = field(default_factory=dict)
    # Where a long check says which stage it is in (a command's status line); None = nowhere.
    progress: Callable[[str], None] | None = None

    def fault(self, name: str) -> str | None:
        """The value of a planted fault, or None when not planted."""
        return self.faults.get(name)


class Check(ABC):
    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    level: ClassVar[Level] = Level.QUICK
    timeout_s: ClassVar[float] = 120.0
    order: ClassVar[int] = 100  # lower runs first; the README's four bring-up questions in order
    launches_ranks: ClassVar[bool] = False  # runs rank processes (ranks.launch): `node` starts their forkserver early
    # judges timings against floors: measured between two readings of the machine (suite/machine.py), whose state
    # the result keeps; on a busy machine a FAIL within its noise is WARN "not judged"
    timing: ClassVar[bool] = False

    @classmethod
    def begin(cls, ctx: CheckContext) -> None:
        """Called by the runner for every check of a run before the first one runs (the fabric check reads its
        error counters' start here); by default nothing."""

    def skip_reason(self, ctx: CheckContext) -> str | None:
        """Return why this check does not apply here (e.g. no GPU), or None."""
        return None

    @classmethod
    def interrupted(cls, ctx: CheckContext, signame: str) -> Outcome | None:
        """What this check measured before SIGINT/SIGTERM stopped it, judged and marked partial (the burn-in);
        None (the default) records it as interrupted, not judged."""
        return None

    def timeout_for(self, ctx: CheckContext) -> float:
        """Seconds this check may run: `--timeout NAME=SECONDS` (ctx.timeouts), else the class default."""
        return float(ctx.timeouts.get(self.name, self.timeout_s))

    @abstractmethod
    def run(self, ctx: CheckContext) -> Outcome:
        """The check's own logic."""

    def execute(self, ctx: CheckContext) -> CheckResult:
        t0 = time.perf_counter()
        try:
            reason = self.skip_reason(ctx)
        except Exception as exc:  # noqa: BLE001 - a probe failing is itself a finding
            reason = None
            outcome = _error_outcome(exc)
        else:
            outcome = Outcome(Status.SKIP, reason) if reason else self._run_measured(ctx)
        return CheckResult(
            name=self.name,
            title=self.title or self.name,
            level=self.level,
            status=outcome.status,
            message=outcome.message,
            remedy=outcome.remedy,
            metrics=outcome.metrics,
            duration_s=time.perf_counter() - t0,
            details=outcome.details,
        )

    def _run_measured(self, ctx: CheckContext) -> Outcome:
        """`_run_bounded`, and for a timing check the machine's state over it (suite/machine.py)."""
        if not self.timing:
            return self._run_bounded(ctx)
        from trainready.suite import machine

        start = machine.read()
        out = self._run_bounded(ctx)
        return machine.judged_on(out, machine.between(start, machine.read(), gpus=ctx.spec.gpu.count > 0))

    def _run_bounded(self, ctx: CheckContext) -> Outcome:
        """Run `self.run` in a worker thread; at the deadline stop it and its ranks.

        The ranks the check launched (`trainready.ranks.launch`) are registered in `dist.live`: at
        the deadline each gets SIGTERM, then SIGKILL after a grace, so the next check starts on a
        quiet machine, and the result names the stage each rank was in.  On SIGINT/SIGTERM
        (`Interrupted`) the same happens before the interrupt goes on to the command.
        """
        box: dict[str, Any] = {}
        epoch = live.begin(self.name)

        def target() -> None:
            live.adopt(epoch)
            try:
                box["outcome"] = self.run(ctx)
            except BaseException as exc:  # noqa: BLE001
                box["exc"] = exc

        timeout = self.timeout_for(ctx)
        th = threading.Thread(target=target, name=f"check-{self.name}", daemon=True)
        th.start()
        try:
            _wait(th, timeout)
        except Interrupted as intr:
            stopped = live.stop(epoch)
            th.join(STOP_JOIN_S)  # its launch returns once its ranks are gone; no new one may start
            intr.during = self.name + (f" ({live.describe(stopped)})" if stopped else "")
            raise
        if th.is_alive():
            return _timed_out(timeout, live.stop(epoch), th)
        if "exc" in box:
            return _error_outcome(box["exc"])
        out = box["outcome"]
        if not isinstance(out, Outcome):
            return Outcome(Status.ERROR, f"check returned {type(out).__name__}, not an Outcome")
        return out


def _wait(th: threading.Thread, timeout: float) -> None:
    """Join `th` for up to `timeout` s, in short slices that re-raise a swallowed interrupt (signals.raise_pending)."""
    end = time.monotonic() + timeout
    while th.is_alive() and (left := end - time.monotonic()) > 0:
        raise_pending()
        th.join(min(left, 0.5))


def _timed_out(timeout: float, stopped: list[live.Stopped], th: threading.Thread) -> Outcome:
    """The check's deadline passed: its ranks are stopped (`stopped`); give its thread a moment to return."""
    th.join(STOP_JOIN_S)
    where = f"; stopped its {len(stopped)} rank(s): {live.describe(stopped)}" if stopped else ""
    killed = [s.rank for s in stopped if s.how == "SIGKILL"]
    if killed:
        where += f" ({len(killed)} needed SIGKILL)"
    if th.is_alive():  # in-process work (a hung CUDA call) cannot be stopped from Python: say so
        where += "; its in-process work is still running (results after this one may be disturbed)"
    return Outcome(
        Status.ERROR,
        f"timed out after {timeout:g} s{where}",
        remedy="Look for a hung device or process (py-spy dump, nvidia-smi); raise the limit with "
        "`--timeout CHECK=SECONDS` only if the machine is known slow.",
        details={"timeout_s": timeout, "stopped": [s.__dict__ for s in stopped], "thread_alive": th.is_alive()},
    )


def _error_outcome(exc: BaseException) -> Outcome:
    if isinstance(exc, GpuUnusable):  # the spec's GPUs are not usable: a verdict on this machine, not an error
        return Outcome(Status.FAIL, str(exc), remedy=GpuUnusable.remedy)
    if isinstance(exc, TrainreadyError):
        msg = str(exc)
    else:
        msg = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    return Outcome(Status.ERROR, msg, remedy="This is an error in running the check, not a verdict; see the message.")


def select(only: list[str] | None, skip: list[str] | None, level: Level) -> list[type[Check]]:
    """Choose checks from the registry. Unknown names in --only/--skip are usage errors."""
    for names in (only or [], skip or []):
        for n in names:
            if n not in REGISTRY:
                raise UsageError(f"unknown check '{n}' (known: {', '.join(sorted(REGISTRY))})")
    chosen = []
    for cls in sorted(REGISTRY.values(), key=lambda c: (c.order, c.name)):
        if only:
            if cls.name not in only:
                continue
        elif cls.level.depth > level.depth:
            continue
        if skip and cls.name in skip:
            continue
        chosen.append(cls)
    return chosen
