"""The switch rule (cluster/judge/switches.py, guard.py) and Slurm's topology read (cluster/control/topology.py),
pure: rejections clustered under one leaf switch for a cross-node cause drain none of its nodes; a node with a
cause of its own under it still drains; a switch with too few of its nodes failing is not named."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainready.cluster.control.topology import Topology, expand, parse, read_file
from trainready.cluster.judge import guard, switches
from trainready.cluster.judge.verdict import FleetVerdict, NodeVerdict
from trainready.errors import UsageError
from trainready.spec import load_spec

FLEET = load_spec("example:local-slurm")[0].fleet
# `scontrol show topology` on the local cluster brought up with `scripts/local-slurm.sh up --cluster topo
# --nodes 8 --topology 2` (Slurm 22.05), as printed
SCONTROL = """SwitchName=s1 Level=0 LinkSpeed=1 Nodes=topo[1-2]
SwitchName=s2 Level=0 LinkSpeed=1 Nodes=topo[3-4]
SwitchName=s3 Level=0 LinkSpeed=1 Nodes=topo[5-6]
SwitchName=s4 Level=0 LinkSpeed=1 Nodes=topo[7-8]
SwitchName=top Level=1 LinkSpeed=1 Nodes=topo[1-8] Switches=s[1-4]
"""


def _verdict(causes: dict[str, tuple[str, ...]], n: int = 8) -> FleetVerdict:
    nodes = tuple(NodeVerdict(f"topo{k}", f"topo{k}" not in causes, tuple(f"{c}: x" for c in causes.get(f"topo{k}", ())),
                              (), "", {}, causes.get(f"topo{k}", ())) for k in range(1, n + 1))
    return FleetVerdict(nodes, (), (), "fleet majority", {})


def test_hostlist_and_topology_parse():
    assert expand("node[1-3,05],gpu7,a[08-10]x") == ["node1", "node2", "node3", "node05", "gpu7", "a08x", "a09x", "a10x"]
    topo = parse(SCONTROL, "scontrol show topology")
    assert "top" not in topo.leaves  # the spine lists every node too: not a leaf
    assert topo.leaves == {"s1": ("topo1", "topo2"), "s2": ("topo3", "topo4"), "s3": ("topo5", "topo6"),
                           "s4": ("topo7", "topo8")}
    assert topo.leaf_of("topo6") == "s3"
    with pytest.raises(UsageError, match="line 1: expected SwitchName"):
        parse("Nodes=a[1-2]\n", "t.conf")
    with pytest.raises(UsageError, match="not a number"):
        expand("n[a-b]")


def test_topology_file_bad_path_is_one_line(tmp_path: Path):
    with pytest.raises(UsageError, match="--topology .*cannot read it"):
        read_file(tmp_path / "none.conf")
    f = tmp_path / "topology.conf"
    f.write_text("# leafs\nSwitchName=s1 Nodes=topo[1-2]\nSwitchName=top Switches=s1\n")
    assert read_file(f).leaves == {"s1": ("topo1", "topo2")}


def test_switch_named_drains_none_of_its_nodes_own_cause_still_drains():
    topo = parse(SCONTROL, "t")
    v = _verdict({"topo1": ("cross-node",), "topo2": ("cross-node",), "topo5": ("check matmul",)})
    old = guard.plan(v, guard.parse_max_drain("50%"))  # without the switch rule: s1's nodes drained as broken
    assert set(old.drain) == {"topo1", "topo2", "topo5"}
    rejected = {n.node: n.causes for n in v.nodes if n.rejected}
    named = tuple(switches.blame(rejected, topo, FLEET.switch_fraction, FLEET.switch_causes))
    assert [s.switch for s in named] == ["s1"] and named[0].nodes == ("topo1", "topo2")
    new = guard.plan(v, guard.parse_max_drain("50%"), named, FLEET.switch_causes)
    assert new.drain == ("topo5",)
    assert set(new.held) == {"topo1", "topo2"}
    assert "switch s1: 2 of its 2 node(s)" in new.why and new.to_json()["switches"][0]["switch"] == "s1"


def test_a_node_with_its_own_cause_under_a_named_switch_still_drains():
    topo = parse(SCONTROL, "t")
    v = _verdict({"topo1": ("cross-node", "check matmul"), "topo2": ("cross-node",)})
    named = tuple(switches.blame({n.node: n.causes for n in v.nodes if n.rejected}, topo, 0.5, FLEET.switch_causes))
    plan = guard.plan(v, guard.parse_max_drain("50%"), named, FLEET.switch_causes)
    assert plan.drain == ("topo1",) and plan.held == ("topo2",)


def test_no_switch_named_for_one_node_own_causes_or_a_minority():
    topo = Topology({"s1": ("a1", "a2", "a3", "a4")}, "t")
    assert switches.blame({"a1": ("cross-node",)}, topo, 0.5, FLEET.switch_causes) == []  # one node is one node
    assert switches.blame({"a1": ("collective",), "a2": ("collective",)}, topo, 0.5, FLEET.switch_causes) == []  # 2 of 4
    assert switches.blame({"a1": ("check matmul",), "a2": ("check matmul",), "a3": ("drift torch",)}, topo, 0.5,
                          FLEET.switch_causes) == []  # not a cross-node cause
    hit = switches.blame({k: ("link",) for k in ("a1", "a2", "a3")}, topo, 0.5, FLEET.switch_causes)
    assert [s.switch for s in hit] == ["s1"]
    assert switches.for_rejected({"a1": ("check matmul",), "a2": ("check matmul",)}, 0.5, FLEET.switch_causes,
                                 Path("/nonexistent")) == ()  # no cross-node cause: the topology is never read


def test_sweep_holds_the_failures_a_switch_explains():
    from trainready.cluster.sweep import judge

    topo = Path(__file__).parent / "data" / "topology_topo.conf"
    v = _verdict({"topo1": ("collective",), "topo2": ("collective",), "topo5": ("check matmul",)})
    outs = [judge.Outcome(n, judge.FAIL, "x", 2, "drain") for n in ("topo1", "topo2", "topo5")]
    kept, lines = judge.by_switch(outs, v.nodes, 0.5, ("link",), topo)  # a spec whose switch causes do not match
    assert [o.action for o in kept] == ["drain", "drain", "drain"] and lines == []
    kept, lines = judge.by_switch(outs, v.nodes, FLEET.switch_fraction, FLEET.switch_causes, topo)
    assert [o.action for o in kept] == ["switch", "switch", "drain"] and lines[0].startswith("switch s1:")


def test_a_bad_topology_file_is_one_line_exit_2_before_slurm(tmp_path: Path):
    from conftest import run_cli

    bad = tmp_path / "topology.conf"
    bad.write_text("Nodes=a[1-2]\n")
    for cmd, f in (("run", tmp_path / "none.conf"), ("pairs", bad)):
        p = run_cli("cluster", cmd, "-N", "2", "--results", str(tmp_path / "r"), "--topology", str(f))
        assert p.returncode == 2, (p.stdout, p.stderr)
        assert p.stderr.strip().count("\n") == 0 and "Traceback" not in p.stderr
        assert ("cannot read it" if cmd == "run" else "line 1: expected SwitchName=NAME") in p.stderr
