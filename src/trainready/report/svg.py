"""Inline SVG charts drawn from Python: no JavaScript, no fonts or files fetched, no xmlns URL.

Three shapes cover the report: `line_chart` (log-x or linear; series, horizontal floor segments,
vertical markers), `bar_chart` (one bar per item, coloured by status, with horizontal bound
lines), and `hbars` (labelled horizontal bars: a stacked breakdown or before/after pairs).
Every label is escaped; sizes are in SVG user units (px at 100% zoom).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape
from typing import Sequence

PALETTE = ("#0969da", "#bf3989", "#1a7f37", "#9a6700", "#8250df", "#cf222e", "#1b7c83", "#6e7781")
STATUS_COLOR = {"pass": "#1a7f37", "accept": "#1a7f37", "warn": "#9a6700", "skip": "#6e7781", "fail": "#cf222e",
                "reject": "#cf222e", "error": "#8250df", "regression": "#cf222e", "missing": "#cf222e",
                "improvement": "#1a7f37", "noise": "#6e7781", "unchanged": "#6e7781", "added": "#0969da"}
W, H = 720, 300
PAD_L, PAD_R, PAD_T, PAD_B = 70, 170, 34, 46


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple[tuple[float, float], ...]
    dashed: bool = False
    markers: bool = False
    width: float = 2.0  # stroke width; a wide pale line shows a series another one lies on top of
    opacity: float = 1.0


@dataclass(frozen=True)
class HLine:
    """A horizontal bound from x0 to x1 (None = the whole axis)."""

    y: float
    label: str
    color: str = "#cf222e"
    x0: float | None = None
    x1: float | None = None


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    status: str = "pass"
    note: str = ""


@dataclass(frozen=True)
class Axes:
    x0: float
    x1: float
    y0: float
    y1: float
    log_x: bool = False
    extra: list[str] = field(default_factory=list)

    def px(self, x: float) -> float:
        if self.log_x:
            x, a, b = math.log10(max(x, 1e-300)), math.log10(self.x0), math.log10(self.x1)
        else:
            a, b = self.x0, self.x1
        return PAD_L + (x - a) / ((b - a) or 1.0) * (W - PAD_L - PAD_R)

    def py(self, y: float) -> float:
        return H - PAD_B - (y - self.y0) / ((self.y1 - self.y0) or 1.0) * (H - PAD_T - PAD_B)


def human(x: float, unit: str = "") -> str:
    """1024 → 1K (powers of 1024 for bytes), else 3 significant digits."""
    if unit == "B":
        for k, suf in ((2**40, "T"), (2**30, "G"), (2**20, "M"), (2**10, "K")):
            if x >= k:
                return f"{x / k:g}{suf}"
        return f"{x:g}"
    return f"{x:.3g}"


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 2) if start + i * step <= hi + step * 1e-9]


def _svg(title: str, body: list[str]) -> str:
    return (f'<svg class="chart" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
            f'aria-label="{escape(title)}"><title>{escape(title)}</title>'
            f'<text x="{PAD_L}" y="20" class="ct">{escape(title)}</text>' + "".join(body) + "</svg>")


def _frame(ax: Axes, xlabel: str, ylabel: str, xunit: str = "", xticks: bool = True) -> list[str]:
    out = [f'<rect x="{PAD_L}" y="{PAD_T}" width="{W - PAD_L - PAD_R}" height="{H - PAD_T - PAD_B}" class="plot"/>']
    for t in nice_ticks(ax.y0, ax.y1):
        y = ax.py(t)
        out.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                   f'<text x="{PAD_L - 6}" y="{y + 4:.1f}" class="tl" text-anchor="end">{human(t)}</text>')
    if not xticks:
        xt: list[float] = []
    elif ax.log_x:
        lo, hi = math.floor(math.log2(ax.x0)), math.ceil(math.log2(ax.x1))
        step = max(1, (hi - lo) // 8)
        xt = [2.0**e for e in range(lo, hi + 1, step) if ax.x0 <= 2.0**e <= ax.x1]
    else:
        xt = nice_ticks(ax.x0, ax.x1, 8)
    for t in xt:
        x = ax.px(t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{PAD_T}" y2="{H - PAD_B}" class="grid"/>'
                   f'<text x="{x:.1f}" y="{H - PAD_B + 16}" class="tl" text-anchor="middle">{human(t, xunit)}</text>')
    out.append(f'<text x="{(PAD_L + W - PAD_R) / 2}" y="{H - 8}" class="al" text-anchor="middle">{escape(xlabel)}</text>'
               f'<text x="14" y="{(PAD_T + H - PAD_B) / 2}" class="al" text-anchor="middle" '
               f'transform="rotate(-90 14 {(PAD_T + H - PAD_B) / 2})">{escape(ylabel)}</text>')
    return out


def _legend(items: Sequence[tuple[str, str, bool]]) -> list[str]:
    out = []
    for i, (name, color, dashed) in enumerate(items):
        y = PAD_T + 8 + i * 17
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        out.append(f'<line x1="{W - PAD_R + 12}" x2="{W - PAD_R + 34}" y1="{y}" y2="{y}" stroke="{color}" '
                   f'stroke-width="2.5"{dash}/><text x="{W - PAD_R + 40}" y="{y + 4}" class="tl">{escape(name)}</text>')
    return out


# A label's box in the 11 px sans-serif of class "tl" (html.py): at most ~6.5 px per character, 11 px tall.
CHAR_W, TEXT_H = 6.5, 11.0
Box = tuple[float, float, float, float]  # x0, x1, top, baseline


def label_box(x: float, baseline: float, text: str) -> Box:
    return x, x + CHAR_W * len(text), baseline - TEXT_H, baseline + 2


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]


def label_y(x: float, line_y: float, text: str, placed: list[Box]) -> float:
    """The baseline for a bound's label at `x`: just above its line, else just below it, else stepped further
    up, so that no two labels overlap (floors of several ops often lie a few pixels apart); the box taken
    is added to `placed`."""
    tries = [line_y - 4, line_y + TEXT_H + 2] + [line_y - 4 - k * (TEXT_H + 2) for k in range(1, 12)]
    fits = [y for y in tries if PAD_T + TEXT_H <= y <= H - PAD_B]
    y = next((y for y in fits if not any(_overlaps(label_box(x, y, text), p) for p in placed)),
             fits[0] if fits else line_y - 4)
    placed.append(label_box(x, y, text))
    return y


def line_chart(title: str, series: Sequence[Series], xlabel: str, ylabel: str, log_x: bool = False,
               hlines: Sequence[HLine] = (), vlines: Sequence[tuple[float, str]] = (), xunit: str = "") -> str:
    xs = [p[0] for s in series for p in s.points if not log_x or p[0] > 0]
    ys = [p[1] for s in series for p in s.points if math.isfinite(p[1])] + [h.y for h in hlines]
    if not xs or not ys:
        return ""
    ax = Axes(min(xs), max(xs) if max(xs) > min(xs) else min(xs) * 2 + 1, min(0.0, min(ys)), max(ys) * 1.08 or 1.0, log_x)
    body = _frame(ax, xlabel, ylabel, xunit)
    legend = []
    for i, s in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        pts = " ".join(f"{ax.px(x):.1f},{ax.py(y):.1f}" for x, y in s.points if math.isfinite(y) and (x > 0 or not log_x))
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        body.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="{s.width:g}" '
                    f'stroke-opacity="{s.opacity:g}"{dash}/>')
        if s.markers:
            body += [f'<circle cx="{ax.px(x):.1f}" cy="{ax.py(y):.1f}" r="2.6" fill="{color}"/>'
                     for x, y in s.points if math.isfinite(y) and (x > 0 or not log_x)]
        legend.append((s.name, color, s.dashed))
    placed: list[Box] = []
    for h in hlines:
        x0, x1 = ax.px(h.x0 if h.x0 is not None else ax.x0), ax.px(h.x1 if h.x1 is not None else ax.x1)
        y = label_y(x0 + 2, ax.py(h.y), h.label, placed)
        body.append(f'<line x1="{x0:.1f}" x2="{x1:.1f}" y1="{ax.py(h.y):.1f}" y2="{ax.py(h.y):.1f}" stroke="{h.color}" '
                    f'stroke-width="2" stroke-dasharray="3 3"/><text x="{x0 + 2:.1f}" y="{y:.1f}" '
                    f'class="tl" fill="{h.color}">{escape(h.label)}</text>')
    for x, label in vlines:
        body.append(f'<line x1="{ax.px(x):.1f}" x2="{ax.px(x):.1f}" y1="{PAD_T}" y2="{H - PAD_B}" stroke="#24292f" '
                    f'stroke-width="1.5" stroke-dasharray="2 3"/><text x="{ax.px(x) + 4:.1f}" y="{PAD_T + 14}" '
                    f'class="tl">{escape(label)}</text>')
    return _svg(title, body + _legend(legend))


def bar_chart(title: str, bars: Sequence[Bar], ylabel: str, hlines: Sequence[HLine] = ()) -> str:
    """One bar per item (GPU, node), coloured by status; rejected ones marked ✗ with their note."""
    if not bars:
        return ""
    top = max([b.value for b in bars if math.isfinite(b.value)] + [h.y for h in hlines] + [1e-12]) * 1.12
    ax = Axes(0, len(bars), 0.0, top)
    body = _frame(ax, "", ylabel, xticks=False)  # the bars carry their own labels
    slot = (W - PAD_L - PAD_R) / len(bars)
    for i, b in enumerate(bars):
        v = b.value if math.isfinite(b.value) else 0.0
        x, y = PAD_L + i * slot + slot * 0.15, ax.py(v)
        color = STATUS_COLOR.get(b.status, "#0969da")
        tip = escape(f"{b.label}: {b.value:.4g}" + (f" — {b.note}" if b.note else ""))
        body.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{slot * 0.7:.1f}" height="{H - PAD_B - y:.1f}" '
                    f'fill="{color}"><title>{tip}</title></rect>')
        if len(bars) <= 32:
            body.append(f'<text x="{x + slot * 0.35:.1f}" y="{H - PAD_B + 14}" class="tl" '
                        f'text-anchor="middle">{escape(b.label[:10])}</text>')
        if b.status in ("fail", "reject", "error"):
            body.append(f'<text x="{x + slot * 0.35:.1f}" y="{y - 4:.1f}" class="bad" text-anchor="middle">✗</text>')
    for h in hlines:
        body.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{ax.py(h.y):.1f}" y2="{ax.py(h.y):.1f}" stroke="{h.color}" '
                    f'stroke-width="2" stroke-dasharray="5 3"/>')
    legend = [(h.label, h.color, True) for h in hlines]
    return _svg(title, body + _legend(legend))


def hbars(title: str, rows: Sequence[tuple[str, Sequence[tuple[float, str, str]]]], unit: str,
          marker: tuple[float, str] | None = None, width: float = 0.0) -> str:
    """Rows of horizontal bars; each row's segments (value, colour, tip) are stacked left to right.
    `marker` draws a vertical line (e.g. GPU capacity)."""
    if not rows:
        return ""
    row_h, left, right = 26, 230, 110
    h = PAD_T + row_h * len(rows) + 30
    top = max([sum(max(v, 0.0) for v, _, _ in segs) for _, segs in rows] + [marker[0] if marker else 0.0, 1e-12])
    scale = (width or W) - left - right
    body = []
    for i, (label, segs) in enumerate(rows):
        y, x = PAD_T + i * row_h, float(left)
        body.append(f'<text x="{left - 8}" y="{y + 16}" class="tl" text-anchor="end">{escape(label[:38])}</text>')
        for v, color, tip in segs:
            w = max(v, 0.0) / top * scale
            body.append(f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{row_h - 8}" fill="{color}">'
                        f'<title>{escape(tip)}</title></rect>')
            x += w
        total = sum(v for v, _, _ in segs)
        body.append(f'<text x="{x + 6:.1f}" y="{y + 16}" class="tl">{escape(human(total))} {escape(unit)}</text>')
    if marker:
        mx = left + marker[0] / top * scale
        body.append(f'<line x1="{mx:.1f}" x2="{mx:.1f}" y1="{PAD_T - 4}" y2="{h - 26}" stroke="#cf222e" '
                    f'stroke-width="2" stroke-dasharray="5 3"/><text x="{mx + 4:.1f}" y="{h - 12}" class="tl" '
                    f'fill="#cf222e">{escape(marker[1])}</text>')
    w = width or W
    return (f'<svg class="chart" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{escape(title)}">'
            f'<title>{escape(title)}</title><text x="10" y="20" class="ct">{escape(title)}</text>' + "".join(body) + "</svg>")


def pairs_chart(title: str, rows: Sequence[tuple[str, float, float, str, str]]) -> str:
    """Before/after per metric: rows of (label, before, after, verdict, change text); each row's two
    bars share a scale (the larger of the two), so a change reads as a length difference."""
    if not rows:
        return ""
    row_h, left, bar_w = 40, 260, 300
    h = PAD_T + row_h * len(rows) + 10
    body = []
    for i, (label, before, after, verdict, change) in enumerate(rows):
        y = PAD_T + i * row_h
        top = max(abs(before), abs(after), 1e-300)
        color = STATUS_COLOR.get(verdict, "#0969da")
        body.append(f'<text x="{left - 8}" y="{y + 17}" class="tl" text-anchor="end">{escape(label[:40])}</text>')
        for j, (v, fill, tag) in enumerate(((before, "#8c959f", "before"), (after, color, "after"))):
            w = abs(v) / top * bar_w if math.isfinite(v) else 0.0
            body.append(f'<rect x="{left}" y="{y + 3 + j * 15}" width="{w:.1f}" height="13" fill="{fill}">'
                        f'<title>{escape(f"{tag}: {v:.4g}")}</title></rect><text x="{left + w + 4:.1f}" '
                        f'y="{y + 14 + j * 15}" class="tl">{escape(human(v))}</text>')
        body.append(f'<text x="{left + bar_w + 70}" y="{y + 17}" class="tl" fill="{color}">'
                    f'{escape(verdict)} {escape(change)}</text>')
    return (f'<svg class="chart" viewBox="0 0 {W} {h}" width="{W}" height="{h}" role="img" aria-label="{escape(title)}">'
            f'<title>{escape(title)}</title><text x="10" y="20" class="ct">{escape(title)}</text>' + "".join(body) + "</svg>")
