"""Which nodes one sweep tests: idle ones only, the least recently swept first, within the cap.

A node with a job on it (Slurm state mixed, allocated, completing) is never touched; nor a node drained, down,
reserved or not responding.  `--skip-passed-within` leaves out a node that passed a sweep that recently, so a
capped sweep walks the fleet over days.  The cap: `--max-nodes` and `--max-fraction` (of the partition's nodes).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from trainready.cluster.control.slurm import NodeInfo
from trainready.cluster.sweep import state

IDLE = "idle"
BUSY = ("mixed", "allocated", "completing")


@dataclass(frozen=True)
class Pick:
    nodes: tuple[str, ...]  # to sweep now, in order
    left: Mapping[str, str] = field(default_factory=dict)  # node → why it is not swept now
    cap: int = 0  # the most nodes under test at once


def cap(total: int, max_nodes: int | None, max_fraction: float | None) -> int:
    """The most nodes one sweep tests: the smaller of --max-nodes and --max-fraction x the partition (>= 1)."""
    limits = [total]
    if max_nodes is not None:
        limits.append(max_nodes)
    if max_fraction is not None:
        limits.append(max(1, math.floor(total * max_fraction)))
    return min(limits)


def why_not_idle(i: NodeInfo) -> str:
    """'' for an idle node that answers, else why it is not swept (Slurm's word)."""
    if i.base in BUSY:
        return f"busy: a job runs on it ({i.state}): never touched"
    if i.drained:
        return f"drained ({i.reason or 'no reason'})"
    if i.base != IDLE or i.flags:
        return f"not idle ({i.state})"
    return ""


def pick(info: Mapping[str, NodeInfo], doc: dict[str, Any], most: int, skip_within_s: float | None,
         t: dt.datetime) -> Pick:
    """The idle nodes not passed within `skip_within_s`, least recently swept first, at most `most`."""
    left: dict[str, str] = {}
    ready = []
    for name, i in info.items():
        why = why_not_idle(i)
        mine = doc["nodes"].get(name, {})
        passed = mine.get("last_pass")
        if not why and passed and skip_within_s is not None and \
                (t - state.parse(passed)).total_seconds() < skip_within_s:
            why = f"passed a sweep at {passed} (within --skip-passed-within)"
        if why:
            left[name] = why
        else:
            ready.append((mine.get("last_swept", ""), name))
    ready.sort()  # never swept ("") first, then the oldest
    chosen = [n for _, n in ready[:most]]
    for _, n in ready[most:]:
        left[n] = f"past the cap of {most} node(s) at once: next sweep"
    return Pick(tuple(chosen), left, most)
