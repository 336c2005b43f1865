"""The fleet verdict: every node accepted or rejected, with reasons, from its node record, Slurm's word on
its task, the cross-node findings and the fleet's robust statistics.

A node is rejected for (1) no result (its task died, did not finish, hung, or wrote no record: Slurm's
state and exit code say which; never a pass), (2) a failed or errored check in its node report, (3) drift of
its versions from the reference (and of its compute NICs' count, firmware and rate: fabricdrift.py), (4) a throughput figure that is slow by stats.py's rule, (5) a FAIL finding
of a cross-node check.  A node Slurm would not run its task on (drained, down, reserved for others; or its
task never started) is NOT TESTED: reported with Slurm's words, neither accepted nor rejected, never drained.
Every reason carries a cause key ("check matmul", "drift torch", "no result: did not finish within --time")
so that many nodes failing alike can be told apart from many nodes failing (guard.py).
Pure: records in, `FleetVerdict` out (benchmarks/fleet_aggregate.py times it).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from trainready.cluster.judge import fabricdrift
from trainready.cluster.judge.fingerprints import CHECK as FINGERPRINT_CHECK
from trainready.cluster.judge.fingerprints import judge_fleet as judge_fingerprints
from trainready.cluster.judge.fingerprints import rejudged
from trainready.cluster.judge.stats import RobustBound, robust_bound
from trainready.cluster.tasks.crosschecks import Finding
from trainready.cluster.tasks.layout import FLEET_SCHEMA
from trainready.cluster.tasks.node import THROUGHPUT
from trainready.hostsettings import drift as hostdrift
from trainready.manifest import drift
from trainready.records import PLANTED_EXIT, CheckResult, Status, _jsonable
from trainready.spec.model import NodeSpec

BAD = ("fail", "error")
CLEARED = "cleared"  # a figure slow in the first measurement only (remeasure.py): a warning, never a reason


@dataclass(frozen=True)
class NodeInput:
    node: str
    record: Mapping[str, Any] | None  # the trainready.fleetnode/1 document, or None: no result
    no_result: str = ""  # why there is no record (Slurm state, exit code)
    record_path: str = ""
    slurm: Mapping[str, str] = field(default_factory=dict)  # job id, state, exit code of its task
    not_tested: str = ""  # why Slurm did not run its task (drained, down, reserved, never started); "" tested
    cause: str = ""  # the cause key of `no_result` ("no result: did not finish within --time 0:20")
    again: Mapping[str, Any] | None = None  # its second record where a figure was slow (remeasure.py), else None
    again_missing: str = ""  # why a suspect measured again has no second record ("" when it has one)


@dataclass(frozen=True)
class NodeVerdict:
    node: str
    accepted: bool
    reasons: tuple[str, ...]
    warnings: tuple[str, ...]
    record: str
    slurm: Mapping[str, str]
    causes: tuple[str, ...] = ()  # one cause key per reason, same order ("check matmul", "slow gemm_bf16")
    not_tested: str = ""  # why it was not tested (Slurm's state and reason); "" when it was

    @property
    def verdict(self) -> str:
        return "not tested" if self.not_tested else ("accept" if self.accepted else "reject")

    @property
    def rejected(self) -> bool:
        return not self.accepted and not self.not_tested

    def to_json(self) -> dict[str, Any]:
        reasons = [f"not tested: {self.not_tested}"] if self.not_tested else list(self.reasons)
        return {"node": self.node, "verdict": self.verdict, "accepted": self.accepted, "reasons": reasons,
                "causes": list(self.causes), "not_tested": self.not_tested, "warnings": list(self.warnings),
                "record": self.record, "slurm": dict(self.slurm)}


@dataclass(frozen=True)
class FleetVerdict:
    nodes: tuple[NodeVerdict, ...]
    stats: tuple[RobustBound, ...]
    cross: tuple[CheckResult, ...]
    reference: str
    planted: Mapping[str, str]
    context: Mapping[str, Any] = field(default_factory=dict)
    guard: Mapping[str, Any] = field(default_factory=dict)  # guard.DrainPlan.to_json(): what --drain may drain

    @property
    def rejected(self) -> list[str]:
        return [n.node for n in self.nodes if n.rejected]

    @property
    def not_tested(self) -> list[str]:
        return [n.node for n in self.nodes if n.not_tested]

    @property
    def fleet_failures(self) -> list[CheckResult]:
        """Fleet-level failures that name no node (e.g. the collective's busbw below expectation, a host pin every
        node misses)."""
        return [c for c in self.cross if c.status.value in BAD and c.name in ("cluster.collective", hostdrift.FLEET_PINS)
                or c.name == FINGERPRINT_CHECK and c.status.value in BAD and c.message.startswith("fleet-wide")]

    @property
    def exit_code(self) -> int:
        """0 all accepted, 1 any rejected (or a fleet-level failure), PLANTED_EXIT (3) for any planted run."""
        if self.planted:
            return PLANTED_EXIT
        return 1 if self.rejected or self.fleet_failures else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": FLEET_SCHEMA,
            "summary": {"nodes": len(self.nodes),
                        "accepted": len(self.nodes) - len(self.rejected) - len(self.not_tested),
                        "rejected": len(self.rejected), "not_tested": len(self.not_tested), "reference": self.reference,
                        "evidence": not self.planted},
            "drain_list": self.rejected,
            "nodes": [n.to_json() for n in self.nodes],
            "stats": [s.to_json() for s in self.stats],
            "cross": [c.to_json() for c in self.cross],
            "guard": _jsonable(self.guard),
            "planted": dict(self.planted),
            "context": _jsonable(self.context),
        }


def throughput_values(inputs: Sequence[NodeInput], second: bool = False) -> dict[str, list[tuple[str, str, float]]]:
    """metric → [(node, which device, value)] over every node with a record (`second`: their second records)."""
    out: dict[str, list[tuple[str, str, float]]] = {m: [] for m in THROUGHPUT}
    for ni in inputs:
        record = ni.again if second else ni.record
        if record is None:
            continue
        for r in (record.get("report") or {}).get("results", []):
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


def slow_reasons(inputs: Sequence[NodeInput], spec: NodeSpec) -> tuple[dict[str, RobustBound],
                                                                          dict[str, list[tuple[str, str]]]]:
    """(metric → its robust bound, node → [(cause, reason)] for each slow figure).  The bounds come from the
    first records of the whole fleet; a node measured again (remeasure.py) is slow only where its second
    figure is below the same bound too: a figure slow once is a cause of type 'cleared', never a rejection."""
    fs = spec.fleet
    values = throughput_values(inputs)
    second = {(n, m, w): v for m, vals in throughput_values(inputs, second=True).items() for n, w, v in vals}
    missing = {ni.node: ni.again_missing for ni in inputs if ni.again_missing}
    bounds = {m: robust_bound(m, THROUGHPUT[m], [v for _, _, v in vals], fs.slow_fraction, fs.outlier_k)
              for m, vals in values.items() if vals}
    slow: dict[str, list[tuple[str, str]]] = {}
    for m, vals in values.items():
        b = bounds.get(m)
        for node, where, v in vals:
            if b is None or not b.slow(v):
                continue
            v2 = second.get((node, m, where))
            said = f"slow: {where} {b.why(v)}"
            if v2 is not None and not b.slow(v2):
                slow.setdefault(node, []).append((CLEARED, f"{said}; measured again: {v2:.4g} {b.unit}, within "
                                                  "the bound: not a fault"))
            elif v2 is not None:
                slow.setdefault(node, []).append((f"slow {m}", f"{said}; measured again: {v2:.4g} {b.unit}, slow again"))
            else:
                again = f" (not measured again: {missing[node]})" if node in missing else ""
                slow.setdefault(node, []).append((f"slow {m}", said + again))
    return bounds, slow


def record_reasons(ni: NodeInput, ref: tuple[str, dict[str, str], bool]) -> list[tuple[str, str]]:
    """(cause, reason) from one node's record: failed checks, then drift from the reference."""
    assert ni.record is not None
    ref_name, versions, by_prefix = ref
    # a failed `host` check is judged again from the node's settings (hostdrift), where a pin every node misses
    # is the fleet's cause and rejects no node; so is a `fingerprint` check failed only for a wrong answer its
    # devices share, from its devices' records (fingerprints.py: the fleet's, or this node's alone)
    out = [(f"check {r.get('name')}", f"check {r.get('name')}: {str(r.get('status')).upper()}: {r.get('message', '')}")
           for r in (ni.record.get("report") or {}).get("results", []) if r.get("status") in BAD
           and not (r.get("name") == "host" and r.get("status") == "fail") and not rejudged(r)]
    mine = dict(ni.record.get("versions") or {})
    rows = drift.diff_pins(versions, mine) if by_prefix else (drift.diff(versions, mine) if versions else [])
    image = [r for r in rows if r[0] == "image_sha256"]
    if image and ni.node != ref_name:  # another squashfs than the reference's: a cause of its own
        out.append(("image differs", f"image differs: {image[0][2] or '(none)'} vs {image[0][1]} ({ref_name})"))
        rows = [r for r in rows if r[0] != "image_sha256"]
    if rows and ni.node != ref_name:
        out.append((f"drift {rows[0][0]}", f"drift: {drift.describe(rows, ref_name)}"))
    return out


