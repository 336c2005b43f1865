"""`cluster pairs --fabric` on a node, without Slurm (cluster/tasks/rails.py, cluster/pairs/fabric.py): the probe
on this host (no RDMA device; a ConnectX-7 sysfs tree that ib_write_bw cannot open) is "not tested", a planted
fabric tests; a pair's rail record read back as the search's figure; the plants' values checked."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fabric_tree import hgx_tree
from trainready.cluster.pairs import fabric
from trainready.cluster.plants import faults as fl
from trainready.cluster.tasks import rails
from trainready.errors import UsageError


@pytest.fixture
def tree(tmp_path: Path, monkeypatch):  # type: ignore[no-untyped-def]
    root = hgx_tree(tmp_path / "sys")
    monkeypatch.setenv("TRAINREADY_SYSFS_ROOT", str(root))
    return root


def test_no_rdma_port_is_not_tested(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TRAINREADY_SYSFS_ROOT", str(tmp_path / "empty"))
    doc = rails.probe(planted=False)
    assert doc["nics"] == [] and doc["untested"] == f"no RDMA device ({tmp_path / 'empty' / 'class/infiniband'}: no port)"
    assert rails.probe(planted=True)["untested"] is not None  # a planted figure needs the ports all the same


def test_a_planted_fabric_on_a_tree_tests_its_eight_ports_in_order(tree):
    doc = rails.probe(planted=True)
    assert doc["untested"] is None
    assert [n["nic"] for n in doc["nics"]] == [f"mlx5_{i}:1" for i in range(8)]
    assert {n["rate_gbps"] for n in doc["nics"]} == {400.0}


@pytest.mark.skipif(shutil.which("ib_write_bw") is None, reason="perftest (ib_write_bw) not installed on this host")
def test_ports_perftest_cannot_open_are_not_tested(tree):
    if Path("/sys/class/infiniband").is_dir():
        pytest.skip("this host has an RDMA driver loaded")
    doc = rails.probe(planted=False)
    assert doc["untested"] == ("ib_write_bw opens none of 8 RDMA port(s): no RDMA device (ib_write_bw: Did not detect "
                               "devices)")
    assert doc["perftest"] and doc["perftest_version"] and doc["cuda"] is False


def test_no_perftest_is_not_tested(tree, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert rails.probe(planted=False)["untested"] == "perftest not installed (no ib_write_bw on PATH)"


def _pair(results: Path, a: str = "n1", b: str = "n2") -> Path:
    from trainready.util.atomic import atomic_write_json

    for n in (a, b):
        atomic_write_json(rails.probe_path(results, n), {**rails.probe(planted=True), "node": n})
    rec = results / "pairs" / "round-1" / f"{a}__{b}.json"
    return rec


def test_a_planted_pair_record_is_read_as_its_worst_rail(tree, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("SLURM_PROCID", "1")
    healthy = _pair(tmp_path)
    rails.run_rail_pair(tmp_path, healthy, 1, "n1", "n2", {"cluster.rails": "400"})
    assert fabric.share_of(healthy) == (pytest.approx(0.98), "")
    slow = {"cluster.rails": "400", "cluster.nic_slow": "n2:3:0.5"}
    rails.run_rail_pair(tmp_path, healthy, 1, "n1", "n2", slow)
    assert fabric.share_of(healthy) == (pytest.approx(0.49), "")
    figs, _ = fabric.figures_of(healthy)
    assert [f.rail for f in figs if f.share < 0.8] == [3] and figs[3].gbps == pytest.approx(196.0)


def test_a_rail_with_no_figure_says_why(tmp_path: Path):
    from trainready.util.atomic import atomic_write_json

    rec = tmp_path / "r.json"
    atomic_write_json(rec, {"schema": rails.PAIR_SCHEMA, "pair": ["a", "b"], "rails": [
        {"rail": 0, "nic_a": "mlx5_0:1", "nic_b": "mlx5_0:1", "gbps": 391.0, "rate_gbps": 400.0, "why": ""},
        {"rail": 1, "nic_a": "mlx5_1:1", "nic_b": "mlx5_1:1", "gbps": None, "rate_gbps": 400.0,
         "why": "ib_write_bw exit 1: Couldn't connect; server: ib_write_bw: IB device mlx5_1 not found"}]})
    share, why = fabric.share_of(rec)
    assert share is None and why.startswith("rail 1 mlx5_1:1-mlx5_1:1: ib_write_bw exit 1")
    assert fabric.is_rail_record(rec) and not fabric.is_rail_record(tmp_path / "none.json")


def test_planted_figures_slow_a_nic_a_node_and_a_switch():
    p = {"cluster.rails": "400", "cluster.nic_slow": "n3:5", "cluster.slow": "n4:0.6", "cluster.slow_link": "n5+n6"}
    assert rails.planted_gbps(p, "n1", "n2", 5, 400.0) == pytest.approx(392.0)
    assert rails.planted_gbps(p, "n1", "n3", 5, 400.0) == pytest.approx(196.0)
    assert rails.planted_gbps(p, "n1", "n3", 4, 400.0) == pytest.approx(392.0)
    assert rails.planted_gbps(p, "n4", "n1", 0, 400.0) == pytest.approx(392.0 * 0.6)
    assert rails.planted_gbps(p, "n5", "n1", 7, 400.0) == pytest.approx(196.0)


@pytest.mark.parametrize("plants, words", [
    ({"cluster.nic_slow": "n3"}, "expected NODE:RAIL[:FACTOR]"),
    ({"cluster.nic_slow": "n3:x"}, "expected NODE:RAIL[:FACTOR]"),
    ({"cluster.nic_slow": "n3:1:2"}, "0 < FACTOR <= 1"),
    ({"cluster.rails": "0"}, "expected GBPS, a number > 0"),
])
def test_bad_plant_values_are_one_usage_line(plants, words):
    fl.validate({"cluster.rails": "400"})
    with pytest.raises(UsageError, match=words.replace("[", r"\[").replace("]", r"\]")):
        fl.validate(plants)


def test_the_spec_names_the_rails_their_order_and_rate(tree):
    doc = rails.probe(planted=True, want={"mlx5_7": 400.0, "mlx5_0": 200.0, "mlx5_9": 400.0})
    assert [(n["nic"], n["rate_gbps"], n.get("missing")) for n in doc["nics"]] == [
        ("mlx5_7:1", 400.0, None), ("mlx5_0:1", 200.0, None), ("mlx5_9:1", 400.0, "not in sysfs (class/infiniband)")]
    assert doc["untested"] is None


def test_a_nic_the_spec_names_and_a_node_lacks_is_a_rail_without_a_figure(tree, tmp_path: Path, monkeypatch):
    from trainready.util.atomic import atomic_write_json

    monkeypatch.setenv("SLURM_PROCID", "1")
    want = {"mlx5_0": 400.0, "mlx5_9": 400.0}
    for n in ("n1", "n2"):
        atomic_write_json(rails.probe_path(tmp_path, n), {**rails.probe(planted=True, want=want), "node": n})
    rec = tmp_path / "pairs" / "round-1" / "n1__n2.json"
    rails.run_rail_pair(tmp_path, rec, 1, "n1", "n2", {"cluster.rails": "400"})
    share, why = fabric.share_of(rec)
    assert share is None and why == "rail 1 mlx5_9:1-mlx5_9:1: mlx5_9:1 not in sysfs (class/infiniband); " \
                                    "mlx5_9:1 not in sysfs (class/infiniband)"


@pytest.mark.skipif(shutil.which("ib_write_bw") is None, reason="perftest (ib_write_bw) not installed on this host")
def test_gpudirect_asked_of_a_perftest_without_cuda_is_not_tested(tree):
    assert rails.probe(planted=False, gpudirect=False)["untested"].startswith("ib_write_bw opens none")
    doc = rails.probe(planted=False, gpudirect=True)
    assert doc["untested"].startswith("ib_write_bw was built without CUDA") and "fabric.gpudirect" in doc["untested"]


def test_a_planted_sysfs_tree_is_what_every_node_s_probe_reads(tmp_path: Path, monkeypatch):
    """cluster.sysfs=PATH: the probe reads that tree (a capture folder's sys/, or the tree itself), not /sys or
    TRAINREADY_SYSFS_ROOT; a PATH that is no folder is refused in one line before any job."""
    from trainready.fabric.sample import hgx_replay

    monkeypatch.setenv("TRAINREADY_SYSFS_ROOT", str(tmp_path / "empty"))
    assert rails.probe(planted=True, root=rails.planted_root({}))["untested"] is not None  # the env's empty tree
    capture = hgx_replay(tmp_path / "capture")
    for path in (capture, capture / "sys"):
        root = rails.planted_root({"cluster.sysfs": str(path)})
        assert root == capture / "sys"
        doc = rails.probe(planted=True, root=root)
        assert doc["untested"] is None and [n["nic"] for n in doc["nics"]][:8] == [f"mlx5_{i}:1" for i in range(8)]
    fl.validate({"cluster.sysfs": str(capture), "cluster.rails": "400", "cluster.nic_slow": "n2:3"})
    assert fl.nodes_planted({"cluster.sysfs": str(capture), "cluster.nic_slow": "n2:3"}) == {"n2"}
    with pytest.raises(UsageError, match=r"--plant cluster.sysfs=/nonexistent: expected a folder"):
        fl.validate({"cluster.sysfs": "/nonexistent"})
