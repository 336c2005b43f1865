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

from trainready.cluster.control import slurm

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


@dataclass(frozen=True)
class Reservation:
    name: str
    nodes: tuple[str, ...]
    users: str  # Users= (or Accounts=) it is for, as Slurm prints it
    flags: str
    state: str  # ACTIVE or INACTIVE (not started yet)


def reservations() -> list[Reservation]:
    """Every reservation slurmctld knows (`scontrol show reservation -o`), its node names expanded."""
    text = slurm.call(["scontrol", "--local", "show", "reservation", "-o"])
    out = []
    for line in text.splitlines():
        kv = dict(slurm.KV.findall(line))
        if "ReservationName" not in kv:
            continue  # "No reservations in the system"
        names = kv.get("Nodes", "")
        users = kv.get("Users", "(null)")
        who = users if users not in ("(null)", "") else f"account {kv.get('Accounts', '?')}"
        out.append(Reservation(kv["ReservationName"], tuple(slurm.hostnames(names)) if names not in ("", "(null)") else (),
                               who, kv.get("Flags", ""), kv.get("State", "")))
    return out


def holder(node: str, resvs: Sequence[Reservation]) -> Reservation | None:
    """The ACTIVE reservation that holds `node`, if any."""
    return next((r for r in resvs if node in r.nodes and r.state.upper() == "ACTIVE"), None)


def why_not(info: slurm.NodeInfo, resv: Reservation | None, ours: str | None) -> str:
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
    resvs = reservations() if any(i.base in RESERVED or "$" in i.state for i in info.values()) or ours \
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
    """Why a task pinned to `node` and pending for `reason` will not start by itself, or '' when it may.

    'ReqNodeNotAvail' on a task whose own node is usable now (idle, or busy with other jobs; not drained,
    down, not responding or reserved) clears by itself: Slurm's scheduler gives every pending task of an
    array the reason of the one it could not start (a sibling's), and it writes the reason when it last
    tried the job: 'UnavailableNodes:' lists the required nodes then out of its available set (drained,
    down, failing, not responding or booting: node_scheduler.c, Slurm 22.05), a state a node under load
    leaves again (a ping it answered late).  Such a task waits, within the run's deadline.
    Stuck: '; the node: <why>' when the node's own state says why, else '.' (the reason alone says it)."""
    if not stuck_reason(reason):
        return ""
    why = "Slurm knows no node of this name" if info is None else why_not(info, None, None)
    if reason.startswith("ReqNodeNotAvail") and (not why or (info is not None and answering_soon(info))):
        return ""
    return f"; the node: {why}" if why else "."


def answering_soon(info: slurm.NodeInfo) -> bool:
    """Not responding ('*') and otherwise in service (idle, busy; not drained, down or reserved), or 'unknown'
    (not yet heard from since slurmctld started): a state Slurm ends by itself.  Every node shows one of them
    after a slurmctld restart until its slurmd registers again (seconds to minutes on a loaded head node), and
    one slurmd restart shows it for that node; a slurmd that stays silent is set DOWN by slurmctld past
    SlurmdTimeout (slurm.conf(5), default 300 s), and DOWN is stuck."""
    others = slurm.SUFFIX_DOWN.replace("*", "")  # in a maintenance reservation, pending reboot: not by itself
    if any(c in info.flags for c in others):
        return False
    # 'unknown': "the Slurm controller has just started and the node's state has not yet been determined"
    # (sinfo(1), NODE STATE CODES); seen for 48 of 64 nodes after a slurmctld restart on a loaded 2-core host
    return info.base == "unknown" or (info.base in slurm.USABLE and "*" in info.flags)


def waiting_note(reason: str, node: str, info: slurm.NodeInfo | None) -> str:
    """One line for a task that Slurm named unavailable while its node is usable now ('' otherwise): the
    collector waits for it rather than calling the node not tested."""
    if info is None or not reason.startswith("ReqNodeNotAvail") or not names_node(reason, node) \
            or stuck_on(reason, node, info):
        return ""
    if answering_soon(info):
        what = "state not yet determined by a slurmctld that has just started" if info.base == "unknown" else \
            "not responding: its slurmd has not registered since a slurmctld or slurmd restart"
        return (f"pending ({reason.replace(',_', ', ')}): the node is {info.state} ({what}); Slurm sets it DOWN "
                "past SlurmdTimeout if it stays silent; waiting (within the run's deadline)")
    return (f"pending ({reason.replace(',_', ', ')}) while the node is {info.state} now: Slurm's word from "
            "when it last tried the task; waiting (within the run's deadline)")


def partition(name: str | None = None) -> dict[str, str]:
    """`name`'s settings (default: the default partition's), as `scontrol show partition -o` prints them
    (PartitionName, OverSubscribe, Nodes, ...); {} when there is no such partition."""
    for line in slurm.call(["scontrol", "--local", "show", "partition", "-o", *([name] if name else [])]
                           ).splitlines():
        kv = dict(slurm.KV.findall(line))
        if name or kv.get("Default") == "YES":
            return kv
    return {}


def jobs_per_node(name: str | None = None) -> int:
    """How many jobs that ask for --exclusive (every `cluster run` task does) one node of partition `name`
    (default: the default partition) runs at once: k under OverSubscribe=FORCE:k, else 1.  slurm.conf(5): FORCE
    makes every resource available for oversubscription "without any means for users to disable it" (FORCE
    alone: FORCE:4); NO and EXCLUSIVE never share a node, and under YES a job's --exclusive keeps its nodes."""
    mode, _, k = partition(name).get("OverSubscribe", "NO").partition(":")
    return (int(k) if k.isdigit() else 4) if mode == "FORCE" else 1
