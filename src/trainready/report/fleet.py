"""A fleet record (`trainready cluster run`, trainready.fleet/1) read for the report, JUnit and Prometheus.

The fleet record names each node's verdict (accepted, reasons) and the path of its node record
(trainready.fleetnode/1, whose "report" is the node's trainready.report/1); the robust statistics
(median, MAD, the outlier bound) are in "stats".  Node records are looked up where the record says,
else in the run's folder ("run": RESULTS/runs/ID/nodes/NODE.json), else beside the fleet record.
RESULTS/fleet.json, the latest run's verdict, also lists every earlier run under RESULTS in "history"
(cluster/history.py): `fleet_history` reads it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from trainready.report.kinds import Record
from trainready.util.nodetext import clean_tree


@dataclass(frozen=True)
class FleetNode:
    node: str
    accepted: bool
    reasons: tuple[str, ...]
    report: Mapping[str, Any] | None  # the node's trainready.report/1, when its record is readable
    not_tested: str = ""  # why Slurm did not run its acceptance (drained, down, reserved); "" when it was tested

    @property
    def verdict(self) -> str:
        return "not tested" if self.not_tested else ("accept" if self.accepted else "reject")


# The order an on-call engineer reads a fleet in: what to repair, what was not looked at, then the rest.
VERDICT_ORDER = {"reject": 0, "not tested": 1, "accept": 2}


def worst_first(nodes: list[FleetNode]) -> list[FleetNode]:
    """Rejected nodes, then not-tested ones, then accepted ones; record order within each (stable sort)."""
    return sorted(nodes, key=lambda n: VERDICT_ORDER[n.verdict])


def _node_report(rec: Record, entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
    embedded = entry.get("record")
    if isinstance(embedded, Mapping):  # a record that embeds its node records
        return embedded.get("report", embedded)  # type: ignore[no-any-return]
    base = Path(rec.path).parent if rec.path else Path(".")
    cands = [Path(str(embedded))] if isinstance(embedded, str) and embedded else []
    cands += [base / str(embedded)] if isinstance(embedded, str) and embedded else []
    run = rec.doc.get("run")
    cands += [Path(run) / "nodes" / f"{entry.get('node')}.json"] if isinstance(run, str) and run else []
    cands.append(base / "nodes" / f"{entry.get('node')}.json")
    for p in cands:
        try:
            doc = clean_tree(json.loads(p.read_text(encoding="utf-8")))  # a node wrote it (util/nodetext.py)
        except (OSError, ValueError):
            continue
        if isinstance(doc, Mapping):
            rep = doc.get("report", doc)
            return rep if isinstance(rep, Mapping) else None
    return None


def fleet_nodes(rec: Record) -> list[FleetNode]:
    out = []
    for n in rec.doc.get("nodes", []) or []:
        if isinstance(n, Mapping):
            accepted = bool(n.get("accepted", n.get("verdict") in ("accept", "pass")))
            not_tested = str(n.get("not_tested") or "") or ("?" if n.get("verdict") == "not tested" else "")
            out.append(FleetNode(str(n.get("node", "?")), accepted and not not_tested,
                                 tuple(map(str, n.get("reasons", []) or [])),
                                 None if not_tested else _node_report(rec, n), not_tested))
    return out


@dataclass(frozen=True)
class EarlierRun:
    """One earlier run under the same --results, as RESULTS/fleet.json's history names it."""

    run: str
    kind: str
    verdict: str  # accept, reject, or "none: ..." (the run ended before its verdict)
    rejected: tuple[str, ...]
    record: str  # its own verdict file ('' when it has none)
    planted: bool


def fleet_history(rec: Record) -> list[EarlierRun]:
    """The earlier runs the latest fleet record names, newest first (none for a run's own record)."""
    out = []
    for h in rec.doc.get("history", []) or []:
        if isinstance(h, Mapping):
            out.append(EarlierRun(str(h.get("run", "?")), str(h.get("kind", "run")), str(h.get("verdict", "?")),
                                  tuple(map(str, h.get("rejected", []) or [])), str(h.get("record") or ""),
                                  bool(h.get("planted"))))
    return out


def bound_of(doc: Mapping[str, Any], metric: str) -> tuple[float | None, float | None]:
    """(robust outlier bound, slow floor) the fleet verdict used for `metric`, when judged."""
    for s in doc.get("stats", []) or []:
        if isinstance(s, Mapping) and s.get("metric") == metric and s.get("judged", True):
            b, f = s.get("robust_bound"), s.get("floor")
            return (float(b) if isinstance(b, (int, float)) else None, float(f) if isinstance(f, (int, float)) else None)
    return None, None
