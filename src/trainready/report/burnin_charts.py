"""The burn-in's charts: temperature, SM clock and throughput over time, one line per GPU (the node record's
`burnin` result, details.gpus.*.series)."""

from __future__ import annotations

from typing import Any, Mapping

from trainready.report.kinds import Record
from trainready.report.svg import Series, line_chart

Chart = tuple[str, str]  # (caption, svg)
# (series key, chart title, y label)
PANELS = (("gemm_tflops", "BF16 GEMM per GPU over time", "TFLOP/s"),
          ("copy_gbps", "HBM copy per GPU over time", "GB/s"),
          ("temp_c", "GPU temperature over time", "°C"),
          ("mem_temp_c", "HBM temperature over time", "°C"),
          ("sm_mhz", "SM clock over time", "MHz"),
          ("power_w", "power draw over time", "W"))


def _gpus(rec: Record) -> Mapping[str, Any]:
    for r in rec.doc.get("results", []) or []:
        if isinstance(r, Mapping) and r.get("name") == "burnin":
            return (r.get("details") or {}).get("gpus") or {}
    return {}


def burnin_charts(rec: Record) -> list[Chart]:
    gpus = _gpus(rec)
    out = []
    for key, title, unit in PANELS:
        series = [Series(str(g.get("name", i)), tuple((float(t), float(v)) for t, v in g.get("series", {}).get(key, [])))
                  for i, g in sorted(gpus.items(), key=lambda kv: int(kv[0])) if isinstance(g, Mapping)]
        series = [s for s in series if s.points]
        if not series:
            continue
        svg = line_chart(title, series, "seconds into the burn-in", unit)
        out.append((f"Burn-in: {title} (median per time bucket; the record keeps these series).", svg))
    return out
