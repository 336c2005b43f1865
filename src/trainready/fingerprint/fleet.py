"""Fingerprints across a fleet (`cluster run`, `cluster sweep`, `cluster rollout`): every GPU of every node, per
group key and per battery entry, against the majority of its identical peers (`judge.py`).

A GPU outside the majority is rejected with a line a person can act on (node, GPU, serial, op, shape, pattern,
chunk, how many identical GPUs agree); a node rejected here failed for its own reason.  A majority wrong against
float64 is a fleet-wide cause: it drains none, and says so; a GPU that differs from such a majority is not judged
(it may be the one that is right).  A key other than the largest group's is configuration drift, never corruption.
A pure function of the records: no Slurm, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from trainready.fingerprint.judge import judge


@dataclass(frozen=True)
class FleetFingerprint:
    rejected: dict[str, list[str]] = field(default_factory=dict)  # node -> its GPUs' deviations, intermittent ones
    drift: dict[str, list[str]] = field(default_factory=dict)  # node -> its GPUs in another key's group
    fleet_wide: list[str] = field(default_factory=list)  # wrong answers a whole group shares (drains none)
    unknown: list[str] = field(default_factory=list)  # entries no strict majority could judge
    groups: dict[str, int] = field(default_factory=dict)  # key id -> GPUs
    mismatches: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> GPU index -> entries off
    found: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)  # node -> (GPU, op, line), as rejected

    @property
    def drains(self) -> list[str]:
        """Nodes rejected for their own GPUs' bits (never for drift or a fleet-wide cause)."""
        return sorted(self.rejected)

    def lines(self) -> list[str]:
        out = [ln for n in sorted(self.rejected) for ln in self.rejected[n]]
        out += [f"fleet-wide: {ln}; drains none" for ln in self.fleet_wide]
        out += [ln for n in sorted(self.drift) for ln in self.drift[n]]
        return out + [f"unknown: {u}" for u in self.unknown]


def gpu_label(node: str, rec: Mapping[str, Any]) -> str:
    """'node17 GPU 3 (serial 1651922012345)' or 'node2 rank 1' (a CPU rank)."""
    if rec.get("device") == "cpu":
        return f"{node} rank {rec['rank']}"
    return f"{node} GPU {rec['index']} (serial {rec.get('serial', 'unavailable')})"


def aggregate(nodes: Mapping[str, list[dict[str, Any]]]) -> FleetFingerprint:
    """Every node's fingerprint records (node -> one record per GPU or rank) judged together."""
    members, owner, index = [], {}, {}
    for node in sorted(nodes):
        for rec in nodes[node]:
            who = gpu_label(node, rec)
            members.append((who, rec))
            owner[who], index[who] = node, str(rec.get("index", rec.get("rank", "?")))
    j = judge(members)
    wrong = {(s.key_id, s.entry) for s in j.shared}
    out = FleetFingerprint(fleet_wide=[s.line() for s in j.shared], unknown=list(j.unknown), groups=dict(j.groups))
    key_of = {who: rec["key_id"] for who, rec in members}
    for d in j.deviations:
        if (key_of[d.who], d.entry) in wrong:
            out.unknown.append(f"{d.who}: {d.entry} differs from a majority that is itself wrong against float64: "
                               "not judged")
            continue
        out.rejected.setdefault(owner[d.who], []).append(d.line())
        out.found.setdefault(owner[d.who], []).append((d.who, d.op, d.line()))
    for i in j.intermittent:
        out.rejected.setdefault(owner[i.who], []).append(i.line())
        out.found.setdefault(owner[i.who], []).append((i.who, "intermittent", i.line()))
    for who, line in zip(j.drifted, j.drift):
        out.drift.setdefault(owner[who], []).append(line)
    for who, n in j.mismatches.items():
        out.mismatches.setdefault(owner[who], {})[index[who]] = n
    return out
