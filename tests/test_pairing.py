"""cluster.pairing: naming slow nodes from rounds of disjoint pairs (the code pairing_sim.py drives)."""

from __future__ import annotations

import itertools
import random

import pytest

from trainready.cluster.pairs.pairing import PairingOptions, classify, find_culprits, round_robin, PairResult


def fleet(n: int) -> list[str]:
    return [f"node{i}" for i in range(1, n + 1)]


def measured(bad: set[str], seed: int = 0, log: list | None = None):
    rng = random.Random(seed)

    def measure(rnd, pairs):
        if log is not None:
            log.append((rnd, list(pairs)))
        return {(a, b): 100 * (rng.uniform(0.5, 0.9) if {a, b} & bad else rng.uniform(0.95, 1.05)) for a, b in pairs}
    return measure


@pytest.mark.parametrize("slow", ["node1", "node2", "node3"])
def test_three_nodes_name_the_slow_one_only(slow):
    out = find_culprits(fleet(3), measured({slow}), PairingOptions())
    assert out.culprits == (slow,) and out.undecided == ()
    assert {v.node: v.status for v in out.verdicts} == {n: ("bad" if n == slow else "good") for n in fleet(3)}
    assert out.rounds <= 3


def test_healthy_fleet_names_nobody_and_a_planted_one_is_named():
    nodes = fleet(64)
    bad = find_culprits(nodes, measured({"node17"}), PairingOptions(floor_fraction=0.925))
    assert bad.culprits == ("node17",)
    ev = next(v for v in bad.verdicts if v.node == "node17")
    assert ev.strikes >= 2 and ev.passes == 0 and "proven good" in ev.reason
    ok = find_culprits(nodes, measured(set()), PairingOptions(floor_fraction=0.925))
    assert ok.culprits == () and ok.undecided == () and ok.rounds == 1


def test_disjoint_pairs_and_retests_use_proven_good_partners():
    log: list = []
    out = find_culprits(fleet(40), measured({"node3", "node30"}, log=log), PairingOptions(floor_fraction=0.925, seed=3))
    for _, pairs in log:
        flat = [n for p in pairs for n in p]
        assert len(flat) == len(set(flat))  # a node is in at most one pair per round
    assert len(log[0][1]) == 20 and all(len(p) < 20 for _, p in log[1:])
    assert set(out.culprits) == {"node3", "node30"} and out.rounds <= 4


def test_two_bad_nodes_paired_together_are_both_named():
    nodes = fleet(20)
    # find this seed's round-1 matching, then plant a bad pair that is matched in round 1
    log: list = []
    find_culprits(nodes, measured(set(), log=log), PairingOptions(seed=5))
    a, b = log[0][1][0]
    out = find_culprits(nodes, measured({a, b}), PairingOptions(floor_fraction=0.925, seed=5))
    assert set(out.culprits) == {a, b} and out.undecided == ()


def test_a_flipping_node_is_undecided_not_guessed():
    # f passed in round 1, then failed with s in round 2; s then passed with g: one of them flips, nobody is named
    r = [PairResult(1, "f", "x", 100.0), PairResult(1, "s", "t", 50.0), PairResult(1, "g", "h", 100.0),
         PairResult(2, "s", "f", 50.0), PairResult(2, "t", "h", 100.0), PairResult(3, "s", "g", 100.0)]
    v = classify(["f", "g", "h", "s", "t", "x"], r, floor=90.0, confirm=2)
    assert (v["f"].status, v["s"].status) == ("undecided", "undecided") and "flips" in v["s"].reason
    assert {n for n, x in v.items() if x.status == "good"} == {"g", "h", "t", "x"}
    # the same failure of two not-yet-proven nodes that both pass later is noise: both cleared
    noise = [PairResult(1, "a", "b", 50.0), PairResult(1, "c", "d", 100.0), PairResult(2, "a", "c", 100.0),
             PairResult(2, "b", "d", 100.0)]
    assert {x.status for x in classify(["a", "b", "c", "d"], noise, 90.0, 2).values()} == {"good"}


def test_flaky_node_in_a_fleet_is_never_named():
    nodes = fleet(12)
    seen = {"n": 0}

    def measure(rnd, pairs):
        out = {}
        for a, b in pairs:
            flaky = "node7" in (a, b)
            seen["n"] += flaky
            out[(a, b)] = 60.0 if flaky and seen["n"] % 2 else 100.0  # node7: fails, passes, fails, ...
        return out
    out = find_culprits(nodes, measure, PairingOptions())
    assert out.culprits == ()


def test_no_result_counts_as_below_floor_and_no_partner_left_is_undecided():
    out = find_culprits(fleet(2), lambda r, pairs: {p: None for p in pairs}, PairingOptions(expected_gbps=100.0))
    assert out.culprits == () and set(out.undecided) == {"node1", "node2"}
    assert all("no untried good partner" in v.reason for v in out.verdicts)


def test_deterministic_given_seed_and_measure():
    a = find_culprits(fleet(30), measured({"node4"}, seed=1), PairingOptions(seed=9))
    b = find_culprits(fleet(30), measured({"node4"}, seed=1), PairingOptions(seed=9))
    assert a == b


def test_round_robin_every_pair_once():
    for n in (3, 4, 5):
        rounds = round_robin(fleet(n))
        pairs = [frozenset(p) for r in rounds for p in r]
        assert sorted(map(sorted, pairs)) == sorted(map(sorted, itertools.combinations(fleet(n), 2)))
        assert len(pairs) == len(set(pairs))


def test_classify_strikes_need_distinct_proven_partners():
    r = [PairResult(1, "a", "b", 50.0), PairResult(2, "a", "c", 50.0), PairResult(2, "b", "d", 100.0),
         PairResult(3, "c", "e", 100.0)]
    v = classify(["a", "b", "c", "d", "e"], r, floor=90.0, confirm=2)
    assert v["a"].status == "bad" and v["a"].strikes == 2
    v1 = classify(["a", "b", "c", "d", "e"], r[:2] + r[2:3], floor=90.0, confirm=2)
    assert v1["a"].status == "suspect" and v1["c"].status == "suspect"
