"""The charts of each record kind, as inline SVG strings (report/svg.py draws them).

`CHARTS` maps a record kind to the functions that chart it; each returns a list of
(caption, svg) and an empty list when its record holds nothing to draw.  A new record
kind adds its entry here.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Callable, Iterable, Mapping

from trainready.report.kinds import Record
from trainready.report.svg import PALETTE, Bar, HLine, Series, bar_chart, hbars, line_chart, pairs_chart

Chart = tuple[str, str]  # (caption, svg)
GIB = 2.0**30


def _results(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [r for r in doc.get("results", []) or [] if isinstance(r, Mapping)]


def _f(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def comm_op_details(doc: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    """Per-op sweep details: a comm record's `comm.<op>` results, or a node record's `comm` check."""
    for r in _results(doc):
        det = r.get("details") or {}
        if r.get("name", "").startswith("comm.") and "rows" in det:
            yield det
        elif r.get("name") == "comm":
            yield from (v for k, v in det.items() if k.startswith("comm.") and isinstance(v, Mapping) and "rows" in v)


def comm_charts(rec: Record) -> list[Chart]:
    series, index = [], {}
    for det in comm_op_details(rec.doc):
        key = (str(det.get("op")), str(det.get("dtype")))
        index[key] = len(series)
        pts = tuple((_f(row.get("bytes")), _f(row.get("busbw_gbps"))) for row in det.get("rows", []) or [])
        series.append(Series(f"{key[0]} ({key[1]})", tuple(p for p in pts if p[0] > 0), markers=True))
    floors = []
    for r in _results(rec.doc):
        for m in r.get("metrics", []) or []:
            thr, lab = m.get("threshold"), m.get("labels") or {}
            if m.get("name") == "comm_busbw_avg" and thr:
                i = index.get((str(lab.get("op")), str(lab.get("dtype"))), 0)
                floors.append(HLine(_f(thr.get("bound")), f"floor {lab.get('op')}", PALETTE[i % len(PALETTE)],
                                    _f(lab.get("from_bytes")) or None, _f(lab.get("to_bytes")) or None))
    if not series:
        return []
    ranks = next((d.get("ranks") for d in comm_op_details(rec.doc)), "?")
    backend = next((d.get("backend") for d in comm_op_details(rec.doc)), "")
    svg = line_chart(f"busbw vs message size ({ranks} ranks, {backend})", series, "message size S (bytes, log scale)",
                     "busbw (GB/s)", log_x=True, hlines=floors, xunit="B")
    note = "dashed lines: the spec's busbw floor over the sizes it is judged on" if floors else \
        "no busbw floor in the spec: bandwidth reported, not judged"
    return [(f"Collective bus bandwidth per op (nccl-tests busbw). {note}.", svg)]


def throughput_charts(rec: Record) -> list[Chart]:
    """Per-GPU GEMM and HBM figures of the throughput check, floors from the spec."""
    out = []
    for r in _results(rec.doc):
        if r.get("name") != "throughput":
            continue
        for kind, unit in (("gemm_bf16", "TFLOP/s"), ("hbm_copy", "GB/s")):
            ms = [m for m in r.get("metrics", []) or [] if m.get("name") == kind]
            if not ms:
                continue
            bars, bound = [], None
            for m in ms:
                thr = m.get("threshold")
                bound = _f(thr.get("bound")) if thr else bound
                ok = not thr or _f(m.get("value")) >= _f(thr.get("bound"))
                bars.append(Bar(f"GPU {(m.get('labels') or {}).get('gpu', '?')}", _f(m.get("value")),
                                "pass" if ok else "fail"))
            lines = [HLine(bound, "spec floor")] if bound is not None else []
            out.append((f"{kind} per GPU ({unit}); red ✗ = below the floor.",
                        bar_chart(f"{kind} per GPU", bars, unit, lines)))
    return out


def resume_charts(rec: Record) -> list[Chart]:
    for r in _results(rec.doc):
        det = r.get("details") or {}
        if r.get("name") != "resume" or not isinstance(det.get("loss_series"), Mapping):
            continue
        ls = det["loss_series"]
        k = (det.get("declared") or {}).get("checkpoint_step")
        style = {"A": ("A: uninterrupted", {"width": 7.0, "opacity": 0.35}), "B": ("B: to checkpoint", {}),
                 "C": ("C: resumed", {"dashed": True, "markers": True})}
        series = [Series(style.get(role, (role, {}))[0], tuple((_f(s), _f(v)) for s, v in pts),
                         **style.get(role, (role, {}))[1])  # type: ignore[arg-type]
                  for role, pts in ls.items() if pts]
        marks = [(float(k), f"resume point: step {k}")] if isinstance(k, (int, float)) else []
        svg = line_chart("training loss per step: continuous vs resumed (rank 0)", series, "step", "loss (nats)",
                         hlines=(), vlines=marks)
        return [("Loss of the uninterrupted run A against the resumed run C (dashed, dots); on a passing "
                 "bitwise resume they lie on top of each other.", svg)] if svg else []
    return []


PLAN_PARTS = (("memory.weights", "weights"), ("memory.grads", "gradients"), ("memory.optimizer", "optimizer states"),
              ("memory.optimizer_step", "AdamW step counters"), ("activations.layers", "activations (layers)"),
              ("activations.extra", "activations (embedding/output)"), ("activations.transient", "transient"),
              ("memory.allowance", "allowance (fragmentation, runtime)"))


def plan_charts(rec: Record) -> list[Chart]:
    items = {q.get("key"): q for q in (rec.doc.get("memory") or {}).get("items", []) or [] if isinstance(q, Mapping)}
    segs = [(_f(items[k]["value"]) / GIB, PALETTE[i % len(PALETTE)], f"{label}: {_f(items[k]['value']) / GIB:.2f} GiB")
            for i, (k, label) in enumerate(PLAN_PARTS) if k in items and _f(items[k].get("value")) > 0]
    if not segs:
        return []
    cap = _f((items.get("memory.capacity") or {}).get("value")) / GIB
    rows = [(tip.split(":")[0], [(v, c, tip)]) for v, c, tip in segs] + [("total per GPU", segs)]
    verdict = (rec.doc.get("memory") or {}).get("verdict", "")
    svg = hbars(f"memory per GPU ({rec.doc.get('gpu', '?')}): {verdict}", rows, "GiB",
                (cap, f"GPU memory {cap:.0f} GiB") if math.isfinite(cap) else None)
    return [("The plan's memory breakdown per GPU; the dashed line is the GPU's memory.", svg)]


def compare_charts(rec: Record) -> list[Chart]:
    rows = []
    for m in rec.doc.get("metrics", []) or []:
        if m.get("verdict") in ("unchanged", "info") or not isinstance(m, Mapping):
            continue
        labels = ",".join(f"{k}={v}" for k, v in sorted((m.get("labels") or {}).items()))
        rel = _f(m.get("rel_change"))
        rows.append((m.get("name", "?") + (f"[{labels}]" if labels else ""), _f(m.get("baseline")), _f(m.get("new")),
                     str(m.get("verdict", "")), f"{rel:+.1%}" if math.isfinite(rel) else ""))
    rows.sort(key=lambda r: (r[3] != "regression", r[0]))
    if not rows:
        return []
    return [("Baseline (grey) against new (coloured by verdict), per metric; unchanged and informational "
             "metrics left out.", pairs_chart("compare: before → after", rows[:40]))]


def fleet_charts(rec: Record) -> list[Chart]:
    from trainready.report.fleet_charts import fleet_charts as draw

    return draw(rec)


def burnin_charts(rec: Record) -> list[Chart]:
    from trainready.report.burnin_charts import burnin_charts as draw

    return draw(rec)


def sweep_charts(rec: Record) -> list[Chart]:
    from trainready.report.sweep_charts import sweep_trend_charts

    return sweep_trend_charts(rec)


CHARTS: dict[str, tuple[Callable[[Record], list[Chart]], ...]] = {
    "node": (throughput_charts, comm_charts, resume_charts, burnin_charts),
    "comm": (comm_charts,),
    "resume": (resume_charts,),
    "plan": (plan_charts,),
    "compare": (compare_charts,),
    "fleet": (fleet_charts,),
    "sweeptrend": (sweep_charts,),
}


def charts_for(rec: Record) -> list[Chart]:
    return [c for fn in CHARTS.get(rec.kind, ()) for c in fn(rec) if c[1]]
