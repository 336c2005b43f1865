"""`cluster pairs --fabric` on a real local Slurm with Slurm's tree topology (`scripts/local-slurm.sh up --cluster
rails --nodes 8 --topology 2`: leaf switches s1..s4 of two nodes each).

This host has no RDMA device and no RDMA kernel module, and Debian's perftest installed: the probe step runs on
every node through Slurm and says "not tested (no RDMA device)" (sysfs has no class/infiniband), or, on a
ConnectX-7 sysfs tree (TRAINREADY_SYSFS_ROOT), that ib_write_bw opens none of its 8 ports ("Did not detect
devices", perftest's own words): never a pass, never a culprit, exit 1.  With the figures planted
(cluster.rails), the pair search over those 8 ports per node names a slow NIC (cluster.nic_slow), a node slow on
every rail (cluster.slow) and the leaf switch both of whose nodes are slow (cluster.slow_link)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import own_cluster, run_cli
from fabric_tree import hgx_tree

pytestmark = pytest.mark.slow

CLUSTER = "rails"
NODES = [f"{CLUSTER}{k}" for k in range(1, 9)]


@pytest.fixture(scope="module")
def cluster():  # type: ignore[no-untyped-def]
    yield from own_cluster(CLUSTER, "--nodes", "8", "--topology", "2", nodes=NODES)


def _pairs(tmp_path: Path, nodes: str, *plants: str, env: dict[str, str] | None = None) -> tuple[int, dict, str]:
    args = ["cluster", "pairs", "--fabric", "--nodelist", nodes, "--spec", "example:local-slurm",
            "--results", str(tmp_path / "r"), "--time", "5:00"]
    for p in plants:
        args += ["--plant", p]
    p = run_cli(*args, env=env, timeout=900)
    doc = json.loads((tmp_path / "r" / "pairs" / "pairs.json").read_text())
    return p.returncode, doc, p.stdout + p.stderr


def test_no_rdma_device_is_not_tested_never_a_pass(cluster, tmp_path: Path):
    if Path("/sys/class/infiniband").is_dir():
        pytest.skip("this host has an RDMA driver loaded")
    rc, doc, out = _pairs(tmp_path, f"{CLUSTER}[1-4]")
    assert rc == 1, out[-3000:]
    assert sorted(doc["fabric"]["not_tested"]) == NODES[:4]
    assert set(doc["fabric"]["not_tested"].values()) == {"no RDMA device (/sys/class/infiniband: no port)"}
    assert doc["culprits"] == [] and doc["nodes"] == [] and doc["pairs"] == []
    assert "rails1: not tested (no RDMA device (/sys/class/infiniband: no port))" in out


@pytest.mark.skipif(shutil.which("ib_write_bw") is None, reason="perftest (ib_write_bw) not installed on this host")
def test_ports_perftest_cannot_open_are_not_tested(cluster, tmp_path: Path):
    if Path("/sys/class/infiniband").is_dir():
        pytest.skip("this host has an RDMA driver loaded")
    root = hgx_tree(tmp_path / "sys")
    rc, doc, out = _pairs(tmp_path, f"{CLUSTER}[1-2]", env={"TRAINREADY_SYSFS_ROOT": str(root)})
    assert rc == 1, out[-3000:]
    assert doc["fabric"]["not_tested"] == {n: "ib_write_bw opens none of 8 RDMA port(s): no RDMA device (ib_write_bw: "
                                              "Did not detect devices)" for n in NODES[:2]}
    probe = json.loads((tmp_path / "r" / "pairs" / "fabric" / "probe" / "rails1.json").read_text())
    assert probe["perftest"] and probe["perftest_version"] and len(probe["nics"]) == 8


def test_planted_figures_name_a_slow_nic_a_slow_node_and_a_slow_switch(cluster, tmp_path: Path):
    root = hgx_tree(tmp_path / "sys")
    rc, doc, out = _pairs(tmp_path, f"{CLUSTER}[1-8]", "cluster.rails=400", "cluster.nic_slow=rails5:3",
                          "cluster.slow=rails7", "cluster.slow_link=rails1+rails2", env={"TRAINREADY_SYSFS_ROOT": str(root)})
    assert rc == 1, out[-3000:]
    fab = doc["fabric"]
    assert fab["not_tested"] == {}
    assert fab["slow_nics"] == [{"node": "rails5", "nic": "mlx5_3:1", "rail": 3}]
    assert "rails7" in fab["slow_nodes"] and "rails5" not in fab["slow_nodes"]
    assert [s["switch"] for s in doc["switches"]] == ["s1"] and doc["switches"][0]["nodes"] == ["rails1", "rails2"]
    assert sorted(doc["culprits"]) == ["rails5", "rails7"]  # s1's nodes are the switch's, not culprits
    status = {n["node"]: n["status"] for n in doc["nodes"]}
    assert status["rails1"] == status["rails2"] == "switch" and status["rails3"] == "good"
    assert "rails5: NIC mlx5_3:1 (rail 3) below 80% of its rate" in out
    assert "switch s1: 2 of its 2 tested node(s) (rails1, rails2)" in out


def test_cluster_run_s_cross_step_measures_the_rails_and_warns_a_slow_pair_without_rejecting(cluster, tmp_path: Path):
    root = hgx_tree(tmp_path / "sys")
    p = run_cli("cluster", "run", "--nodelist", f"{CLUSTER}[1-4]", "--spec", "example:local-slurm", "--results",
                str(tmp_path / "r"), "--only", "versions", "--no-collective", "--time", "5:00",
                "--plant", "cluster.rails=400", "--plant", "cluster.nic_slow=rails3:2",
                env={"TRAINREADY_SYSFS_ROOT": str(root)}, timeout=900)
    doc = json.loads((tmp_path / "r" / "fleet.json").read_text())
    rails = next(c for c in doc["cross"] if c["name"] == "cluster.rails")
    assert rails["status"] == "warn", (rails, p.stderr[-3000:])
    assert "rail 2 rails3:mlx5_2:1 -> rails4:mlx5_2:1: 196 Gb/s, 49% of 400" in rails["message"]
    nodes = {n["node"]: n for n in doc["nodes"]}
    assert all(n["accepted"] for n in nodes.values()), doc["drain_list"]  # one pairing cannot say which: no rejection
    assert any("rails" in w and "rail 2" in w for w in nodes["rails4"]["warnings"])
    assert not any("rail" in w for w in nodes["rails1"]["warnings"])  # rails1 + rails2: every rail at 98%
