"""Render a `Report` as a table for people (JSON records are written by commands.common.write_json_doc)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from trainready.records import CheckResult, Metric, Report, Status

STYLE = {
    Status.PASS: "bold green",
    Status.WARN: "bold yellow",
    Status.SKIP: "dim",
    Status.FAIL: "bold red",
    Status.ERROR: "bold magenta",
}


def status_text(s: Status) -> Text:
    return Text(s.value.upper(), style=STYLE[s])


def fmt_metric(m: Metric) -> str:
    labels = ",".join(f"{k}={v}" for k, v in m.labels)
    val = f"{m.value:.4g}" if abs(m.value) < 1e5 else f"{m.value:.3e}"
    thr = f" ({m.threshold.op} {m.threshold.bound:.4g})" if m.threshold else ""
    unit = "" if m.unit == "1" else f" {m.unit}"
    return f"{m.name}{'[' + labels + ']' if labels else ''} = {val}{unit}{thr}"


def results_table(results: tuple[CheckResult, ...] | list[CheckResult], title: str = "") -> Table:
    t = Table(title=title or None, show_lines=False, expand=False)
    t.add_column("check", style="bold")
    t.add_column("status")
    t.add_column("time", justify="right")
    t.add_column("result", overflow="fold")
    for r in results:
        msg = Text(r.message)
        if r.status in (Status.FAIL, Status.ERROR, Status.WARN) and r.remedy:
            msg.append(f"\n→ {r.remedy}", style="italic")
        t.add_row(r.name, status_text(r.status), f"{r.duration_s:.1f}s", msg)
    return t


def planted_banner(report: Report) -> str | None:
    """One line for a run with `--plant`s (faults or replayed facts files), else None."""
    planted = report.planted
    if not planted:
        return None
    what = ", ".join(f"{k}={v}" for k, v in planted.items())
    return f"PLANTED FAULTS / REPLAYED FACTS: {what} — this record is a test, not evidence"


def print_report(report: Report, console: Console, verbose: bool = False) -> None:
    banner = planted_banner(report)
    if banner:
        console.print(Text(banner, style="bold reverse yellow"))
    console.print(results_table(report.results, title=f"trainready {report.command} on {report.host}"))
    if verbose:
        for r in report.results:
            for m in r.metrics:
                console.print(f"  {r.name}: {fmt_metric(m)}", highlight=False, markup=False)
    counts: dict[str, int] = {}
    for r in report.results:
        counts[r.status.value] = counts.get(r.status.value, 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no checks"
    if all(r.status == Status.SKIP for r in report.results):
        summary += "; nothing was judged"
    if banner:
        summary += "; planted: a test, at most warn, exit 3"
    console.print(
        Text.assemble("verdict: ", status_text(report.status), f"  ({summary}; {report.duration_s:.1f} s)")
    )
