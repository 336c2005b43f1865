"""`cluster pairs --fabric`: which NIC, which node is slow, from ib_write_bw rail by rail between node pairs. Pure.

A pair of nodes A, B is measured on every rail i: A's i-th compute NIC to B's i-th (perftest's ib_write_bw, the
client measures; cluster/tasks/rails.py).  Each rail's figure is held to its floor, `fraction` x the port's rate
(the spec's rate where it names one, else the slower end's `rate` in sysfs): the documents' "every pair of nodes
at >= 80% of the expected bandwidth" is fraction 0.8, the spec's `fabric.rail_fraction`.  The pair search (pairing.py) runs on one figure per pair,
its worst rail's share of the rate, so a pair is below the floor when any rail is; the search's rounds re-pair
the suspects with proven nodes as for the all_reduce.  Then every rail is classified on its own over the same
pairs (pairing.classify): a node the search names, slow on some rails only, is named with those NICs; slow on
every rail, as a node (its PCIe root, its CPU, its firmware).  A node with no RDMA device or no perftest was
never paired: "not tested (why)", never a pass, never a culprit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from trainready.cluster.pairs.pairing import NodeVerdict, PairingOutcome, PairResult, classify


@dataclass(frozen=True)
class RailFigure:
    """One rail of one pair: A's NIC to B's NIC of the same index."""

    rail: int
    """The NIC index, from 0, in the order the spec lists the compute NICs (else their names, naturally sorted)."""
    nic_a: str
    """A's NIC as DEV:PORT (mlx5_3:1)."""
    nic_b: str
    """B's NIC as DEV:PORT."""
    gbps: float | None
    """ib_write_bw's BW average, Gb/s (the client's); None: no figure (see `why`)."""
    rate_gbps: float | None
    """The rate the figure is held to, Gb/s: the spec's, else the slower port's sysfs `rate`."""
    why: str = ""
    """Why there is no figure: perftest's own words."""

    @property
    def share(self) -> float | None:
        """The figure's share of the rate (None: no figure or no rate)."""
        if self.gbps is None or not self.rate_gbps or not math.isfinite(self.gbps):
            return None
        return self.gbps / self.rate_gbps

    def to_json(self) -> dict[str, Any]:
        return {"rail": self.rail, "nic_a": self.nic_a, "nic_b": self.nic_b, "gbps": self.gbps,
                "rate_gbps": self.rate_gbps, "share": self.share, **({"why": self.why} if self.why else {})}


def pair_share(rails: Sequence[RailFigure]) -> float | None:
    """The pair's one figure for the search: its worst rail's share of the rate (None: a rail without one, or no
    rail at all, which counts as below the floor)."""
    shares = [r.share for r in rails]
    if not shares or any(s is None for s in shares):
        return None
    return min(s for s in shares if s is not None)


@dataclass(frozen=True)
class NicVerdict:
    node: str
    rail: int
    nic: str  # DEV:PORT on that node
    status: str  # good | bad | undecided | suspect | untested (pairing.classify's, per rail)
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "rail": self.rail, "nic": self.nic, "status": self.status, "reason": self.reason}


def per_rail(nodes: Sequence[str], log: Mapping[tuple[int, str, str], Sequence[RailFigure]], fraction: float,
             confirm: int) -> list[NicVerdict]:
    """Each (node, rail)'s standing, classified on that rail's figures alone over every pair measured."""
    rails = sorted({f.rail for figs in log.values() for f in figs})
    out = []
    for i in rails:
        results, nic_of = [], {}
        for (rnd, a, b), figs in sorted(log.items()):
            f = next((x for x in figs if x.rail == i), None)
            if f is None:
                continue
            nic_of.setdefault(a, f.nic_a)
            nic_of.setdefault(b, f.nic_b)
            results.append(PairResult(rnd, a, b, f.share))
        measured = sorted(nic_of)
        for n, v in classify(measured, results, fraction, confirm).items():
            out.append(NicVerdict(n, i, nic_of[n], v.status, v.reason))
    return out


def named(outcome: PairingOutcome, nics: Sequence[NicVerdict]) -> dict[str, tuple[str, list[NicVerdict]]]:
    """Each node the search named: ('nic', its slow NICs) when some of its rails are slow, ('node', all of them)
    when every rail measured is, ('node', []) when no single rail is slow twice over (its worst rail varied)."""
    out = {}
    for node in outcome.culprits:
        mine = [v for v in nics if v.node == node]
        slow = [v for v in mine if v.status == "bad"]
        out[node] = ("node" if not slow or len(slow) == len(mine) and len(mine) > 1 else "nic", slow)
    return out


