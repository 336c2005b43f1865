"""A node's sweeps over time (`trainready.sweeptrend/1`, written by `cluster sweep`): one chart per figure, one
series per device, over wall-clock time (report/timechart.py: hours or dates, UTC); each sweep's verdict marked
along the top, a failing sweep's points as red ✗, the sweep's drain as a red line; the caption says the node's
state first (report/node_state.py), then the figure's trend WARNs."""

from __future__ import annotations

from typing import Mapping

from trainready.report.kinds import Record
from trainready.report.node_state import node_state, strikes_of
from trainready.report.svg import Series
from trainready.report.timechart import epoch, time_chart

Chart = tuple[str, str]


def _marks(runs: list[Mapping]) -> list[tuple[float, str, str]]:  # type: ignore[type-arg]
    out = []
    for r in runs:
        v = str(r.get("verdict", "unknown"))
        tip = f"{r['when'][:16].replace('T', ' ')} UTC: {v}" + (
            f" (strike {strikes_of(r)}): {r.get('why', '')}" if v == "fail" else "")
        out.append((epoch(r["when"]), v, tip))
    return out


def sweep_trend_charts(rec: Record) -> list[Chart]:
    runs = [r for r in rec.doc.get("runs", []) or [] if isinstance(r, Mapping) and r.get("when")]
    if not runs:
        return []
    state = node_state(rec.doc, rec.path)
    by: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for r in runs:
        for key, value in (r.get("figures") or {}).items():
            fig, _, dev = str(key).partition("@")
            by.setdefault(fig, {}).setdefault(dev, []).append((epoch(r["when"]), float(value)))
    warned = [f"{r['when'][:16]}: {w}" for r in runs for w in r.get("trend", []) or []]
    events = [(epoch(state.drained["when"]), "drained")] if state.drained else []
    failed = [epoch(r["when"]) for r in runs if r.get("verdict") == "fail"]
    out = []
    for fig, devs in sorted(by.items()):
        series = [Series(dev or "node", tuple(pts), markers=True) for dev, pts in sorted(devs.items())]
        mine = [w for w in warned if f": {fig}@" in w]
        caption = (f"{state.headline}. {fig} of node {rec.doc.get('node', '?')} per sweep, one line per device; "
                   "squares along the top: each sweep's verdict (green pass, red fail, grey unknown). "
                   + (f"Trend WARNs: {'; '.join(mine[-5:])}" if mine else "No trend WARN of this figure."))
        out.append((caption, time_chart(f"{fig} over the sweeps", series, fig, _marks(runs), events, failed)))
    return out
