"""The comparison as a typed record (`trainready.compare/1`) and as a table for people."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from trainready.compare.judge import (CheckChange, MetricChange, VersionChange, check_changes, counts, failures,
                                      label_suffix, metric_changes, version_changes)
from trainready.compare.fingerprint import FingerprintDiff, fingerprint_changes
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
    fingerprint: FingerprintDiff | None = None

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
            "fingerprint": self.fingerprint.to_json() if self.fingerprint else None,
        }


def compare(base: Side, new: Side, spec: CompareSpec, spec_source: str, allow: tuple[str, ...]) -> Comparison:
    vs = version_changes(base, new, tuple(spec.allow_changes) + allow)
    cs = check_changes(base, new)
    ms = metric_changes(base, new, spec)
    fp = fingerprint_changes(base.fingerprint, new.fingerprint) if base.fingerprint or new.fingerprint else None
    why = failures(vs, cs, ms, base, new) + ([fp.failing] if fp and fp.failing else [])
    return Comparison(base, new, spec_source, tuple(vs), tuple(cs), tuple(ms), tuple(why), fp)


def _fmt(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:.4g}" if abs(x) < 1e5 else f"{x:.3e}"


def shared_labels(rows: list[MetricChange]) -> tuple[tuple[str, str], ...]:
    """The label pairs every row has (backend=gloo, ranks=4): said once above the table, so each row shows
    the labels that tell it apart (op, size, run, gpu) and stays readable on an 80-column terminal."""
    if not rows:
        return ()
    common = set(rows[0].labels)
    for m in rows[1:]:
        common &= set(m.labels)
    return tuple(sorted(common))


ARROW = {"higher": "↑", "lower": "↓", "exact": "="}  # which way is better, beside the unit


def _metrics_table(rows: list[MetricChange], common: tuple[tuple[str, str], ...]) -> Table:
    """One row per metric: its name with the labels that tell it apart (metric[op=...,size_bytes=...]), folded
    in its own column; the figures never wrap."""
    t = Table(title="metrics (worse than tolerance = regression; ↑ higher is better, ↓ lower, = exact)",
              title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1),
              collapse_padding=True)
    t.add_column("metric", overflow="fold", ratio=1)
    for col in ("unit", "baseline", "new", "change", "tolerance", "verdict"):
        t.add_column(col, no_wrap=True, justify="left" if col in ("unit", "verdict") else "right")
    for m in rows:
        rel = m.rel_change
        change = "—" if m.change is None else f"{rel:+.1%}" if rel is not None else f"{m.change:+.3g}"
        own = tuple(kv for kv in m.labels if kv not in common)
        t.add_row(Text(m.name + label_suffix(own).replace(",", ", ")), f"{m.unit} {ARROW.get(m.direction, '')}".strip(), _fmt(m.baseline),
                  _fmt(m.new), change, "" if m.verdict in ("added", "missing", "info") else f"±{m.band:.3g}",
                  Text(m.verdict, STYLE.get(m.verdict, "")))
    return t


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
    for line in c.fingerprint.lines() if c.fingerprint else []:
        console.print(line, highlight=False)
    rows = [m for m in c.metrics if show_all or m.verdict not in ("unchanged", "info")]
    common = shared_labels(rows)
    if common:
        console.print(Text(f"labels of every metric row below: {', '.join(f'{k}={v}' for k, v in common)}"))
    console.print(_metrics_table(rows, common))
    n = counts(list(c.metrics))
    summary = ", ".join(f"{v} {k}" for k, v in sorted(n.items()))
    hidden = n.get("unchanged", 0) + n.get("info", 0)
    if hidden and not show_all:
        summary += f" ({hidden} unchanged/info rows hidden; --all shows them)"
    for r in c.reasons:
        console.print(Text(f"  ✗ {r}", "red"), highlight=False)
    verdict = Text("FAIL", "bold red") if c.reasons else Text("PASS", "bold green")
    console.print(Text.assemble("verdict: ", verdict, f"  ({summary})"))
