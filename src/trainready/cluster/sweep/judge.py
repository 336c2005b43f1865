"""The sweep's verdicts: pass / fail / unknown per node, strikes across sweeps, and the drain bound.

* fail: the node ran its checks and one failed (its own record says so).  Anything that kept it from finishing
  is unknown, never fail: preempted by a job, cancelled, busy, never started, timed out, no record.  Unknown
  leaves the strikes as they are and is never drained.  A node whose checks passed but one was "not judged" (a
  timing measured on a busy machine, records.NOT_JUDGED) is unknown too, never a pass: a pass would clear the
  strikes, and failing, busy, failing, busy would never drain.
* unjudged: consecutive unknown sweeps of a node; at the spec's fleet.unjudged_sweeps it is said "cannot be judged
  for N sweeps" (coverage, history, Prometheus), never a drain on its own.
* strikes: consecutive failing sweeps; a node is drained only at `--strikes` (default 2), the failure measured
  again.  Before that it is a WARN that says so.  A pass clears the strikes.
* the bound: past `--max-drain` drains (a count, or a percentage of the partition's nodes) within the window, the
  sweep drains no more and says so loudly: so many nodes failing alike is a fleet-wide cause (a driver, a
  filesystem, the spec), not so many broken nodes.
* a leaf switch: most of one switch's nodes failing for a cross-node or bandwidth cause (`by_switch`, the
  fleet run's rule in cluster/judge/switches.py) are not drained for it: action 'switch'.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from trainready.cluster.judge.guard import MaxDrain
from trainready.cluster.judge.verdict import NodeVerdict
from trainready.cluster.sweep import state

PASS, FAIL, UNKNOWN = "pass", "fail", "unknown"
STOPPED = ("PREEMPTED", "CANCELLED", "REQUEUED")


@dataclass(frozen=True)
class Outcome:
    node: str
    verdict: str  # pass / fail / unknown
    text: str  # the reasons (fail), why it could not be judged (unknown), or its warnings (pass)
    strikes: int = 0  # consecutive failing sweeps, this one included
    action: str = ""  # "", "warn" (a first failure), "drain", "held" (past the bound), "left-alone" (admin's drain)
    trend: tuple[str, ...] = ()  # trend WARNs against the node's own history (trend.py)
    causes: tuple[str, ...] = ()  # a failure's cause keys (verdict.NodeVerdict.causes): its class (reasons.py)
    unjudged: int = 0  # consecutive sweeps that could not judge the node (unknown), this one included


def not_judged(record: Mapping[str, Any] | None) -> list[str]:
    """'check NAME: not judged: WHY' for each check of a node record whose timing was not judged (busy machine)."""
    from trainready.records import NOT_JUDGED

    return [f"check {r.get('name')}: not judged: {(r.get('details') or {}).get(NOT_JUDGED)}"
            for r in ((record or {}).get("report") or {}).get("results", [])
            if isinstance(r, Mapping) and (r.get("details") or {}).get(NOT_JUDGED)]


def outcome(nv: NodeVerdict, stopped_by: Mapping[str, str], unjudged: Sequence[str] = ()) -> Outcome:
    """One node's verdict of this sweep; `stopped_by`: node → what stopped its task ('preempted by job N after
    40 s'), for tasks Slurm preempted or cancelled; `unjudged`: its record's checks not judged (not_judged())."""
    if nv.not_tested:
        return Outcome(nv.node, UNKNOWN, nv.not_tested)
    if nv.node in stopped_by:
        return Outcome(nv.node, UNKNOWN, stopped_by[nv.node])
    if nv.accepted and unjudged:
        return Outcome(nv.node, UNKNOWN, "; ".join(unjudged))
    if nv.accepted:
        return Outcome(nv.node, PASS, "; ".join(nv.warnings))
    if no_record(nv):  # it did not finish (died, timed out, killed): it could not be judged
        return Outcome(nv.node, UNKNOWN, "; ".join(nv.reasons) or "no record")
    return Outcome(nv.node, FAIL, "; ".join(nv.reasons), causes=tuple(nv.causes))


def no_record(nv: NodeVerdict) -> bool:
    """The node's task left no record (fleet verdict cause 'no result: ...')."""
    return any(c.startswith("no result") for c in nv.causes)


def cannot_judge(n: int, limit: int) -> str:
    """The line for a node not judged in `n` sweeps in a row, at or past the spec's `limit`; else ""."""
    return f"cannot be judged for {n} sweeps" if limit and n >= limit else ""


def strike(doc: dict[str, Any], o: Outcome, strikes: int, t: dt.datetime, limit: int = 0) -> Outcome:
    """Record `o` in the node's state; a failure becomes 'warn' until the `strikes`-th in a row, then 'drain'; an
    unknown keeps the strikes and counts the sweeps in a row that could not judge the node (`limit`: the spec's
    fleet.unjudged_sweeps, past which it is said)."""
    mine = state.node(doc, o.node)
    mine["last_swept"] = state.stamp(t)
    mine["unjudged"] = int(mine.get("unjudged", 0)) + 1 if o.verdict == UNKNOWN else 0
    if o.verdict == UNKNOWN:
        said = cannot_judge(mine["unjudged"], limit)
        o = dataclasses.replace(o, unjudged=mine["unjudged"], text="; ".join(x for x in (said, o.text) if x))
    mine["runs"] = (mine.get("runs", []) + [{"when": state.stamp(t), "verdict": o.verdict, "text": o.text}])[-20:]
    if o.verdict == PASS:
        mine["strikes"], mine["last_pass"] = 0, state.stamp(t)
        return o
    if o.verdict == UNKNOWN:
        return o
    mine["strikes"] = int(mine.get("strikes", 0)) + 1
    n = mine["strikes"]
    return Outcome(o.node, o.verdict, o.text, n, "drain" if n >= strikes else "warn", causes=o.causes)


def bound(doc: dict[str, Any], wanted: Sequence[str], most: MaxDrain, fleet: int, window_s: float,
          t: dt.datetime) -> tuple[list[str], list[str], str]:
    """(drain, hold, loud line): the nodes that may be drained within `--max-drain` over the window."""
    recent = [d for d in doc.get("drains", []) if (t - state.parse(d["when"])).total_seconds() < window_s]
    room = max(0, most.limit(fleet) - len(recent))
    drain, hold = list(wanted[:room]), list(wanted[room:])
    if not hold:
        return drain, hold, ""
    return drain, hold, (f"DRAINING STOPPED: {len(recent) + len(wanted)} node(s) failing within "
                         f"{window_s / 3600:g} h, past --max-drain {most} of {fleet}: a fleet-wide cause is likelier "
                         f"than so many broken nodes (driver, filesystem, spec?); not drained: {', '.join(hold)}")


def by_switch(outs: Sequence[Outcome], nodes: Sequence[NodeVerdict], fraction: float, prefixes: Sequence[str],
              topology: Any = None) -> tuple[list[Outcome], list[str]]:
    """(outcomes, lines): failing nodes a leaf switch explains (cluster/judge/switches.py) get action 'switch'
    instead of a warn or a drain; the lines name each switch."""
    from trainready.cluster.judge import switches

    failing = {o.node for o in outs if o.verdict == FAIL}
    rejected = {nv.node: nv.causes for nv in nodes if nv.node in failing}
    named = switches.for_rejected(rejected, fraction, prefixes, topology, {nv.node for nv in nodes if not nv.not_tested})  # swept ones
    held = switches.held_by_switch(rejected, named, prefixes)
    return ([dataclasses.replace(o, action="switch") if o.node in held else o for o in outs],
            [s.line() for s in named])
