"""Reading figures back from trainready records (spec init): which metrics count, labels as numbers."""

from __future__ import annotations

import math
from typing import Any, Mapping


def metrics(report: Mapping[str, Any] | None, name: str, notes: list[str] | None = None,
            run: str = "") -> list[dict[str, Any]]:
    """Positive finite figures named `name`, from checks that did not fail or error: a floor taken from
    a broken reference would hold the fleet to a broken figure.  What is left out is said in `notes`."""
    if not report:
        return []
    out = []
    for r in report.get("results", []):
        found = [m for m in r.get("metrics", []) if m.get("name") == name]
        if r.get("status") in ("fail", "error"):
            if found and notes is not None:
                notes.append(f"{run}check '{r.get('name')}' {r.get('status')}ed ({str(r.get('message', ''))[:120]}): "
                             f"no {name} floor from it")
            continue
        for m in found:
            v = m.get("value")
            if isinstance(v, (int, float)) and math.isfinite(v) and v > 0:
                out.append(m)
            elif notes is not None:
                lab = dict(m.get("labels", {}))
                why = ("busbw is 0 by definition at 1 rank" if v == 0 and str(lab.get("ranks")) == "1" else
                       "no message size in the averaging window" if not isinstance(v, (int, float)) or not math.isfinite(v)
                       else "not a positive figure")
                notes.append(f"{run}{name} {lab.get('op', '')}@{lab.get('ranks', '?')} = {v}: {why}; no floor")
    return out


def sig(x: float, digits: int = 4) -> float:
    """Round to significant figures (a 0.004 GB/s CPU figure must not become a 0.0 floor)."""
    return float(f"{x:.{digits}g}")


def int_label(v: Any) -> int | None:
    """A metric label read back as a positive integer (records store labels as strings), else None."""
    try:
        n = int(str(v))
    except ValueError:
        return None
    return n if n > 0 else None


def run_label(i: int, reports: list[Mapping[str, Any]]) -> str:
    return f"run {i + 1}: " if len(reports) > 1 else ""
