"""The continuation half of `--load-from`: the loader's run K→N against the saver's, as table rows."""

from __future__ import annotations

import math
from typing import Any

from trainready.resume.compat_env import row
from trainready.resume.compare import Tolerance


def _group(rows: list[dict[str, Any]], label: str) -> tuple[dict[str, Any], float]:
    worst = max((r["max_abs"] for r in rows), default=0.0)
    bad = [r["name"].split(":", 1)[1] for r in rows if not r["ok"]]
    note = "" if not bad else f"{len(bad)} of {len(rows)} differ, first {bad[0]}"
    return row(f"{label} after the continuation ({len(rows)} tensors)", "saver's", f"max |Δ| {worst:.3g}", not bad, note), worst


def continuation_rows(ranks: list[dict[str, Any]], man: dict[str, Any], tol: tuple[float, float]
                      ) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Rows for every rank (restored state, per-step losses, parameters, optimizer state, LR/data/RNG)
    and the worst |Δ| per component."""
    t = Tolerance(*tol)
    rows: list[dict[str, Any]] = []
    worst: dict[str, float] = {"loss": 0.0, "parameters": 0.0, "optimizer": 0.0}
    for res in ranks:
        r = res["rank"]
        tag = f" (rank {r})" if len(ranks) > 1 else ""
        if "load_error" in res:
            rows.append(row(f"load{tag}", "checkpoint", res["load_error"], False, "the load itself failed"))
            continue
        for name, c in res["restored"].items():
            rows.append(row(f"restored {name}{tag}", "saved", "equal" if c["ok"] else "differs", c["ok"], "" if c["ok"] else c.get("note", "")))
        ref = man["reference_losses"][r]
        first, big = None, 0.0
        for s in sorted(ref, key=int):
            a, b = float(res["losses"].get(int(s), res["losses"].get(s, math.nan))), float(ref[s])
            d = abs(a - b)
            big = max(big, d) if not math.isnan(d) else math.inf
            if first is None and not t.floats_match(a, b):
                first = s
        worst["loss"] = max(worst["loss"], big)
        rows.append(row(f"loss, steps {min(ref, key=int)}-{max(ref, key=int)}{tag}", "saver's", f"max |Δ| {big:.3g}",
                        first is None, "" if first is None else f"first differs at step {first}"))
        for key, label in (("params", "parameters"), ("optim", "optimizer")):
            rw, w = _group(res["final"][key], label)
            worst[label] = max(worst[label], w)
            rows.append({**rw, "component": rw["component"] + tag})
        for c in res["final"]["scalars"]:
            rows.append(row(f"{c['name']} after the continuation{tag}", "saver's", "equal" if c["ok"] else "differs",
                            c["ok"], c.get("note", "") if not c["ok"] else ""))
    return rows, worst
