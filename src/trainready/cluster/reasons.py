"""Drain reasons a program can sort: `trainready:SOURCE/CLASS YYYY-MM-DD: CAUSE`.

`sinfo -R` shows the first 20 characters of a reason (its default format "%20E %9u %19H %N", sinfo(1)), so
those 20 tell what drained the node and what kind of fault it is:

    trainready:sweep/hw 2026-12-06: check matmul: FAIL: 3 of 4096 elements off
    trainready:run/fab 2026-12-06: collective: all_reduce busbw 12 GB/s below ...
    trainready:health/sw 2026-12-06: check versions: FAIL: driver 550.54 != 550.90

* SOURCE: `run` (`cluster run`, `cluster resume`, `cluster rollout`), `sweep` (`cluster sweep`), `health`
  (`node --health-check`, passive or active).
* CLASS: `hw` hardware (a part of this node: GPU, memory, PCIe, its own figures), `sw` software (versions,
  drift, host settings, a task that left no result), `fab` fabric (the collectives and cross-node causes:
  all_reduce, comm, the shared storage path).  The anchors: soperator drains with a `[node_problem]` or
  `[user_problem]` prefix (nebius/soperator, passive checks); NHC marks its own drains with an `NHC:` prefix
  and only resumes those (LBNL Node Health Check, `nhc` with `-a`/DRAIN_NODE).  trainready does the same with
  `trainready:`: a reason without it is an administrator's and is never overwritten nor resumed.

The class travels as data: the failing check's name (`CHECK_CLASS`) or the fleet verdict's cause key
(`class_of`), never the message.  The whole text goes in the ledger (RESULTS/drain-ledger.jsonl); Slurm keeps
the reason up to `REASON_MAX` characters.  Reasons written by earlier versions, `trainready: [KIND] DATE:
reason` and `trainready: reason`, parse as trainready's own with an unknown class.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Sequence

PREFIX = "trainready:"  # the same word as control/slurm.py PREFIX: every reason trainready sets starts with it
SOURCES = ("run", "sweep", "health")
HARDWARE, SOFTWARE, FABRIC = "hardware", "software", "fabric"
CODE = {HARDWARE: "hw", SOFTWARE: "sw", FABRIC: "fab"}  # in the reason; `sinfo -R` shows 20 characters
HEAD_MAX = 20  # sinfo -R's default width of the reason column (sinfo(1) "%20E")

# The class of each check's failure (checks/NAME.py `name`); tests/test_drain_reasons.py holds every registered
# check to a row.  A node's own part: hardware; its software chain and settings: software; collectives: fabric.
CHECK_CLASS: dict[str, str] = {
    "gpus": HARDWARE, "matmul": HARDWARE, "fingerprint": HARDWARE, "throughput": HARDWARE, "pcie": HARDWARE,
    "burnin": HARDWARE, "train_step": HARDWARE, "ckpt_throughput": HARDWARE,
    "versions": SOFTWARE, "host": SOFTWARE, "resume": SOFTWARE, "ckpt_compat": SOFTWARE, "ckpt_compat_save": SOFTWARE,
    "allreduce": FABRIC, "comm": FABRIC, "fabric": FABRIC,
}
# The cross-node findings' checks (cluster/tasks/crosschecks.py, collective.py) and other fleet cause keys.
CAUSE_CLASS: dict[str, str] = {
    "clock": SOFTWARE, "limits": SOFTWARE, "hosts": SOFTWARE, "storage": FABRIC, "collective": FABRIC,
    "fingerprint": HARDWARE, "image differs": SOFTWARE, "drift": SOFTWARE, "host": SOFTWARE,
    "no result": SOFTWARE, "rejected": SOFTWARE,
}


def class_of(cause: str) -> str:
    """The class of one fleet verdict cause key ('check matmul', 'slow gemm_bf16', 'drift torch', 'collective',
    'no result: hung in matmul'); a key no table names is software (what trainready ran, not a part)."""
    word, _, rest = cause.partition(" ")
    if word == "check":
        return CHECK_CLASS.get(rest, SOFTWARE)
    if word == "slow":  # a figure slow against the fleet: a busbw is the fabric's, the others the node's own
        return FABRIC if "busbw" in rest else HARDWARE
    if cause.startswith("no result: hung in "):  # its progress stopped in a check (tasks/progress.py): that check's
        return CHECK_CLASS.get(cause.removeprefix("no result: hung in ").split()[0], SOFTWARE)
    return CAUSE_CLASS.get(cause, CAUSE_CLASS.get(cause.split(":")[0], CAUSE_CLASS.get(word, SOFTWARE)))


def class_of_causes(causes: Sequence[str]) -> str:
    """The class of a drain: its first cause's (the reason's text starts with the first reason)."""
    return class_of(causes[0]) if causes else SOFTWARE


def head(source: str, klass: str) -> str:
    """'trainready:sweep/hw': the reason's first word, within `sinfo -R`'s 20 characters but for health/fab."""
    if source not in SOURCES or klass not in CODE:
        raise ValueError(f"drain reason: source {source!r} or class {klass!r} not in {SOURCES} / {tuple(CODE)}")
    return f"{PREFIX}{source}/{CODE[klass]}"


def compose(source: str, klass: str, cause: str, day: dt.date | None = None) -> str:
    """The whole reason (Slurm keeps up to REASON_MAX characters of it: ledger.reason_text cuts it)."""
    when = (day or dt.datetime.now(dt.timezone.utc).date()).isoformat()
    return f"{head(source, klass)} {when}: {cause}"


@dataclass(frozen=True)
class Reason:
    """A drain reason read back: whose it is and, for trainready's, what drained the node and why."""

    ours: bool  # starts with 'trainready:' (any version)
    source: str = ""  # run / sweep / health; '' unknown (a plain reason of an earlier version)
    klass: str = ""  # hardware / software / fabric; '' unknown (written before the classes)
    date: dt.date | None = None
    cause: str = ""  # the rest: the failing check and its one-line reason
    form: str = ""  # "classed" (this format), "dated" ('trainready: [KIND] DATE:'), "plain", or "" (not ours)


_CLASSED = re.compile(r"trainready:(\w+)/(\w*)(?:\s+(\d{4}-\d\d-\d\d):)?\s*(.*)", re.S)
_DATED = re.compile(r"trainready:\s*\[(\w[\w-]*)\]\s+(\d{4}-\d\d-\d\d):\s*(.*)", re.S)
_BY_CODE = {c: k for k, c in CODE.items()}


def _date(text: str | None) -> dt.date | None:
    try:
        return dt.date.fromisoformat(text) if text else None
    except ValueError:
        return None


def _klass(code: str) -> str:
    """A class code, or its start where `sinfo -R` cut it ('fa' → fabric); '' when none matches one."""
    hits = [k for c, k in _BY_CODE.items() if code and c.startswith(code)]
    return hits[0] if len(hits) == 1 else ""


def parse(text: str) -> Reason:
    """Any node reason → who set it and, for trainready's own, source, class, date and cause.  Also reads the first
    20 characters alone, as `sinfo -R` prints them."""
    text = text.strip()
    if not text.startswith(PREFIX):
        return Reason(False)
    m = _CLASSED.fullmatch(text)
    if m and m.group(1) in SOURCES:
        return Reason(True, m.group(1), _klass(m.group(2)), _date(m.group(3)), m.group(4).strip(), "classed")
    m = _DATED.fullmatch(text)
    if m:
        return Reason(True, m.group(1), "", _date(m.group(2)), m.group(3).strip(), "dated")
    return Reason(True, cause=text[len(PREFIX):].strip(), form="plain")
