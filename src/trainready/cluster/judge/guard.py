"""The blast-radius guard of `--drain`: never drain more than --max-drain nodes in one run, and when most
rejected nodes share one cause, say that the cause looks fleet-wide and drain none of them.

Kubernetes' draino has the same guard (`--max-simultaneous-cordon=(Value|Value%)`): an automatic remedy
that acts on many machines at once must be bounded, because a cause outside the machines (a wrong
`--time`, a bad image, a missing mount, a filesystem outage) makes every machine fail alike.

Default 10% of the nodes tested (at least 1).  Large training fleets lose well under 1% of their nodes
a day (Meta, "The Llama 3 Herd of Models", 2024: 419 unexpected interruptions in 54 days on 16,384 GPUs,
about 0.4% of its 2,048 nodes a day), so one acceptance run that rejects more than 1 node in 10 is far
likelier to be seeing one cause than that many separate faults; draino's own example deployment bounds
cordons at 15%.  Pure: a verdict in, a plan out (tested at 640 synthetic nodes and on the local cluster).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainready.errors import UsageError

if TYPE_CHECKING:  # annotations only: `trainready node` parses FleetOptions' --max-drain without the fleet's judges
    from trainready.cluster.judge import switches as sw
    from trainready.cluster.judge.verdict import FleetVerdict

DEFAULT_MAX_DRAIN = "10%"


@dataclass(frozen=True)
class MaxDrain:
    """--max-drain: a count of nodes, or a percentage of the nodes tested (at least 1)."""

    value: float
    percent: bool

    def limit(self, tested: int) -> int:
        return max(1, int(tested * self.value / 100.0)) if self.percent else int(self.value)

    def __str__(self) -> str:
        return f"{self.value:g}%" if self.percent else f"{int(self.value)}"


def parse_max_drain(text: str) -> MaxDrain:
    """'10%' or '25' → MaxDrain; anything else is one usage line (exit 2)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(%?)\s*", text or "")
    if not m or (m.group(2) and float(m.group(1)) > 100) or (not m.group(2) and "." in m.group(1)):
        raise UsageError(f"--max-drain '{text}': expected a count of nodes (e.g. 8) or a percentage of the nodes "
                         "tested (e.g. 10%)")
    return MaxDrain(float(m.group(1)), bool(m.group(2)))


@dataclass(frozen=True)
class FleetWide:
    """One cause shared by most rejected nodes, on more nodes than --max-drain allows: not the nodes' fault."""

    cause: str
    nodes: tuple[str, ...]
    rejected: int
    tested: int

    def line(self) -> str:
        return (f"fleet-wide cause: {len(self.nodes)} of {self.tested} tested node(s) rejected for '{self.cause}' "
                f"({len(self.nodes)} of the {self.rejected} rejected): a cause this wide is the run's or the fleet's "
                "(--time, the image, a mount, the network), not each node's; drained none of them")


@dataclass(frozen=True)
class DrainPlan:
    drain: tuple[str, ...]  # the rejected nodes --drain may drain
    held: tuple[str, ...]  # rejected nodes the guard keeps in service
    limit: int  # --max-drain as a count of nodes, for this run
    max_drain: str  # as given
    fleet_wide: FleetWide | None
    why: str  # one line when nodes are held, "" otherwise
    switches: tuple[sw.SwitchCause, ...] = ()  # leaf switches named as the cause (switches.py)

    def to_json(self) -> dict[str, Any]:
        fw = self.fleet_wide
        return {"max_drain": self.max_drain, "limit": self.limit, "drain": list(self.drain), "held": list(self.held),
                "why": self.why, "fleet_wide": None if fw is None else
                {"cause": fw.cause, "nodes": list(fw.nodes), "rejected": fw.rejected, "tested": fw.tested},
                "switches": [s.to_json() for s in self.switches]}


def shared_cause(verdict: FleetVerdict, among: set[str] | None = None) -> tuple[str, list[str]]:
    """The cause most rejected nodes (of `among`, default all) have (each node counted once per cause) and those
    nodes."""
    mine = [n for n in verdict.nodes if n.rejected and (among is None or n.node in among)]
    counts: Counter[str] = Counter()
    for n in mine:
        counts.update(set(n.causes) or {"rejected"})
    if not counts:
        return "", []
    cause = counts.most_common(1)[0][0]
    return cause, [n.node for n in mine if cause in (set(n.causes) or {"rejected"})]


def plan(verdict: FleetVerdict, max_drain: MaxDrain, switches: tuple[sw.SwitchCause, ...] = (),
         prefixes: tuple[str, ...] = ()) -> DrainPlan:
    """Which rejected nodes may be drained: a node a named switch explains (switches.py) never; of the rest,
    all when they are at most --max-drain; none when more (then, if most share one cause, that cause is named
    as fleet-wide)."""
    causes = {n.node: n.causes for n in verdict.nodes if n.rejected}
    from trainready.cluster.judge import switches as sw

    by_switch = sw.held_by_switch(causes, switches, prefixes)
    rejected = [n for n in verdict.rejected if n not in by_switch]
    tested = len(verdict.nodes) - len(verdict.not_tested)
    limit = max_drain.limit(tested)
    cause, alike = shared_cause(verdict, set(rejected))
    wide = None
    if len(alike) > limit and 2 * len(alike) > len(rejected):
        wide = FleetWide(cause, tuple(alike), len(rejected), tested)
    held_switch = tuple(n for n in verdict.rejected if n in by_switch)
    lines = [s.line() for s in switches]
    if len(rejected) <= limit and wide is None:
        return DrainPlan(tuple(rejected), held_switch, limit, str(max_drain), None, "; ".join(lines), switches)
    why = wide.line() if wide else (
        f"{len(rejected)} rejected node(s) is more than --max-drain {max_drain} ({limit} of {tested} tested "
        "node(s)): drained none; read the reasons, drain by hand, or raise --max-drain")
    return DrainPlan((), tuple(verdict.rejected), limit, str(max_drain), wide, "; ".join([*lines, why]), switches)
