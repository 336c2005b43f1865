"""`cluster pairs --fabric`'s judgment over planted per-NIC figures (cluster/pairs/rails.py, pure): ib_write_bw
rail by rail held to 0.8 x the port's rate, the pair search naming a slow NIC, a slow node, and (through the switch
rule) a leaf switch most of whose nodes' NICs are slow; a healthy fleet names nobody."""

from __future__ import annotations

import random
from pathlib import Path

from trainready.cluster.control.topology import parse
from trainready.cluster.judge import switches
from trainready.cluster.pairs import rails as rl
from trainready.cluster.pairs.pairing import PairingOptions, find_culprits
from trainready.spec.fabric import FabricSpec

RATE = 400.0  # NDR: "400 Gb/sec (4X NDR)"
NICS = [f"mlx5_{i}:1" for i in range(8)]


def planted(slow: dict[tuple[str, int], float], seed: int = 0):
    """Every rail at 0.95-0.99 x NDR (healthy ib_write_bw on NDR: ~392 of 400), x FACTOR on a slow (node, rail)."""
    rng = random.Random(seed)

    def run(rnd, pairs):
        out = {}
        for a, b in pairs:
            figs = []
            for i, nic in enumerate(NICS):
                f = min(slow.get((a, i), 1.0), slow.get((b, i), 1.0))
                figs.append(rl.RailFigure(i, nic, nic, RATE * rng.uniform(0.95, 0.99) * f, RATE))
            out[(a, b)] = figs
        return out
    return run


def search(nodes, slow, seed=0):
    log: rl.Log = {}
    out = find_culprits(nodes, rl.measure_rails(planted(slow, seed), log), PairingOptions(FabricSpec().rail_fraction, 1.0))
    return out, rl.to_json(out, log, FabricSpec().rail_fraction, 2, {})


NODES = [f"topo{k}" for k in range(1, 9)]


def test_a_healthy_fleet_names_nobody():
    out, doc = search(NODES, {})
    assert out.culprits == () and out.undecided == ()
    assert doc["slow_nics"] == [] and doc["slow_nodes"] == [] and doc["lines"] == []
    assert all(v["status"] == "good" for v in doc["nics"]) and len(doc["nics"]) == 8 * 8


def test_one_nic_at_half_rate_is_named_with_its_node_and_rail():
    out, doc = search(NODES, {("topo3", 5): 0.5})
    assert out.culprits == ("topo3",)
    assert doc["slow_nics"] == [{"node": "topo3", "nic": "mlx5_5:1", "rail": 5}] and doc["slow_nodes"] == []
    assert doc["lines"][0].startswith("topo3: NIC mlx5_5:1 (rail 5) below 80% of its rate: below the floor with 2")
    other = [v for v in doc["nics"] if v["node"] == "topo3" and v["rail"] != 5]
    assert other and all(v["status"] == "good" for v in other)  # its other NICs pass with the same partners


def test_just_below_the_floor_is_slow_just_above_is_not():
    assert search(NODES, {("topo4", 2): 0.78})[0].culprits == ("topo4",)  # 0.95-0.99 x 0.78 < 0.8
    assert search(NODES, {("topo4", 2): 0.86})[0].culprits == ()  # 0.95 x 0.86 = 0.817 >= 0.8


def test_a_node_slow_on_every_rail_is_named_as_the_node():
    out, doc = search(NODES, {("topo6", i): 0.6 for i in range(8)})
    assert out.culprits == ("topo6",)
    assert doc["slow_nodes"] == ["topo6"] and doc["slow_nics"] == []
    assert "every NIC" in doc["lines"][0] and "the node, not one NIC" in doc["lines"][0]


def test_a_switch_most_of_whose_nodes_nics_are_slow_is_named():
    topo = parse("SwitchName=s1 Nodes=topo[1-2]\nSwitchName=s2 Nodes=topo[3-4]\nSwitchName=s3 Nodes=topo[5-6]\n"
                  "SwitchName=s4 Nodes=topo[7-8]\n", "test")
    slow = {("topo1", i): 0.5 for i in range(8)} | {("topo2", i): 0.5 for i in range(8)} | {("topo7", 1): 0.5}
    out, doc = search(NODES, slow, seed=3)
    assert set(out.culprits) == {"topo1", "topo2", "topo7"}
    named = switches.blame({n: ("link",) for n in out.culprits}, topo, 0.5, ("link",))
    assert [s.switch for s in named] == ["s1"] and named[0].nodes == ("topo1", "topo2")
    assert {"node": "topo7", "nic": "mlx5_1:1", "rail": 1} in doc["slow_nics"]  # slow for itself, on another switch


def test_a_rail_without_a_figure_is_below_the_floor_never_a_pass():
    f = rl.RailFigure(0, "mlx5_0:1", "mlx5_0:1", None, RATE, "ib_write_bw exit 1: Couldn't connect")
    assert f.share is None and rl.pair_share([f, rl.RailFigure(1, "a", "b", 390.0, RATE)]) is None
    assert rl.pair_share([]) is None
    assert rl.pair_share([rl.RailFigure(1, "a", "b", 390.0, RATE), rl.RailFigure(2, "a", "b", 300.0, RATE)]) == 0.75


def test_one_rail_slow_on_every_node_is_the_rail_s_switch_not_each_node():
    out, doc = search(NODES, {(n, 4): 0.5 for n in NODES})
    assert doc["slow_rails"] == ["rail 4: below 80% of its rate in 4 of 4 pairs while their other rails pass: rail 4's "
                                 "own switch or its cabling is the likelier cause, not each node"]
    assert doc["slow_rails"][0] in doc["lines"]
    assert search(NODES, {("topo3", 5): 0.5})[1]["slow_rails"] == []  # one node's NIC is not a rail's switch
    assert search(NODES, {})[1]["slow_rails"] == []
