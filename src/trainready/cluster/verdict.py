"""The fleet verdict: every node accepted or rejected, with reasons, from its node record, Slurm's word on
its task, the cross-node findings and the fleet's robust statistics.

A node is rejected for (1) no result (its task died, hung, never ran, or wrote no record: Slurm's state
and exit code say which; never a pass), (2) a failed or errored check in its node report, (3) drift of its
versions from the reference, (4) a throughput figure that is slow by stats.py's rule, (5) a FAIL finding of
a cross-node check.  Pure: records in, `FleetVerdict` out (benchmarks/fleet_aggregate.py times it).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from trainready.cluster import drift
from trainready.cluster.crosschecks import Finding
from trainready.cluster.layout import FLEET_SCHEMA
from trainready.cluster.stats import RobustBound, robust_bound
from trainready.cluster.task import THROUGHPUT
from trainready.records import PLANTED_EXIT, CheckResult, Status, _jsonable
from trainready.spec.model import NodeSpec

BAD = ("fail", "error")


@dataclass(frozen=True)
class NodeInput:
    node: str
    record: Mapping[str, Any] | None  # the trainready.fleetnode/1 document, or None: no result
    no_result: str = ""  # why there is no record (Slurm state, exit code)
    record_path: str = ""
    slurm: Mapping[str, str] = field(default_factory=dict)  # job id, state, exit code of its task


@dataclass(frozen=True)
class NodeVerdict:
    node: str
    accepted: bool
    reasons: tuple[str, ...]
    warnings: tuple[str, ...]
    record: str
    slurm: Mapping[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "accepted": self.accepted, "reasons": list(self.reasons),
                "warnings": list(self.warnings), "record": self.record, "slurm": dict(self.slurm)}


@dataclass(frozen=True)
class FleetVerdict:
    nodes: tuple[NodeVerdict, ...]
    stats: tuple[RobustBound, ...]
    cross: tuple[CheckResult, ...]
    reference: str
    planted: Mapping[str, str]
    context: Mapping[str, Any] = field(default_factory=dict)

    @property
    def rejected(self) -> list[str]:
        return [n.node for n in self.nodes if not n.accepted]

    @property
    def fleet_failures(self) -> list[CheckResult]:
        """Fleet-level failures that name no node (e.g. the collective's busbw below expectation)."""
        return [c for c in self.cross if c.status.value in BAD and c.name == "cluster.collective"]

    @property
    def exit_code(self) -> int:
        """0 all accepted, 1 any rejected (or a fleet-level failure), PLANTED_EXIT (3) for any planted run."""
        if self.planted:
            return PLANTED_EXIT
        return 1 if self.rejected or self.fleet_failures else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": FLEET_SCHEMA,
            "summary": {"nodes": len(self.nodes), "accepted": len(self.nodes) - len(self.rejected),
                        "rejected": len(self.rejected), "reference": self.reference,
                        "evidence": not self.planted},
            "drain_list": self.rejected,
            "nodes": [n.to_json() for n in self.nodes],
            "stats": [s.to_json() for s in self.stats],
            "cross": [c.to_json() for c in self.cross],
            "planted": dict(self.planted),
            "context": _jsonable(self.context),
        }


def check_failures(record: Mapping[str, Any]) -> list[str]:
    return [f"check {r.get('name')}: {str(r.get('status')).upper()}: {r.get('message', '')}"
            for r in (record.get("report") or {}).get("results", []) if r.get("status") in BAD]


def throughput_values(inputs: Sequence[NodeInput]) -> dict[str, list[tuple[str, str, float]]]:
    """metric → [(node, which device, value)] over every node with a record."""
    out: dict[str, list[tuple[str, str, float]]] = {m: [] for m in THROUGHPUT}
    for ni in inputs:
        if ni.record is None:
            continue
        for r in (ni.record.get("report") or {}).get("results", []):
            for m in r.get("metrics", []):
                name, value = m.get("name"), m.get("value")
                lab = m.get("labels") or {}
                if name in out and isinstance(value, (int, float)):
                    where = f"GPU {lab['gpu']}" if "gpu" in lab else str(lab.get("device", "node"))
                    out[name].append((ni.node, where, float(value)))
    return out


def reference_versions(inputs: Sequence[NodeInput], reference: str | None,
                       spec: NodeSpec) -> tuple[str, dict[str, str], bool]:
    """(name, versions, by_prefix): --reference NODE, else the spec's pins, else the most common value per key."""
    have = {ni.node: dict(ni.record.get("versions") or {}) for ni in inputs if ni.record is not None}
    if reference:
        if reference in have:
            return reference, have[reference], False
        return reference, {}, False  # the reference itself has no record: nothing to compare against
    pins = drift.spec_reference(spec.software)
    if pins:
        return "spec", pins, True
    common = {k: Counter(v.get(k, "") for v in have.values()).most_common(1)[0][0] for k in drift.FIELDS} if have else {}
    return "fleet majority", common, False


def decide(inputs: Sequence[NodeInput], spec: NodeSpec, cross: Sequence[CheckResult], findings: Sequence[Finding],
           reference: str | None = None, planted: Mapping[str, str] | None = None,
           context: Mapping[str, Any] | None = None, peers: Sequence[NodeInput] = ()) -> FleetVerdict:
    """Verdicts for `inputs`; `peers` (a resume's baseline run, history.py) add their figures and versions to
    the statistics and the reference, and get no verdict of their own."""
    fs = spec.fleet
    values = throughput_values([*inputs, *peers])
    bounds = {m: robust_bound(m, THROUGHPUT[m], [v for _, _, v in vals], fs.slow_fraction, fs.outlier_k)
              for m, vals in values.items() if vals}
    slow: dict[str, list[str]] = {}
    for m, vals in values.items():
        b = bounds.get(m)
        for node, where, v in vals:
            if b is not None and b.slow(v):
                slow.setdefault(node, []).append(f"slow: {where} {b.why(v)}")
    ref_name, ref, by_prefix = reference_versions([*inputs, *peers], reference, spec)
    by_node: dict[str, list[Finding]] = {}
    for f in findings:
        by_node.setdefault(f.node, []).append(f)
    verdicts = []
    for ni in inputs:
        reasons: list[str] = []
        warnings = [f"{f.check}: {f.text}" for f in by_node.get(ni.node, []) if f.status == Status.WARN]
        if ni.record is None:
            reasons.append(f"no result: {ni.no_result}")
        else:
            reasons += check_failures(ni.record)
            mine = dict(ni.record.get("versions") or {})
            rows = drift.diff_pins(ref, mine) if by_prefix else (drift.diff(ref, mine) if ref else [])
            if rows and ni.node != ref_name:
                reasons.append(f"drift: {drift.describe(rows, ref_name)}")
            reasons += slow.get(ni.node, [])
        reasons += [f"{f.check}: {f.text}" for f in by_node.get(ni.node, []) if f.status == Status.FAIL]
        verdicts.append(NodeVerdict(ni.node, not reasons, tuple(reasons), tuple(warnings), ni.record_path,
                                    dict(ni.slurm)))
    return FleetVerdict(tuple(verdicts), tuple(bounds.values()), tuple(cross), ref_name, dict(planted or {}),
                        dict(context or {}))
