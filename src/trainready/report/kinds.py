"""What kind of record a JSON file is, read once for the report, bundle and exporters.

Every trainready record names its schema (``"schema": "trainready.<kind>/1"``); a report
record (`trainready.report/1`) is further told apart by its ``command`` (node, comm, resume,
...).  Renderers dispatch on `Record.kind`, so a new record kind (fleet, compare, selftest)
plugs in by adding an entry to their tables, not by editing each renderer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from trainready.errors import UsageError
from trainready.records import read_json

# schema → kind; a report record's kind is its command.
SCHEMAS: dict[str, str] = {
    "trainready.report/1": "report",
    "trainready.env/1": "env",
    "trainready.plan/1": "plan",
    "trainready.fleet/1": "fleet",
    "trainready.compare/1": "compare",
    "trainready.selftest/1": "selftest",
    "trainready.sweeptrend/1": "sweeptrend",
}
# What each kind is, for people (bundle index, report headings).
PURPOSE: dict[str, str] = {
    "node": "node acceptance record (trainready node): every check's verdict, metrics and remedy",
    "comm": "collectives record (trainready comm): correctness and busbw per op and size",
    "resume": "resume-equivalence record (trainready resume): run C vs uninterrupted run A",
    "env": "environment manifest (trainready env): host, GPUs, driver, software chain, container, code, env vars",
    "plan": "capacity plan (trainready plan): memory per GPU, checkpoint, compute",
    "fleet": "fleet record (trainready cluster run): per-node verdicts, drain list, cross-node checks",
    "compare": "upgrade gate (trainready compare): versions and metrics, baseline vs new",
    "selftest": "self-test (trainready selftest): every planted fault and whether it was detected",
    "sweeptrend": "one node's sweeps (trainready cluster sweep): its figures per device and counters over time",
    "report": "trainready report record",
}


def fleet_status(doc: Mapping[str, Any]) -> str:
    """fail when a node is rejected or a fleet-level check failed; warn when planted; else pass."""
    summary = doc.get("summary") or {}
    failed = any(isinstance(c, Mapping) and c.get("status") in ("fail", "error") and c.get("name") == "cluster.collective"
                 for c in doc.get("cross", []) or [])
    if summary.get("rejected") or doc.get("drain_list") or failed:
        return "fail"
    return "warn" if doc.get("planted") else "pass"


def sweep_trend_status(doc: Mapping[str, Any], path: str = "") -> str:
    """A node's sweep history by its state (report/node_state.py): fail (drained by the sweep, or its last sweep
    failed), warn (unknown, or a trend WARN) or pass."""
    from trainready.report.node_state import node_state

    return node_state(doc, path).status


@dataclass(frozen=True)
class Record:
    path: str
    kind: str
    doc: Mapping[str, Any]

    @property
    def planted(self) -> Mapping[str, str]:
        """Plants of a report record (context.planted); {} for every other kind."""
        if self.kind == "fleet":  # the fleet run's own plants (per-node faults)
            p = self.doc.get("planted")
            return p if isinstance(p, Mapping) else {}
        if self.doc.get("schema") != "trainready.report/1":
            return {}
        from trainready.records import planted_of

        return planted_of(self.doc.get("context"))

    @property
    def status(self) -> str:
        """The record's overall verdict word (pass/warn/fail/error, a plan's fit, or '')."""
        if self.kind == "fleet":
            return fleet_status(self.doc)
        if self.kind == "sweeptrend":
            return sweep_trend_status(self.doc, self.path)
        s = self.doc.get("status") or self.doc.get("verdict")
        if isinstance(s, Mapping):
            s = s.get("status")
        if not s and self.kind == "plan":
            s = (self.doc.get("memory") or {}).get("verdict", "")
        return str(s or "")

    @property
    def title(self) -> str:
        host = self.doc.get("host") or self.doc.get("node")
        if isinstance(host, Mapping):
            host = host.get("hostname")
        return f"{self.kind}" + (f" on {host}" if isinstance(host, str) and host else "")



def kind_of(doc: Any, where: str) -> str:
    schema = doc.get("schema") if isinstance(doc, dict) else None
    kind = SCHEMAS.get(schema) if isinstance(schema, str) else None
    if kind is None:
        raise UsageError(f"{where}: schema {schema!r} is not a trainready record (expected one of {', '.join(SCHEMAS)})")
    if kind == "report":
        if not isinstance(doc.get("results"), list):
            raise UsageError(f"{where}: a trainready.report/1 record without a results list")
        command = doc.get("command")
        return command if isinstance(command, str) and command else "report"
    return kind


def read_record(path: str, where: str | None = None) -> Record:
    """A record from a file, its strings cleaned (util/nodetext.py): a node may have written it (a fleet's node
    record), and its text goes on to HTML, JUnit, Prometheus and the terminal."""
    from trainready.util.nodetext import clean_tree

    where = where or path
    doc = clean_tree(read_json(path, where, "a trainready JSON record (--json of node, comm, resume, env, plan, ...)"))
    return Record(str(path), kind_of(doc, where), doc)


def record_of(doc: Mapping[str, Any], path: str = "") -> Record:
    """A record from an in-memory doc (a command's own report, before or instead of a file)."""
    return Record(path, kind_of(dict(doc), path or "record"), doc)
