"""Judge one finished self-test command: a planted case (detected / missed / broke) or a control run (the
same command with no plant, which must pass before any case of its family counts).

Rules: only a FAIL whose message matches the case's expectation is a detection; an `error` result, a missing
record or result, a crash, a timeout is the run breaking ("broke"), never a detection.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainready.records import PLANTED_EXIT


@dataclass(frozen=True)
class Finished:
    """One command run to its end (or its limit)."""

    argv: tuple[str, ...]
    returncode: int | None  # None: stopped at its limit
    last_line: str  # the last line it wrote to stderr
    record: Path | None  # its --json record, when it was asked for one
    seconds: float

    @property
    def what(self) -> str:
        return "trainready " + " ".join(self.argv[:2])


@dataclass(frozen=True)
class Verdict:
    outcome: str  # detected | missed | broke  (a control: passed | failed | broke)
    verdict: str  # the check's status, "exit N", "rejected"/"accepted", or why there is none
    message: str


def _broke(run: Finished, why: str) -> Verdict:
    if run.returncode is None:
        return Verdict("broke", "timeout", f"{run.what} did not end within its limit ({run.seconds:.0f} s)")
    return Verdict("broke", why, run.last_line or f"{run.what} exited {run.returncode} with no output")


def _record(run: Finished) -> dict[str, Any] | None:
    if run.record is None or not run.record.is_file():
        return None
    try:
        doc = json.loads(run.record.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _result(doc: dict[str, Any], check: str) -> dict[str, Any] | None:
    """The named result, or the one a whole run fails under (a sweep that broke is "comm", not "comm.all_reduce")."""
    results = [r for r in doc.get("results", []) if isinstance(r, dict)]
    return next((r for r in results if r.get("name") == check), None) or next(
        (r for r in results if check.startswith(f"{r.get('name')}.")), None)


def judge_case(check: str, expect: str, run: Finished) -> Verdict:
    """A planted run: detected only when the detector FAILED naming the fault (`expect`)."""
    if run.returncode is None:
        return _broke(run, "timeout")
    if not check:  # must refuse the input: exit 2 with one line naming what is wrong
        if run.returncode not in (0, 2):
            return _broke(run, f"exit {run.returncode}")
        found = run.returncode == 2 and re.search(expect, run.last_line) is not None
        return Verdict("detected" if found else "missed", f"exit {run.returncode}", run.last_line)
    doc = _record(run)
    if doc is None:
        return _broke(run, f"exit {run.returncode}, no record")
    if check.startswith("node:"):  # a fleet record: that node must be rejected for the planted reason
        return _judge_node(doc, check.split(":", 1)[1], expect)
    if check.startswith("cleared:"):  # a planted transient: the node measured again and accepted, with why
        return _judge_cleared(doc, check.split(":", 1)[1], expect)
    res = _result(doc, check)
    if res is None:
        return Verdict("broke", "no result", f"the record has no '{check}' result")
    status, msg = str(res.get("status")), str(res.get("message", ""))
    if status == "error":
        return Verdict("broke", status, msg)
    found = status == "fail" and re.search(expect, msg) is not None
    return Verdict("detected" if found else "missed", status, msg)


def _standing(doc: dict[str, Any], node: dict[str, Any]) -> tuple[bool, list[str]]:
    """(accepted, reasons) of a node in a fleet record, or in a `cluster pairs` record (trainready.pairs/1:
    accepted when its status is 'good'; its reasons the pairing's and, with --fabric, the lines naming it)."""
    if "accepted" in node:
        return bool(node.get("accepted")), [str(r) for r in node.get("reasons", [])]
    name = str(node.get("node"))
    lines = [str(x) for x in (doc.get("fabric") or {}).get("lines") or [] if str(x).startswith(f"{name}:")]
    return node.get("status") == "good", ([str(node["reason"])] if node.get("reason") else []) + lines


def _judge_node(doc: dict[str, Any], name: str, expect: str) -> Verdict:
    node = next((n for n in doc.get("nodes", []) if n.get("node") == name), None)
    if node is None:
        return Verdict("broke", "no node", f"the fleet record has no node {name}")
    accepted, reasons = _standing(doc, node)
    rejected = not accepted
    found = rejected and any(re.search(expect, r) for r in reasons)
    return Verdict("detected" if found else "missed", "rejected" if rejected else "accepted",
                   "; ".join(reasons) or "accepted")


def _judge_cleared(doc: dict[str, Any], name: str, expect: str) -> Verdict:
    """A planted transient (slow in one measurement only): told apart from a fault when the node is accepted, or
    the check `name` passes, with a message that says why (failing it would be the false alarm)."""
    if "nodes" not in doc:
        res = _result(doc, name)
        if res is None:
            return Verdict("broke", "no result", f"the record has no '{name}' result")
        status, msg = str(res.get("status")), str(res.get("message", ""))
        found = status in ("pass", "warn") and re.search(expect, msg) is not None
        return Verdict("detected" if found else "missed", status, msg)
    node = next((n for n in doc.get("nodes", []) if n.get("node") == name), None)
    if node is None:
        return Verdict("broke", "no node", f"the fleet record has no node {name}")
    warnings = [str(w) for w in node.get("warnings", [])]
    found = bool(node.get("accepted")) and any(re.search(expect, w) for w in warnings)
    said = "; ".join(str(r) for r in node.get("reasons", [])) or "; ".join(warnings) or "accepted"
    return Verdict("detected" if found else "missed", "accepted" if node.get("accepted") else "rejected", said)


def judge_control(check: str, run: Finished) -> Verdict:
    """The family's control (no plant): the command must accept its input, the named check must pass (or
    warn), a fleet run must accept the node."""
    if run.returncode is None:
        return _broke(run, "timeout")
    if not check:
        ok = run.returncode == 0
        return Verdict("passed" if ok else "failed", f"exit {run.returncode}", run.last_line)
    doc = _record(run)
    if doc is None:
        return _broke(run, f"exit {run.returncode}, no record")
    if check.startswith("cleared:") and "nodes" not in doc:
        check = check.split(":", 1)[1]
    if check.startswith(("node:", "cleared:")):
        name = check.split(":", 1)[1]
        node = next((n for n in doc.get("nodes", []) if n.get("node") == name), None)
        if node is None:
            return Verdict("broke", "no node", f"the fleet record has no node {name}")
        accepted, said = _standing(doc, node)
        reasons = "; ".join(said)
        return Verdict("passed" if accepted else "failed", "accepted" if accepted else "rejected",
                       reasons or "accepted")
    res = _result(doc, check)
    if res is None:
        return Verdict("broke", "no result", f"the record has no '{check}' result")
    status = str(res.get("status"))
    return Verdict("passed" if status in ("pass", "warn") else "failed", status, str(res.get("message", "")))


def prep_failed(run: Finished) -> str:
    """'' when a preparation step ran to its end (exit 0, or 3 for a planted run), else what went wrong."""
    if run.returncode is None:
        return f"preparation step `{run.what}` did not end within its limit ({run.seconds:.0f} s)"
    if run.returncode in (0, PLANTED_EXIT):
        return ""
    return f"preparation step `{run.what}` failed (exit {run.returncode}): {run.last_line or 'no output'}"
