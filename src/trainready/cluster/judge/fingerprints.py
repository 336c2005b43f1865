"""The fleet's fingerprints in its verdict: every node's `fingerprint` records judged together
(fingerprint/fleet.py).  A GPU outside its identical peers' majority rejects its node (cause "fingerprint", a
hardware class); a wrong answer devices of several nodes share is a fleet-level failure that drains none, and
the nodes' own `fingerprint` checks that failed for it alone are judged here instead (`rejudged`), so no node is
rejected for it; one node alone with such an answer is rejected for it (cause "fingerprint answer", software);
drift and a GPU alone in its group are a node's warnings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from trainready.fingerprint.fleet import FleetFingerprint, aggregate
from trainready.records import CheckResult, Level, Metric, Status

CHECK = "cluster.fingerprint"
CAUSE = "fingerprint"  # a GPU outside its identical peers (reasons.CAUSE_CLASS: hardware)
ANSWER = "fingerprint answer"  # a wrong answer only one node's devices give (its own software: reasons.CAUSE_CLASS)
SHARED_ONLY = ["shared"]  # the node check's `failed_for` when a shared wrong answer was its only failure


@dataclass(frozen=True)
class FleetPrints:
    reasons: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # node -> (cause, text)
    warnings: dict[str, list[str]] = field(default_factory=dict)
    results: tuple[CheckResult, ...] = ()
    result: FleetFingerprint | None = None


def records_of(record: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The fingerprint check's device records in one node's fleet record ([] where it did not run)."""
    for r in ((record or {}).get("report") or {}).get("results", []):
        if r.get("name") == "fingerprint" and isinstance(r.get("details"), Mapping):
            return [d for d in r["details"].get("devices") or [] if isinstance(d, dict)]
    return []


def rejudged(result: Mapping[str, Any]) -> bool:
    """A node's `fingerprint` check that failed only for a wrong answer its devices share (its details'
    `failed_for`, data the check writes): judged across the fleet here, not a reason of its node by itself."""
    details = result.get("details")
    return (result.get("name") == "fingerprint" and isinstance(details, Mapping)
            and details.get("failed_for") == SHARED_ONLY and bool(details.get("devices")))


def grouped(found: list[tuple[str, str, str]]) -> list[str]:
    """One line per GPU and op, in the order first found: the first entry's line, and how many more of the battery's
    entries of that op differ on that GPU (the full list stays in the check's details: `rejected`)."""
    by: dict[tuple[str, str], list[str]] = {}
    for who, op, line in found:
        by.setdefault((who, op), []).append(line)
    return [lines[0] + (f" (+{len(lines) - 1} more {op} entr{'y' if len(lines) == 2 else 'ies'} on this GPU)"
                        if len(lines) > 1 else "") for (_, op), lines in by.items()]


def judge_fleet(records: Mapping[str, Mapping[str, Any] | None]) -> FleetPrints:
    """node -> its fleetnode record (or None): reasons, warnings, the fleet's result."""
    prints = {n: p for n, rec in records.items() if (p := records_of(rec))}
    if not prints:
        return FleetPrints()
    res = aggregate(prints)
    reasons = {n: [(CAUSE, f"fingerprint: {ln}") for ln in grouped(res.found.get(n, []))] for n in res.rejected}
    for n, lines in res.answer.items():
        reasons.setdefault(n, []).extend((ANSWER, f"fingerprint: {ln}") for ln in lines)
    warnings: dict[str, list[str]] = {}
    for per in (res.drift, res.alone):
        for n, lines in per.items():
            warnings.setdefault(n, []).extend(f"fingerprint: {ln}" for ln in lines)
    gpus = sum(len(p) for p in prints.values())
    metrics = tuple(Metric.of("fingerprint_mismatches", v, "entries", None, node=n, gpu=g)
                    for n, per in sorted(res.mismatches.items()) for g, v in sorted(per.items()))
    if res.fleet_wide:
        status, msg = Status.FAIL, "; ".join(f"fleet-wide: {x}; drains none" for x in res.fleet_wide[:2])
    elif res.rejected or res.answer:
        status, msg = Status.FAIL, f"{len(res.drains)} node(s) with a GPU outside its identical peers or a wrong " \
            "answer of their own: " + "; ".join(ln for per in (res.rejected, res.answer) for n in sorted(per)
                                                for ln in per[n][:1])[:600]
    elif res.unknown or res.drift or res.alone:
        status, msg = Status.WARN, f"{len(res.drift)} node(s) drifted, {len(res.unknown)} entries unknown " \
            f"(no strict majority of 3 or more identical GPUs), {len(res.alone)} node(s) with a GPU in a group " \
            "too small to judge"
    else:
        status, msg = Status.PASS, f"{gpus} device(s) in {len(res.groups)} key group(s): every entry bit for bit " \
            "identical within its group, every majority within its float64 bound"
    detail = {"groups": res.groups, "fleet_wide": res.fleet_wide,
              "rejected": {n: v for n, v in sorted(res.rejected.items())}, "unknown": res.unknown[:50],
              "drift": {n: v for n, v in sorted(res.drift.items())}, "alone": {n: v for n, v in sorted(res.alone.items())}}
    cr = CheckResult(CHECK, "Every GPU's fingerprint against its identical peers across the fleet", Level.QUICK,
                     status, msg, "Drain the named GPU's node for the vendor's field diagnostic; a fleet-wide wrong "
                     "answer points at the software (driver, cuBLAS, image), not a node." if status == Status.FAIL
                     else "", metrics, 0.0, detail)
    return FleetPrints(reasons, warnings, (cr,), res)
