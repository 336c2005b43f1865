"""Naming the slow nodes of a simulated fleet with the decision code `trainready cluster pairs` runs.

The code under test is trainready.cluster.pairs.pairing.find_culprits itself (not a copy); only the
measurement is simulated.  Fleet model: every pair's busbw is drawn anew at each
measurement: a healthy pair at nominal x U(0.95, 1.05) (±5%), a pair holding a bad node at
nominal x U(0.50, 0.90).  Bad nodes are planted at random, 0.1%-2% of the fleet (at least one).
The floor is 0.925 x the fleet's own median (between a healthy pair's worst, 0.95, and a bad
pair's best, 0.90); no expected figure is given, so the reference is found from the data.

Prints, per fleet size and bad fraction over --seeds seeds: rounds used (mean, max), nodes
planted and named, false accusations, misses and undecided nodes; side by side with
round-robin (every pair once: n-1 rounds) and with repeated random pairing (15 rounds, a node
named when it fails more than half its pairs) run on the same simulated fleets.
Target: every planted node named, no healthy node accused, <= 4 rounds at <= 1% bad.

    PYTHONPATH=src python3 benchmarks/pairing_sim.py                 # 640 and 5120 nodes, 100 seeds
    PYTHONPATH=src python3 benchmarks/pairing_sim.py --nodes 640 --seeds 20
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from trainready.cluster.pairs.pairing import Pair, PairingOptions, find_culprits

NOMINAL_GBPS = 100.0
FRACTIONS = (0.001, 0.005, 0.01, 0.02)
RANDOM_ROUNDS = 15  # a public pairwise scanner's default number of random re-pairings


def simulated(bad: set[str], rng: random.Random):  # type: ignore[no-untyped-def]
    def measure(rnd: int, pairs: Sequence[Pair]) -> Mapping[Pair, float | None]:
        return {(a, b): NOMINAL_GBPS * (rng.uniform(0.5, 0.9) if a in bad or b in bad else rng.uniform(0.95, 1.05))
                for a, b in pairs}
    return measure


def random_repairing(nodes: list[str], bad: set[str], rng: random.Random, floor_fraction: float) -> set[str]:
    """The repeated-random-pairing baseline: RANDOM_ROUNDS perfect matchings; named = failed > half its pairs."""
    measure = simulated(bad, rng)
    fails: dict[str, int] = {n: 0 for n in nodes}
    seen: dict[str, int] = {n: 0 for n in nodes}
    values = []
    for r in range(RANDOM_ROUNDS):
        order = nodes[:]
        rng.shuffle(order)
        got = measure(r, [(order[i], order[i + 1]) for i in range(0, len(order) - 1, 2)])
        values.append(got)
    floor = floor_fraction * statistics.median(v for got in values for v in got.values() if v is not None)
    for got in values:
        for (a, b), v in got.items():
            for n in (a, b):
                seen[n] += 1
                fails[n] += v is None or v < floor
    return {n for n in nodes if seen[n] and fails[n] > seen[n] / 2}


@dataclass
class Tally:
    rounds: list[int] = field(default_factory=list)
    planted: int = 0
    named: int = 0
    false: int = 0
    missed: int = 0
    undecided: int = 0
    rnd_false: int = 0
    rnd_missed: int = 0


def run(n: int, frac: float, seeds: int, floor_fraction: float) -> Tally:
    t = Tally()
    nodes = [f"node{i:05d}" for i in range(n)]
    for seed in range(seeds):
        rng = random.Random(seed * 1_000_003 + n)
        bad = set(rng.sample(nodes, max(1, round(frac * n))))
        out = find_culprits(nodes, simulated(bad, rng), PairingOptions(floor_fraction=floor_fraction, seed=seed))
        named = set(out.culprits)
        t.rounds.append(out.rounds)
        t.planted += len(bad)
        t.named += len(named & bad)
        t.false += len(named - bad)
        t.missed += len(bad - named)
        t.undecided += len(out.undecided)
        rnd = random_repairing(nodes, bad, rng, floor_fraction)
        t.rnd_false += len(rnd - bad)
        t.rnd_missed += len(bad - rnd)
    return t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[640, 5120])
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--floor-fraction", type=float, default=0.925)
    args = ap.parse_args(argv)
    print(f"pair busbw: healthy U(0.95,1.05), bad U(0.50,0.90) x {NOMINAL_GBPS:g}; floor {args.floor_fraction:g} x median; "
          f"{args.seeds} seeds per row")
    head = (f"{'nodes':>6} {'bad%':>5} {'planted':>7} {'rounds':>9} {'named':>6} {'false':>6} {'missed':>6} "
            f"{'undec':>6} | {'round-robin':>11} {'ratio':>6} | {'random-15 (15 rounds) false/missed':>34}")
    print(head)
    print("-" * len(head))
    ok = True
    for n in args.nodes:
        for frac in FRACTIONS:
            t0 = time.perf_counter()
            t = run(n, frac, args.seeds, args.floor_fraction)
            mean, worst = statistics.mean(t.rounds), max(t.rounds)
            rr = n - 1 if n % 2 == 0 else n
            print(f"{n:>6} {frac * 100:>5.1f} {t.planted:>7} {mean:>5.2f}/{worst:<3} {t.named:>6} {t.false:>6} "
                  f"{t.missed:>6} {t.undecided:>6} | {rr:>11} {rr / mean:>5.0f}x | {t.rnd_false:>22}/{t.rnd_missed:<11}"
                  f" ({time.perf_counter() - t0:.1f} s)", flush=True)
            ok &= t.false == 0 and t.missed == 0 and (frac > 0.01 or worst <= 4)
    print("target met: every planted node named, none accused, <= 4 rounds at <= 1% bad" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
