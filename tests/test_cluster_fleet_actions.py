"""Fleet actions an operator can trust with --drain: the blast-radius guard (at 640 synthetic nodes), what a task
past --time is called (did not finish vs hung, from its progress), which Slurm node states are "not tested",
and how often the collector polls slurmctld.  Pure: no Slurm here (tests/test_cluster_fleet_slurm.py runs the
same rules on the local cluster)."""

from __future__ import annotations

import pytest

from trainready.cluster import steps as run
from trainready.cluster.control import avail, slurm, watch
from trainready.cluster.judge import guard, synthetic
from trainready.cluster.judge.verdict import NodeInput, decide
from trainready.cluster.tasks import progress
from trainready.errors import UsageError
from trainready.spec import load_spec

SPEC, _ = load_spec("example:h200-8x")


def failing(ni: NodeInput, check: str = "matmul") -> NodeInput:
    """The same synthetic node with a FAILED check."""
    rec = dict(ni.record or {})
    rec["report"] = {"results": list(rec["report"]["results"]) + [{"name": check, "status": "fail",
                                                                   "message": "planted", "metrics": []}]}
    return NodeInput(ni.node, rec, "", ni.record_path)


def verdict_of(inputs: list[NodeInput]):  # type: ignore[no-untyped-def]
    return decide(inputs, SPEC, [], [])


def test_guard_at_640_nodes_drains_a_few_bad_nodes_but_never_a_fleet_wide_cause():
    base = synthetic.fleet(640, 8, seed=1)
    few = [failing(ni) if i % 64 == 5 else ni for i, ni in enumerate(base)]  # 10 separate bad nodes
    p = guard.plan(verdict_of(few), guard.parse_max_drain("10%"))
    assert p.limit == 64 and len(p.drain) == 10 and not p.held and p.fleet_wide is None
    wide = [failing(ni) if i < 300 else ni for i, ni in enumerate(base)]  # e.g. a missing mount on 300 nodes
    p = guard.plan(verdict_of(wide), guard.parse_max_drain("10%"))
    assert p.drain == () and len(p.held) == 300 and p.fleet_wide is not None
    assert p.fleet_wide.cause == "check matmul" and len(p.fleet_wide.nodes) == 300
    assert p.why.startswith("fleet-wide cause: 300 of 640 tested node(s) rejected for 'check matmul'")
    assert "drained none" in p.why and "\n" not in p.why


def test_guard_holds_too_many_different_rejections_without_calling_them_fleet_wide():
    base = synthetic.fleet(640, 8, seed=2)
    mixed = [failing(ni, ("matmul", "hbm", "gpus")[i % 3]) if i < 70 else ni for i, ni in enumerate(base)]
    p = guard.plan(verdict_of(mixed), guard.parse_max_drain("10%"))
    assert len(p.held) == 70 and p.drain == () and p.fleet_wide is None
    assert "70 rejected node(s) is more than --max-drain 10% (64 of 640" in p.why
    p = guard.plan(verdict_of(mixed), guard.parse_max_drain("70"))  # the operator raised it: all 70 drained
    assert len(p.drain) == 70 and not p.held


def test_guard_on_three_nodes_and_not_tested_nodes():
    three = synthetic.fleet(3, 8, seed=3)
    all_bad = verdict_of([failing(ni) for ni in three])
    p = guard.plan(all_bad, guard.parse_max_drain(guard.DEFAULT_MAX_DRAIN))
    assert p.limit == 1 and p.drain == () and p.fleet_wide is not None and len(p.fleet_wide.nodes) == 3
    one = verdict_of([failing(three[0]), three[1], NodeInput("gpu0003", None, not_tested="drained by an administrator")])
    p = guard.plan(one, guard.parse_max_drain("10%"))
    assert p.drain == ("gpu0001",) and p.fleet_wide is None  # the not-tested node is neither counted nor drained
    assert one.not_tested == ["gpu0003"] and one.rejected == ["gpu0001"] and one.exit_code == 1
    assert one.to_json()["nodes"][2]["verdict"] == "not tested"


@pytest.mark.parametrize("text, ok", [("10%", True), ("8", True), ("0", True), ("150%", False), ("ten", False),
                                      ("2.5", False), ("", False)])
def test_max_drain_parse(text, ok):
    if ok:
        assert str(guard.parse_max_drain(text)) == text
    else:
        with pytest.raises(UsageError, match="--max-drain"):
            guard.parse_max_drain(text)


