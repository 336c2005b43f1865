"""The fleet's slow-node rule: a node slow in the acceptance run is measured again before it is rejected."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from trainready.cluster.judge import synthetic
from trainready.cluster.plants.faults import NodeFaults, for_node
from trainready.cluster.options import FleetOptions
from trainready.cluster.remeasure import ONCE_PLANT, remeasure, second_options, suspects
from trainready.cluster.judge.verdict import decide
from trainready.spec import load_spec

SPEC = load_spec("example:h200-8x")[0]


def _fleet(slow: float) -> list:  # type: ignore[type-arg]
    return synthetic.fleet(16, 8, seed=1, slow={"gpu0005": {2: slow}} if slow < 1 else None)


def _second(fleet: list, node: str, factor: float):  # type: ignore[no-untyped-def, type-arg]
    """The node's second record: its figures of a fleet where GPU 2 runs at `factor`."""
    again = synthetic.fleet(16, 8, seed=2, slow={node: {2: factor}} if factor < 1 else None)
    return next(ni.record for ni in again if ni.node == node)


def test_slow_twice_is_rejected_slow_once_is_a_warning_never_a_rejection() -> None:
    fleet = _fleet(0.5)
    assert list(suspects(fleet, SPEC)) == ["gpu0005"] and suspects(fleet, SPEC)["gpu0005"] == ("throughput",)
    twice = [dataclasses.replace(ni, again=_second(fleet, ni.node, 0.5)) if ni.node == "gpu0005" else ni for ni in fleet]
    v = {n.node: n for n in decide(twice, SPEC, [], []).nodes}
    assert not v["gpu0005"].accepted and "slow again" in v["gpu0005"].reasons[0]
    once = [dataclasses.replace(ni, again=_second(fleet, ni.node, 1.0)) if ni.node == "gpu0005" else ni for ni in fleet]
    v = {n.node: n for n in decide(once, SPEC, [], []).nodes}
    assert v["gpu0005"].accepted and any("not a fault" in w for w in v["gpu0005"].warnings)
    assert all(x.accepted for x in v.values())


def test_a_suspect_not_measured_again_keeps_its_verdict_and_says_why() -> None:
    fleet = _fleet(0.5)
    gone = [dataclasses.replace(ni, again_missing="task FAILED") if ni.node == "gpu0005" else ni for ni in fleet]
    v = {n.node: n for n in decide(gone, SPEC, [], []).nodes}
    assert not v["gpu0005"].accepted and "not measured again: task FAILED" in v["gpu0005"].reasons[0]


def test_the_second_array_runs_only_the_suspects_slow_checks_without_the_transient_plant(tmp_path: Path) -> None:
    opts = FleetOptions(results=tmp_path, plants={ONCE_PLANT: "gpu0005", "cluster.fail": "gpu0001"}, drain=True)
    sub = second_options(opts, ["gpu0005"], ["throughput"])
    assert sub.nodelist == "gpu0005" and sub.only == ("throughput",) and not sub.drain and not sub.cross
    assert ONCE_PLANT not in sub.plants and sub.plants["cluster.fail"] == "gpu0001"
    assert sub.results == tmp_path / "remeasure"
    assert for_node({ONCE_PLANT: "node2:0.4"}, "node2") == NodeFaults(slow_factor=0.4)
    assert for_node({ONCE_PLANT: "node2:0.4"}, "node1") == NodeFaults()


def test_a_fleet_with_no_slow_node_submits_nothing(tmp_path: Path) -> None:
    def never(*a: object) -> tuple:  # type: ignore[type-arg]
        raise AssertionError("no second array for a fleet with no slow figure")

    fleet = _fleet(1.0)
    out, job = remeasure(FleetOptions(results=tmp_path), fleet, SPEC, 8, print, never)
    assert out == fleet and job == ""


def test_every_figure_the_fleet_compares_names_the_check_that_measures_it_again() -> None:
    from trainready.cluster.remeasure import CHECK_OF, NOT_AGAIN
    from trainready.cluster.tasks.node import THROUGHPUT
    from trainready.checks import REGISTRY

    assert set(CHECK_OF) | set(NOT_AGAIN) == set(THROUGHPUT) and not set(CHECK_OF) & set(NOT_AGAIN)
    assert all(c in REGISTRY for c in CHECK_OF.values())
