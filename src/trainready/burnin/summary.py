"""`python -m trainready.burnin.summary RECORD.json`: a node record's burn-in figures as Markdown, for the docs.

Per GPU: temperatures (GPU, HBM), SM clock, power, first against last window, the drop, the slowdown reasons'
seconds; every counter read (before → after) or why not; the NVML sampling cost measured side by side.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def _span(series: list[list[float]]) -> str:
    vals = [v for _, v in series]
    return f"{min(vals):g}-{max(vals):g}" if vals else "not read"


def lines(result: dict[str, Any]) -> list[str]:
    d = result.get("details") or {}
    out = [f"burn-in: {result.get('status')} ({d.get('measured_s')} s of {d.get('duration_s')} s; first window "
           f"{d.get('window_s')} s; partial: {d.get('partial') or 'no'})", "",
           "| device | GEMM first → last (TFLOP/s) | HBM first → last (GB/s) | GPU °C | HBM °C | SM MHz | W | "
           "slowdown reasons (s) |", "|---|---|---|---|---|---|---|---|"]
    for g in (d.get("gpus") or {}).values():
        s, gm, hb = g.get("series", {}), g.get("gemm_tflops", {}), g.get("copy_gbps", {})
        out.append(f"| {g.get('name')} | {gm.get('first', 0):.4g} → {gm.get('last', 0):.4g} | "
                   f"{hb.get('first', 0):.4g} → {hb.get('last', 0):.4g} | {_span(s.get('temp_c', []))} | "
                   f"{_span(s.get('mem_temp_c', []))} | {_span(s.get('sm_mhz', []))} | {_span(s.get('power_w', []))} | "
                   f"{g.get('reasons_s', {})} |")
    out += ["", "| device | counter | before → after or why not |", "|---|---|---|"]
    for r in d.get("counters", []):
        what = r["not_available"] if "not_available" in r else f"{r['before']} → {r['after']}"
        out.append(f"| {r['gpu']} | {r['counter']} | {what} |")
    smp = d.get("sampling") or {}
    cost = smp.get("cost_fraction")
    out += ["", f"NVML sampling: {smp.get('samples')} samples at {smp.get('hz')} Hz (x{smp.get('amplify')} in every "
                f"other {smp.get('block_s')} s block); cost to the load, side by side: "
                + (f"{cost:.3%} over {smp.get('pairs')} block pairs" if isinstance(cost, float) else str(cost))
                + f"; the sampler's own time: {smp.get('self_time_fraction', 0):.4%} of a core",
            "", "findings: " + ("; ".join(d.get("findings", [])) or "none")]
    return out


def main(argv: list[str]) -> int:
    doc = json.loads(open(argv[0], encoding="utf-8").read())
    found = [r for r in doc.get("results", []) if r.get("name") == "burnin"]
    if not found:
        print(f"{argv[0]}: no burn-in result", file=sys.stderr)
        return 2
    print("\n".join(lines(found[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
