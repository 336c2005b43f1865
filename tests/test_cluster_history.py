"""Fleet records kept per run (cluster/history.py): a second run never overwrites the first's verdict, the latest
RESULTS/fleet.json names every earlier run, and a resume's baseline is the run that rejected its nodes."""

from __future__ import annotations

import json
from pathlib import Path

from trainready.cluster import history
from trainready.cluster.judge import synthetic
from trainready.cluster.tasks.layout import FLEET_SCHEMA


def _verdict(run_dir: Path, kind: str, rejected: list[str], nodes: list[str], reference: str = "fleet majority",
             option: str | None = None) -> dict:  # type: ignore[type-arg]
    """A fleet verdict whose node records lie in run_dir/nodes/ (as cluster/tasks/node.py writes them)."""
    (run_dir / "nodes").mkdir(parents=True, exist_ok=True)
    entries = []
    for i, name in enumerate(nodes):
        rec = synthetic.node_record(name, 2, __import__("random").Random(i), 0.01, {})
        (run_dir / "nodes" / f"{name}.json").write_text(json.dumps(rec))
        entries.append({"node": name, "accepted": name not in rejected, "reasons": ["check matmul: FAIL"] if
                        name in rejected else [], "record": str(run_dir / "nodes" / f"{name}.json")})
    return {"schema": FLEET_SCHEMA, "summary": {"nodes": len(nodes), "accepted": len(nodes) - len(rejected),
                                                "rejected": len(rejected), "reference": reference, "evidence": True},
            "drain_list": rejected, "nodes": entries, "planted": {},
            "context": {"kind": kind, "run": str(run_dir), "reference_option": option}}


def test_a_second_run_keeps_the_first_verdict_and_names_it(tmp_path):
    first = history.new_run_dir(tmp_path, "run")
    history.write(_verdict(first, "run", ["node2"], ["node1", "node2", "node3"]), tmp_path, first)
    latest = json.loads((tmp_path / "fleet.json").read_text())
    assert latest["drain_list"] == ["node2"] and latest["history"] == []
    second = history.new_run_dir(tmp_path, "run")
    assert first != second and second.name > first.name  # never one folder (-2 within a second); newer sorts last
    history.write(_verdict(second, "run", [], ["node1", "node3"]), tmp_path, second)
    latest = json.loads((tmp_path / "fleet.json").read_text())
    assert latest["drain_list"] == [] and latest["run"] == str(second)
    assert [(h["run"], h["verdict"], h["rejected"]) for h in latest["history"]] == [(first.name, "reject", ["node2"])]
    assert json.loads((first / "fleet.json").read_text())["drain_list"] == ["node2"]  # untouched


def test_a_run_without_verdict_and_an_earlier_layout_are_named(tmp_path):
    old = _verdict(tmp_path, "run", ["node3"], ["node1", "node3"])
    del old["context"]["run"]
    (tmp_path / "fleet.json").write_text(json.dumps(old))  # RESULTS/fleet.json of a trainready before run folders
    broken = history.new_run_dir(tmp_path, "run")  # killed before its verdict
    now = history.new_run_dir(tmp_path, "resume")
    history.write(_verdict(now, "resume", [], ["node3"]), tmp_path, now)
    got = {h["run"].rsplit("-", 1)[-1]: h for h in json.loads((tmp_path / "fleet.json").read_text())["history"]}
    assert got["earlier"]["rejected"] == ["node3"] and Path(got["earlier"]["record"]).is_file()
    assert got[broken.name.rsplit("-", 1)[-1]]["record"] is None
    assert got[broken.name.rsplit("-", 1)[-1]]["verdict"].startswith("none: the run ended before its verdict")


def test_the_baseline_is_the_run_that_judged_the_resumed_node(tmp_path):
    rejecting = history.new_run_dir(tmp_path, "run")
    history.write(_verdict(rejecting, "run", ["node2"], ["node1", "node2", "node3"], "node1", "node1"), tmp_path,
                  rejecting)
    later = history.new_run_dir(tmp_path, "run")  # node2 drained: a later run covers the others only
    history.write(_verdict(later, "run", [], ["node1", "node3"]), tmp_path, later)
    resumed = history.new_run_dir(tmp_path, "resume")
    history.write(_verdict(resumed, "resume", [], ["node2"]), tmp_path, resumed)
    base = history.baseline((tmp_path,), ["node2"])
    assert base is not None and base.record == str(rejecting / "fleet.json") and base.reference == "node1"
    assert [p.node for p in base.peers] == ["node1", "node3"] and all(p.record for p in base.peers)
    other = history.baseline((tmp_path,), ["node9"])  # a node no run judged: the latest run
    assert other is not None and other.record == str(later / "fleet.json") and other.reference is None