def doc(phase: str, since: float, done: list[tuple[str, float]], total: int = 3, now: float = 1000.0) -> dict:
    return {"phase": phase, "phase_started": now - since, "done": [{"name": n, "seconds": s} for n, s in done],
            "total": total}


def test_a_task_still_moving_did_not_finish_and_one_that_stopped_is_hung():
    others = [doc("matmul", 5, [("start-up", 3.0), ("versions", 2.0)]), doc("versions", 4, [("start-up", 4.0)])]
    moving = progress.judge(doc("train_step", 8, [("start-up", 4.0), ("versions", 2.0), ("matmul", 16.0)]), others,
                            [], 30.0, "0:20", now=1000.0)
    assert not moving.hung and moving.cause == "no result: did not finish within --time 0:20"
    assert "did not finish within --time 0:20" in moving.text and "~45 s (2 of 3 checks in 30 s)" in moving.text
    assert "hung" not in moving.text and "raise --time" in moving.text
    stuck = progress.judge(doc("start-up", 40, []), others, [], 40.0, "0:30", now=1000.0)
    assert stuck.hung and "hung: no progress for 40 s in start-up" in stuck.text and "at most 4 s" in stuck.text
    alone = progress.judge(doc("start-up", 40, []), [], [61.0, 59.0, 70.0], 40.0, "0:30", now=1000.0)
    assert not alone.hung and "~61 s (median of the 3 node(s) that finished)" in alone.text


@pytest.mark.parametrize("state", ["idle*", "allocated*", "mixed*"])
def test_a_node_not_responding_but_in_service_is_waited_for(state):
    """Seen with slurmctld restarted under a 64-node run (Slurm 22.05, load average 16): every node showed
    'idle*' until its slurmd registered again, and a task pending on one was called not tested.  Not
    responding ends by itself: the slurmd registers, or slurmctld sets the node DOWN past SlurmdTimeout."""
    down = slurm.NodeInfo("node2", "down*", "h", "Not responding")
    assert avail.stuck_on("ReqNodeNotAvail,_UnavailableNodes:node2", "node2", down).startswith("; the node: down")
    node = slurm.NodeInfo("node2", state, "h", "")
    assert not node.usable and avail.why_not(node, None, None).startswith("down or not responding")  # not submitted to
    assert avail.stuck_on("ReqNodeNotAvail,_UnavailableNodes:node2", "node2", node) == ""
    note = avail.waiting_note("ReqNodeNotAvail,_UnavailableNodes:node2", "node2", node)
    assert "not responding" in note and "SlurmdTimeout" in note and "waiting" in note, note


@pytest.mark.parametrize("state", ["unknown", "unknown*"])
def test_a_node_whose_state_slurmctld_has_not_yet_determined_is_waited_for(state):
    """Seen with slurmctld restarted under the 64-node run (Slurm 22.05, a loaded 2-core host): 48 nodes showed
    'unknown' (sinfo(1): the controller has just started and the node's state has not yet been determined) and
    their pending tasks were called not tested.  It ends by itself, as not responding does."""
    node = slurm.NodeInfo("node2", state, "h", "")
    assert not node.usable and avail.why_not(node, None, None).startswith(("not available", "down or not"))
    assert avail.stuck_on("ReqNodeNotAvail,_UnavailableNodes:node2", "node2", node) == ""
    note = avail.waiting_note("ReqNodeNotAvail,_UnavailableNodes:node2", "node2", node)
    assert "not yet determined" in note and "SlurmdTimeout" in note and "waiting" in note, note
    for stuck in ("down", "drained", "unknown$", "unknown@"):  # a state that does not end by itself stays stuck
        said = avail.stuck_on("ReqNodeNotAvail,_UnavailableNodes:node2", "node2", slurm.NodeInfo("node2", stuck, "h", ""))
        assert said.startswith("; the node: "), (stuck, said)


@pytest.mark.parametrize("state, reason, words", [
    ("drained", "hw: DIMM ticket 42", "drained by an administrator (Slurm state drained, reason 'hw: DIMM ticket 42')"),
    ("draining", "admin: fan", "drained by an administrator"),
    ("drained", "trainready: check matmul: FAIL", "drained by trainready earlier"),
    ("down*", "Not responding", "down or not responding (Slurm state down*"),
    ("idle*", "", "down or not responding"),
    ("maint", "", "not available to jobs (Slurm state maint)"),
    ("future", "", "not available to jobs"),
    ("idle", "", ""), ("mixed", "", ""), ("allocated", "", ""), ("idle~", "", ""), ("completing", "", ""),
])
def test_node_states_that_are_not_tested(state, reason, words):
    why = avail.why_not(slurm.NodeInfo("node2", state, "h", reason), None, None)
    assert (why.startswith(words) if words else why == ""), why


