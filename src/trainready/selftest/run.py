"""Run the self-test cases, each in a fresh `python -m trainready` process, and build the
`trainready.selftest/1` record.

Outcome per case: "detected" (the named check FAILED with a message matching the case's `expect`, or
the command refused the input with such a line), "missed" (it did not), "skipped" (not applicable
here: the case needs what this machine lacks, with the reason), "broke" (the run itself broke: no
record, an `error` result, a timeout, a failed preparation step, or its family's control run, the same
command with no plant, did not pass).  The self-test fails on any missed or broke case.

The fleet cases (`cluster run` on 3 nodes) are grouped: a group's plants go into ONE run (cases.shared_argv),
each case judged on its own node's line, and the control is in that run: the unplanted reference node
({node1}), which ran the same command at the same time, must be accepted.

Independent cases run side by side (selftest/schedule.py): CPU-bound ones up to a number of lanes set
by the cores, Slurm ones three at a time beside them (one at a time where the partition does not let jobs share
a node), timing-sensitive ones alone at the end; every command forked from one interpreter that has torch imported (selftest/zygote.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from trainready.selftest.cases import Case, control_of, share_key, shared_argv
from trainready.selftest.judge import Finished, Verdict, judge_case, judge_control, prep_failed
from trainready.selftest.prepare import LAZY, Unmet, child_env, unmet, world
from trainready.selftest.zygote import Zygote

SCHEMA = "trainready.selftest/1"
CASE_TIMEOUT_S = 300.0  # one case: a hang plant waits out its 10 s (gloo) / 60 s (NCCL) deadline well inside


@dataclass(frozen=True)
class CaseResult:
    name: str
    fault: str
    plants: tuple[str, ...]
    argv: tuple[str, ...]
    outcome: str  # detected | missed | skipped (not applicable here) | broke
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


def run_cli(argv: Sequence[str], work: Path, record: Path | None = None, timeout_s: float = CASE_TIMEOUT_S,
            zygote: Zygote | None = None) -> Finished:
    """`python -m trainready ARGV [--json RECORD]` in a fresh process, its scratch inside `work`: forked from
    `zygote` (torch already imported), else a new interpreter."""
    extra = ("--json", str(record)) if record is not None else ()
    if record is not None and record.exists():
        record.unlink()
    t0 = time.perf_counter()
    if zygote is not None:
        with tempfile.TemporaryDirectory(prefix="cli-", dir=work) as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            rc = zygote.run([*argv, *extra], child_env(work), work, out, err, timeout_s)
            stderr = err.read_text(encoding="utf-8", errors="replace")
    else:
        try:
            p = subprocess.run([sys.executable, "-m", "trainready", *argv, *extra], capture_output=True, text=True,
                               timeout=timeout_s, env=child_env(work), cwd=work)
            rc, stderr = p.returncode, p.stderr
        except subprocess.TimeoutExpired:
            rc, stderr = None, ""
    last = (stderr.strip().splitlines() or [""])[-1] if rc is not None else ""
    return Finished(tuple(argv), rc, last, record, time.perf_counter() - t0)


def once(done: dict[Any, Any], locks: dict[Any, threading.Lock], guard: threading.Lock, key: Any,
         make: Callable[[], Any]) -> Any:
    """done[key], made by the first caller (`make`) while later callers of that key wait for it; other keys go
    on meanwhile (thread-safe)."""
    with guard:
        lock = locks.setdefault(key, threading.Lock())
    with lock:
        if key not in done:
            done[key] = make()
        return done[key]


@dataclass
class Controls:
    """Each detector family's control run, made once and shared by the family's cases (thread-safe)."""

    work: Path
    values: dict[str, str]
    zygote: Zygote | None = None  # every command forked from it (selftest/zygote.py); None: new interpreters
    done: dict[tuple[tuple[str, ...], tuple[str, ...]], Verdict] = field(default_factory=dict)
    locks: dict[tuple[tuple[str, ...], tuple[str, ...]], threading.Lock] = field(default_factory=dict)
    guard: threading.Lock = field(default_factory=threading.Lock)

    def verdict(self, case: Case) -> Verdict:
        key = control_of(case)  # the first case of a family runs the control; the others wait for its verdict
        return once(self.done, self.locks, self.guard, key, lambda: self._run(case, key))

    def _run(self, case: Case, key: tuple[tuple[str, ...], tuple[str, ...]]) -> Verdict:
        before, argv = ([_fill(a, self.values) for a in part] for part in key)
        if before:
            prep = run_cli(before, self.work, zygote=self.zygote)
            if prep_failed(prep):
                return Verdict("broke", "control preparation", prep_failed(prep))
        digest = hashlib.sha1(repr(key).encode()).hexdigest()[:10]
        record = self.work / f"control-{digest}.json" if case.check else None
        return judge_control(_fill(case.check, self.values), run_cli(argv, self.work, record, zygote=self.zygote))


FLEET_CONTROL = "node:{node1}"  # a fleet case's control: the run's unplanted reference node, accepted in it


@dataclass
class Shared:
    """The fleet cases' `cluster run`s: one per share group (selftest/cases.py shared_argv), made by the first of
    its cases that runs and judged by each of them; nobody runs a group's command twice (thread-safe)."""

    work: Path
    values: dict[str, str]
    groups: dict[str, tuple[Case, ...]]  # share key -> the selected cases of that run, in table order
    zygote: Zygote | None = None
    done: dict[str, tuple[tuple[str, ...], Finished | None, str]] = field(default_factory=dict)
    guard: threading.Lock = field(default_factory=threading.Lock)
    locks: dict[str, threading.Lock] = field(default_factory=dict)

    def run(self, case: Case) -> tuple[tuple[str, ...], Finished | None, str]:
        """(the command as run, its result, '' or why its preparation step failed)."""
        key = share_key(case)
        return once(self.done, self.locks, self.guard, key, lambda: self._run(self.groups.get(key) or (case,)))

    def _run(self, group: tuple[Case, ...]) -> tuple[tuple[str, ...], Finished | None, str]:
        argv = tuple(_fill(a, self.values) for a in shared_argv(group))
        t0 = time.perf_counter()
        for c in group:
            if c.before:
                prep = run_cli([_fill(a, self.values) for a in c.before], self.work, zygote=self.zygote)
                if prep_failed(prep):
                    return argv, None, prep_failed(prep)
        record = self.work / f"share-{share_key(group[0])}.json"
        run = run_cli(argv, self.work, record, zygote=self.zygote)
        return argv, dataclasses.replace(run, seconds=time.perf_counter() - t0), ""  # its preparation counted


