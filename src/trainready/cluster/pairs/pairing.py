"""Which node is slow? Adaptive rounds of disjoint node pairs (a group test), pure and deterministic.

One fleet-wide all_reduce runs at the speed of its slowest link and names nobody; testing every pair
(round-robin) takes n-1 rounds (639 for 640 nodes).  Here:

  round 1  a random perfect matching (seeded): every node in one pair, all pairs at once;
           a pair below the floor makes both its nodes suspects; a pair at or above it proves both good.
  round 2+ each suspect is re-paired with a node already proven good (a different one each time):
           a pass clears the suspect (its earlier failure was its partner's); a fail is a strike, since
           the partner is known good.  `confirm` strikes (default 2, against distinct good partners) and
           no pass name the node bad: one noisy measurement never convicts.  A suspect that fails against
           a good partner and then passes, or passes and then fails, flips: it is reported undecided,
           not guessed; so is a suspect left without an untried good partner.
Two bad nodes paired together are both suspects and each fails again against good partners.

Floor: `floor_fraction` x `expected` (GB/s) when given (--expected-gbps, else the spec's
fleet.expected_busbw_gbps all_reduce), else x the reference: the median of the upper half of the nodes'
best pairs so far (the best pairs: a slow switch under which every node pairs with a healthy one in round
1 makes most pairs slow, and a median over all of them would set the floor at the slow figure).  When most
pairs are below the floor, the outcome says so: a fleet-wide cause (fabric, spec), not each node.  Fleets below
`ROUND_ROBIN_BELOW` nodes are first measured round-robin (n-1 <= 4 rounds), because one or two pairs
cannot say what normal is.  The decision is re-derived from all measurements after every round, so it
is a pure function of the log.  The simulation in benchmarks/pairing_sim.py drives this same code.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

Pair = tuple[str, str]
Measure = Callable[[int, Sequence[Pair]], Mapping[Pair, "float | None"]]  # round, pairs → busbw GB/s (None: no result)

ROUND_ROBIN_BELOW = 6  # n < 6: round-robin first (<= 4 rounds, <= 10 pairs)


@dataclass(frozen=True)
class PairResult:
    round: int
    a: str
    b: str
    busbw_gbps: float | None  # None: the pair produced no result (counts as below the floor)

    def passed(self, floor: float) -> bool:
        return self.busbw_gbps is not None and math.isfinite(self.busbw_gbps) and self.busbw_gbps >= floor


@dataclass(frozen=True)
class NodeVerdict:
    node: str
    status: str  # good | bad | undecided | untested
    passes: int
    fails: int
    strikes: int  # fails against partners proven good
    reason: str

    @property
    def pass_ratio(self) -> float:
        n = self.passes + self.fails
        return self.passes / n if n else float("nan")


@dataclass(frozen=True)
class PairingOutcome:
    rounds: int
    floor_gbps: float
    reference_gbps: float
    results: tuple[PairResult, ...]
    verdicts: tuple[NodeVerdict, ...]

    @property
    def fleet_slow(self) -> str:
        """One line when most pairs were below the floor, else ""."""
        return slow_majority(self.results, self.floor_gbps)

    @property
    def culprits(self) -> tuple[str, ...]:
        return tuple(v.node for v in self.verdicts if v.status == "bad")

    @property
    def undecided(self) -> tuple[str, ...]:
        return tuple(v.node for v in self.verdicts if v.status in ("undecided", "untested"))


@dataclass(frozen=True)
class PairingOptions:
    floor_fraction: float = 0.9  # a node 10% slow fails its pairs; healthy pairs vary ~±5% (nccl-tests repeats)
    expected_gbps: float | None = None  # absolute reference (--expected-gbps or the spec); None: the best pairs' median
    confirm: int = 2  # strikes against distinct good partners that name a node bad
    max_rounds: int = 8
    seed: int = 0


def reference(nodes: Sequence[str], results: Sequence[PairResult]) -> float:
    """The median of the upper half of the measured nodes' best pair busbw (nan when nothing was measured):
    what the best pairs reach, so that it holds while more than a quarter of the nodes have met a healthy
    partner, however many pairs a slow switch or a slow majority pulled down."""
    best: dict[str, float] = {}
    for r in results:
        v = r.busbw_gbps if r.busbw_gbps is not None and math.isfinite(r.busbw_gbps) else 0.0
        for n in (r.a, r.b):
            best[n] = max(best.get(n, 0.0), v)
    ranked = sorted(best.values())
    return statistics.median(ranked[len(ranked) // 2:]) if ranked else float("nan")


def slow_majority(results: Sequence[PairResult], floor: float) -> str:
    """"" or one line when most measured pairs are below the floor: the fleet is slow, not each node."""
    below = sum(not r.passed(floor) for r in results)
    if not results or 2 * below <= len(results):
        return ""
    return (f"most pairs are slow: {below} of {len(results)} below the floor {floor:.3g} GB/s: a fleet-wide cause "
            "(the fabric, a shared switch, or an expectation this fleet does not reach), not each node")


def classify(nodes: Sequence[str], results: Sequence[PairResult], floor: float, confirm: int) -> dict[str, NodeVerdict]:
    """Each node's standing under `floor`, from every measurement so far (a pure function of the log).

    A node flips when it fails with a partner that also passes elsewhere, after either of them had
    already passed (a proven node got worse, or a suspect failed with a proven one and then passed).
    A failure of two nodes that were not yet proven, both passing later, is noise: both are cleared."""
    seq: dict[str, list[tuple[bool, str, int]]] = {n: [] for n in nodes}
    for r in results:
        ok = r.passed(floor)
        seq[r.a].append((ok, r.b, r.round))
        seq[r.b].append((ok, r.a, r.round))
    first = {n: min((rnd for ok, _, rnd in s if ok), default=None) for n, s in seq.items()}
    passed = {n for n, f in first.items() if f is not None}
    flipping = {n for n in passed if any(
        not ok and p in passed and (first[n] < rnd or first[p] < rnd) for ok, p, rnd in seq[n])}  # type: ignore[operator]
    proven = passed - flipping
    out = {}
    for n, s in seq.items():
        passes, fails = sum(ok for ok, _, _ in s), sum(not ok for ok, _, _ in s)
        strikes = len({p for ok, p, _ in s if not ok and p in proven})
        if not s:
            status, why = "untested", "never measured"
        elif n in flipping:
            status, why = "undecided", f"flips: passed with {_names(s, True)}, then below the floor with {_names(s, False, passed)}"
        elif passes:
            status, why = "good", f"passed with {_names(s, True)}"
        elif strikes >= confirm:
            status, why = "bad", f"below the floor with {strikes} partners proven good ({_names(s, False, proven)})"
        else:
            status, why = "suspect", f"below the floor with {_names(s, False)}"
        out[n] = NodeVerdict(n, status, passes, fails, strikes, why)
    return out


def _names(seq: list[tuple[bool, str, int]], ok: bool, within: set[str] | None = None) -> str:
    return ", ".join(sorted({p for o, p, _ in seq if o == ok and (within is None or p in within)})) or "none"


def round_robin(nodes: Sequence[str]) -> list[list[Pair]]:
    """Circle-method rounds: every pair once, n-1 rounds (n even) or n (n odd, one node idle per round)."""
    ring = list(nodes) + ([""] if len(nodes) % 2 else [])
    rounds = []
    for _ in range(len(ring) - 1):
        rounds.append([(ring[i], ring[-1 - i]) for i in range(len(ring) // 2) if ring[i] and ring[-1 - i]])
        ring = [ring[0], ring[-1]] + ring[1:-1]
    return rounds


def plan_retest(verdicts: Mapping[str, NodeVerdict], results: Sequence[PairResult], rng: random.Random) -> list[Pair]:
    """Disjoint pairs: each suspect or untested node with a good node it has not met (else an untested one)."""
    met: dict[str, set[str]] = {}
    for r in results:
        met.setdefault(r.a, set()).add(r.b)
        met.setdefault(r.b, set()).add(r.a)
    needy = sorted(n for n, v in verdicts.items() if v.status in ("suspect", "untested"))
    pool = sorted(n for n, v in verdicts.items() if v.status == "good")
    rng.shuffle(pool)
    untested = [n for n in needy if verdicts[n].status == "untested"]
    used: set[str] = set()
    pairs: list[Pair] = []
    for n in needy:
        if n in used:
            continue
        partner = next((g for g in pool if g not in used and g not in met.get(n, set())), None)
        if partner is None:
            partner = next((u for u in untested if u != n and u not in used and u not in met.get(n, set())), None)
        if partner is not None:
            used.update((n, partner))
            pairs.append((n, partner))
    return pairs


def find_culprits(nodes: Sequence[str], measure: Measure, opts: PairingOptions = PairingOptions(),
                  on_round: Callable[[int, Sequence[PairResult]], None] | None = None) -> PairingOutcome:
    """Run rounds through `measure` until every node is decided (or no pair can help, or max_rounds)."""
    nodes = sorted(set(nodes))
    rng = random.Random(opts.seed)
    results: list[PairResult] = []
    scheduled: list[list[Pair]]
    if len(nodes) < ROUND_ROBIN_BELOW:
        scheduled = round_robin(nodes)
    else:
        order = list(nodes)
        rng.shuffle(order)
        scheduled = [[(order[i], order[i + 1]) for i in range(0, len(order) - 1, 2)]]
    rnd, floor, ref = 0, float("nan"), float("nan")
    verdicts: dict[str, NodeVerdict] = {}
    while rnd < opts.max_rounds:
        pairs = scheduled.pop(0) if scheduled else plan_retest(verdicts, results, rng)
        if not pairs:
            break
        rnd += 1
        got = measure(rnd, pairs)
        new = [PairResult(rnd, a, b, got.get((a, b))) for a, b in pairs]
        results.extend(new)
        ref = opts.expected_gbps if opts.expected_gbps is not None else reference(nodes, results)
        floor = opts.floor_fraction * ref
        verdicts = classify(nodes, results, floor, opts.confirm)
        if on_round is not None:
            on_round(rnd, new)
        if not scheduled and not any(v.status in ("suspect", "untested") for v in verdicts.values()):
            break
    final = tuple(_settle(verdicts.get(n), n) for n in nodes)
    return PairingOutcome(rnd, floor, ref, tuple(results), final)


def _settle(v: NodeVerdict | None, node: str) -> NodeVerdict:
    """A suspect left when the rounds end is undecided: no good partner left to tell."""
    if v is None:
        return NodeVerdict(node, "untested", 0, 0, 0, "never measured")
    if v.status == "suspect":
        return NodeVerdict(node, "undecided", v.passes, v.fails, v.strikes, v.reason + "; no untried good partner left")
    return v