def test_reservations_and_stuck_reasons():
    resv = avail.Reservation("pm-rack7", ("node2",), "alice", "MAINT", "ACTIVE")
    idle = slurm.NodeInfo("node2", "reserved", "h", "")
    assert avail.why_not(idle, resv, None) == "in reservation pm-rack7 for alice (Slurm state reserved)"
    assert avail.why_not(slurm.NodeInfo("node2", "maint", "h", ""), resv, "pm-rack7") == ""  # our own reservation
    assert avail.why_not(slurm.NodeInfo("node2", "idle$", "h", ""), resv, "pm-rack7") == ""
    assert avail.why_not(slurm.NodeInfo("node2", "idle$", "h", ""), None, None).startswith("not available")
    assert avail.stuck_reason("ReqNodeNotAvail, UnavailableNodes:node2") and avail.stuck_reason("PartitionDown")
    assert not avail.stuck_reason("Resources") and not avail.stuck_reason("Priority")
    assert not avail.stuck_reason("JobArrayTaskLimit")


def test_a_siblings_reason_echoed_by_the_scheduler_is_not_stuck():
    """Captured on the local cluster (Slurm 22.05): node3 drained while the array waited; every task of the
    array then showed ReqNodeNotAvail, only node3's naming its node."""
    fine = slurm.NodeInfo("node1", "idle", "h", "")
    drained = slurm.NodeInfo("node3", "drained", "h", "admin: PSU swap")
    assert avail.stuck_on("ReqNodeNotAvail", "node1", fine) == ""  # an echo: clears once node3's task goes
    said = avail.stuck_on("ReqNodeNotAvail,_UnavailableNodes:node3", "node3", drained)
    assert said.startswith("; the node: drained by an administrator") and "admin: PSU swap" in said
    assert avail.stuck_on("PartitionDown", "node1", fine) == "."
    assert avail.stuck_on("Resources", "node3", drained) == ""


@pytest.mark.parametrize("state", ["allocated", "mixed", "completing", "idle"])
def test_a_node_named_unavailable_but_usable_now_is_waited_for(state):
    """Seen on a 3-node cluster without oversubscription (2 CPUs per node): a task pinned to node2 pended with
    'ReqNodeNotAvail, UnavailableNodes:node2' while node2 ran another run's task, and was called not tested.
    Slurm lists the required nodes that were out of its available set when it last tried the job (drained,
    down, not responding: node_scheduler.c, Slurm 22.05); node2 busy (or idle again) is in it now."""
    node = slurm.NodeInfo("node2", state, "h", "")
    for reason in ("ReqNodeNotAvail,_UnavailableNodes:node2", "ReqNodeNotAvail, UnavailableNodes:node[1-3]"):
        assert avail.stuck_on(reason, "node2", node) == ""
        note = avail.waiting_note(reason, "node2", node)
        assert f"while the node is {state} now" in note and "waiting (within the run's deadline)" in note, note
    assert avail.waiting_note("ReqNodeNotAvail", "node2", node) == ""  # a sibling's echo: nothing to say


@pytest.mark.parametrize("state, reason, words", [
    ("drained", "hw: DIMM", "; the node: drained by an administrator"), ("draining", "admin", "; the node: drained"),
    ("down*", "", "; the node: down or not responding"), ("drained*", "hw", "; the node: drained by an administrator"),
    ("idle$*", "", "; the node: down or not responding"),
    ("reserved", "", "; the node: not available to jobs"), ("idle$", "", "; the node: not available to jobs"),
])
def test_a_node_named_unavailable_that_is_out_of_service_stays_stuck(state, reason, words):
    node = slurm.NodeInfo("node2", state, "h", reason)
    said = avail.stuck_on("ReqNodeNotAvail,_UnavailableNodes:node2", "node2", node)
    assert said.startswith(words), said
    assert avail.waiting_note("ReqNodeNotAvail,_UnavailableNodes:node2", "node2", node) == ""
    assert avail.stuck_on("ReqNodeNotAvail,_UnavailableNodes:node2", "node2", None) == \
        "; the node: Slurm knows no node of this name"


