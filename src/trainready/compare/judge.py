"""Judge NEW against BASELINE: versions that changed, check statuses that got worse, and each
metric's change against its tolerance, direction-aware.

Direction of a metric (which way is worse), first match wins:
  1. the spec's `[compare.metrics.NAME] direction`;
  2. the threshold the metric was judged against in its record: `>=`/`>` higher is better,
     `<=`/`<` lower is better, `==` exact;
  3. its unit and name: `…/s`, `*_fraction_of_peak`, `*_mfu` higher; s/ms/us lower; names with
     err/diff/delta/mismatch/wrong and unit `errors` lower; `GPUs` exact;
  4. otherwise `info`: shown, never judged (a loss value, a ratio without a bound).

Tolerance band (how far worse a metric may get and still be noise), in the metric's unit:
  * throughput (rate) metrics: `compare.rate_rel_tol` × |baseline| (default 10%);
  * time metrics: `compare.time_rel_tol` × |baseline| (default 10%);
  * any other metric with a recorded threshold: the headroom the baseline had to that threshold (a
    numerical error may grow while it stays within its own accuracy bound); without one: 0;
  * `[compare.metrics.NAME] rel/abs` replace the default: band = max(rel × |baseline|, abs).
A change worse than the band is a regression; better than the band an improvement; else noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from trainready.compare.sides import MetricKey, Observed, Side, severity
from trainready.spec.model import CompareSpec

TIME_UNITS = frozenset({"s", "ms", "us", "ns"})
ERROR_WORDS = ("err", "diff", "delta", "mismatch", "wrong")


@dataclass(frozen=True)
class VersionChange:
    key: str
    baseline: str
    new: str
    declared: bool  # the upgrade under test is meant to change it (--allow-change / compare.allow_changes)

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "baseline": self.baseline, "new": self.new, "declared": self.declared}


@dataclass(frozen=True)
class MetricChange:
    name: str
    labels: tuple[tuple[str, str], ...]
    unit: str
    direction: str  # higher | lower | exact | info
    baseline: float | None
    new: float | None
    band: float  # tolerance in the metric's unit
    band_source: str
    verdict: str  # regression | improvement | noise | unchanged | info | missing | added

    @property
    def change(self) -> float | None:
        return None if self.baseline is None or self.new is None else self.new - self.baseline

    @property
    def rel_change(self) -> float | None:
        d = self.change
        return None if d is None or not self.baseline else d / abs(self.baseline)

    def to_json(self) -> dict[str, Any]:
        def num(x: float | None) -> float | str | None:
            return str(x) if isinstance(x, float) and not math.isfinite(x) else x

        return {"name": self.name, "labels": dict(self.labels), "unit": self.unit, "direction": self.direction,
                "baseline": num(self.baseline), "new": num(self.new), "change": num(self.change),
                "rel_change": num(self.rel_change), "tolerance": num(self.band), "tolerance_source": self.band_source,
                "verdict": self.verdict}


@dataclass(frozen=True)
class CheckChange:
    name: str
    baseline: str
    new: str
    verdict: str  # regression (now fail/error), worse (now warn), better, missing

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "baseline": self.baseline, "new": self.new, "verdict": self.verdict}


def direction(name: str, obs: Observed, spec: CompareSpec) -> str:
    tol = spec.metrics.get(name)
    if tol is not None and tol.direction != "auto":
        return tol.direction
    if obs.op in (">=", ">"):
        return "higher"
    if obs.op in ("<=", "<"):
        return "lower"
    if obs.op == "==":
        return "exact"
    if family(name, obs.unit) == "rate":
        return "higher"
    if obs.unit in TIME_UNITS or obs.unit == "errors" or any(w in name for w in ERROR_WORDS):
        return "lower"
    return "exact" if obs.unit == "GPUs" else "info"


def family(name: str, unit: str) -> str:
    if unit.endswith("/s") or name.endswith(("_fraction_of_peak", "_mfu")):
        return "rate"
    return "time" if unit in TIME_UNITS else "other"


def band(name: str, way: str, base: Observed, spec: CompareSpec) -> tuple[float, str]:
    """(tolerance in the metric's unit, where it came from)."""
    tol = spec.metrics.get(name)
    if tol is not None and (tol.rel is not None or tol.abs is not None):
        return max((tol.rel or 0.0) * abs(base.value), tol.abs or 0.0), f"spec compare.metrics.{name}"
    fam = family(name, base.unit)
    if fam == "rate":
        return spec.rate_rel_tol * abs(base.value), f"compare.rate_rel_tol {spec.rate_rel_tol:g}"
    if fam == "time":
        return spec.time_rel_tol * abs(base.value), f"compare.time_rel_tol {spec.time_rel_tol:g}"
    if base.bound is not None and way in ("higher", "lower"):
        room = (base.bound - base.value) if way == "lower" else (base.value - base.bound)
        return max(room, 0.0), f"headroom to its threshold {base.op} {base.bound:g}"
    return 0.0, "none (any worsening counts)"


def judge_metric(key: MetricKey, base: Observed | None, new: Observed | None, spec: CompareSpec) -> MetricChange:
    name, labels = key
    ref = base or new
    assert ref is not None
    way = direction(name, ref, spec)
    if base is None or new is None:
        verdict = "added" if base is None else ("info" if way == "info" else "missing")
        return MetricChange(name, labels, ref.unit, way, base and base.value, new and new.value, 0.0, "", verdict)
    width, source = band(name, way, base, spec)
    d = new.value - base.value
    if way == "info":
        verdict = "info"
    elif not (math.isfinite(new.value) and math.isfinite(base.value)):
        verdict = "unchanged" if str(new.value) == str(base.value) else ("regression" if not math.isfinite(new.value) else "improvement")
    elif d == 0:
        verdict = "unchanged"
    elif way == "exact":
        verdict = "regression" if abs(d) > width else "noise"
    else:
        worse = -d if way == "higher" else d  # > 0: got worse
        verdict = "regression" if worse > width else "improvement" if -worse > width else "noise"
    return MetricChange(name, labels, base.unit, way, base.value, new.value, width, source, verdict)


def version_changes(base: Side, new: Side, allowed: tuple[str, ...]) -> list[VersionChange]:
    out = []
    for key in sorted(set(base.versions) | set(new.versions)):
        b, n = base.versions.get(key, "not recorded"), new.versions.get(key, "not recorded")
        if b != n:
            declared = key in allowed or key.split(".", 1)[0] in allowed
            out.append(VersionChange(key, b, n, declared))
    return out


def check_changes(base: Side, new: Side) -> list[CheckChange]:
    out = []
    for name, b in base.checks.items():
        n = new.checks.get(name)
        if n is None:
            if b != "skip":
                out.append(CheckChange(name, b, "not run", "missing"))
        elif severity(n) > severity(b):
            out.append(CheckChange(name, b, n, "regression" if severity(n) >= 2 else "worse"))
        elif severity(n) < severity(b):
            out.append(CheckChange(name, b, n, "better"))
    return out


def metric_changes(base: Side, new: Side, spec: CompareSpec) -> list[MetricChange]:
    keys = sorted(set(base.metrics) | set(new.metrics))
    return [judge_metric(k, base.metrics.get(k), new.metrics.get(k), spec) for k in keys]


FAILING_METRIC = ("regression", "missing")


def failures(versions: list[VersionChange], checks: list[CheckChange], metrics: list[MetricChange],
             base: Side, new: Side) -> list[str]:
    """Why the comparison fails (empty = it passes), one line each."""
    why = [f"version {v.key} changed {v.baseline} → {v.new} (not declared: --allow-change {v.key.split('.')[0]})"
           for v in versions if not v.declared]
    for side in (base, new):
        if not side.versions:
            why.append(f"{side.path}: no versions recorded (the record has no 'versions' check)")
    why += [f"check {c.name}: {c.baseline} → {c.new}" for c in checks if c.verdict in ("regression", "missing")]
    for m in metrics:
        if m.verdict in FAILING_METRIC:
            why.append(f"{m.name}{label_suffix(m.labels)}: {m.verdict}" + (
                f" {m.baseline:.4g} → {m.new:.4g} {m.unit} (worse than tolerance {m.band:.3g})"
                if m.verdict == "regression" else " in the new record"))
    return why


def label_suffix(labels: tuple[tuple[str, str], ...]) -> str:
    """'[op=all_reduce,size_bytes=4096]': what tells rows of one metric name apart ('' without labels)."""
    return "[" + ",".join(f"{k}={v}" for k, v in labels) + "]" if labels else ""


def counts(metrics: list[MetricChange]) -> Mapping[str, int]:
    out: dict[str, int] = {}
    for m in metrics:
        out[m.verdict] = out.get(m.verdict, 0) + 1
    return out