def culprit_line(node: str, kind: str, slow: Sequence[NicVerdict], verdict: NodeVerdict, fraction: float) -> str:
    """One line naming the slow NIC(s) or node, with the evidence."""
    if kind == "nic":
        what = ", ".join(f"{v.nic} (rail {v.rail})" for v in slow)
        return f"{node}: NIC {what} below {fraction:.0%} of its rate: {slow[0].reason}"
    every = f"every NIC ({', '.join(v.nic for v in slow)})" if slow else "its worst rail, not always the same NIC,"
    return f"{node}: {every} below {fraction:.0%} of the rate: the node, not one NIC: {verdict.reason}"


def slow_rails(log: Mapping[tuple[int, str, str], Sequence[RailFigure]], fraction: float) -> list[str]:
    """A rail below the floor in most pairs measured (at least 2) while the pairs' other rails pass: on a
    rail-optimised fabric every NIC i hangs off rail i's own switch, so that switch (or its cabling) is the likelier
    cause, not each node; the search alone would find no proven node to tell it by."""
    below: dict[int, int] = {}
    seen: dict[int, int] = {}
    others_ok: dict[int, bool] = {}
    for figs in log.values():
        for f in figs:
            seen[f.rail] = seen.get(f.rail, 0) + 1
            low = f.share is None or f.share < fraction
            below[f.rail] = below.get(f.rail, 0) + low
            if low:
                rest = [g.share for g in figs if g.rail != f.rail]
                others_ok[f.rail] = others_ok.get(f.rail, True) and all(x is not None and x >= fraction for x in rest)
    return [f"rail {i}: below {fraction:.0%} of its rate in {below[i]} of {seen[i]} pairs while their other rails "
            f"pass: rail {i}'s own switch or its cabling is the likelier cause, not each node"
            for i in sorted(seen) if below.get(i, 0) >= 2 and below[i] * 2 > seen[i] and others_ok.get(i)]


def to_json(outcome: PairingOutcome, log: Mapping[tuple[int, str, str], Sequence[RailFigure]], fraction: float,
            confirm: int, not_tested: Mapping[str, str]) -> dict[str, Any]:
    """The record's `fabric` section: every rail figure, every NIC's standing, the named NICs and nodes, and the
    nodes not tested with why."""
    nodes = [v.node for v in outcome.verdicts]
    nics = per_rail(nodes, log, fraction, confirm)
    verdicts = {v.node: v for v in outcome.verdicts}
    names = named(outcome, nics)
    return {
        "tool": "ib_write_bw",
        "floor_fraction": fraction,
        "floor": f"{fraction:g} x the port's rate, per rail",
        "rails": [{"round": rnd, "a": a, "b": b, "figures": [f.to_json() for f in figs]}
                  for (rnd, a, b), figs in sorted(log.items())],
        "nics": [v.to_json() for v in nics],
        "slow_nics": [{"node": n, "nic": v.nic, "rail": v.rail} for n, (k, slow) in names.items() if k == "nic"
                      for v in slow],
        "slow_nodes": [n for n, (k, _) in names.items() if k == "node"],
        "slow_rails": (rails_slow := slow_rails(log, fraction)),
        "lines": [culprit_line(n, k, s, verdicts[n], fraction) for n, (k, s) in names.items()] + rails_slow,
        "not_tested": dict(not_tested),
    }



Log = dict[tuple[int, str, str], Sequence[RailFigure]]  # (round, a, b) -> that measurement's rail figures


def measure_rails(run: Callable[[int, Sequence[tuple[str, str]]], Mapping[tuple[str, str], Sequence[RailFigure]]],
                  log: Log) -> Callable[[int, Sequence[tuple[str, str]]], dict[tuple[str, str], float | None]]:
    """The pair search's `measure` over rail figures: each pair's worst share, every figure kept in `log`."""

    def measure(rnd: int, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], float | None]:
        got = run(rnd, pairs)
        out = {}
        for ab in pairs:
            figs = tuple(got.get(ab, ()))
            log[(rnd, ab[0], ab[1])] = figs
            out[ab] = pair_share(figs)
        return out
    return measure
