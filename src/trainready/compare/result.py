"""The comparison as a typed record (`trainready.compare/1`) and as a table for people."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from trainready.compare.judge import (CheckChange, MetricChange, VersionChange, check_changes, counts, failures,
                                      metric_changes, version_changes)
from trainready.compare.sides import Side
from trainready.spec.model import CompareSpec

SCHEMA = "trainready.compare/1"
STYLE = {"regression": "bold red", "missing": "bold red", "improvement": "green", "noise": "dim",
         "unchanged": "dim", "info": "dim", "added": "cyan"}


@dataclass(frozen=True)
class Comparison:
    baseline: Side
    new: Side
    spec_source: str
    versions: tuple[VersionChange, ...]
    checks: tuple[CheckChange, ...]
    metrics: tuple[MetricChange, ...]
    reasons: tuple[str, ...]

    @property
    def exit_code(self) -> int:
        return 1 if self.reasons else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "verdict": "fail" if self.reasons else "pass",
            "reasons": list(self.reasons),
            "spec_source": self.spec_source,
            "baseline": self.baseline.header(),
            "new": self.new.header(),
            "versions_changed": [v.to_json() for v in self.versions],
            "checks_changed": [c.to_json() for c in self.checks],
            "counts": dict(counts(list(self.metrics))),
            "metrics": [m.to_json() for m in self.metrics],
        }


def compare(base: Side, new: Side, spec: CompareSpec, spec_source: str, allow: tuple[str, ...]) -> Comparison:
    vs = version_changes(base, new, tuple(spec.allow_changes) + allow)
    cs = check_changes(base, new)
    ms = metric_changes(base, new, spec)
    return Comparison(base, new, spec_source, tuple(vs), tuple(cs), tuple(ms), tuple(failures(vs, cs, ms, base, new)))


def _fmt(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:.4g}" if abs(x) < 1e5 else f"{x:.3e}"


def print_comparison(c: Comparison, console: Console, show_all: bool = False) -> None:
    console.print(f"baseline: {c.baseline.path} ({c.baseline.host}, {c.baseline.started_at})", highlight=False)
    console.print(f"new:      {c.new.path} ({c.new.host}, {c.new.started_at})", highlight=False)
    if c.versions:
        t = Table(title="versions changed")
        for col in ("version", "baseline", "new", ""):
            t.add_column(col, overflow="fold")
        for v in c.versions:
            t.add_row(v.key, v.baseline, v.new, Text("declared", "green") if v.declared else Text("NOT DECLARED", "bold red"))
        console.print(t)
    else:
        console.print("versions: none changed")
    for ch in c.checks:
        console.print(f"check {ch.name}: {ch.baseline} → {ch.new} ({ch.verdict})", highlight=False)
    t = Table(title="metrics (worse than tolerance = regression)")
    for col in ("metric", "unit", "better", "baseline", "new", "change", "tolerance", "verdict"):
        t.add_column(col, overflow="fold", justify="right" if col in ("baseline", "new", "change", "tolerance") else "left")
    for m in c.metrics:
        if not show_all and m.verdict in ("unchanged", "info"):
            continue
        rel = m.rel_change
        change = "—" if m.change is None else f"{m.change:+.3g}" + (f" ({rel:+.1%})" if rel is not None else "")
        labels = ",".join(f"{k}={v}" for k, v in m.labels)
        t.add_row(m.name + (f"[{labels}]" if labels else ""), m.unit, m.direction, _fmt(m.baseline), _fmt(m.new),
                  change, "" if m.verdict in ("added", "missing", "info") else f"±{m.band:.3g}",
                  Text(m.verdict, STYLE.get(m.verdict, "")))
    console.print(t)
    n = counts(list(c.metrics))
    summary = ", ".join(f"{v} {k}" for k, v in sorted(n.items()))
    hidden = n.get("unchanged", 0) + n.get("info", 0)
    if hidden and not show_all:
        summary += f" ({hidden} unchanged/info rows hidden; --all shows them)"
    for r in c.reasons:
        console.print(Text(f"  ✗ {r}", "red"), highlight=False)
    verdict = Text("FAIL", "bold red") if c.reasons else Text("PASS", "bold green")
    console.print(Text.assemble("verdict: ", verdict, f"  ({summary})"))
