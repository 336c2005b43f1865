"""The HTML report's busbw chart: the floor labels of ops whose floors lie a few pixels apart do not overlap."""

from __future__ import annotations

import re

from trainready.report.charts import comm_charts
from trainready.report.kinds import record_of

CHAR_W, TEXT_H = 6.5, 11.0  # 11 px sans-serif (class "tl"): at most ~6.5 px a character


def _comm_record(floors: dict[str, float]) -> dict:  # type: ignore[type-arg]
    results = []
    for op, bound in floors.items():
        rows = [{"bytes": b, "busbw_gbps": bound * 1.3 * b / 2**26} for b in (2**20, 2**23, 2**26)]
        results.append({"name": f"comm.{op}", "status": "pass", "metrics": [
            {"name": "comm_busbw_avg", "value": bound * 1.2, "unit": "GB/s",
             "labels": {"op": op, "dtype": "float", "from_bytes": str(2**23), "to_bytes": str(2**26)},
             "threshold": {"op": ">=", "bound": bound, "unit": "GB/s", "source": "spec"}}],
            "details": {"op": op, "dtype": "float", "ranks": 8, "backend": "nccl", "rows": rows}})
    return {"schema": "trainready.report/1", "command": "comm", "host": "ref", "status": "pass", "results": results}


def test_floor_labels_do_not_overlap() -> None:
    floors = {"all_reduce": 360.0, "all_gather": 355.0, "reduce_scatter": 352.0, "alltoall": 340.0}
    (_, svg), = comm_charts(record_of(_comm_record(floors), "comm.json"))
    lines = [float(y) for y in re.findall(r'<line x1="[\d.]+" x2="[\d.]+" y1="([\d.]+)" y2="[\d.]+" stroke="#[0-9a-f]+" '
                                         r'stroke-width="2" stroke-dasharray="3 3"', svg)]
    assert len(lines) == 4 and max(lines) - min(lines) < 3 * TEXT_H  # the floors lie within a few px ...
    labels = [(float(x), float(y), t) for x, y, t in re.findall(r'<text x="([\d.]+)" y="([\d.]+)" class="tl" '
                                                               r'fill="#[0-9a-f]+">(floor [^<]+)</text>', svg)]
    assert sorted(t for _, _, t in labels) == sorted(f"floor {op}" for op in floors)
    boxes = [(x, x + CHAR_W * len(t), y - TEXT_H, y + 2) for x, y, t in labels]
    clashes = [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:]
               if a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]]
    assert clashes == []  # ... and their labels do not overlap
