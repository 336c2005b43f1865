"""Per node (and GPU) throughput across a fleet, readable at any size.

Up to MAX_BARS figures: one bar per node/GPU, rejected nodes red with ✗, the fleet median, and the robust
outlier bound and slow floor the fleet verdict used (median − k·1.4826·MAD; fraction × median).  Above it
(640 nodes x 8 GPUs = 5120 bars would be 0.1 px each): the distribution of every figure as a histogram with
the same three lines, and one bar per node for the LOWEST nodes by their slowest GPU (what decides a node's
verdict), rejected nodes always among them.
"""

from __future__ import annotations

import math
import statistics

from trainready.report.fleet import FleetNode, bound_of, fleet_nodes
from trainready.report.kinds import Record
from trainready.report.svg import STATUS_COLOR, Bar, HLine, Series, bar_chart, hbars, line_chart

Chart = tuple[str, str]  # (caption, svg)
METRICS = ("gemm_bf16", "hbm_copy", "train_tokens_per_s")  # cluster/tasks/node.py THROUGHPUT, the figures judged
MAX_BARS = 64  # one bar per figure up to here: a 480 px plot gives each bar >= 7 px
LOWEST = 32  # nodes in the "lowest nodes" chart: bar_chart labels every bar up to 32
BINS = 40  # histogram bins over the figures' range


def _bars(nodes: list[FleetNode], name: str) -> tuple[list[Bar], str]:
    bars, unit = [], ""
    for n in nodes:
        for r in (n.report or {}).get("results", []) or []:
            for m in r.get("metrics", []) or []:
                if m.get("name") == name and isinstance(m.get("value"), (int, float)):
                    lab = m.get("labels") or {}
                    where = f"/{lab['gpu']}" if "gpu" in lab else ""
                    bars.append(Bar(n.node + where, float(m["value"]), "pass" if n.accepted else "reject",
                                    "; ".join(n.reasons)))
                    unit = unit or str(m.get("unit", ""))
    return bars, unit


def _lines(rec: Record, name: str, bars: list[Bar]) -> list[HLine]:
    lines = [HLine(statistics.median(b.value for b in bars), "fleet median", "#6e7781")]
    bound, floor = bound_of(rec.doc, name)
    if bound is not None:
        lines.append(HLine(bound, "outlier bound"))
    if floor is not None:
        lines.append(HLine(floor, "slow floor", "#9a6700"))
    return lines


def lowest_nodes(bars: list[Bar], k: int = LOWEST) -> list[Bar]:
    """One bar per node at its slowest figure; every rejected node, then the lowest accepted, up to k, low first."""
    worst: dict[str, Bar] = {}
    for b in bars:
        node = b.label.split("/", 1)[0]
        if node not in worst or b.value < worst[node].value:
            worst[node] = b
    ranked = sorted(worst.values(), key=lambda b: (b.status == "pass", b.value))[:k]
    return sorted(ranked, key=lambda b: b.value)


def histogram(title: str, values: list[float], unit: str, lines: list[HLine]) -> tuple[str, int]:
    """Count of figures per bin (BINS bins), with the verdict's lines as vertical markers; the range spans the
    lines and the 1st..100th percentile, so one far outlier does not squeeze the fleet into a bin or two:
    figures below it are counted in the first bin (returned: how many)."""
    ranked = sorted(values)
    lo = min([ranked[len(ranked) // 100]] + [h.y for h in lines])
    hi = max([ranked[-1]] + [h.y for h in lines])
    width = (hi - lo) / BINS or 1.0
    counts = [0] * BINS
    for v in values:
        counts[max(0, min(BINS - 1, int((v - lo) / width)))] += 1
    pts = tuple((lo + (i + 0.5) * width, float(c)) for i, c in enumerate(counts))
    marks = [(h.y, h.label[:14] if i == 0 else "") for i, h in enumerate(lines)]  # one label: the lines are close
    svg = line_chart(title, [Series("figures per bin", pts, markers=True)], unit, "count",
                     vlines=marks)
    return svg, sum(1 for v in values if v < lo)


def lowest_chart(title: str, low: list[Bar], unit: str, lines: list[HLine]) -> str:
    """One labelled row per node (horizontal bars: every name readable), the cut a figure is slow below marked."""
    cut = min((h.y for h in lines if h.label != "fleet median"), default=None)
    rows = [(b.label, [(b.value, STATUS_COLOR["reject" if b.status != "pass" else "pass"],
                        f"{b.label}: {b.value:.4g} {unit}" + (f" — {b.note}" if b.note else ""))]) for b in low]
    return hbars(title, rows, unit, (cut, f"slow below {cut:.4g}") if cut is not None else None)


def fleet_charts(rec: Record) -> list[Chart]:
    nodes = fleet_nodes(rec)
    out: list[Chart] = []
    for name in METRICS:
        bars, unit = _bars(nodes, name)
        if not bars:
            continue
        lines = _lines(rec, name, bars)
        per = "/GPU" if any("/" in b.label for b in bars) else ""
        if len(bars) <= MAX_BARS:
            out.append((f"{name} per node{per} across the fleet; red ✗ = rejected node (any reason); a node is slow "
                        "only below both the outlier bound and the floor.",
                        bar_chart(f"{name} across the fleet ({unit})", bars, unit, lines)))
            continue
        low = lowest_nodes(bars)
        n_nodes = len({b.label.split("/", 1)[0] for b in bars})
        finite = [b.value for b in bars if math.isfinite(b.value)]
        svg, below = histogram(f"{name} across the fleet: distribution ({unit})", finite, unit, lines)
        out.append((f"{name}: all {len(bars)} figures of {n_nodes} nodes, counted per bin; dotted lines: "
                    + ", ".join(f"{h.label} {h.y:.4g}" for h in lines) + " (a figure is slow only below both the bound "
                    "and the floor)" + (f"; {below} figure(s) below the range are counted in its first bin" if below else ""),
                    svg))
        out.append((f"{name}: the {len(low)} lowest nodes by their slowest figure{per and ' (GPU)'}, every rejected "
                    "node among them; red = rejected (any reason). The full list is the node table below.",
                    lowest_chart(f"{name}: lowest {len(low)} nodes ({unit})", low, unit, lines)))
    return out
