"""A bad switch is not many bad nodes: when the nodes rejected for a cross-node or bandwidth cause cluster under
one leaf switch, the switch is named as the cause and none of its nodes is drained for it.

The rule (spec `fleet.switch_fraction`, `fleet.switch_causes`): a leaf switch (Slurm's topology/tree,
topology.conf(5)) of which MORE than switch_fraction of the nodes this run tested (a run over 4 of its 8 nodes
counts 4; nodes down, drained or left out are no evidence either way), and at least 2, are rejected for a cause
that starts with one of switch_causes (the cross-node collective's blame, a missing cross-node record, a slow
pair in `cluster pairs`) is the cause.  Those nodes keep their reasons, are held from the drain for them, and
one line names the switch; a node under it that also fails for a reason of its own (a check, drift, a slow
GEMM) is drained for that reason as before.  The same share-of-a-group idea as the fleet-wide guard
(guard.py), one level down: a leaf switch's nodes share its ports, cables and firmware, which no node task
can tell from a fault of its own.  Where no topology could be read, or a rejected node stands under no leaf, the
rule could not be checked for them: `check` says so and why, for the output and fleet.json.  Pure apart from
reading the topology: rejections and a topology in, the switches out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Mapping, Sequence

from trainready.cluster.control.topology import Topology

MIN_NODES = 2  # one node is one node, whatever its switch


@dataclass(frozen=True)
class SwitchCause:
    switch: str
    nodes: tuple[str, ...]  # its nodes rejected for a cross-node or bandwidth cause
    of: int  # how many of its nodes this run tested
    causes: tuple[str, ...]  # those nodes' cross-node or bandwidth causes
    leaf: int = 0  # how many nodes the switch has (0: as many as tested)

    def line(self) -> str:
        whole = f" (of {self.leaf} under it)" if self.leaf and self.leaf != self.of else ""
        return (f"switch {self.switch}: {len(self.nodes)} of its {self.of} tested node(s){whole} "
                f"({', '.join(self.nodes)}) rejected "
                f"for a cross-node or bandwidth cause ({', '.join(self.causes)}): the switch is the likelier cause, "
                "not each node; none of them drained for it (check the switch's ports, cables and firmware)")

    def to_json(self) -> dict[str, Any]:
        return {"switch": self.switch, "nodes": list(self.nodes), "of": self.of, "leaf": self.leaf or self.of,
                "causes": list(self.causes), "why": self.line()}


@dataclass(frozen=True)
class SwitchCheck:
    named: tuple[SwitchCause, ...] = ()
    unchecked: str = ""  # why the rule could not be checked for some or all of the rejected nodes; "" when it was


def link_cause(cause: str, prefixes: Sequence[str]) -> bool:
    return any(cause == p or cause.startswith(p + " ") or cause.startswith(p + ":") for p in prefixes)


def own_causes(causes: Sequence[str], prefixes: Sequence[str]) -> list[str]:
    """The causes of a node that are its own (not a cross-node or bandwidth cause)."""
    return [c for c in causes if not link_cause(c, prefixes)]


def blame(rejected: Mapping[str, Sequence[str]], topo: Topology, fraction: float,
          prefixes: Sequence[str], tested: Collection[str] | None = None) -> list[SwitchCause]:
    """The leaf switches named as the cause; `rejected`: node -> its cause keys; `tested`: the nodes the run
    tested (None: every node of the topology), the only ones counted."""
    out = []
    for switch, members in sorted(topo.leaves.items()):
        here = [n for n in members if tested is None or n in tested]
        hit = [n for n in here if any(link_cause(c, prefixes) for c in rejected.get(n, ()))]
        if len(hit) >= MIN_NODES and len(hit) > fraction * len(here):
            causes = sorted({c for n in hit for c in rejected[n] if link_cause(c, prefixes)})
            out.append(SwitchCause(switch, tuple(hit), len(here), tuple(causes), len(members)))
    return out


def held_by_switch(rejected: Mapping[str, Sequence[str]], switches: Sequence[SwitchCause],
                   prefixes: Sequence[str]) -> set[str]:
    """Nodes under a named switch with no cause of their own: kept from the drain."""
    return {n for s in switches for n in s.nodes if not own_causes(rejected.get(n, ()), prefixes)}


def check(rejected: Mapping[str, Sequence[str]], fraction: float, prefixes: Sequence[str], path: Any = None,
          tested: Collection[str] | None = None) -> SwitchCheck:
    """The switches named for these rejections, and why the rule could not be checked where it could not; the
    topology (`path`: a topology.conf, else `scontrol show topology`) is read only when at least two nodes are
    rejected for a cross-node or bandwidth cause."""
    from trainready.cluster.control import topology

    linked = sorted(n for n, c in rejected.items() if any(link_cause(x, prefixes) for x in c))
    if len(linked) < MIN_NODES:
        return SwitchCheck()
    topo = topology.read(path)
    if not topo.leaves:
        return SwitchCheck((), f"no switch checked: {topo.source}; the {len(linked)} node(s) rejected for a "
                               f"cross-node or bandwidth cause ({', '.join(linked[:8])}) are judged each on its own")
    outside = [n for n in linked if topo.leaf_of(n) is None]
    why = (f"{len(outside)} node(s) rejected for a cross-node or bandwidth cause stand under no leaf switch of "
           f"{topo.source} ({', '.join(outside[:8])}): their switch not checked" if outside else "")
    return SwitchCheck(tuple(blame(rejected, topo, fraction, prefixes, tested)), why)


def for_rejected(rejected: Mapping[str, Sequence[str]], fraction: float, prefixes: Sequence[str],
                 path: Any = None, tested: Collection[str] | None = None) -> tuple[SwitchCause, ...]:
    """The switches `check` names."""
    return check(rejected, fraction, prefixes, path, tested).named
