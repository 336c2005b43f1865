"""Run a list of checks with a progress display and build the `Report`."""

from __future__ import annotations

import datetime as dt
import socket
import time
from typing import Any, Callable, Sequence

from trainready import __version__
from trainready.errors import Interrupted
from trainready.records import CheckResult, Report, Status
from trainready.spec.load import spec_to_json
from trainready.suite.base import Check, CheckContext


def run_checks(
    command: str,
    checks: Sequence[type[Check]],
    ctx: CheckContext,
    on_start: Callable[[type[Check]], None] | None = None,
    on_done: Callable[[CheckResult], None] | None = None,
    context: dict[str, Any] | None = None,
) -> Report:
    started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    results: list[CheckResult] = []

    def report() -> Report:
        return Report(
            command=command,
            host=socket.gethostname(),
            started_at=started,
            duration_s=time.perf_counter() - t0,
            tool_version=__version__,
            spec=spec_to_json(ctx.spec),
            results=tuple(results),
            # A run with planted faults / replayed facts says so in its record (and is capped at WARN).
            context={**(context or {}), **({"planted": dict(ctx.faults)} if ctx.faults else {})},
        )

    for cls in checks:  # each check's reading at the run's start (the fabric check's error counters)
        cls.begin(ctx)
    for cls in checks:
        if on_start:
            on_start(cls)
        t_check = time.perf_counter()
        try:
            res = cls().execute(ctx)
        except Interrupted as exc:  # SIGINT/SIGTERM: the check's ranks are stopped; keep what was judged
            exc.during = exc.during or cls.name
            results.append(_interrupted(cls, ctx, exc, time.perf_counter() - t_check))
            exc.partial = report()
            raise
        ctx.previous[res.name] = res
        results.append(res)
        if on_done:
            on_done(res)
    return report()


def _interrupted(cls: type[Check], ctx: CheckContext, exc: Interrupted, seconds: float) -> CheckResult:
    """The interrupted check's result: its own partial verdict where it gives one (Check.interrupted), else
    'interrupted, not judged'."""
    try:
        part = cls.interrupted(ctx, exc.signame)
    except Exception as err:  # noqa: BLE001 - the way out must not fail: the plain line instead
        part = None
        exc.notes.append(f"{cls.name}'s partial record failed: {type(err).__name__}: {err}")
    if part is not None:
        return CheckResult(cls.name, cls.title or cls.name, cls.level, part.status, part.message, part.remedy,
                           part.metrics, seconds, {**part.details, "interrupted": exc.signame})
    return CheckResult(cls.name, cls.title or cls.name, cls.level, Status.ERROR,
                       f"interrupted by {exc.signame} during {exc.during}",
                       "Not judged: the run was interrupted; run it again.", (), seconds)
