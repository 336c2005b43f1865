"""Run the self-test cases one at a time, each in a fresh `python -m trainready` process, and
build the `trainready.selftest/1` record.

Outcome per case: "detected" (the named check failed or errored with a message matching the
case's `expect`, or the command refused the input with such a line), "missed" (it did not),
"skipped" (the case needs what this machine lacks, with the reason), "error" (the run itself
broke: no record, a timeout).  The self-test fails on any missed or error case.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from trainready import __version__
from trainready.selftest.cases import Case
from trainready.selftest.prepare import LAZY, Unmet, child_env, gpu_count, placeholders, unmet, unmount_all

SCHEMA = "trainready.selftest/1"
CASE_TIMEOUT_S = 300.0  # one case: a hang plant waits out its 10 s (gloo) / 60 s (NCCL) deadline well inside


@dataclass(frozen=True)
class CaseResult:
    name: str
    fault: str
    plants: tuple[str, ...]
    argv: tuple[str, ...]
    outcome: str  # detected | missed | skipped | error
    verdict: str  # the check's status, "exit 2" for refused input, or why there is none
    check: str
    message: str
    expect: str
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "fault": self.fault, "plants": list(self.plants), "argv": list(self.argv),
                "outcome": self.outcome, "verdict": self.verdict, "check": self.check, "message": self.message,
                "expect": self.expect, "seconds": round(self.seconds, 2)}


def _fill(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), text)


def _judge(case: Case, expect: str, proc: subprocess.CompletedProcess[str], record: Path) -> tuple[str, str, str]:
    """(outcome, verdict, message) of one finished run."""
    last = (proc.stderr.strip().splitlines() or [""])[-1]
    if not case.check:  # must refuse the input: exit 2 with one line naming what is wrong
        ok = proc.returncode == 2 and re.search(expect, last) is not None
        return ("detected" if ok else "missed"), f"exit {proc.returncode}", last
    if not record.is_file():
        return "error", f"exit {proc.returncode}, no record", last or "no output"
    doc = json.loads(record.read_text())
    if case.check.startswith("node:"):  # a fleet record: that node must be rejected for the planted reason
        name = case.check.split(":", 1)[1]
        node = next((n for n in doc.get("nodes", []) if n.get("node") == name), None)
        if node is None:
            return "error", "no node", f"the fleet record has no node {name}"
        reasons = [str(r) for r in node.get("reasons", [])]
        found = not node.get("accepted") and any(re.search(expect, r) for r in reasons)
        return ("detected" if found else "missed"), "rejected" if not node.get("accepted") else "accepted", \
            "; ".join(reasons) or "accepted"
    # The named result, or the one a whole run fails under (a sweep that broke is "comm", not "comm.all_reduce").
    res = next((r for r in doc.get("results", []) if r.get("name") == case.check), None) or next(
        (r for r in doc.get("results", []) if case.check.startswith(f"{r.get('name')}.")), None)
    if res is None:
        return "error", "no result", f"the record has no '{case.check}' result"
    status, msg = str(res.get("status")), str(res.get("message", ""))
    found = status in ("fail", "error") and re.search(expect, msg) is not None
    return ("detected" if found else "missed"), status, msg


def run_case(case: Case, values: dict[str, str], gpus: int, work: Path) -> CaseResult:
    why = unmet(case.needs, gpus)
    t0 = time.perf_counter()
    if not why:
        for name in {m for a in case.argv for m in re.findall(r"\{(\w+)\}", a)} - set(values):
            if name in LAZY:  # e.g. this machine's own busbw, measured once for the cases that need it
                try:
                    values[name] = LAZY[name](Path(values["root"]), gpus, list(case.argv))
                except Unmet as exc:
                    why = str(exc)
                    break
                except (OSError, ValueError, KeyError, StopIteration, subprocess.SubprocessError) as exc:
                    return CaseResult(case.name, case.fault, case.plants, case.argv, "error", "no calibration",
                                      case.check, f"could not make {{{name}}}: {type(exc).__name__}: {exc}",
                                      case.expect, time.perf_counter() - t0)
    argv = tuple(_fill(a, values) for a in case.argv)
    expect = _fill(case.expect, {k: re.escape(v) for k, v in values.items()})
    if why:
        return CaseResult(case.name, case.fault, case.plants, argv, "skipped", "", case.check, why, expect, 0.0)
    record = work / f"{case.name}.json"
    extra = ("--json", str(record)) if case.check else ()
    env = child_env(work)  # scratch of every run stays inside the self-test's own folder
    try:
        if case.before:  # its own outcome is not judged: the case's command is (e.g. the load of what it saved)
            subprocess.run([sys.executable, "-m", "trainready", *(_fill(a, values) for a in case.before)],
                           capture_output=True, text=True, timeout=CASE_TIMEOUT_S, env=env, cwd=work)
        proc = subprocess.run([sys.executable, "-m", "trainready", *argv, *extra], capture_output=True, text=True,
                              timeout=CASE_TIMEOUT_S, env=env, cwd=work)
    except subprocess.TimeoutExpired:
        return CaseResult(case.name, case.fault, case.plants, argv, "error", "timeout", case.check,
                          f"the run did not end within {CASE_TIMEOUT_S:.0f} s", expect, time.perf_counter() - t0)
    outcome, verdict, msg = _judge(case, expect, proc, record)
    return CaseResult(case.name, case.fault, case.plants, argv, outcome, verdict, case.check, msg, expect,
                      time.perf_counter() - t0)


def run_selftest(cases: Sequence[Case], on_case: Callable[[int, Case], None] = lambda i, c: None,
                 on_done: Callable[[CaseResult], None] = lambda r: None) -> dict[str, Any]:
    started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    gpus = gpu_count()
    with tempfile.TemporaryDirectory(prefix="trainready-selftest-") as tmp:
        work = Path(tmp)
        values = placeholders(work / "inputs", gpus)
        results = []
        try:
            for i, case in enumerate(cases):
                on_case(i, case)
                res = run_case(case, values, gpus, work)
                results.append(res)
                on_done(res)
        finally:
            unmount_all()  # before the scratch folder holding the mount points is removed
    bad = [r for r in results if r.outcome in ("missed", "error")]
    counts = {k: sum(1 for r in results if r.outcome == k) for k in ("detected", "missed", "skipped", "error")}
    return {"schema": SCHEMA, "host": socket.gethostname(), "started_at": started,
            "duration_s": round(time.perf_counter() - t0, 2), "tool_version": __version__,
            "status": "fail" if bad else "pass", "gpus": gpus, "counts": counts,
            "cases": [r.to_json() for r in results]}
