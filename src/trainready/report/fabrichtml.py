"""The fabric tables of a node record's HTML section: NIC x (state, rate, firmware, error counters) and GPU x NVLink
(each link up or down, with its error counters where any is not zero), from the fabric check's facts
(fabric/facts.py), so a port trained to HDR or a GPU with one link down is seen without reading JSON."""

from __future__ import annotations

from html import escape
from typing import Any, Callable, Mapping, Sequence

Table = Callable[[Sequence[str], Sequence[Sequence[str]]], str]


def _facts(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for r in doc.get("results", []) or []:
        if r.get("name") == "fabric" and isinstance((r.get("details") or {}).get("facts"), Mapping):
            return r["details"]["facts"]
    return None


def _counters(c: Mapping[str, Any] | None) -> str:
    return escape(", ".join(f"{k} {v}" for k, v in sorted((c or {}).items()) if v) or "all 0")


def _link_cell(lk: Mapping[str, Any]) -> str:
    errs = _counters(lk.get("counters"))
    state = "up" if lk.get("active") else "<b>down</b>"
    return state + (f"<br><small>{errs}</small>" if errs != "all 0" else "")


def fabric_tables(doc: Mapping[str, Any], table: Table) -> str:
    """'' when the record has no fabric check with facts."""
    facts = _facts(doc)
    if facts is None:
        return ""
    ports = [p for p in facts.get("ports") or [] if isinstance(p, Mapping)]
    out = "<h4>fabric: RDMA ports</h4>" + (table(
        ("NIC", "state", "rate", "link layer", "firmware", "error counters"),
        [[escape(f"{p.get('device')}:{p.get('port')}"),
          escape(f"{p.get('state')} ({p.get('phys_state')})") if p.get("state") == "ACTIVE"
          else f"<b>{escape(str(p.get('state')))} ({escape(str(p.get('phys_state')))})</b>",
          escape(str(p.get("rate"))), escape(str(p.get("link_layer"))), escape(str(p.get("fw_ver"))),
          _counters(p.get("counters"))] for p in ports]) if ports else
        f"<p class='sub'>no RDMA port (sysfs root {escape(str(facts.get('root')))})</p>")
    gpus = [g for g in facts.get("gpus") or [] if isinstance(g, Mapping)]
    width = max((len(g.get("links") or []) for g in gpus), default=0)
    if width:
        rows = [[escape(str(g.get("index")))] + ([_link_cell(lk) for lk in g.get("links") or []] or
                                                  [escape(str(g.get("not_applicable") or "no link"))])
                for g in gpus]
        out += "<h4>fabric: NVLink (GPU x link)</h4>" + table(("GPU", *(str(i) for i in range(width))), rows)
    elif gpus:
        out += f"<p class='sub'>NVLink not applicable ({escape(str(gpus[0].get('not_applicable')))})</p>"
    return out
