"""A failed rendezvous names its nodes: a rank that failed with its own error (torch.distributed raised it at
process-group set-up, nobody behind it) is at fault; the ranks that waited for it are not; two such nodes
under one leaf switch name the switch, none drained for it.  The records are the ones the cross-node task
writes: comm/external.py's failure details through blame.from_details."""

from __future__ import annotations

import json
from pathlib import Path

from trainready.cluster.control.topology import Topology
from trainready.cluster.judge import guard, switches
from trainready.cluster.judge.verdict import NodeInput, decide
from trainready.cluster.tasks import blame, collective
from trainready.cluster.tasks.layout import CROSS_SCHEMA
from trainready.comm.external import name_peers
from trainready.records import SCHEMA_VERSION
from trainready.spec import load_spec

NODES = [f"node{k}" for k in range(1, 7)]
TOPO = Topology({"s1": ("node1", "node2"), "s2": ("node3", "node4"), "s3": ("node5", "node6")}, "test")
OWN = "RuntimeError: [gloo] connect to peer failed: No route to host (errno 113)"  # as gloo raised it


def failed_rendezvous(res: Path, raised: set[int], n: int = 6) -> None:
    """RESULTS as the step leaves it: every rank of `n` reached 'rendezvous'; the ranks in `raised` failed there
    with their own error, the others' watchdogs reported no progress; rank 0 wrote the comm record."""
    (res / "cross" / "ranks").mkdir(parents=True)
    stages = {k: (1, f"node{k + 1}", "rendezvous") for k in range(n)}
    early = {k: (v if k in raised else None) for k, v in stages.items()}  # a raising rank fails before most join
    for r in range(n):
        _, peers = name_peers(early if r in raised else stages, r)  # the heartbeat view each rank reads
        own = r in raised
        det = {"rank": r, "host": f"node{r + 1}", "stage": "rendezvous", "error": OWN if own else
               "no progress for 50 s (timeout 30 s)", "raised": own, **peers}
        rec = {"schema": blame.RANK_SCHEMA, "node": f"node{r + 1}", "rank": r, "status": "fail",
               "stage": "rendezvous", "error": det["error"], **blame.from_details(det)}
        (res / "cross" / "ranks" / f"{r}.json").write_text(json.dumps(rec))
        (res / "cross" / f"node{r + 1}.json").write_text(json.dumps(
            {"schema": CROSS_SCHEMA, "node": f"node{r + 1}", "rank": r, "collective": rec}))
        if r == 0:
            msg = ("gloo sweep over 6 ranks failed on rank 0 (node1) in 'rendezvous': no progress for 50 s; no rank is "
                   "behind: all 6 reached 'rendezvous' (a stalled collective or link, not one rank)")
            (res / "cross" / "comm.json").write_text(json.dumps({"schema": SCHEMA_VERSION, "results": [
                {"name": "comm", "status": "fail", "message": msg, "details": det, "metrics": []}]}))


def judged(res: Path, nodes: list[str] = NODES):
    from trainready.cluster.fleet import read_cross

    cross, _ = read_cross(res, nodes)
    return collective.judge(res, cross, nodes, 1)


def test_the_ranks_that_failed_with_their_own_error_are_at_fault_not_those_that_waited(tmp_path):
    failed_rendezvous(tmp_path, raised={2, 3})
    res, findings = judged(tmp_path)
    assert [f.node for f in findings] == ["node3", "node4"], findings
    assert res.details["at_fault"] == [2, 3] and res.details["waiting"] == [0, 1, 4, 5]
    assert "failed with its own error in 'rendezvous': " + OWN in findings[0].text
    assert "at fault by the ranks' records: rank(s) [2, 3] on node3, node4" in res.message


def test_two_such_nodes_under_one_switch_name_the_switch_and_none_is_drained(tmp_path):
    failed_rendezvous(tmp_path, raised={2, 3})
    res, findings = judged(tmp_path)
    spec = load_spec("example:local-slurm")[0]
    verdict = decide([NodeInput(n, {"report": {"results": []}, "versions": {}}) for n in NODES], spec, [res], findings)
    assert verdict.rejected == ["node3", "node4"]
    causes = {n.node: n.causes for n in verdict.nodes if n.rejected}
    named = switches.blame(causes, TOPO, spec.fleet.switch_fraction, spec.fleet.switch_causes)
    assert [s.switch for s in named] == ["s2"]
    drain = guard.plan(verdict, guard.parse_max_drain("50%"), tuple(named), spec.fleet.switch_causes)
    assert drain.drain == () and drain.held == ("node3", "node4") and "switch s2: 2 of its 2 tested node(s)" in drain.why


def test_when_every_rank_raised_none_is_named_for_its_own_error(tmp_path):
    failed_rendezvous(tmp_path, raised=set(range(6)))  # a dead peer makes every survivor raise: no one to name
    res, findings = judged(tmp_path)
    assert findings == [] and res.details["at_fault"] == []


def test_a_rank_that_raised_with_a_peer_behind_it_still_names_that_peer() -> None:
    """A peer that died mid-collective stays behind in the heartbeat; a survivor that raised for it names it."""
    stages = {0: (5, "node1", "all_reduce 1 MiB"), 1: (5, "node2", "all_reduce 1 MiB"), 2: (3, "node3", "joined")}
    _, peers = name_peers(stages, 0)
    got = blame.from_details({"rank": 0, "stage": "all_reduce 1 MiB", "error": "RuntimeError: Connection closed by "
                              "peer", "raised": True, **peers})
    assert got["at_fault"] == [2] and got["waiting"] == [0] and not got.get("own_error")


def test_a_leaf_of_four_down_among_sixteen_names_its_switch_not_the_healthy_nodes_its_ranks_never_saw(tmp_path):
    """The accuracy campaign's switch down (16 nodes, four leaves of four): the four ranks that raised at set-up
    saw none of the others join; their view must not blame the twelve healthy nodes."""
    nodes = [f"node{k}" for k in range(1, 17)]
    topo = Topology({f"s{j + 1}": tuple(nodes[4 * j:4 * j + 4]) for j in range(4)}, "test")
    failed_rendezvous(tmp_path, raised={8, 9, 10, 11}, n=16)
    res, findings = judged(tmp_path, nodes)
    assert sorted({f.node for f in findings}) == ["node10", "node11", "node12", "node9"], findings
    spec = load_spec("example:local-slurm")[0]
    verdict = decide([NodeInput(n, {"report": {"results": []}, "versions": {}}) for n in nodes], spec, [res], findings)
    assert sorted(verdict.rejected) == ["node10", "node11", "node12", "node9"]
    causes = {n.node: n.causes for n in verdict.nodes if n.rejected}
    named = switches.blame(causes, topo, spec.fleet.switch_fraction, spec.fleet.switch_causes)
    assert [s.switch for s in named] == ["s3"]
    drain = guard.plan(verdict, guard.parse_max_drain("50%"), tuple(named), spec.fleet.switch_causes)
    assert drain.drain == () and sorted(drain.held) == ["node10", "node11", "node12", "node9"]
