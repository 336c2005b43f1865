"""Drain and resume, NHC-style, with a ledger: RESULTS/drain-ledger.jsonl, one JSON object per action.

* drain: `scontrol update nodename=X state=drain reason="trainready:run/CLASS DATE: <first reason>"` (reasons.py)
  for rejected nodes only, each with its RMA folder (RESULTS/rma/NODE/, cluster/repair/rma/).  A node an administrator
  drained (a reason without the `trainready:` prefix) is left alone: its reason is never overwritten.
* resume: a node is returned to service only if its current reason starts with `trainready:` AND it passes
  acceptance again.  So that no other job lands on it while it is re-validated, it is first reserved
  (`scontrol create reservation ... Flags=MAINT,IGNORE_JOBS`), then resumed, accepted inside the
  reservation, drained again if it fails, and the reservation is deleted.
Every entry: action, node, when (UTC), who (user@host), why, the record that caused it, Slurm's reason.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import getpass
import json
import socket
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from trainready.cluster.repair import reasons as vocab
from trainready.cluster.repair import rma
from trainready.cluster.control import slurm
from trainready.cluster.judge.guard import DrainPlan
from trainready.cluster.judge.verdict import FleetVerdict
from trainready.cluster.repair.jobs import JobImpact
from trainready.cluster.tasks.layout import LEDGER

REASON_MAX = 200  # characters of the drain reason (Slurm keeps it as given; sinfo -R shows it)
REASON_BYTES = 255  # UTF-8 bytes: slurmdbd keeps a node event's reason in a TINYTEXT column (255 bytes)


def who() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def append(results: Path, entry: dict[str, Any]) -> None:
    """Add one entry; the ledger is rewritten atomically (a crash leaves the old or the new one, whole)."""
    from trainready.util.atomic import atomic_write_text

    path = results / LEDGER
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    stamp = {"when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "who": who()}
    atomic_write_text(path, old + json.dumps({**stamp, **entry}, sort_keys=False) + "\n")


def read(results: Path) -> list[dict[str, Any]]:
    path = results / LEDGER
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def reason_text(reasons: Sequence[str], source: str = "run", klass: str = vocab.SOFTWARE,
                day: dt.date | None = None) -> str:
    """'trainready:SOURCE/CLASS YYYY-MM-DD: first reason (+n more)' (cluster/repair/reasons.py), cut to REASON_MAX."""
    from trainready.util.nodetext import clean_line

    first = " ".join(clean_line(reasons[0], REASON_MAX).split()) if reasons else "rejected"
    more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
    text = vocab.compose(source, klass, first, day)
    return fit(text, more)


def fit(text: str, more: str = "") -> str:
    """`text` + `more` within REASON_MAX characters and REASON_BYTES bytes of UTF-8 (≥, ×, → take 3 each): cut
    with '...' before `more` where either is passed."""
    if len(text) + len(more) <= REASON_MAX and len((text + more).encode()) <= REASON_BYTES:
        return text + more
    cut = text[: REASON_MAX - len(more) - 3]
    while len((cut + "..." + more).encode()) > REASON_BYTES:
        cut = cut[:-1]
    return cut + "..." + more


def dated_reason(kind: str, reasons: Sequence[str], day: dt.date | None = None, klass: str = vocab.SOFTWARE) -> str:
    """The reason a sweep or the health check sets: what found it (`kind`), the class, the date, the cause."""
    return reason_text(reasons, kind, klass, day)


def whole(source: str, klass: str, reasons: Sequence[str]) -> dict[str, str]:
    """The ledger's fields of a drain's reason: source, class, and the whole text Slurm's copy may cut."""
    return {"source": source, "class": klass, "reason": vocab.compose(source, klass, "; ".join(reasons) or "rejected")}