def test_polls_grow_with_the_run_and_the_fleet():
    def polls(n: int, run_s: float) -> int:
        t, k = 0.0, 0
        while t < run_s:
            k += 1
            t += watch.poll_interval(n, t)
        return k

    assert watch.poll_interval(3, 0) == 2.0 and watch.poll_interval(640, 0) == 30.0
    assert max(watch.poll_interval(32, t) for t in range(0, 7200, 7)) == 30.0
    assert polls(32, 120) <= 14  # < 0.5 slurmctld call per node over a 2-minute run of 32 nodes
    assert polls(128, 600) <= 32 and polls(640, 3600) <= 130


def plant_failed_collective(res, silent: int, reporters: list[int], no_cross: set[int], store_gone: bool = False):
    """RESULTS as the cross-node step leaves it when rank `silent` (node{silent+1}) fell silent: rank 0's comm
    record (if rank 0 reported), one blame record per reporting rank, cross records except `no_cross`'s."""
    import json

    from trainready.cluster.tasks import blame
    from trainready.cluster.tasks.layout import CROSS_SCHEMA
    from trainready.records import SCHEMA_VERSION

    (res / "cross" / "ranks").mkdir(parents=True)
    for r in range(3):
        if r not in no_cross:
            (res / "cross" / f"node{r + 1}.json").write_text(json.dumps({"schema": CROSS_SCHEMA, "node": f"node{r + 1}",
                                                                       "rank": r}))
    for r in reporters:
        det = {"rank": r, "stage": "rendezvous", **({"store_error": "refused"} if store_gone else
                                                   {"absent": [silent], "behind": []})}
        msg = f"gloo sweep over 3 ranks failed on rank {r} (vm) in 'rendezvous': DistStoreError; silent: rank {silent} never joined"
        (res / "cross" / "ranks" / f"{r}.json").write_text(json.dumps(
            {"schema": blame.RANK_SCHEMA, "node": f"node{r + 1}", "rank": r, "status": "fail", **blame.from_details(det)}))
        if r == 0:
            (res / "cross" / "comm.json").write_text(json.dumps({"schema": SCHEMA_VERSION, "results": [
                {"name": "comm", "status": "fail", "message": msg, "details": det, "metrics": []}]}))


@pytest.mark.parametrize("silent, no_cross", [(0, set()), (1, set()), (2, set()), (2, {2}), (0, {0})])
def test_the_silent_rank_is_blamed_never_the_rank_that_reports_it(tmp_path, silent, no_cross):
    from trainready.cluster.fleet import read_cross
    from trainready.cluster.tasks import collective

    reporters = [r for r in range(3) if r != silent]
    plant_failed_collective(tmp_path, silent, reporters, no_cross, store_gone=silent == 0)
    cross, _ = read_cross(tmp_path, ["node1", "node2", "node3"])
    res, findings = collective.judge(tmp_path, cross, ["node1", "node2", "node3"], 1)
    assert [f.node for f in findings] == [f"node{silent + 1}"]  # the silent rank's node, and only it
    assert res.details["at_fault"] == [silent] and res.details["waiting"] == reporters
    assert f"rank(s) [{silent}] at fault" in findings[0].text


def test_wrong_elements_are_blamed_on_the_rank_that_sent_them(tmp_path):
    import json

    from trainready.cluster.tasks import collective
    from trainready.records import SCHEMA_VERSION

    (tmp_path / "cross").mkdir()
    rows = [{"bytes": 1024, "wrong": 4, "wrong_by_rank": [0, 0, 4]}]
    (tmp_path / "cross" / "comm.json").write_text(json.dumps({"schema": SCHEMA_VERSION, "results": [
        {"name": "comm.all_reduce", "status": "fail", "message": "all_reduce: 4 wrong element(s), seen on rank(s) [2]",
         "details": {"rows": rows}, "metrics": []}]}))
    cross = {f"node{r + 1}": {"rank": r} for r in range(3)}
    _, findings = collective.judge(tmp_path, cross, list(cross), 1)
    assert [(f.node, "sent wrong elements" in f.text) for f in findings] == [("node3", True)]


