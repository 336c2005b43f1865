"""The rails in `cluster run`'s cross-node step (cluster/tasks/railcross.py): neighbours paired 1+2, 3+4; a rail
below the spec's fabric.rail_fraction (0.8) x its rate WARNs on both nodes (one pairing cannot tell which), never rejects; not tested is said, and
WARNs only where the spec names compute NICs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fabric_tree import hgx_tree
from trainready.cluster.tasks import railcross as rc
from trainready.records import Status
from trainready.spec import load_spec
from trainready.util.atomic import atomic_write_json

SPEC = load_spec("example:local-slurm")[0]


def test_neighbours_are_paired_in_natural_order_and_the_odd_one_is_out():
    nodes = ["n10", "n2", "n1", "n3", "n11"]
    assert rc.partner(nodes, "n1") == ("n2", 0) and rc.partner(nodes, "n2") == ("n1", 1)
    assert rc.partner(nodes, "n3") == ("n10", 0) and rc.partner(nodes, "n11") == (None, 0)


def _run(tmp_path: Path, monkeypatch, plants: dict[str, str]) -> dict:
    monkeypatch.setenv("TRAINREADY_SYSFS_ROOT", str(hgx_tree(tmp_path / "sys")))
    res = tmp_path / "r"
    from trainready.cluster.tasks import rails

    atomic_write_json(rc.probe_file(res, "n2"), {**rails.probe(True, {}, False), "node": "n2", "host": "h"})
    a = rc.node_part(res, "n1", ["n1", "n2"], SPEC, plants, 1.0)
    b = rc.node_part(res, "n2", ["n1", "n2"], SPEC, plants, 1.0)
    assert a == {"partner": "n2", "role": "serves", "figures": []}
    return {"n1": {"rails": a}, "n2": {"rails": b}}


def test_a_slow_rail_warns_on_both_nodes_and_rejects_neither(tmp_path: Path, monkeypatch):
    cross = _run(tmp_path, monkeypatch, {"cluster.rails": "400", "cluster.nic_slow": "n1:2"})
    res, found = rc.judge(cross, SPEC)
    assert res.status is Status.WARN and {f.node for f in found} == {"n1", "n2"}
    assert all(f.status is Status.WARN for f in found)
    assert found[0].text == ("rail 2 n1:mlx5_2:1 -> n2:mlx5_2:1: 196 Gb/s, 49% of 400, below 80% of the rate: one of "
                             "the two; `cluster pairs --fabric` names which")
    half = dataclasses.replace(SPEC, fabric=dataclasses.replace(SPEC.fabric, rail_fraction=0.45))
    res, found = rc.judge(cross, half)  # the spec's floor, not a constant: 49% passes a 45% floor
    assert res.status is Status.PASS and found == [] and "each >= 45% of its rate" in res.message
    healthy = _run(tmp_path / "h", monkeypatch, {"cluster.rails": "400"})
    res, found = rc.judge(healthy, SPEC)
    assert res.status is Status.PASS and found == [] and res.message.startswith("8 rail(s) measured")


def test_not_tested_is_said_and_warns_only_where_the_spec_names_nics(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TRAINREADY_SYSFS_ROOT", str(tmp_path / "empty"))
    part = rc.node_part(tmp_path / "r", "n1", ["n1", "n2"], SPEC, {}, 0.1)
    assert part["untested"].startswith("no RDMA device") and part["partner"] == "n2"
    cross = {"n1": {"rails": part}, "n2": {"rails": {"untested": "partner n1: no RDMA device"}}}
    res, found = rc.judge(cross, SPEC)
    assert res.status is Status.SKIP and found == [] and res.message.startswith("not tested on 2 node(s): no RDMA")
    named = dataclasses.replace(SPEC, fabric=dataclasses.replace(SPEC.fabric, nics={"mlx5_0": 400.0}))
    res, found = rc.judge(cross, named)
    assert res.status is Status.WARN and [f.node for f in found] == ["n1", "n2"]
    assert found[0].text.startswith("not tested (no RDMA device")
