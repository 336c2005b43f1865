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
    assert "switch s1: 2 of its 2 tested node(s)" in new.why and new.to_json()["switches"][0]["switch"] == "s1"


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


LEAF8 = "SwitchName=s1 Nodes=big[1-8]\nSwitchName=s2 Nodes=big[9-16]\nSwitchName=top Switches=s[1-2]\n"


def test_a_partly_tested_leaf_counts_the_nodes_this_run_tested(tmp_path: Path):
    """A run over 4 of an 8-node leaf (a --nodelist subset, or 4 of its nodes down or drained), all 4 rejected for
    the collective: the switch is named, counted against the 4 it tested; 1 of 4 tested is no switch."""
    topo = parse(LEAF8, "t")
    tested = {f"big{k}" for k in range(1, 5)}
    rejected = {n: ("collective",) for n in tested}
    assert switches.blame(rejected, topo, 0.5, FLEET.switch_causes) == []  # against all 8: what it did before
    hit = switches.blame(rejected, topo, 0.5, FLEET.switch_causes, tested)
    assert [(s.switch, s.of, s.leaf) for s in hit] == [("s1", 4, 8)]
    assert "4 of its 4 tested node(s) (of 8 under it)" in hit[0].line()
    assert switches.blame({"big1": ("collective",)}, topo, 0.5, FLEET.switch_causes, tested) == []
    f = tmp_path / "topology.conf"
    f.write_text(LEAF8)
    got = switches.check(rejected, FLEET.switch_fraction, FLEET.switch_causes, f, tested)
    assert [s.switch for s in got.named] == ["s1"] and got.unchecked == ""


def test_cluster_pairs_counts_the_nodes_it_paired(tmp_path: Path):
    """`cluster pairs` over 4 nodes of an 8-node leaf, all 4 named: the same rule, the same count."""
    from trainready.cluster.options import FleetOptions
    from trainready.cluster.pairs import search
    from trainready.cluster.pairs.pairing import NodeVerdict as PairVerdict, PairingOutcome

    f = tmp_path / "topology.conf"
    f.write_text(LEAF8)
    out = PairingOutcome(3, 10.0, 20.0, (), tuple(PairVerdict(f"big{k}", "bad", 0, 3, 3, "slow") for k in range(1, 5)))
    fleet = FleetOptions(results=tmp_path, spec="example:local-slurm", topology=f)
    assert [s.switch for s in search.name_switches(out, fleet)] == ["s1"]


def test_hostlists_expand_as_slurm_does():
    """Every bracket group of a name, as `scontrol show hostnames` printed them (tests/data, Slurm 22.05)."""
    rows = [ln.split("\t") for ln in (Path(__file__).parent / "data" / "scontrol_hostnames.txt").read_text().splitlines()
            if not ln.startswith("#")]
    assert expand("rack[1-2]-n[1-2]") != ["rack1-n[1-2]", "rack2-n[1-2]"]
    for expr, names in rows:
        assert expand(expr) == names.split(), expr
    assert parse("SwitchName=s1 Nodes=rack[1-2]-n[1-2]\n", "t").leaf_of("rack2-n2") == "s1"


def test_a_topology_that_cannot_be_read_or_misses_nodes_is_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A stand-in `scontrol` on PATH that fails as slurmctld does when it cannot answer the topology: the rule
    names no switch and says why; a rejected node under no leaf is named too."""
    import stat

    d = tmp_path / "bin"
    d.mkdir()
    (d / "scontrol").write_text("#!/bin/sh\necho 'slurm_load_topo error: Unexpected message received' >&2\nexit 1\n")
    (d / "scontrol").chmod(0o755 | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{d}:/bin:/usr/bin")
    rejected = {"topo1": ("collective",), "topo2": ("collective",)}
    got = switches.check(rejected, FLEET.switch_fraction, FLEET.switch_causes)
    assert got.named == ()
    assert got.unchecked.startswith("no switch checked: no topology (scontrol show topology: slurm_load_topo error")
    assert "(topo1, topo2) are judged each on its own" in got.unchecked
    f = tmp_path / "topology.conf"
    f.write_text("SwitchName=s1 Nodes=topo[1-2]\n")
    got = switches.check({**rejected, "gpu9": ("collective",), "gpu8": ("link",)}, FLEET.switch_fraction,
                         FLEET.switch_causes, f)
    assert [s.switch for s in got.named] == ["s1"]
    assert got.unchecked.startswith("2 node(s) rejected for a cross-node or bandwidth cause stand under no leaf switch")
    assert "(gpu8, gpu9): their switch not checked" in got.unchecked