def _fleet_case(case: Case, values: dict[str, str], expect: str, shared: Shared, t0: float) -> CaseResult:
    """A fleet case: its group's one run; the unplanted reference node accepted in it is the control."""
    argv, run, prep = shared.run(case)
    check = _fill(case.check, values)
    if run is None:
        return _result(case, argv, expect, Verdict("broke", "preparation", prep), time.perf_counter() - t0, check)
    control = judge_control(_fill(FLEET_CONTROL, values), run)
    if control.outcome != "passed":
        return _result(case, argv, expect, Verdict("broke", f"control {control.verdict}", "control (the run's "
                       f"unplanted reference node) not accepted: {control.message}"), run.seconds, check)
    return _result(case, argv, expect, judge_case(check, expect, run), run.seconds, check)


def _result(case: Case, argv: tuple[str, ...], expect: str, v: Verdict, seconds: float,
            check: str = "") -> CaseResult:
    """`check`: the case's check with its placeholders filled ('node:{node2}' → that node), once they are."""
    return CaseResult(case.name, case.fault, case.plants, argv, v.outcome, v.verdict, check or case.check, v.message,
                      expect, seconds)


def _lazy(case: Case, values: dict[str, str], gpus: int) -> str:
    """Make the lazily made placeholders this case needs; '' or why the case does not apply here."""
    for name in sorted({m for a in case.argv for m in re.findall(r"\{(\w+)\}", a)} - set(values)):
        if name in LAZY:  # e.g. this machine's own busbw, measured once for the cases that need it
            try:
                values[name] = LAZY[name](Path(values["root"]), gpus, list(case.argv))
            except Unmet as exc:
                return f"not applicable: {exc}"
    return ""


def run_case(case: Case, values: dict[str, str], gpus: int, work: Path, controls: Controls | None = None,
             shared: Shared | None = None) -> CaseResult:
    """One case: not applicable here (why), or its family's control, its preparation step, then the planted run
    (a fleet case: its group's one run, `Shared`)."""
    t0 = time.perf_counter()
    expect = _fill(case.expectation(world(gpus)), {k: re.escape(v) for k, v in values.items()})
    why = unmet(case.needs, gpus)
    if why:
        return _result(case, case.argv, expect, Verdict("skipped", "", why), 0.0)
    try:
        why = _lazy(case, values, gpus)
    except (OSError, ValueError, KeyError, StopIteration, subprocess.SubprocessError) as exc:
        return _result(case, case.argv, expect, Verdict("broke", "no calibration", f"could not prepare the case: "
                                                        f"{type(exc).__name__}: {exc}"), time.perf_counter() - t0)
    argv = tuple(_fill(a, values) for a in case.argv)
    if why:
        return _result(case, argv, expect, Verdict("skipped", "", why), 0.0)
    controls = controls or Controls(work, values)
    if case.needs == "slurm":
        return _fleet_case(case, values, expect, shared or Shared(work, values, {}, controls.zygote), t0)
    control = controls.verdict(case)
    if control.outcome != "passed":
        return _result(case, argv, expect, Verdict("broke", f"control {control.verdict}", "control run (the same "
                       f"command, no plant) did not pass: {control.message}"), time.perf_counter() - t0)
    if case.before:
        prep = run_cli([_fill(a, values) for a in case.before], work, zygote=controls.zygote)
        if prep_failed(prep):
            return _result(case, argv, expect, Verdict("broke", "preparation", prep_failed(prep)),
                           time.perf_counter() - t0)
    run = run_cli(argv, work, work / f"{case.name}.json" if case.check else None, zygote=controls.zygote)
    check = _fill(case.check, values)
    return _result(case, argv, expect, judge_case(check, expect, run), time.perf_counter() - t0, check)
