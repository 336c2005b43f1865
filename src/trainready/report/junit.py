"""JUnit XML for CI systems: one `<testcase>` per check, `<failure>`/`<error>`/`<skipped>` children.

Format: the de-facto JUnit schema CI systems ingest (Jenkins, GitLab, GitHub actions' test
reporters): ``<testsuites>`` → ``<testsuite name tests failures errors skipped time>`` →
``<testcase classname name time>`` with at most one ``failure`` (message attribute, text = message
and remedy), ``error`` (the check could not run) or ``skipped`` (why it does not apply) child.
A warning passes, with the message and remedy in ``<system-out>``.

Each record kind maps to suites through `SUITES` (kind → function); a new kind plugs in there.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from trainready.report.kinds import Record

# XML 1.0 cannot carry most control characters, even escaped: drop them.
_BAD_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


@dataclass(frozen=True)
class Case:
    classname: str
    name: str
    status: str  # pass | warn | skip | fail | error
    message: str = ""
    remedy: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class Suite:
    name: str
    hostname: str
    timestamp: str
    cases: tuple[Case, ...]
    properties: tuple[tuple[str, str], ...] = ()


def _report_suites(rec: Record) -> list[Suite]:
    d = rec.doc
    cmd = str(d.get("command", rec.kind))
    cases = tuple(
        Case(f"trainready.{cmd}", str(r.get("name", "?")), str(r.get("status", "error")), str(r.get("message", "")),
             str(r.get("remedy", "")), _float(r.get("duration_s")))
        for r in d.get("results", [])
    )
    props = [("verdict", rec.status), ("tool_version", str(d.get("tool_version", ""))),
             ("spec", str((d.get("spec") or {}).get("name", "")))]
    if rec.planted:
        props.append(("planted", ", ".join(f"{k}={v}" for k, v in rec.planted.items())))
    return [Suite(f"trainready {cmd}", str(d.get("host", "")), str(d.get("started_at", "")), cases, tuple(props))]


def _selftest_suites(rec: Record) -> list[Suite]:
    d = rec.doc
    cases = []
    for c in d.get("cases", []):
        outcome = str(c.get("outcome", ""))
        status = {"detected": "pass", "missed": "fail", "skipped": "skip"}.get(outcome, "error")
        msg = f"{outcome}: verdict {c.get('verdict', '?')}: {c.get('message', '')}"
        cases.append(Case("trainready.selftest", str(c.get("name", "?")), status, msg, str(c.get("expect", "")),
                          _float(c.get("seconds"))))
    return [Suite("trainready selftest", str(d.get("host", "")), str(d.get("started_at", "")), tuple(cases))]


def _fleet_suites(rec: Record) -> list[Suite]:
    """A fleet record: one suite per node (its node record's checks, plus the node's verdict as a case),
    and one for the cross-node checks."""
    from trainready.report.fleet import fleet_nodes

    stamp = str((rec.doc.get("context") or {}).get("started_at", ""))
    out = []
    for n in fleet_nodes(rec):
        cls = f"trainready.cluster.{n.node}"
        cases = [Case(cls, str(r.get("name", "?")), str(r.get("status", "error")), str(r.get("message", "")),
                      str(r.get("remedy", "")), _float(r.get("duration_s")))
                 for r in (n.report or {}).get("results", []) or [] if isinstance(r, Mapping)]
        if n.not_tested:
            cases.append(Case(cls, "fleet verdict", "skip", f"not tested: {n.not_tested}"))
        else:
            cases.append(Case(cls, "fleet verdict", "pass" if n.accepted else "fail",
                              "accepted" if n.accepted else "rejected: " + "; ".join(n.reasons),
                              "" if n.accepted else "drained (trainready: reason) until repaired and re-validated"))
        out.append(Suite(f"trainready cluster {n.node}", n.node, stamp, tuple(cases)))
    cross = [Case("trainready.cluster", str(r.get("name", "?")), str(r.get("status", "error")),
                  str(r.get("message", "")), str(r.get("remedy", "")), _float(r.get("duration_s")))
             for r in rec.doc.get("cross", []) or [] if isinstance(r, Mapping)]
    if cross:
        out.append(Suite("trainready cluster cross-node", "", stamp, tuple(cross)))
    return out


def _compare_suites(rec: Record) -> list[Suite]:
    """An upgrade gate: one case per changed version and per judged metric (regression/missing fail)."""
    d = rec.doc
    cases = [Case("trainready.compare.versions", str(v.get("key", "?")), "pass" if v.get("declared") else "fail",
                  f"{v.get('baseline')} -> {v.get('new')}" + ("" if v.get("declared") else " (not declared)"))
             for v in d.get("versions_changed", []) or [] if isinstance(v, Mapping)]
    for m in d.get("metrics", []) or []:
        if not isinstance(m, Mapping) or m.get("verdict") in ("unchanged", "info"):
            continue
        labels = ",".join(f"{k}={v}" for k, v in sorted((m.get("labels") or {}).items()))
        cases.append(Case("trainready.compare.metrics", str(m.get("name")) + (f"[{labels}]" if labels else ""),
                          "fail" if m.get("verdict") in ("regression", "missing") else "pass",
                          f"{m.get('verdict')}: {m.get('baseline')} -> {m.get('new')} {m.get('unit', '')} "
                          f"(tolerance {m.get('tolerance')}, {m.get('tolerance_source', '')})"))
    return [Suite("trainready compare", str((d.get("new") or {}).get("host", "")), "", tuple(cases))]


SUITES: dict[str, Callable[[Record], list[Suite]]] = {
    "node": _report_suites, "comm": _report_suites, "resume": _report_suites, "report": _report_suites,
    "selftest": _selftest_suites, "fleet": _fleet_suites, "compare": _compare_suites,
}


def _float(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return 0.0


def _clean(s: str) -> str:
    return _BAD_XML.sub("", s)


def _case_element(c: Case) -> ET.Element:
    el = ET.Element("testcase", classname=_clean(c.classname), name=_clean(c.name), time=f"{c.seconds:.3f}")
    body = _clean(c.message + (f"\nremedy: {c.remedy}" if c.remedy else ""))
    if c.status == "fail":
        ET.SubElement(el, "failure", message=_clean(c.message), type="fail").text = body
    elif c.status == "error":
        ET.SubElement(el, "error", message=_clean(c.message), type="error").text = body
    elif c.status == "skip":
        ET.SubElement(el, "skipped", message=_clean(c.message))
    elif c.status == "warn":
        ET.SubElement(el, "system-out").text = "WARN: " + body
    elif c.message:
        ET.SubElement(el, "system-out").text = _clean(c.message)
    return el


def _count(cases: Sequence[Case]) -> dict[str, str]:
    n = {k: sum(1 for c in cases if c.status == k) for k in ("fail", "error", "skip")}
    return {"tests": str(len(cases)), "failures": str(n["fail"]), "errors": str(n["error"]),
            "skipped": str(n["skip"]), "time": f"{sum(c.seconds for c in cases):.3f}"}


def junit_xml(records: Sequence[Record]) -> str:
    """The JUnit XML document for these records (kinds without a suite mapping are left out)."""
    suites = [s for rec in records for s in SUITES.get(rec.kind, lambda _r: [])(rec)]
    root = ET.Element("testsuites", name="trainready", **_count([c for s in suites for c in s.cases]))
    for s in suites:
        el = ET.SubElement(root, "testsuite", name=_clean(s.name), hostname=_clean(s.hostname),
                           timestamp=_clean(s.timestamp), **_count(s.cases))
        if s.properties:
            props = ET.SubElement(el, "properties")
            for k, v in s.properties:
                ET.SubElement(props, "property", name=k, value=_clean(v))
        el.extend(_case_element(c) for c in s.cases)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(path: str, records: Sequence[Record]) -> None:
    """Atomically (temp file + rename): a CI collector never reads half a file."""
    from trainready.util.atomic import atomic_write_text

    atomic_write_text(path, junit_xml(records))
