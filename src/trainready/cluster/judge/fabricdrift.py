"""The fleet's fabric drift: each node's compute NICs against the reference node's, as the host-settings drift
does for sysctls (hostsettings/drift.py).

From each node record's manifest `fabric` section (fabric/facts.py: the RDMA ports as sysfs shows them), four
keys: `nics` (how many compute ports), `fw_ver` (the firmware versions they run), `rate` (their rates, Gb/s) and
`board_id` (the boards' PSIDs). The compute ports are the spec's `[fabric] nics` where it names them, else every
RDMA port. The reference is `--reference NODE`, else the fleet's most common value of each key. A node that
differs is rejected, cause `fabric KEY` (drain class `fab`): `fabric: nics 7 (fleet majority) ≠ 8` — a NIC
missing or not enumerated, a firmware one update behind the others, a port trained to HDR on an NDR fleet. A
record without the section (written before it existed) is not compared. Pure: records in, reasons out.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from trainready.hostsettings.drift import differences, reference
from trainready.manifest.drift import describe

KEYS = ("nics", "fw_ver", "rate", "board_id")


def _joined(values: Sequence[Any]) -> str:
    return " | ".join(sorted({str(v) for v in values if v not in (None, "")})) or "(none)"


def summary(record: Mapping[str, Any] | None, compute: Sequence[str] = ()) -> dict[str, str]:
    """The four keys of one node record ({} where its manifest has no fabric section)."""
    fab = ((record or {}).get("manifest") or {}).get("fabric")
    if not isinstance(fab, Mapping) or not isinstance(fab.get("ports"), list):
        return {}
    ports = [p for p in fab["ports"] if isinstance(p, Mapping) and (not compute or p.get("device") in compute)]
    rates = [f"{p['rate_gbps']:g}" if isinstance(p.get("rate_gbps"), (int, float)) else p.get("rate") for p in ports]
    return {"nics": str(len(ports)), "fw_ver": _joined([p.get("fw_ver") for p in ports]), "rate": _joined(rates),
            "board_id": _joined([p.get("board_id") for p in ports])}


def judge(inputs: Sequence[Any], ref_node: str | None, compute: Sequence[str] = ()) -> dict[str, list[tuple[str, str]]]:
    """node -> [(cause, reason)] for the nodes (verdict.NodeInput) whose fabric differs from the reference's."""
    have = {ni.node: s for ni in inputs if ni.record is not None and (s := summary(ni.record, compute))}
    if len(have) < 2 and not (ref_node and ref_node in have):
        return {}
    ref_name, ref = reference(have, ref_node if ref_node in have else None)
    out: dict[str, list[tuple[str, str]]] = {}
    for node, mine in have.items():
        rows = differences(ref, mine) if ref and node != ref_name else []
        if rows:
            out[node] = [(f"fabric {rows[0][0]}", f"fabric: {describe(rows, ref_name)}")]
    return out
