"""Typed, frozen result records and their versioned JSON form.

A `CheckResult` is what one check concluded; a `Report` is one run of a
command (node, comm, resume, ...) on one host.  Metrics carry an explicit unit
and structured labels (``{"gpu": "0", "dtype": "bf16"}``), never a name glued
together from strings, so the fleet layer can group and compare them.

JSON schema versioning: `SCHEMA_VERSION` is bumped on any incompatible change
(a renamed or removed field); added optional fields keep the version.
"""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from trainready.errors import UsageError

SCHEMA_VERSION = "trainready.report/1"
# Exit code of any run made with `--plant` (planted faults / replayed facts), whatever its checks
# concluded: a script that reads exit codes must never take a test run for evidence about a machine.
PLANTED_EXIT = 3


class Status(str, enum.Enum):
    """Verdict of one check. Ordered by severity in `SEVERITY`."""

    PASS = "pass"
    WARN = "warn"
    SKIP = "skip"
    FAIL = "fail"
    ERROR = "error"


SEVERITY: dict[Status, int] = {
    Status.PASS: 0,
    Status.SKIP: 0,
    Status.WARN: 1,
    Status.FAIL: 2,
    Status.ERROR: 3,
}


class Level(str, enum.Enum):
    """How deep a run goes, each level including the ones before it: `light` is the version chain, the
    manifest and the fabric's files and NVML (one interpreter and torch start-up per node: for exercising fleet orchestration on many
    nodes, not an acceptance of the hardware), `quick` adds the checks that take seconds, `standard` every check but the burn-in, `burn-in` that too."""

    LIGHT = "light"
    QUICK = "quick"
    STANDARD = "standard"
    BURN_IN = "burn-in"  # standard, then the burn-in: minutes of sustained load judged over time (docs/burn-in.md)

    @property
    def depth(self) -> int:
        """0 light, 1 quick, 2 standard, 3 burn-in: a check runs at every level at least as deep as its own."""
        return list(Level).index(self)


@dataclass(frozen=True)
class Threshold:
    """The bound a metric was judged against: ``value <op> bound``.

    `source` says where the bound came from (spec key, a named rule, table entry).
    """

    op: str  # one of ">=", "<=", "==", ">", "<"
    bound: float
    unit: str
    source: str

    def holds(self, value: float) -> bool:
        if isinstance(value, float) and math.isnan(value):
            return False
        return {
            ">=": value >= self.bound,
            "<=": value <= self.bound,
            ">": value > self.bound,
            "<": value < self.bound,
            "==": value == self.bound,
        }[self.op]

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "bound": _num(self.bound), "unit": self.unit, "source": self.source}


@dataclass(frozen=True)
class Metric:
    """One measured number: name, value, unit, labels, and what it was judged against."""

    name: str
    value: float
    unit: str
    labels: tuple[tuple[str, str], ...] = ()
    threshold: Threshold | None = None

    @staticmethod
    def of(
        name: str,
        value: float,
        unit: str,
        threshold: Threshold | None = None,
        **labels: object,
    ) -> "Metric":
        return Metric(name, float(value), unit, tuple(sorted((k, str(v)) for k, v in labels.items())), threshold)

    @property
    def label_dict(self) -> dict[str, str]:
        return dict(self.labels)

    @property
    def ok(self) -> bool:
        return self.threshold is None or self.threshold.holds(self.value)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": _num(self.value),
            "unit": self.unit,
            "labels": self.label_dict,
            "threshold": self.threshold.to_json() if self.threshold else None,
        }


@dataclass(frozen=True)
class Outcome:
    """What a check's own logic returns; the base class adds name, timing, level."""

    status: Status
    message: str
    metrics: tuple[Metric, ...] = ()
    remedy: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)


# Keys a timing check may set in Outcome.details (suite/machine.py judges them against the machine's state):
TIMING_ONLY = "timing_only"  # the FAIL rests on timings alone (no wrong element, no error, no hardware fact)
BEYOND_NOISE = "beyond_noise"  # and a figure stands out beyond its own repeats' spread (a part at half speed)
NOT_JUDGED = "not_judged"  # why a timing FAIL became WARN "not judged" (a busy machine): unknown, never a pass


@dataclass(frozen=True)
class CheckResult:
    name: str
    title: str
    level: Level
    status: Status
    message: str
    remedy: str
    metrics: tuple[Metric, ...]
    duration_s: float
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "level": self.level.value,
            "status": self.status.value,
            "message": self.message,
            "remedy": self.remedy,
            "duration_s": round(self.duration_s, 4),
            "metrics": [m.to_json() for m in self.metrics],
            "details": _jsonable(self.details),
        }


