"""Fingerprints across a fleet (`cluster run`, `cluster sweep`, `cluster rollout`): every GPU of every node, per
group key and per battery entry, against the majority of its identical peers (`judge.py`).

A GPU outside the majority is rejected with a line a person can act on (node, GPU, serial, op, shape, pattern,
chunk, how many identical GPUs agree); a node rejected here failed for its own reason.  A majority wrong against
float64 that devices of two or more nodes share is a fleet-wide cause (software, library, image): it drains
none, and says so; one node alone with such an answer (its own key) is rejected for it, a software cause.  A GPU
that differs from a wrong majority is not judged (it may be the one that is right).  A key other than the
largest group's, or a VBIOS, driver or ECC mode other than its group's, is configuration drift, never
corruption; a GPU alone in its group is unknown, said on its node.  A pure function of the records: no Slurm,
no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from trainready.fingerprint.judge import Judgment, judge


@dataclass(frozen=True)
class FleetFingerprint:
    rejected: dict[str, list[str]] = field(default_factory=dict)  # node -> its GPUs' deviations, intermittent ones
    answer: dict[str, list[str]] = field(default_factory=dict)  # node -> wrong answers its devices alone share
    drift: dict[str, list[str]] = field(default_factory=dict)  # node -> its GPUs in another key's group
    alone: dict[str, list[str]] = field(default_factory=dict)  # node -> its GPUs in a group too small to judge
    fleet_wide: list[str] = field(default_factory=list)  # wrong answers devices of several nodes share
    unknown: list[str] = field(default_factory=list)  # entries no strict majority could judge
    groups: dict[str, int] = field(default_factory=dict)  # key id -> GPUs
    mismatches: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> GPU index -> entries off
    found: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)  # node -> (GPU, op, line), as rejected

    @property
    def drains(self) -> list[str]:
        """Nodes rejected for their own GPUs' bits or their own wrong answer (never drift or a fleet-wide cause)."""
        return sorted(set(self.rejected) | set(self.answer))

    def lines(self) -> list[str]:
        out = [ln for n in sorted(self.rejected) for ln in self.rejected[n]]
        out += [ln for n in sorted(self.answer) for ln in self.answer[n]]
        out += [f"fleet-wide: {ln}; drains none" for ln in self.fleet_wide]
        out += [ln for n in sorted(self.drift) for ln in self.drift[n]]
        out += [ln for n in sorted(self.alone) for ln in self.alone[n]]
        return out + [f"unknown: {u}" for u in self.unknown]


def gpu_label(node: str, rec: Mapping[str, Any]) -> str:
    """'node17 GPU 3 (serial 1651922012345)' or 'node2 rank 1' (a CPU rank)."""
    if rec.get("device") == "cpu":
        return f"{node} rank {rec['rank']}"
    return f"{node} GPU {rec['index']} (serial {rec.get('serial', 'unavailable')})"


def _answers(j: Judgment, owner: dict[str, str], out: FleetFingerprint) -> None:
    """Shared wrong answers: one node's own when its devices alone give it in a fleet of several nodes, else the
    fleet's."""
    fleet = len(set(owner.values()))
    for s in j.shared:
        nodes = sorted({owner[w] for w in s.members})
        if len(nodes) == 1 and fleet > 1:
            out.answer.setdefault(nodes[0], []).append(f"{nodes[0]}: {s.line()}: only this node's devices give it")
        else:
            out.fleet_wide.append(s.line() + f" (on {len(nodes):,} node(s))")


def aggregate(nodes: Mapping[str, list[dict[str, Any]]]) -> FleetFingerprint:
    """Every node's fingerprint records (node -> one record per GPU or rank) judged together."""
    members, owner, index = [], {}, {}
    for node in sorted(nodes):
        for rec in nodes[node]:
            who = gpu_label(node, rec)
            members.append((who, rec))
            owner[who], index[who] = node, str(rec.get("index", rec.get("rank", "?")))
    j = judge(members)
    out = FleetFingerprint(unknown=list(j.unknown), groups=dict(j.groups))
    _answers(j, owner, out)
    wrong = {(s.key_id, s.entry) for s in j.shared}  # (judged group, entry) whose majority is wrong
    for d in j.deviations:
        if (j.judged_in[d.who], d.entry) in wrong:
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
    for whos, line in j.small:
        for node in sorted({owner[w] for w in whos}):
            out.alone.setdefault(node, []).append(f"unknown: {line}")
    for who, n in j.mismatches.items():
        out.mismatches.setdefault(owner[who], {})[index[who]] = n
    return out
