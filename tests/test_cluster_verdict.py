"""Fleet verdict, robust statistics, drift and the cross-node judges: each shown failing on a planted fault
before the healthy case passes."""

from __future__ import annotations

import dataclasses
import resource
from pathlib import Path

import pytest

from trainready.cluster.judge import synthetic
from trainready.cluster.judge.stats import robust_bound
from trainready.cluster.judge.verdict import NodeInput, decide
from trainready.cluster.plants.faults import NodeFaults, check_plants, for_node, validate
from trainready.cluster.tasks import crosschecks
from trainready.cluster.tasks.clock import ClockServer, measure, ntp
from trainready.cluster.tasks.cross import hosts_facts, limit_facts, storage_facts
from trainready.errors import UsageError
from trainready.manifest import drift
from trainready.records import Status
from trainready.spec import load_spec

SPEC = load_spec("example:h200-8x")[0]


def verdicts(inputs, **kw):
    return {n.node: n for n in decide(inputs, SPEC, [], [], **kw).nodes}


@pytest.mark.parametrize("seed", range(5))
def test_ten_percent_slow_gpu_is_caught_and_healthy_fleet_flags_nobody(seed):
    slow = synthetic.fleet(640, 8, seed=seed, slow={"gpu0123": {5: 0.90}})
    v = verdicts(slow)
    assert not v["gpu0123"].accepted
    assert any(r.startswith("slow: GPU 5 gemm_bf16") for r in v["gpu0123"].reasons)
    assert [n for n, x in v.items() if not x.accepted] == ["gpu0123"]
    healthy = verdicts(synthetic.fleet(640, 8, seed=seed))
    assert all(x.accepted for x in healthy.values())


def test_robust_bound_needs_both_floor_and_outlier():
    tight = robust_bound("m", "u", [100.0, 100.0, 100.0, 99.0], 0.95, 3.0)  # MAD 0: bound = median
    assert tight.slow(90.0) and not tight.slow(99.0)  # 99 is an outlier of a tight fleet but above the floor
    noisy = robust_bound("m", "u", [100.0, 60.0, 140.0, 100.0, 100.0, 80.0, 120.0], 0.95, 3.0)
    assert not noisy.slow(90.0)  # below the floor but within the fleet's own spread
    assert not robust_bound("m", "u", [100.0, 50.0], 0.95, 3.0).slow(50.0)  # two figures: nothing judged


def test_no_result_failed_check_and_drift_reject_with_reasons():
    inputs = synthetic.fleet(4, 2)
    dead = NodeInput("gpu0002", None, "task 12 FAILED (exit code 137 = killed by signal 9)")
    bad = dataclasses.replace(inputs[2], record={**inputs[2].record, "report": {"results": [
        {"name": "matmul", "status": "fail", "message": "1 wrong element", "metrics": []}]}})
    drifted = dataclasses.replace(inputs[3], record={**inputs[3].record,
                                                     "versions": {**inputs[3].record["versions"], "nccl": "2.21.5"}})
    v = verdicts([inputs[0], dead, bad, drifted], reference="gpu0001")
    assert v["gpu0002"].reasons == ("no result: task 12 FAILED (exit code 137 = killed by signal 9)",)
    assert v["gpu0003"].reasons[0].startswith("check matmul: FAIL: 1 wrong element")
    assert v["gpu0004"].reasons == ("drift: nccl 2.27.7 (gpu0001) ≠ 2.21.5",)
    assert v["gpu0001"].accepted


def test_drift_against_spec_pins_and_majority():
    node = dict(synthetic.VERSIONS)
    assert drift.diff_pins({"torch": "2.9"}, node) == []
    assert drift.diff_pins({"torch": "2.10"}, node) == [("torch", "2.10", "2.9.0")]
    inputs = synthetic.fleet(3, 1)
    odd = dataclasses.replace(inputs[1], record={**inputs[1].record, "versions": {**node, "kernel": "6.1"}})
    unpinned = dataclasses.replace(SPEC, software=dataclasses.replace(SPEC.software, cuda=None))
    v = {n.node: n for n in decide([inputs[0], odd, inputs[2]], unpinned, [], []).nodes}  # no pins: the majority
    assert v["gpu0002"].reasons == ("drift: kernel 6.8.0-60-generic (fleet majority) ≠ 6.1",)