@dataclass(frozen=True)
class Report:
    """One command's run on one host."""

    command: str
    host: str
    started_at: str  # ISO-8601 UTC
    duration_s: float
    tool_version: str
    spec: Mapping[str, Any]
    results: tuple[CheckResult, ...]
    context: Mapping[str, Any] = field(default_factory=dict)

    @property
    def status(self) -> Status:
        """Worst result; a run in which nothing was judged (no checks, or all skipped) is a
        warning (a failure under a GPU spec), never a pass: an empty acceptance must not look like an
        accepted node. Nor is a run with planted faults / replayed facts (context "planted"): it is a test, not evidence."""
        if all(r.status == Status.SKIP for r in self.results):
            # Under a GPU spec nothing judged is a failure: a machine must not be accepted for GPUs unseen.
            return Status.FAIL if _gpu_count(self.spec) > 0 else Status.WARN
        worst = Status.PASS
        for r in self.results:
            if SEVERITY[r.status] > SEVERITY[worst]:
                worst = r.status
        if worst == Status.PASS and self.planted:
            return Status.WARN  # planted faults / replayed facts: a test, never a clean PASS of this machine
        return worst

    @property
    def planted(self) -> dict[str, Any]:
        """The `--plant`s this run was made with ({} for a real run)."""
        return planted_of(self.context)

    @property
    def exit_code(self) -> int:
        """0 passed (warnings allowed), 1 a check failed, PLANTED_EXIT (3) any planted run."""
        if self.planted:
            return PLANTED_EXIT
        return 1 if SEVERITY[self.status] >= SEVERITY[Status.FAIL] else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA_VERSION,
            "command": self.command,
            "host": self.host,
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 3),
            "tool_version": self.tool_version,
            "status": self.status.value,
            "spec": _jsonable(self.spec),
            "context": _jsonable(self.context),
            "results": [r.to_json() for r in self.results],
        }


def _gpu_count(spec: Mapping[str, Any]) -> int:
    """gpu.count of a spec as recorded (spec_to_json); 0 when absent."""
    gpu = spec.get("gpu") if isinstance(spec, Mapping) else None
    count = gpu.get("count", 0) if isinstance(gpu, Mapping) else 0
    return count if isinstance(count, int) else 0


def _num(x: float) -> float | str | None:
    """JSON has no NaN/inf: write them as strings so the file stays valid JSON."""
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return str(x)
    return x


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, float):
        return _num(obj)
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if hasattr(obj, "to_json"):
        return obj.to_json()
    return obj


def planted_of(context: Any) -> dict[str, Any]:
    """The plants a record's context names ({} when none). "planted_faults" is what comm records
    written before "planted" existed called it."""
    if not isinstance(context, Mapping):
        return {}
    found = context.get("planted") or context.get("planted_faults")
    if isinstance(found, Mapping):
        return dict(found)
    if isinstance(found, (list, tuple)):
        return {str(k): "" for k in found}
    return {"?": str(found)} if found else {}


def read_json(path: str, where: str, expected: str) -> Any:
    """The parsed JSON of `path`; a missing/unreadable/non-JSON file → one UsageError line (exit 2)."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{where}: no such file (expected {expected})")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{where}: unreadable ({exc.strerror}); expected {expected}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{where}: not JSON ({str(exc).splitlines()[0]}); expected {expected}") from None


def read_report(path: str, where: str, expected: str) -> dict[str, Any]:
    """A `trainready.report/1` JSON record from `path`, as a dict; anything else → one UsageError line
    `{where}: <what is wrong> ... {expected}` (exit 2).  The ONE reader of records (spec init,
    plan --mfu-from, and every later consumer): a record made with `--plant` is refused here, since
    planted faults / replayed facts are a test of trainready, not a measurement of a machine."""
    doc = read_json(path, where, expected)
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if schema != SCHEMA_VERSION or not isinstance(doc.get("results"), list):
        raise UsageError(f"{where}: schema {schema!r}, expected '{SCHEMA_VERSION}' with a results list ({expected})")
    planted = planted_of(doc.get("context"))
    if planted:
        raise UsageError(f"{where}: the record was made with --plant {', '.join(map(str, planted))}; a test record "
                         f"is not evidence (rerun without --plant; expected {expected})")
    return doc  # type: ignore[no-any-return]
