"""A node's sweeps over time (`trainready.sweeptrend/1`, written by `cluster sweep`): one line chart per figure,
one series per device, x in days since the node's first sweep; the caption names the trend WARNs."""

from __future__ import annotations

import datetime as dt
from typing import Mapping

from trainready.report.kinds import Record
from trainready.report.svg import Series, line_chart

Chart = tuple[str, str]


def _days(when: str, first: dt.datetime) -> float:
    return (dt.datetime.fromisoformat(when) - first).total_seconds() / 86400.0


def sweep_trend_charts(rec: Record) -> list[Chart]:
    runs = [r for r in rec.doc.get("runs", []) or [] if isinstance(r, Mapping) and r.get("when")]
    if not runs:
        return []
    first = dt.datetime.fromisoformat(runs[0]["when"])
    by: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for r in runs:
        for key, value in (r.get("figures") or {}).items():
            fig, _, dev = str(key).partition("@")
            by.setdefault(fig, {}).setdefault(dev, []).append((_days(r["when"], first), float(value)))
    warned = [f"{r['when'][:16]}: {w}" for r in runs for w in r.get("trend", []) or []]
    out = []
    for fig, devs in sorted(by.items()):
        series = [Series(dev or "node", tuple(pts), markers=True) for dev, pts in sorted(devs.items())]
        mine = [w for w in warned if f": {fig}@" in w]
        caption = (f"{fig} of node {rec.doc.get('node', '?')} per sweep, one line per device. "
                   + (f"Trend WARNs: {'; '.join(mine[-5:])}" if mine else "No trend WARN."))
        out.append((caption, line_chart(f"{fig} over the sweeps", series, "days since the first sweep", fig)))
    return out