def drain_rejected(results: Path, verdict: FleetVerdict, say: Callable[[str], None],
                   guard: DrainPlan | None = None, jobs: Mapping[str, JobImpact] | None = None) -> list[str]:
    """Drain each rejected node the guard allows (all of them without a guard: resume drains again the nodes
    it re-validated), never over an administrator's drain; nodes not tested are never touched; `jobs`: the
    run's job impact per node, handed to each RMA folder.  The nodes drained."""
    rejected = [n for n in verdict.nodes if n.rejected]
    if guard is not None and guard.held:
        say(guard.why)
        for nv in rejected:
            if nv.node in guard.held:
                append(results, {"action": "held", "node": nv.node, "why": list(nv.reasons), "record": nv.record,
                                 "guard": guard.why, "planted": dict(verdict.planted)})
        rejected = [n for n in rejected if n.node in guard.drain]
    info = slurm.nodes([n.node for n in rejected]) if rejected else {}
    drained = []
    for nv in rejected:
        i = info.get(nv.node)
        base = {"node": nv.node, "why": list(nv.reasons), "record": nv.record, "planted": dict(verdict.planted)}
        if i is not None and i.drained and not i.ours:
            say(f"{nv.node}: already drained by an administrator ({i.reason or 'no reason'}); left alone")
            append(results, {"action": "left-alone", **base, "slurm_reason": i.reason})
            continue
        klass = vocab.class_of_causes(nv.causes)
        reason = reason_text(nv.reasons, "run", klass)
        failed = drain_one(nv.node, reason)
        append(results, {"action": "drain-failed" if failed else "drain", **base, "slurm_reason": reason,
                         **whole("run", klass, nv.reasons),
                         **({"error": failed} if failed else {})})
        say(f"{nv.node}: NOT drained: {failed}" if failed else f"{nv.node}: drained ({reason})")
        if not failed:
            drained.append(nv.node)
            rma.after_drain(results, nv.node, nv.record or "", say, jobs=(jobs or {}).get(nv.node))  # RESULTS/rma/NODE/
    return drained


def drain_one(node: str, reason: str) -> str:
    """Drain `node`; '' when done, else why not, in one line.  A failure on one node is that node's: it never
    stops the drains of the others, nor the verdict or state written after them."""
    from trainready.errors import SlurmError

    try:
        slurm.drain(node, reason)
    except (SlurmError, OSError, ValueError) as exc:  # ValueError: an argv element execve(2) refuses
        return f"{type(exc).__name__}: {exc}" if not isinstance(exc, SlurmError) else str(exc)
    return ""


@dataclasses.dataclass(frozen=True)
class ResumePlan:
    revalidate: tuple[str, ...]
    left: tuple[tuple[str, str], ...]  # (node, why it is not touched)


def plan_resume(nodes: Sequence[str] | None, partition: str | None) -> ResumePlan:
    """Which nodes may be re-validated: drained by trainready.  Given none: every such node of the partition."""
    info = slurm.nodes(list(nodes) if nodes else None, partition)
    todo, left = [], []
    for name in nodes or list(info):
        i = info.get(name)
        if i is None:
            left.append((name, "not a node Slurm knows"))
        elif not i.drained:
            if nodes:
                left.append((name, f"not drained ({i.state}): nothing to resume"))
        elif not i.ours:
            left.append((name, f"drained by an administrator ({i.reason or 'no reason'}): left alone"))
        else:
            todo.append(name)
    return ResumePlan(tuple(todo), tuple(left))


def reserve(nodes: Sequence[str], minutes: int) -> str:
    name = f"trainready-revalidate-{dt.datetime.now().strftime('%Y%m%d%H%M%S')}"
    slurm.call(["scontrol", "create", "reservation", f"ReservationName={name}", f"Nodes={','.join(nodes)}",
                "StartTime=now", f"Duration={minutes}", f"Users={getpass.getuser()}", "Flags=MAINT,IGNORE_JOBS"])
    return name


def unreserve(name: str) -> None:
    slurm.call(["scontrol", "delete", f"ReservationName={name}"])