def test_planted_run_is_never_evidence():
    doc = decide(synthetic.fleet(3, 1), SPEC, [], [], planted={"cluster.fail": "gpu0002"}).to_json()
    assert doc["summary"]["evidence"] is False and doc["schema"] == "trainready.fleet/1"


def test_ntp_arithmetic_and_a_real_exchange():
    s = ntp(t1=100.0, t2=105.0, t3=105.0, t4=100.2)  # host 5 s ahead, 0.2 s round trip
    assert s.offset_s == pytest.approx(4.9) and s.rtt_s == pytest.approx(0.2)
    with ClockServer("127.0.0.1") as srv:
        ahead = measure(f"127.0.0.1:{srv.port}", clock=lambda: __import__("time").time() + 5.0)
        same = measure(f"127.0.0.1:{srv.port}")
    assert ahead.offset_s == pytest.approx(-5.0, abs=0.1)
    assert abs(same.offset_s) < 0.1 and same.rtt_s < 0.5


def test_clock_judge():
    spec = SPEC.fleet
    c = {"a": {"clock": {"offset_s": -5.0, "rtt_s": 0.001, "daemons": ["chronyd"]}},
         "b": {"clock": {"offset_s": 0.9, "rtt_s": 0.4, "daemons": ["chronyd"]}},
         "c": {"clock": {"error": "cannot reach", "daemons": []}},
         "d": {"clock": {"offset_s": 0.001, "rtt_s": 0.001, "daemons": ["chronyd"]}}}
    res, found = crosschecks.clock(c, spec)
    got = {(f.node, f.status) for f in found}
    assert ("a", Status.FAIL) in got and ("b", Status.WARN) in got and ("c", Status.WARN) in got
    assert not any(f.node == "d" for f in found) and res.status == Status.FAIL


def _probe_all(root, planted: str | None, wait_s: float):
    """Every node's storage probe at once (threads), as the srun step runs them."""
    from concurrent.futures import ThreadPoolExecutor

    peers = ["n1", "n2", "n3"]
    with ThreadPoolExecutor(len(peers)) as ex:
        futs = {n: ex.submit(storage_facts, root, n, [p for p in peers if p != n], wait_s,
                             NodeFaults(storage=(n == planted))) for n in peers}
    return {n: {"storage": f.result()} for n, f in futs.items()}


def test_storage_judge_names_the_node_on_another_filesystem(tmp_path):
    shm = Path("/dev/shm")
    before = set(shm.glob("trainready-private-*")) if shm.is_dir() else set()
    res, found = crosschecks.storage(_probe_all(tmp_path / "a", "n2", 2.0))
    after = set(shm.glob("trainready-private-*")) if shm.is_dir() else set()
    assert after == before, f"the planted private folder was left behind: {sorted(after - before)}"
    assert res.status == Status.FAIL and {f.node for f in found if f.status == Status.FAIL} == {"n2"}
    assert "another filesystem" in next(f.text for f in found if f.node == "n2")
    assert crosschecks.storage(_probe_all(tmp_path / "b", None, 10.0))[0].status == Status.PASS


def test_limits_judge_on_a_really_lowered_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        low = limit_facts(NodeFaults(nofile=512))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert low["nofile_soft"] == 512
    res, found = crosschecks.limits({"n1": {"limits": low}, "n2": {"limits": {"nofile_soft": 1 << 20}}}, SPEC.fleet)
    assert [(f.node, f.status) for f in found] == [("n1", Status.FAIL)]


def test_hosts_trap(tmp_path):
    hosts = tmp_path / "hosts"
    name = __import__("socket").gethostname()
    hosts.write_text(f"127.0.0.1 localhost\n127.0.1.1 {name}.example {name}\n")
    facts = hosts_facts(str(hosts))
    assert facts["etc_hosts_loopback_lines"] == [f"127.0.1.1 {name}.example {name}"]
    multi = {"a": {"hosts": {**facts, "hostname": "a"}}, "b": {"hosts": {**facts, "hostname": "b"}}}
    assert crosschecks.hosts(multi)[0].status == Status.FAIL
    one = {"a": {"hosts": facts}, "b": {"hosts": facts}}
    assert crosschecks.hosts(one)[0].status == Status.WARN  # every node on one host: loopback is harmless
    ok = {"a": {"hosts": {"hostname": "a", "resolves_to": {"loopback": False}, "etc_hosts_loopback_lines": []}}}
    assert crosschecks.hosts(ok)[0].status == Status.PASS


