"""A bad switch is not many bad nodes: when the nodes rejected for a cross-node or bandwidth cause cluster under
one leaf switch, the switch is named as the cause and none of its nodes is drained for it.

The rule (spec `fleet.switch_fraction`, `fleet.switch_causes`): a leaf switch (Slurm's topology/tree,
topology.conf(5)) of which MORE than switch_fraction of the nodes, and at least 2, are rejected for a cause
that starts with one of switch_causes (the cross-node collective's blame, a missing cross-node record, a slow
pair in `cluster pairs`) is the cause.  Those nodes keep their reasons, are held from the drain for them, and
one line names the switch; a node under it that also fails for a reason of its own (a check, drift, a slow
GEMM) is drained for that reason as before.  The same share-of-a-group idea as the fleet-wide guard
(guard.py), one level down: a leaf switch's nodes share its ports, cables and firmware, which no node task
can tell from a fault of its own.  Pure: rejections and a topology in, the switches out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from trainready.cluster.control.topology import Topology

MIN_NODES = 2  # one node is one node, whatever its switch


@dataclass(frozen=True)
class SwitchCause:
    switch: str
    nodes: tuple[str, ...]  # its nodes rejected for a cross-node or bandwidth cause
    of: int  # how many nodes the switch has
    causes: tuple[str, ...]  # those nodes' cross-node or bandwidth causes

    def line(self) -> str:
        return (f"switch {self.switch}: {len(self.nodes)} of its {self.of} node(s) ({', '.join(self.nodes)}) rejected "
                f"for a cross-node or bandwidth cause ({', '.join(self.causes)}): the switch is the likelier cause, "
                "not each node; none of them drained for it (check the switch's ports, cables and firmware)")

    def to_json(self) -> dict[str, Any]:
        return {"switch": self.switch, "nodes": list(self.nodes), "of": self.of, "causes": list(self.causes),
                "why": self.line()}


def link_cause(cause: str, prefixes: Sequence[str]) -> bool:
    return any(cause == p or cause.startswith(p + " ") or cause.startswith(p + ":") for p in prefixes)


def own_causes(causes: Sequence[str], prefixes: Sequence[str]) -> list[str]:
    """The causes of a node that are its own (not a cross-node or bandwidth cause)."""
    return [c for c in causes if not link_cause(c, prefixes)]


def blame(rejected: Mapping[str, Sequence[str]], topo: Topology, fraction: float,
          prefixes: Sequence[str]) -> list[SwitchCause]:
    """The leaf switches named as the cause; `rejected`: node -> its cause keys."""
    out = []
    for switch, members in sorted(topo.leaves.items()):
        hit = [n for n in members if any(link_cause(c, prefixes) for c in rejected.get(n, ()))]
        if len(hit) >= MIN_NODES and len(hit) > fraction * len(members):
            causes = sorted({c for n in hit for c in rejected[n] if link_cause(c, prefixes)})
            out.append(SwitchCause(switch, tuple(hit), len(members), tuple(causes)))
    return out


def held_by_switch(rejected: Mapping[str, Sequence[str]], switches: Sequence[SwitchCause],
                   prefixes: Sequence[str]) -> set[str]:
    """Nodes under a named switch with no cause of their own: kept from the drain."""
    return {n for s in switches for n in s.nodes if not own_causes(rejected.get(n, ()), prefixes)}


def for_rejected(rejected: Mapping[str, Sequence[str]], fraction: float, prefixes: Sequence[str],
                 path: Any = None) -> tuple[SwitchCause, ...]:
    """The switches named for these rejections; the topology (`path`: a topology.conf, else `scontrol show
    topology`) is read only when at least two nodes are rejected for a cross-node or bandwidth cause."""
    from trainready.cluster.control import topology

    linked = [n for n, c in rejected.items() if any(link_cause(x, prefixes) for x in c)]
    if len(linked) < MIN_NODES:
        return ()
    return tuple(blame(rejected, topology.read(path), fraction, prefixes))
