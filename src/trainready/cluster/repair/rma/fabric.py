"""The fabric in a drained node's RMA folder: each RDMA port (state, rate, firmware, board, its IBA error counters)
and each GPU's NVLinks (active of those NVML answered for, the links down, every error counter not zero), from the
node record's fabric check (its facts, fabric/facts.py) or, where the check did not run, its manifest's fabric
section.  What a vendor asks for with a NIC or an HGX board sent back: which port, which link, which counter."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

Table = Callable[[Sequence[str], Sequence[Sequence[Any]]], list[str]]


def facts_of(record: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The fabric facts a node record holds: its fabric check's, else its manifest's; None when neither."""
    for r in ((record or {}).get("report") or {}).get("results") or []:
        if r.get("name") == "fabric" and isinstance((r.get("details") or {}).get("facts"), Mapping):
            return r["details"]["facts"]
    fab = ((record or {}).get("manifest") or {}).get("fabric")
    return fab if isinstance(fab, Mapping) and "ports" in fab else None


def _nonzero(counters: Mapping[str, Any] | None) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted((counters or {}).items()) if v) or "all 0"


def fabric_md(record: Mapping[str, Any] | None, table: Table) -> list[str]:
    """The INDEX.md section: the ports' table, the GPUs' NVLink table, or why there is neither."""
    facts = facts_of(record)
    out = ["", "## Fabric", ""]
    if facts is None:
        return out + ["Not recorded (the node's record has no fabric facts)."]
    ports = [p for p in facts.get("ports") or [] if isinstance(p, Mapping)]
    out += table(("NIC", "state", "rate", "link layer", "firmware", "board", "error counters"),
                 [(f"{p.get('device')}:{p.get('port')}", f"{p.get('state')} ({p.get('phys_state')})", p.get("rate"),
                   p.get("link_layer"), p.get("fw_ver"), p.get("board_id"), _nonzero(p.get("counters")))
                  for p in ports]) if ports else [f"No RDMA port (sysfs root {facts.get('root')})."]
    rows = []
    for g in facts.get("gpus") or []:
        links = [lk for lk in g.get("links") or [] if isinstance(lk, Mapping)]
        if g.get("not_applicable") or not links:
            rows.append((g.get("index"), "not applicable", g.get("not_applicable") or "no link answered", ""))
            continue
        down = [str(lk.get("link")) for lk in links if not lk.get("active")]
        errs = "; ".join(f"link {lk.get('link')}: {_nonzero(lk.get('counters'))}" for lk in links
                         if any((lk.get("counters") or {}).values()))
        rows.append((g.get("index"), f"{len(links) - len(down)} of {len(links)} active",
                     ", ".join(down) or "none", errs or "all 0"))
    if rows:
        out += ["", *table(("GPU", "NVLinks", "links down", "error counters"), rows)]
    return out
