"""A bad switch is not many bad nodes, on a real local Slurm with Slurm's tree topology
(`scripts/local-slurm.sh up --cluster topo --nodes 8 --topology 2`: TopologyPlugin=topology/tree, leaf switches
s1..s4 of two nodes each in topology.conf(5)).

`cluster run --drain`: s1's two nodes drop out of the cross-node step (a cross-node cause on every node of one
switch) and topo5 fails its matmul: topo5 is drained, s1 is named and none of its nodes drained.
`cluster pairs`: a slow link planted on s1's nodes names the switch, and topo5, slow for its own reason on
another switch, is still a culprit.  Without accounting the job impact says "not known (no accounting)".
On six of the nodes (s1..s3): a switch whose nodes' ranks fail at the all_reduce's set-up (cluster.switch_down)
is named by their own errors, none drained; and `cluster pairs` with s1's nodes slow, each paired with a healthy
node in round 1 (two of three pairs slow), names s1 from the best pairs' reference."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import own_cluster, run_cli, undrain

pytestmark = pytest.mark.slow

CLUSTER = "topo"
CONF = f"/etc/slurm-{CLUSTER}/slurm.conf"
NODES = [f"{CLUSTER}{k}" for k in range(1, 9)]
WHERE = ("--nodelist", f"{CLUSTER}[1-8]", "--spec", "example:local-slurm")


@pytest.fixture(scope="module")
def cluster():  # type: ignore[no-untyped-def]
    yield from own_cluster(CLUSTER, "--nodes", "8", "--topology", "2", nodes=NODES, after=lambda: undrain(*NODES))


def _reason(node: str) -> str:
    return subprocess.run(["sinfo", "-h", "-n", node, "-o", "%E"], capture_output=True, text=True,
                          env={**os.environ, "SLURM_CONF": CONF}).stdout.strip()


def test_slurm_tree_is_read(cluster):
    from trainready.cluster.control.topology import read_slurm

    topo = read_slurm()
    assert topo.source == "scontrol show topology"
    assert topo.leaves["s1"] == ("topo1", "topo2") and topo.leaf_of("topo8") == "s4" and "top" not in topo.leaves


def test_run_names_the_switch_and_drains_only_the_node_failing_for_itself(cluster, tmp_path: Path):
    p = run_cli("cluster", "run", *WHERE, "--results", str(tmp_path), "--only", "versions,matmul", "--time", "5:00",
                "--drain", "--max-drain", "50%", "--plant", "cluster.vanish=topo1+topo2", "--plant", "cluster.fail=topo5")
    doc = json.loads((tmp_path / "fleet.json").read_text())
    assert set(doc["drain_list"]) == {"topo1", "topo2", "topo5"}, p.stderr[-3000:]  # all three rejected ...
    assert doc["guard"]["drain"] == ["topo5"] and doc["guard"]["held"] == ["topo1", "topo2"]  # ... one drained
    assert [s["switch"] for s in doc["guard"]["switches"]] == ["s1"]
    assert "switch s1: 2 of its 2 tested node(s) (topo1, topo2)" in p.stdout + p.stderr
    try:
        assert _reason("topo5").startswith("trainready")
        assert _reason("topo1") in ("", "none") and _reason("topo2") in ("", "none")
        assert doc["context"]["job_impact"]["topo5"]["text"] == "topo5: job impact: not known (no accounting)"
    finally:
        undrain("topo5")


def test_pairs_name_the_switch_of_a_slow_link_and_keep_a_node_slow_for_itself(cluster, tmp_path: Path):
    p = run_cli("cluster", "pairs", *WHERE, "--results", str(tmp_path), "--plant", "cluster.slow_link=topo1+topo2",
                "--plant", "cluster.slow=topo5", timeout=900)
    doc = json.loads((tmp_path / "pairs" / "pairs.json").read_text())
    status = {n["node"]: n["status"] for n in doc["nodes"]}
    assert p.returncode == 1, p.stderr[-3000:]
    assert status["topo1"] == status["topo2"] == "switch" and status["topo5"] == "bad"
    assert doc["culprits"] == ["topo5"]
    assert [s["switch"] for s in doc["switches"]] == ["s1"] and doc["switches"][0]["nodes"] == ["topo1", "topo2"]


SIX = ("--nodelist", f"{CLUSTER}[1-6]", "--spec", "example:local-slurm")


def test_a_switch_whose_nodes_fail_at_set_up_is_named_and_none_drained(cluster, tmp_path: Path):
    p = run_cli("cluster", "run", *SIX, "--results", str(tmp_path), "--only", "versions", "--time", "5:00",
                "--drain", "--max-drain", "50%", "--plant", "cluster.switch_down=topo3+topo4", timeout=900)
    doc = json.loads((tmp_path / "fleet.json").read_text())
    out = p.stdout + p.stderr
    rejected = {n["node"]: n for n in doc["nodes"] if n["verdict"] == "reject"}
    assert set(rejected) == {"topo3", "topo4"}, out[-3000:]  # the ranks that failed, never those that waited
    assert all("failed with its own error" in " ".join(n["reasons"]) for n in rejected.values())
    assert [s["switch"] for s in doc["guard"]["switches"]] == ["s2"] and doc["guard"]["drain"] == []
    assert doc["guard"]["held"] == ["topo3", "topo4"] and "switch s2: 2 of its 2 tested node(s) (topo3, topo4)" in out
    assert _reason("topo3") in ("", "none") and _reason("topo4") in ("", "none")


def _splitting_seed(nodes: list[str], a: str, b: str) -> int:
    """A seed of the pairs search whose round 1 pairs `a` and `b` each with another node."""
    from trainready.cluster.pairs.pairing import PairingOptions, find_culprits

    for seed in range(100):
        first: list = []
        find_culprits(nodes, lambda rnd, pairs: first.extend(pairs) or {q: 1.0 for q in pairs}, PairingOptions(seed=seed))
        if (a, b) not in first and (b, a) not in first:
            return seed
    raise AssertionError("no seed")


def test_pairs_with_a_slow_switch_in_most_pairs_name_the_switch(cluster, tmp_path: Path):
    seed = _splitting_seed(NODES[:6], "topo1", "topo2")
    p = run_cli("cluster", "pairs", *SIX, "--results", str(tmp_path), "--plant", "cluster.slow_link=topo1+topo2",
                "--seed", str(seed), timeout=900)
    doc = json.loads((tmp_path / "pairs" / "pairs.json").read_text())
    first = [q for q in doc["pairs"] if q["round"] == 1]
    slow = [q for q in first if {q["a"], q["b"]} & {"topo1", "topo2"}]
    assert len(first) == 3 and len(slow) == 2, p.stderr[-3000:]  # the case: two of round 1's three pairs slow
    assert not any(q["passed"] for q in slow) and doc["reference_gbps"] > max(q["busbw_gbps"] or 0 for q in slow)
    assert p.returncode == 1 and [s["switch"] for s in doc["switches"]] == ["s1"], p.stderr[-3000:]
    assert doc["switches"][0]["nodes"] == ["topo1", "topo2"] and doc["culprits"] == []
