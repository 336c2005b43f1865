"""A node task's progress, RESULTS/nodes/NODE.progress.json, and what it says about a task that ran past
--time: it did not finish in time (it was still moving: raise --time), or it hung (it stopped moving).

The node task rewrites the file (atomically) when it starts, and at the start and the end of each check:
{phase, phase_started, task_started, done: [{name, seconds}], total}.  The collector reads it for each task
it had to cancel (or Slurm killed at its time limit).  "Hung" needs evidence: the task sat in one phase
(start-up or a check) more than HUNG_FACTOR x the longest any other node took for that same phase, plus
HUNG_SLACK_S.  Without such a comparison (no other node got through that phase) the task only "did not
finish within --time", with an estimate of how long the acceptance takes at this level.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

START = "start-up"  # the phase before the first check: interpreter, imports, spec
HUNG_FACTOR = 3.0  # x the longest any other node spent in the same phase
HUNG_SLACK_S = 10.0  # plus this (seconds): start-up times on a loaded host vary by seconds


def path(results: Path, node: str) -> Path:
    return results / "nodes" / f"{node}.progress.json"


class Writer:
    """The node task's side: one call per event; a failed write never fails the acceptance."""

    def __init__(self, results: Path, node: str, total: int) -> None:
        now = time.time()
        self.file = path(results, node)
        self.doc: dict[str, Any] = {"node": node, "task_started": now, "phase": START, "phase_started": now,
                                    "done": [], "total": total, "updated": now}
        self._write()

    def _write(self) -> None:
        from trainready.util.atomic import atomic_write_json

        try:
            atomic_write_json(self.file, self.doc)
        except OSError:
            pass

    def phase(self, name: str) -> None:
        """The previous phase ended now; `name` starts."""
        now = time.time()
        self.doc["done"].append({"name": self.doc["phase"], "seconds": round(now - self.doc["phase_started"], 3)})
        self.doc.update(phase=name, phase_started=now, updated=now)
        self._write()


def read(results: Path, node: str) -> dict[str, Any] | None:
    """The node's progress file, its strings cleaned (util/nodetext.py: a node wrote it); None if unreadable."""
    from trainready.util.nodetext import clean_tree

    try:
        doc = clean_tree(json.loads(path(results, node).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


@dataclass(frozen=True)
class Overtime:
    hung: bool
    cause: str  # the cause key (judge/guard.py groups nodes by it)
    text: str  # what to say after "task J "


def phase_times(docs: Sequence[Mapping[str, Any]]) -> dict[str, list[float]]:
    """phase name → the seconds each node (that got through it) spent in it."""
    out: dict[str, list[float]] = {}
    for d in docs:
        for p in d.get("done") or []:
            if isinstance(p, Mapping) and isinstance(p.get("seconds"), (int, float)):
                out.setdefault(str(p.get("name")), []).append(float(p["seconds"]))
    return out


def estimate(doc: Mapping[str, Any] | None, finished_s: Sequence[float], ran_s: float) -> str:
    """How long a node's acceptance takes at this level: the median of the nodes that finished, else this
    task's own pace (checks done of total), else a lower bound."""
    if finished_s:
        return f"~{statistics.median(finished_s):.0f} s (median of the {len(finished_s)} node(s) that finished)"
    done = [p for p in (doc or {}).get("done") or [] if p.get("name") != START]
    total = int((doc or {}).get("total") or 0)
    if done and total:
        return f"~{ran_s * total / len(done):.0f} s ({len(done)} of {total} checks in {ran_s:.0f} s)"
    return f"more than {ran_s:.0f} s (no check finished)"


def judge(doc: Mapping[str, Any] | None, others: Sequence[Mapping[str, Any]], finished_s: Sequence[float],
          ran_s: float, limit: str, now: float | None = None) -> Overtime:
    """A task that ran past --time `limit` (ran_s seconds, Slurm's RunTime): hung, or still going."""
    now = time.time() if now is None else now
    if doc is not None:
        phase, since = str(doc.get("phase", START)), now - float(doc.get("phase_started") or now)
        seen = phase_times(others).get(phase, [])
        if seen and since > HUNG_FACTOR * max(seen) + HUNG_SLACK_S:
            where = "start-up (before its first check)" if phase == START else f"check {phase}"
            return Overtime(True, f"no result: hung in {phase}",
                            f"hung: no progress for {since:.0f} s in {where}, which took the other "
                            f"{len(seen)} node(s) at most {max(seen):.0f} s")
    where = f"; it was in {doc.get('phase')}" if doc else "; it wrote no progress"
    return Overtime(False, f"no result: did not finish within --time {limit}",
                    f"did not finish within --time {limit}{where} (the node acceptance takes "
                    f"{estimate(doc, finished_s, ran_s)} at this level: raise --time)")