def decide(inputs: Sequence[NodeInput], spec: NodeSpec, cross: Sequence[CheckResult], findings: Sequence[Finding],
           reference: str | None = None, planted: Mapping[str, str] | None = None,
           context: Mapping[str, Any] | None = None, peers: Sequence[NodeInput] = ()) -> FleetVerdict:
    """Verdicts for `inputs`; `peers` (a resume's baseline run, history.py) add their figures and versions to
    the statistics and the reference, and get no verdict of their own."""
    bounds, slow = slow_reasons([*inputs, *peers], spec)
    ref = reference_versions([*inputs, *peers], reference, spec)
    host = hostdrift.judge([*inputs, *peers], spec, reference)
    fab = fabricdrift.judge([*inputs, *peers], reference, tuple(spec.fabric.nics))  # NIC count, firmware, rate
    prints = judge_fingerprints({ni.node: ni.record for ni in [*inputs, *peers] if ni.record is not None})
    by_node: dict[str, list[Finding]] = {}
    for f in findings:
        by_node.setdefault(f.node, []).append(f)
    verdicts = []
    for ni in inputs:
        if ni.not_tested:
            verdicts.append(NodeVerdict(ni.node, False, (), (), ni.record_path, dict(ni.slurm), (), ni.not_tested))
            continue
        warnings = [f"{f.check}: {f.text}" for f in by_node.get(ni.node, []) if f.status == Status.WARN]
        if ni.record is None:
            pairs = [(ni.cause or "no result", f"no result: {ni.no_result}")]
        else:
            pairs = record_reasons(ni, ref) + list(host.reasons.get(ni.node, [])) + \
                [p for p in slow.get(ni.node, []) if p[0] != CLEARED] + prints.reasons.get(ni.node, []) + \
                fab.get(ni.node, [])
            warnings += host.warnings.get(ni.node, []) + prints.warnings.get(ni.node, [])
            warnings += [t for c, t in slow.get(ni.node, []) if c == CLEARED]
        pairs += [(f.check, f"{f.check}: {f.text}") for f in by_node.get(ni.node, []) if f.status == Status.FAIL]
        verdicts.append(NodeVerdict(ni.node, not pairs, tuple(t for _, t in pairs), tuple(warnings), ni.record_path,
                                    dict(ni.slurm), tuple(c for c, _ in pairs)))
    return FleetVerdict(tuple(verdicts), tuple(bounds.values()), (*cross, *host.results, *prints.results), ref[0],
                        dict(planted or {}),
                        dict(context or {}))