def test_blame_from_one_ranks_heartbeat_view():
    from trainready.cluster.tasks import blame

    assert blame.from_details({"rank": 0, "absent": [2], "behind": []}) == \
        {"at_fault": [2], "waiting": [0], "why": "rank(s) [2] never joined"}
    assert blame.from_details({"rank": 1, "absent": [], "behind": [1]})["waiting"] == []  # itself behind: at fault
    assert blame.from_details({"rank": 1, "store_error": "x"})["at_fault"] == [0]
    assert blame.from_details({"rank": 0, "store_error": "x"})["at_fault"] == []
    # rank 2's watchdog fired after rank 0 had reported and left: its "store did not answer" blames nobody
    reports = [{"rank": 0, **blame.from_details({"rank": 0, "absent": [1], "behind": []})},
               {"rank": 2, **blame.from_details({"rank": 2, "store_error": "refused"})}]
    assert blame.tally(reports, []) == ({1: ["rank 0: rank(s) [1] never joined"]}, {0, 2})
    assert blame.tally(reports[1:], [])[0] == {0: ["rank 2: " + blame.STORE_WHY]}  # rank 0 filed no report: blamed
    assert blame.rank_nodes({0: "a", 2: "c"}, ["a", "b", "c"], 2, 6) == {0: "a", 1: "a", 2: "c", 3: "c", 4: "b", 5: "b"}


def test_gather_names_overtime_stuck_and_finished_tasks(tmp_path):
    """The collector's view after the wait: a record (accepted later), a task cancelled past --time that was
    still moving (did not finish; judged as of when it was cancelled, not when the run ended), a task that
    never started (not tested, with Slurm's reason)."""
    import json
    import time

    from trainready.cluster.options import FleetOptions
    from trainready.cluster.tasks.layout import NODE_SCHEMA

    (tmp_path / "nodes").mkdir()
    now = time.time()
    (tmp_path / "nodes" / "node1.json").write_text(json.dumps({"schema": NODE_SCHEMA, "node": "node1", "task_s": 50.0}))
    for n, phase, since, done in (("node1", "manifest", 1, [("start-up", 2.0), ("versions", 3.0)]),
                                  ("node2", "versions", 100, [("start-up", 2.0)])):
        d = doc(phase, since, done, total=1, now=now)
        (tmp_path / "nodes" / f"{n}.progress.json").write_text(json.dumps(d))
    w = watch.Watch(states={0: slurm.TaskState(0, "10", "COMPLETED", "0:0", "node1", "None"),
                          1: slurm.TaskState(1, "11", watch.OVERTIME, "0:15", "node2", "None", 30.0),
                          2: slurm.TaskState(2, "12", watch.STUCK, "", "", "ReqNodeNotAvail")},
                  over={1: now - 90}, stuck={2: "its task 12 stayed PENDING (ReqNodeNotAvail); the node: drained"})
    opts = FleetOptions(results=tmp_path, time_limit="0:20")
    got = {ni.node: ni for ni in run.gather(opts, ["node1", "node2", "node3"], w)}
    assert got["node1"].record is not None and not got["node1"].not_tested
    assert got["node2"].record is None and got["node2"].cause == "no result: did not finish within --time 0:20"
    assert "did not finish within --time 0:20; it was in versions" in got["node2"].no_result
    assert "~50 s (median of the 1 node(s) that finished)" in got["node2"].no_result  # node1's own time
    assert got["node3"].not_tested.startswith("its task 12 stayed PENDING (ReqNodeNotAvail)")


def test_exit_codes_in_slurms_two_forms():
    assert run.exit_words(slurm.TaskState(0, "5", "FAILED", "137:0", "n", "")) == "exit code 137 = killed by signal 9"
    assert run.exit_words(slurm.TaskState(0, "5", "FAILED", "0:9", "n", "")) == "exit code 0, killed by signal 9"
    assert run.exit_words(slurm.TaskState(0, "5", "FAILED", "1:0", "n", "")) == "exit code 1"


def test_stalled_tasks_are_cancelled_as_array_tasks_never_by_the_arrays_own_id(monkeypatch):
    """Seen on the local cluster: the array's last task keeps the array's job id (here 1), and `scancel 1` ended
    every task of the array; the collector names each task JOB_INDEX."""
    calls: list[list[str]] = []

    def call(argv, timeout=0):  # type: ignore[no-untyped-def]
        calls.append(list(argv))
        return "node1\tidle\thost\tnone\nnode3\tdrained\thost\tadmin: PSU swap\n" if argv[0] == "sinfo" else ""

    monkeypatch.setattr(slurm, "call", call)
    states = {0: slurm.TaskState(0, "2", "PENDING", "", "", "ReqNodeNotAvail"),
              1: slurm.TaskState(1, "3", "RUNNING", "", "node2", "None", 99.0),
              2: slurm.TaskState(2, "1", "PENDING", "", "", "ReqNodeNotAvail,_UnavailableNodes:node3")}
    w = watch.Watch()
    watch.cancel_stalled("1", states, ["node1", "node2", "node3"], 30.0, w, lambda s: None)
    assert calls[-1] == ["scancel", "1_1", "1_2"] and set(w.stuck) == {2} and set(w.over) == {1}