def test_plants_are_keyed_by_node():
    p = {"cluster.slow": "node3:0.9", "cluster.fail": "node2", "cluster.clock": "node2:5"}
    assert for_node(p, "node3") == NodeFaults(slow_factor=0.9)
    assert for_node(p, "node2") == NodeFaults(fail="matmul", clock_ahead_s=5.0)
    assert check_plants(for_node(p, "node2")) == {"matmul.corrupt": "0"}
    assert check_plants(for_node({"cluster.fail": "node2:train_step"}, "node2")) == {"train_step.nan": "loss"}
    assert not for_node(p, "node1").any and check_plants(for_node(p, "node1")) == {}
    for bad in ({"cluster.slow": "node3:x"}, {"cluster.clock": "node2"}, {"cluster.fail": "node2:1"},
                {"cluster.fail": "node2:versions"}, {"cluster.fail": ":matmul"}):
        with pytest.raises(UsageError):
            validate(bad)


def test_a_resumed_node_is_judged_with_its_baseline_runs_figures_and_reference():
    """`cluster resume` re-validates one node: alone it is its own fleet (its slowness is the median, the
    majority is itself); with the rejecting run's other nodes as peers (cluster/history.py) it is caught."""
    run = synthetic.fleet(8, 8, slow={"gpu0005": {g: 0.5 for g in range(8)}})
    drifted = dataclasses.replace(run[4], record={**run[4].record, "versions": {**run[4].record["versions"],
                                                                                "nccl": "2.21.5"}})
    alone = decide([drifted], SPEC, [], [], reference="gpu0001")
    assert alone.nodes[0].accepted and alone.stats[0].n == 8  # the planted slow, drifted node passes alone
    judged = decide([drifted], SPEC, [], [], reference="gpu0001", peers=run[:4] + run[5:])
    assert [n.node for n in judged.nodes] == ["gpu0005"]  # peers get no verdict of their own
    reasons = judged.nodes[0].reasons
    assert any(r.startswith("slow: GPU 0 gemm_bf16") for r in reasons), reasons
    assert "drift: nccl 2.27.7 (gpu0001) ≠ 2.21.5" in reasons and judged.stats[0].n == 64
    healthy = decide([run[3]], SPEC, [], [], reference="gpu0001", peers=run[:3] + run[4:])
    assert healthy.nodes[0].accepted, healthy.nodes[0].reasons


