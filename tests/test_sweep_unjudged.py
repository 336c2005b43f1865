"""'Not judged' is not a pass in the sweep: a timing FAIL turned WARN "not judged" on a busy machine
(suite/machine.py) keeps the node's strikes (failing, busy, failing drains at --strikes 2), and the sweeps in a row
that could not judge a node are counted; at the spec's fleet.unjudged_sweeps coverage, `cluster history` and
Prometheus say "cannot be judged for N sweeps", never a drain on its own."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from trainready.cluster.repair import coverage
from trainready.cluster.judge.verdict import NodeVerdict
from trainready.cluster.sweep import judge, monitor, state, trend
from trainready.records import TIMING_ONLY, Outcome, Status
from trainready.report.node_state import node_state, text
from trainready.spec import load_spec
from trainready.suite.machine import MachineState, judged_on

T = dt.datetime(2026, 12, 5, 3, 0, tzinfo=dt.timezone.utc)
BUSY = MachineState(cores=2, seconds=10.0, foreign_cores=1.8, steal_fraction=0.0, load1=4.2, gpu_others=())
SLOW = Outcome(Status.FAIL, "train_tokens_per_s 900 < floor 1500", details={TIMING_ONLY: True})


def busy_record() -> dict:  # type: ignore[type-arg]
    """A node record whose train_step timing failed on a busy machine: the check says WARN 'not judged'."""
    out = judged_on(SLOW, BUSY)
    assert out.status == Status.WARN and out.message.startswith("not judged: other processes kept 1.8 of 2")
    return {"report": {"results": [{"name": "train_step", "status": "warn", "message": out.message,
                                    "details": dict(out.details)}]}}


ACCEPTED = NodeVerdict("n1", True, (), (), "r", {}, ())
FAILED = NodeVerdict("n1", False, ("check matmul: FAIL",), (), "r", {}, ("check matmul",))


def test_failing_busy_failing_drains_a_not_judged_sweep_keeps_the_strikes() -> None:
    doc = {"schema": state.SCHEMA, "nodes": {}, "drains": []}
    seq = [judge.outcome(FAILED, {}), judge.outcome(ACCEPTED, {}, judge.not_judged(busy_record()))]
    assert seq[1].verdict == "unknown" and seq[1].text.startswith("check train_step: not judged: other processes")
    got = [judge.strike(doc, o, 2, T, 3) for o in (seq[0], seq[1], seq[0])]
    assert [(o.verdict, o.strikes, o.action) for o in got] == [("fail", 1, "warn"), ("unknown", 0, ""),
                                                               ("fail", 2, "drain")]
    assert judge.outcome(ACCEPTED, {}, judge.not_judged({"report": {"results": []}})).verdict == "pass"


def test_three_sweeps_not_judged_are_said_in_coverage_history_and_prometheus(tmp_path: Path) -> None:
    limit = load_spec("example:local-slurm")[0].fleet.unjudged_sweeps
    assert limit == 3
    doc = {"schema": state.SCHEMA, "nodes": {}, "drains": []}
    rec = tmp_path / "n1.json"
    rec.write_text(json.dumps(busy_record()))
    outs = []
    for k in range(limit):
        o = judge.strike(doc, judge.outcome(ACCEPTED, {}, judge.not_judged(busy_record())), 2, T, limit)
        trend.follow(tmp_path, "n1", str(rec), trend.Sweep(o.verdict, f"2026-12-0{k + 1}T03:00:00+00:00", f"r{k}",
                                                           o.text, o.strikes, 2, o.unjudged), {}, trend.Rule(0.1, 5))
        outs.append(o)
    assert [o.unjudged for o in outs] == [1, 2, 3] and [o.action for o in outs] == ["", "", ""]  # never a drain
    assert not outs[1].text.startswith("cannot be judged") and outs[2].text.startswith("cannot be judged for 3 sweeps")
    state.save(tmp_path, doc)
    assert coverage.unjudged(tmp_path, limit) == [
        "n1: cannot be judged for 3 sweeps (fleet.unjudged_sweeps 3; last: " + outs[2].text + ")"]
    shown = text(node_state({"node": "n1", "runs": trend.load(tmp_path, "n1")}))
    assert shown[0] == "n1: NOT JUDGED in its last sweep (unknown)" and "cannot be judged for 3 sweeps" in shown[1]
    prom = tmp_path / "sweep.prom"
    monitor.write(str(prom), tmp_path, doc, {}, limit)
    body = prom.read_text()
    assert 'trainready_sweep_unjudged_sweeps{node="n1"} 3' in body
    assert 'trainready_sweep_cannot_be_judged{node="n1"} 1' in body
    judge.strike(doc, judge.outcome(ACCEPTED, {}), 2, T, limit)  # a judged pass ends the run
    assert doc["nodes"]["n1"]["unjudged"] == 0