def test_a_busy_node_named_unavailable_is_waited_for_and_said_once(monkeypatch):
    """The collector cancels nothing for a task Slurm named unavailable while its node is busy; it says so once."""
    calls: list[list[str]] = []

    def call(argv, timeout=0):  # type: ignore[no-untyped-def]
        calls.append(list(argv))
        return "node2\tallocated\thost\tnone\n" if argv[0] == "sinfo" else ""

    monkeypatch.setattr(slurm, "call", call)
    states = {1: slurm.TaskState(1, "3", "PENDING", "", "", "ReqNodeNotAvail,_UnavailableNodes:node2")}
    w, said = watch.Watch(), []
    for _ in range(3):
        watch.cancel_stalled("1", states, ["node1", "node2", "node3"], 30.0, w, said.append)
    assert not w.stuck and not [c for c in calls if c[0] == "scancel"], calls
    assert len(said) == 1 and said[0].startswith("node2: task 3 pending (ReqNodeNotAvail, UnavailableNodes:node2) "
                                                 "while the node is allocated now"), said


@pytest.mark.parametrize("mode, jobs", [("FORCE:4", 4), ("FORCE:2", 2), ("FORCE", 4), ("NO", 1), ("YES:4", 1),
                                        ("EXCLUSIVE", 1)])
def test_jobs_per_node_from_the_default_partitions_oversubscribe(monkeypatch, mode, jobs):
    """scontrol's one line per partition; the default one's OverSubscribe (slurm.conf(5))."""
    text = (f"PartitionName=other Default=NO OverSubscribe=FORCE:8 Nodes=n[1-2]\n"
            f"PartitionName=debug Default=YES OverSubscribe={mode} Nodes=node[1-3] TotalCPUs=6\n")
    monkeypatch.setattr(slurm, "call", lambda argv, timeout=0: text)
    assert avail.jobs_per_node() == jobs


def test_a_one_task_arrays_pending_task_is_seen(monkeypatch):
    """Seen on the local cluster: a one-node run's array is never split; scontrol shows its one task as
    'ArrayTaskId=0%1', and the collector saw no task at all (so never its pending reason)."""
    text = ("JobId=43 ArrayJobId=43 ArrayTaskId=0%1 JobState=PENDING Reason=ReqNodeNotAvail,_UnavailableNodes:node1 "
            "ExitCode=0:0 RunTime=00:00:00 NodeList=(null)\n"
            "JobId=44 ArrayJobId=44 ArrayTaskId=3-9%4 JobState=PENDING Reason=JobArrayTaskLimit NodeList=(null)\n")
    monkeypatch.setattr(slurm, "call", lambda argv, timeout=0: text)
    states = slurm.task_states("43")
    assert list(states) == [0] and states[0].job_id == "43" and states[0].state == "PENDING"
    assert states[0].reason.startswith("ReqNodeNotAvail") and states[0].node == ""


def test_a_record_is_held_to_the_exit_code_slurm_recorded_for_its_task():
    from trainready.cluster.control.slurm import TaskState
    from trainready.cluster.steps import contradicts

    def rec(status, planted=False):
        return {"report": {"status": status, "context": {"planted": {"matmul.corrupt": "0"}} if planted else {}}}

    def task(state, code):
        return TaskState(0, "41_0", state, code, "n1", "")

    assert contradicts(rec("fail"), task("COMPLETED", "0:0")).startswith(
        "its record says FAIL (its task would exit 1), but Slurm says task 41_0 exited 0")
    assert "says PASS (its task would exit 0), but Slurm says task 41_0 exited 1" in contradicts(
        rec("pass"), task("FAILED", "1:0"))
    assert contradicts(rec("fail"), task("FAILED", "1:0")) == contradicts(rec("warn"), task("COMPLETED", "0:0")) == ""
    assert contradicts(rec("fail", planted=True), task("FAILED", "3:0")) == ""
    assert contradicts(rec("pass"), task("TIMEOUT", "0:15")) == contradicts(rec("pass"), None) == ""  # not ended by itself
    assert contradicts(rec("pass"), task("FAILED", "0:9")) == ""  # a signal: not the task's own answer