def test_storage_waits_for_peers_that_start_late_but_names_one_that_never_writes(tmp_path):
    """The step's tasks start over minutes when a fleet's worth share a host (640 on 2 cores: ~300 s): six
    nodes starting 0.4 s apart, 2 s in all, with a 1 s wait, all see one another; a node that never writes its
    file is missed by every other node, 1 s after the last new file (and the judge, with no record of its own
    from it, blames no one else: one missing peer is not a storage fault of the others)."""
    import threading
    import time

    peers = [f"n{k}" for k in range(1, 7)]

    def staggered(root: Path, silent: str | None) -> dict:
        out: dict = {}

        def one(k: int, n: str) -> None:
            time.sleep(0.4 * k)
            if n == silent:
                return
            out[n] = {"storage": storage_facts(root, n, [p for p in peers if p != n], 1.0, NodeFaults())}

        ts = [threading.Thread(target=one, args=(k, n)) for k, n in enumerate(peers)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return out

    silent = staggered(tmp_path / "a", "n6")
    assert {n: [p for p, v in d["storage"]["seen"].items() if v is None] for n, d in silent.items()} == \
        {n: ["n6"] for n in peers[:5]}
    res, found = crosschecks.storage(staggered(tmp_path / "b", None))
    assert res.status == Status.PASS and not found, [f.text for f in found]


def _rec(written: float, until: float, seen: dict[str, bool], wait_s: float = 20.0) -> dict:
    """A node's storage facts as storage_facts writes them: times in s, `seen` peer -> whether its file was seen."""
    return {"storage": {"st_dev": 7, "written_at": written, "looked_until": until, "wait_s": wait_s,
                        "seen": {p: (7 if ok else None) for p, ok in seen.items()}}}


def test_storage_excuses_a_peer_whose_file_came_after_the_node_stopped_looking_but_not_one_that_was_there():
    """At 640 nodes on one 2-core host the step's tasks started over 458 s: the first nodes stopped looking 20 s
    after the last new file and missed the late ones, and were rejected ('cannot see the files of' 400 nodes).
    A file written after a node stopped looking is late, not unseen (a WARN 'not judged' on the late node); a
    file that was there for the node's whole wait and was not seen is still its FAIL."""
    def fleet(n4_seen_by_n1: bool, n4_written: float) -> dict:
        # n1 looked from 0 to 30 s (last new file at 10 s, wait 20 s); n2, n3 wrote at 5 and 10 s
        return {"n1": _rec(0.0, 30.0, {"n2": True, "n3": True, "n4": n4_seen_by_n1}),
                "n2": _rec(5.0, 200.0, {"n1": True, "n3": True, "n4": True}),
                "n3": _rec(10.0, 200.0, {"n1": True, "n2": True, "n4": True}),
                "n4": _rec(n4_written, 200.0, {"n1": True, "n2": True, "n3": True})}

    for written, blamed in ((8.0, True), (100.0, False)):  # n4's file there for n1's whole wait / after it
        res, found = crosschecks.storage(fleet(False, written))
        fails = {f.node for f in found if f.status == Status.FAIL}
        if blamed:
            # one miss of three is not n1's fault and one observer of three is not n4's: nobody is blamed, but
            # the miss is judged (no 'not judged' WARN)
            assert fails == set() and not found, [f.text for f in found]
        else:
            assert fails == set() and res.status == Status.WARN, [f.text for f in found]
            assert [(f.node, f.text.split(":")[0]) for f in found] == [("n4", "not judged by 1 node(s)")]
    # the 640-node shape: n1 stopped looking before three late peers wrote; before, it was rejected
    late = {"n1": _rec(0.0, 20.0, {p: False for p in ("n2", "n3", "n4")}),
            **{p: _rec(50.0 + k, 300.0, {q: True for q in ("n1", "n2", "n3", "n4") if q != p})
               for k, p in enumerate(("n2", "n3", "n4"))}}
    res, found = crosschecks.storage(late)
    assert not [f for f in found if f.status == Status.FAIL], [f.text for f in found]
    assert {f.node for f in found} == {"n2", "n3", "n4"}
    # and the same misses with the files there all along: n1 is rejected, named with what it could not see
    there = {**late, **{p: _rec(-30.0, 300.0, {q: True for q in ("n1", "n2", "n3", "n4") if q != p})
                        for p in ("n2", "n3", "n4")}}
    res, found = crosschecks.storage(there)
    assert res.status == Status.FAIL and [(f.node, f.text) for f in found if f.status == Status.FAIL] == \
        [("n1", "cannot see the files of n2, n3, n4")]


def test_a_step_that_ends_during_the_storage_wait_leaves_each_record_and_judges_no_one_for_it(tmp_path):
    """At 640 nodes srun ended the step after 232 s while every node still waited for late peers' files: no node
    had written its record, and all 640 were rejected for 'no cross-node record'.  The record is now written
    (storage 'waiting') as soon as the node's own file is, before the wait; the judge says 'not judged'."""
    import time

    kept: list[dict] = []
    t0 = time.monotonic()
    facts = storage_facts(tmp_path, "n1", ["n2"], 1.0, NodeFaults(), kept.append)  # n2 never writes
    assert len(kept) == 1 and kept[0]["waiting"] is True and "seen" not in kept[0]
    assert facts["seen"] == {"n2": None} and "waiting" not in facts and time.monotonic() - t0 >= 1.0
    cross = {"n1": {"storage": kept[0]},
             "n2": _rec(kept[0]["written_at"] + 1, kept[0]["written_at"] + 60, {"n1": True, "n3": True}),
             "n3": _rec(kept[0]["written_at"] + 2, kept[0]["written_at"] + 60, {"n1": True, "n2": True})}
    cross["n1"]["storage"]["st_dev"] = 7  # the other records' filesystem
    res, found = crosschecks.storage(cross)
    assert res.status == Status.WARN and [(f.node, f.status) for f in found] == [("n1", Status.WARN)]
    assert found[0].text.startswith("not judged: the step ended while this node waited")
