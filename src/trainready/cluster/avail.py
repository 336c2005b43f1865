"""Which nodes can be tested, from Slurm's own word before anything is submitted; and which array tasks wait
for a reason that cannot clear by itself.

A node that is drained (by an administrator, or by trainready earlier), down, not responding, in a
maintenance or someone else's reservation, or in any other state Slurm will not start a job in, is NOT
TESTED: it gets no array task (one unavailable node would otherwise hold back the others: Slurm's
scheduler skips the rest of an array in a cycle once one of its tasks cannot start), it is recorded with
Slurm's state and the administrator's reason, and it is never drained nor rejected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from trainready.cluster import slurm

# Node states that mean a reservation holds the node (sinfo %T base name).
RESERVED = ("reserved", "maint")


@dataclass(frozen=True)
class Selection:
    """The nodes a run submits to, and those it reports as not tested (node → why, one line)."""

    nodes: tuple[str, ...]
    not_tested: Mapping[str, str]
    order: tuple[str, ...] = ()  # every name, in the order asked for (the verdict's order)

    def say_not_tested(self, say: Callable[[str], None]) -> None:
        """One line per node not tested, with why."""
        for node, why in self.not_tested.items():
            say(f"{node}: not tested: {why}")


def holder(node: str, resvs: Sequence[slurm.Reservation]) -> slurm.Reservation | None:
    """The ACTIVE reservation that holds `node`, if any."""
    return next((r for r in resvs if node in r.nodes and r.state.upper() == "ACTIVE"), None)


def why_not(info: slurm.NodeInfo, resv: slurm.Reservation | None, ours: str | None) -> str:
    """'' when a task pinned to this node can start by itself; else one line: Slurm's state and reason."""
    said = f"Slurm state {info.state}" + (f", reason '{info.reason}'" if info.reason else "")
    if resv is not None and resv.name != ours:
        return f"in reservation {resv.name} for {resv.users} ({said})"
    if info.drained:
        if info.ours:
            return f"drained by trainready earlier ({said}); `trainready cluster resume` re-validates it"
        return f"drained by an administrator ({said}); left alone"
    if info.usable:
        return ""
    in_ours = resv is not None and resv.name == ours  # resume's own maintenance reservation: 'maint', 'idle$'
    if in_ours and (info.base in RESERVED or info.base in slurm.USABLE) and not info.state.endswith("*"):
        return ""
    if info.base in ("down", "fail", "failing") or info.state.endswith("*"):
        return f"down or not responding ({said})"
    return f"not available to jobs ({said})"


def select(names: Sequence[str], info: Mapping[str, slurm.NodeInfo], ours: str | None) -> Selection:
    """Split `names` (in order) into the nodes to submit to and those not tested; a name Slurm does not
    know is not tested either ('Slurm knows no such node')."""
    resvs = slurm.reservations() if any(i.base in RESERVED or "$" in i.state for i in info.values()) or ours \
        else []
    keep: list[str] = []
    skip: dict[str, str] = {}
    for n in names:
        i = info.get(n)
        why = "Slurm knows no node of this name (sinfo lists none)" if i is None else why_not(i, holder(n, resvs), ours)
        if why:
            skip[n] = why
        else:
            keep.append(n)
    return Selection(tuple(keep), skip, tuple(names))


def stuck_reason(reason: str) -> bool:
    """A pending reason that cannot clear by itself ('ReqNodeNotAvail, UnavailableNodes:node2' → True)."""
    return reason.split(",", 1)[0].strip() in slurm.STUCK


def names_node(reason: str, node: str) -> bool:
    """The reason's 'UnavailableNodes:' list (a hostlist; scontrol writes '_' for spaces) includes `node`."""
    _, _, tail = reason.replace("_", " ").partition("UnavailableNodes:")
    expr = tail.split()[0].strip(",") if tail.split() else ""
    from trainready.ranks.env import expand_hostlist

    return bool(expr) and node in expand_hostlist(expr)


def stuck_on(reason: str, node: str, info: slurm.NodeInfo | None) -> str:
    """Why a task pinned to `node` and pending for `reason` will not start by itself, or '' when it may:
    Slurm's scheduler gives every pending task of an array the reason of the one it could not start, so a
    bare 'ReqNodeNotAvail' on a task whose own node is fine is a sibling's, and clears once that one goes.
    Stuck: '; the node: <why>' when the node's own state says why, else '.' (the reason alone says it)."""
    if not stuck_reason(reason):
        return ""
    why = "Slurm knows no node of this name" if info is None else why_not(info, None, None)
    if reason.startswith("ReqNodeNotAvail") and not why and not names_node(reason, node):
        return ""
    return f"; the node: {why}" if why else "."
