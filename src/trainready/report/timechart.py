"""A line chart over wall-clock time (report/svg.py's frame): a time axis a person reads, each sweep's verdict
marked, and events (a drain) as labelled vertical lines.

The axis picks its step from the span: hours (1, 2, 3, 6 or 12) labelled "12-06 03:00" up to four days, else days
(1, 2, 7, 14 or 30) labelled "2026-12-06"; always UTC, as every trainready record keeps time.  Each sweep gets a
mark along the top of the plot in its verdict's colour (pass green, fail red with a ✗, unknown grey) with its
verdict as the tooltip, and a failing sweep's points are drawn as red ✗.
"""

from __future__ import annotations

import datetime as dt
import math
from html import escape
from typing import Sequence

from trainready.report.svg import H, PAD_B, PAD_T, PALETTE, STATUS_COLOR, Axes, Series, _frame, _legend, _svg

HOUR, DAY = 3600.0, 86400.0
HOUR_STEPS = (1, 2, 3, 6, 12)
DAY_STEPS = (1, 2, 7, 14, 30)
VERDICT_COLOR = {"pass": STATUS_COLOR["pass"], "fail": STATUS_COLOR["fail"], "unknown": STATUS_COLOR["skip"]}


def epoch(when: str) -> float:
    return dt.datetime.fromisoformat(when).timestamp()


def time_ticks(t0: float, t1: float, most: int = 8) -> tuple[list[float], str]:
    """Tick times (epoch s) and their strftime format: hours within four days, else days; at most `most`."""
    span = max(t1 - t0, 1.0)
    if span <= 4 * DAY:
        step = next((s * HOUR for s in HOUR_STEPS if span / (s * HOUR) <= most), DAY)
        fmt = "%m-%d %H:%M"
    else:
        step = next((s * DAY for s in DAY_STEPS if span / (s * DAY) <= most), 30 * DAY)
        fmt = "%Y-%m-%d"
    first = math.ceil(t0 / step) * step  # whole hours / days in UTC (the epoch starts at a UTC midnight)
    return [first + i * step for i in range(int((t1 - first) // step) + 1)], fmt


def _x_axis(ax: Axes) -> list[str]:
    ticks, fmt = time_ticks(ax.x0, ax.x1)
    out = []
    for t in ticks:
        x = ax.px(t)
        label = dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime(fmt)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{PAD_T}" y2="{H - PAD_B}" class="grid"/>'
                   f'<text x="{x:.1f}" y="{H - PAD_B + 16}" class="tl" text-anchor="middle">{escape(label)}</text>')
    return out


def _verdicts(ax: Axes, marks: Sequence[tuple[float, str, str]]) -> list[str]:
    out = []
    for t, verdict, tip in marks:
        x, color = ax.px(t), VERDICT_COLOR.get(verdict, STATUS_COLOR["skip"])
        out.append(f'<g class="sweep-mark" data-verdict="{escape(verdict)}"><title>{escape(tip)}</title>'
                   f'<rect x="{x - 5:.1f}" y="{PAD_T + 3}" width="10" height="10" fill="{color}"/>'
                   + (f'<text x="{x:.1f}" y="{PAD_T + 25}" class="bad" text-anchor="middle">✗</text>'
                      if verdict == "fail" else "") + "</g>")
    return out


def time_chart(title: str, series: Sequence[Series], ylabel: str, marks: Sequence[tuple[float, str, str]] = (),
               events: Sequence[tuple[float, str]] = (), failed: Sequence[float] = ()) -> str:
    """`series` x in epoch seconds; `marks` (t, verdict, tooltip) per sweep; `events` (t, label) vertical lines;
    `failed` the times of failing sweeps, whose points are drawn as red ✗."""
    xs = [p[0] for s in series for p in s.points] + [t for t, _, _ in marks] + [t for t, _ in events]
    ys = [p[1] for s in series for p in s.points if math.isfinite(p[1])]
    if not xs or not ys:
        return ""
    pad = max((max(xs) - min(xs)) * 0.04, 1800.0)  # half an hour at least, so a lone sweep is not on the frame
    ax = Axes(min(xs) - pad, max(xs) + pad, min(0.0, min(ys)), max(ys) * 1.15 or 1.0)
    body = _frame(ax, "time (UTC)", ylabel, xticks=False) + _x_axis(ax)
    legend = []
    bad = set(failed)
    for i, s in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        pts = " ".join(f"{ax.px(x):.1f},{ax.py(y):.1f}" for x, y in s.points if math.isfinite(y))
        body.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="{s.width:g}"/>')
        for x, y in s.points:
            if not math.isfinite(y):
                continue
            body.append(f'<text x="{ax.px(x):.1f}" y="{ax.py(y) + 5:.1f}" class="bad" text-anchor="middle">✗</text>'
                        if x in bad else f'<circle cx="{ax.px(x):.1f}" cy="{ax.py(y):.1f}" r="3" fill="{color}"/>')
        legend.append((s.name, color, s.dashed))
    body += _verdicts(ax, marks)
    for t, label in events:
        x = ax.px(t)
        body.append(f'<g class="event"><line x1="{x:.1f}" x2="{x:.1f}" y1="{PAD_T}" y2="{H - PAD_B}" '
                    f'stroke="{STATUS_COLOR["fail"]}" stroke-width="2" stroke-dasharray="4 3"/>'
                    f'<text x="{x - 4:.1f}" y="{PAD_T + 40}" class="tl" text-anchor="end" '
                    f'style="fill:{STATUS_COLOR["fail"]}">{escape(label)}</text></g>')
    legend += [("pass / fail / unknown", "#6e7781", False)] if marks else []
    return _svg(title, body + _legend(legend))
