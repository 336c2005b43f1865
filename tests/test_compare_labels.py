"""`trainready compare`'s table: every row names the labels that tell it apart (op, run, size), at any
terminal width; labels every row shares are said once above the table."""

from __future__ import annotations

import re

from rich.console import Console

from trainready.compare.result import compare, print_comparison
from trainready.compare.sides import node_side
from trainready.records import CheckResult, Level, Metric, Report, Status
from trainready.spec.model import CompareSpec


def _record(scale: float) -> dict:  # type: ignore[type-arg]
    busbw = [Metric.of("comm_busbw_avg", v * scale, "GB/s", op=op, backend="nccl")
             for op, v in (("all_reduce", 350.0), ("all_gather", 300.0), ("reduce_scatter", 310.0))]
    walls = [Metric.of("resume_wall_time", v / scale, "s", run=run, backend="nccl")
             for run, v in (("A", 60.0), ("B", 31.0), ("C", 33.0))]
    res = (CheckResult("comm", "comm", Level.STANDARD, Status.PASS, "ok", "", tuple(busbw), 1.0, {}),
           CheckResult("resume", "resume", Level.STANDARD, Status.PASS, "ok", "", tuple(walls), 1.0, {}))
    return Report("node", "ref", "2026-01-01T00:00:00+00:00", 1.0, "0.1", {}, res, {}).to_json()


def _text(width: int) -> str:
    c = compare(node_side(_record(1.0), "a.json", "BASELINE"), node_side(_record(0.7), "b.json", "NEW"),
                CompareSpec(), "test", ())
    console = Console(record=True, width=width, color_system=None)
    print_comparison(c, console)
    return console.export_text()


def test_every_row_names_its_labels() -> None:
    wide = _text(200)
    rows = [line.split()[0] for line in wide.splitlines() if line.startswith(("comm_busbw_avg", "resume_wall_time"))]
    assert len(rows) == 6 and len(set(rows)) == 6, rows
    assert len(rows) == 6  # six rows under two metric names ...
    assert sorted(rows) == ["comm_busbw_avg[op=all_gather]", "comm_busbw_avg[op=all_reduce]",
                            "comm_busbw_avg[op=reduce_scatter]", "resume_wall_time[run=A]",
                            "resume_wall_time[run=B]", "resume_wall_time[run=C]"]  # ... each told apart
    assert "labels of every metric row below: backend=nccl" in wide  # what they share, said once
    lines = _text(80).splitlines()  # on an 80-column terminal the labels fold in their column, never vanish
    head = next(i for i, line in enumerate(lines) if line.startswith("metric "))
    width = lines[head].index("unit")
    column = "".join(line[:width].strip() for line in lines[head + 2:] if line[:width].strip())
    assert re.findall(r"\w+\[[^]]*\]", column) == [r.replace(",", ", ") for r in rows], column
