"""Fleet actions on the real local Slurm cluster (scripts/local-slurm.sh): a node an administrator drained is not
tested and holds back nobody; a node drained while its task waits, or after it ran, is named and not tested; every node failing
alike (too short --time) drains none; the cross-node all_reduce blames the silent rank, never the one that
reports it.  Every test leaves the cluster as it found it (3 idle nodes, no drains)."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import run_cli, undrain

pytestmark = pytest.mark.slow

SPEC = "example:local-slurm"


def sinfo(node: str) -> tuple[str, str]:
    out = subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T|%E"], capture_output=True, text=True).stdout
    state, _, reason = out.strip().splitlines()[0].partition("|")
    return state, reason


def resume(*nodes: str) -> None:
    undrain(*[n for n in nodes if "drain" in sinfo(n)[0]])


def by_node(doc):  # type: ignore[no-untyped-def]
    return {n["node"]: n for n in doc["nodes"]}


def test_admin_drained_node_is_not_tested_and_the_others_are_accepted(local_slurm, tmp_path):
    subprocess.run(["scontrol", "update", "nodename=node2", "state=drain", "reason=hw: DIMM ticket 42"], check=True)
    try:
        t0 = time.monotonic()
        p = run_cli("cluster", "run", "--nodelist", "node[1-3]", "--drain", "--spec", SPEC, "--only", "versions,train_step",
                    "--no-collective", "--time", "5:00", "--results", str(tmp_path / "r"), "--json", str(tmp_path / "f.json"))
        took = time.monotonic() - t0
        doc = json.loads((tmp_path / "f.json").read_text())
        v = by_node(doc)
        assert v["node2"]["verdict"] == "not tested" and not v["node2"]["accepted"], v["node2"]
        assert v["node2"]["not_tested"].startswith("drained by an administrator") and \
            "reason 'hw: DIMM ticket 42'" in v["node2"]["not_tested"]
        assert doc["drain_list"] == [] and doc["summary"]["not_tested"] == 1
        assert sinfo("node2") == ("drained", "hw: DIMM ticket 42")  # the administrator's reason, untouched
        assert v["node1"]["verdict"] == "accept" and v["node3"]["verdict"] == "accept", \
            (v["node1"]["reasons"], v["node3"]["reasons"])
        assert "drain" not in sinfo("node1")[0] and "drain" not in sinfo("node3")[0]
        assert p.returncode == 0, p.stderr[-2000:]
        assert "node2: not tested: drained by an administrator" in p.stderr
        assert took < 150, f"the run took {took:.0f} s"
    finally:
        resume("node2")


def squeue(fields: str, *which: str) -> dict[str, str]:
    """squeue's word on each array task of the jobs `which` selects (-j JOB, -n NAME): {first field: the rest},
    `fields` in squeue's -o format joined by '|'."""
    out = subprocess.run(["squeue", "-h", "-r", *which, "-o", fields], capture_output=True, text=True).stdout
    return {k: rest for k, _, rest in (line.partition("|") for line in out.split()) if k}


def tasks() -> dict[str, str]:
    """The acceptance array's tasks: {node asked for (ReqNodeList): state}."""
    return squeue("%n|%T", "-n", "trainready-accept")


def test_nodes_drained_mid_run_are_named_and_not_tested(local_slurm, tmp_path):
    """--max-parallel 1, so the tasks run one at a time (in Slurm's order, not the nodelist's).  While the first
    runs, an administrator drains a node whose task still waits: pending ReqNodeNotAvail, which cannot clear, is
    named at once, cancelled, not tested.  Once the first task has written its record, its node is drained too:
    it is left out of the cross-node step (srun would wait for it until --time, and every node would lose its
    cross record) and not tested.  The third node is accepted."""
    lines: list[tuple[float, str]] = []
    res = tmp_path / "r"
    cmd = ["cluster", "run", "--nodelist", "node[1-3]", "--max-parallel", "1", "--spec", SPEC, "--only", "versions",
           "--no-collective", "--time", "2:00", "--results", str(res), "--json", str(tmp_path / "f.json")]
    import os
    import sys

    from conftest import SRC

    env = dict(os.environ, PYTHONPATH=str(SRC), COLUMNS="200")
    proc = subprocess.Popen([sys.executable, "-m", "trainready", *cmd], stderr=subprocess.PIPE, text=True, env=env)

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append((time.monotonic(), line.rstrip()))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    waiting = done = ""
    try:
        deadline = time.monotonic() + 120
        while not waiting and time.monotonic() < deadline and proc.poll() is None:
            now = tasks()
            if "RUNNING" in now.values():
                waiting = sorted(n for n, st in now.items() if st == "PENDING")[-1]
            time.sleep(0.2)
        assert waiting, f"no task ran while two waited: {tasks()}"
        subprocess.run(["scontrol", "update", f"nodename={waiting}", "state=drain", "reason=admin: PSU swap"], check=True)
        drained_at = time.monotonic()
        while not done and time.monotonic() < deadline and proc.poll() is None:
            done = next((p.name[:-5] for p in res.glob("runs/*/nodes/node?.json")), "")
            time.sleep(0.1)
        assert done and done != waiting, (done, waiting)
        subprocess.run(["scontrol", "update", f"nodename={done}", "state=drain", "reason=admin: DIMM ticket 7"],
                       check=True)
        proc.wait(timeout=400)
        reader.join(timeout=5)
        doc = json.loads((tmp_path / "f.json").read_text())
        v = by_node(doc)
        said = "\n".join(x for _, x in lines)
        assert v[waiting]["verdict"] == "not tested", (v[waiting], said[-3000:])
        assert "ReqNodeNotAvail" in v[waiting]["not_tested"] and "admin: PSU swap" in v[waiting]["not_tested"]
        assert v[done]["verdict"] == "not tested", (v[done], said[-3000:])
        assert v[done]["not_tested"].startswith("drained by an administrator") and "admin: DIMM ticket 7" in \
            v[done]["not_tested"] and "left out of the cross-node step" in v[done]["not_tested"]
        (third,) = {"node1", "node2", "node3"} - {waiting, done}
        assert v[third]["verdict"] == "accept", (v[third], said[-3000:])
        assert "cross-node step over 1 node(s)" in said, said[-3000:]
        assert sinfo(waiting) == ("drained", "admin: PSU swap") and sinfo(done) == ("drained", "admin: DIMM ticket 7")
        assert doc["drain_list"] == [] and proc.returncode == 0, said[-3000:]
        named = [t for t, x in lines if x.startswith(f"{waiting}: not tested")]
        assert named and named[0] - drained_at < 60, said[-3000:]  # named within a minute of the drain
    finally:
        if proc.poll() is None:
            proc.kill()
        resume("node1", "node2", "node3")


def test_every_node_failing_alike_drains_none_and_says_fleet_wide(local_slurm, tmp_path):
    """--time 0:05: no node's standard acceptance fits (the collector cancels a task 10 s past --time; one
    node alone takes 34 s on a quiet 2-core x86 VM, three at once longer), so every node fails alike.  (The
    quick level fits on a quiet host: its 3 tasks took 10.7-12.9 s, and are then rightly accepted.)"""
    p = run_cli("cluster", "run", "-N", "3", "--drain", "--spec", SPEC, "--level", "standard", "--time", "0:05",
                "--results", str(tmp_path / "r"), "--json", str(tmp_path / "f.json"))
    try:
        doc = json.loads((tmp_path / "f.json").read_text())
        v = by_node(doc)
        assert all(n["reasons"] and "did not finish within --time 0:05" in n["reasons"][0] and
                   "raise --time" in n["reasons"][0] for n in v.values()), [n["reasons"] for n in v.values()]
        assert not any("hung" in n["reasons"][0] for n in v.values())
        assert all("drain" not in sinfo(n)[0] for n in ("node1", "node2", "node3"))
        wide = [x for x in p.stdout.splitlines() + p.stderr.splitlines() if "fleet-wide cause" in x]
        assert len(wide) >= 1 and "3 of 3 tested node(s) rejected for 'no result: did not finish within --time 0:05'" \
            in " ".join(p.stdout.split()) + " ".join(p.stderr.split())
        assert doc["guard"]["drain"] == [] and sorted(doc["guard"]["held"]) == ["node1", "node2", "node3"]
        actions = [json.loads(x)["action"] for x in (tmp_path / "r" / "drain-ledger.jsonl").read_text().splitlines()]
        assert actions == ["held"] * 3 and p.returncode == 1
    finally:
        resume("node1", "node2", "node3")


def quick_spec(tmp_path: Path) -> str:
    """example:local-slurm with a 5 s collective step timeout: a rank that stops is named in seconds."""
    from importlib.resources import files

    text = (files("trainready.spec") / "examples" / "local-slurm.toml").read_text()
    assert "timeout_s = 30.0" in text
    path = tmp_path / "quick.toml"
    path.write_text(text.replace("timeout_s = 30.0", "timeout_s = 5.0"))
    return str(path)


@pytest.mark.parametrize("plant", ["cluster.silent=node1", "cluster.silent=node2", "cluster.silent=node3",
                                   "cluster.vanish=node2"])
def test_cross_step_blames_the_silent_rank(local_slurm, tmp_path, plant):
    """The real cross-node step (srun over the 3 nodes, gloo all_reduce) with one rank silent: rank 0
    (node1, which hosts the rendezvous store), a middle and the last rank, and a node that writes no cross
    record and whose rank never joins.  Only the silent node is named; the ranks that waited are not."""
    from trainready.cluster import fleet, steps as run
    from trainready.cluster.control import slurm
    from trainready.cluster.options import FleetOptions
    from trainready.spec import load_spec

    spec_path = quick_spec(tmp_path)
    kind, _, node = plant.partition("=")
    opts = FleetOptions(results=tmp_path / "r", spec=spec_path, time_limit="3:00", plants={kind: node})
    for sub in ("cross", "logs"):
        (opts.results / sub).mkdir(parents=True, exist_ok=True)
    spec, _ = load_spec(spec_path)
    nodes = ["node1", "node2", "node3"]
    run.cross_phase(opts, nodes, slurm.nodes(nodes), spec.gpu.count, lambda s: None)
    results, findings = fleet.judge_cross(opts, spec, nodes)
    coll = next(r for r in results if r.name == "cluster.collective")
    blamed = sorted({f.node for f in findings if f.check == "collective"})
    assert blamed == [node], ([(f.node, f.check, f.text) for f in findings],
                              (opts.results / "logs" / "cross.out").read_text()[-3000:])
    silent_rank = nodes.index(node)
    assert coll.details["at_fault"] == [silent_rank]
    assert set(coll.details["waiting"]) <= {0, 1, 2} - {silent_rank} and coll.details["waiting"]
    if kind == "cluster.vanish":
        assert any(f.node == node and f.check == "cross-node" for f in findings)  # and it wrote no cross record


def test_no_collective_still_checks_the_cross_facts_and_says_the_collective_was_not_run(local_slurm, tmp_path):
    """--no-collective: no rank joins an all_reduce (no comm record), the collective's row says SKIP and why;
    the clocks, storage, limits and hosts are still checked: a clock planted 5 s ahead still rejects its node."""
    res = tmp_path / "r"
    p = run_cli("cluster", "run", "-N", "3", "--spec", SPEC, "--only", "versions", "--time", "2:00", "--no-collective",
                "--results", str(res), "--json", str(tmp_path / "f.json"), "--plant", "cluster.clock=node2:5")
    doc = json.loads((tmp_path / "f.json").read_text())
    cross = {c["name"]: c for c in doc["cross"]}
    assert cross["cluster.collective"]["status"] == "skip", cross["cluster.collective"]
    assert "--no-collective" in cross["cluster.collective"]["message"]
    assert not list(res.glob("runs/*/cross/comm.json")) and not list(res.glob("runs/*/cross/ranks/*"))
    v = by_node(doc)
    ahead = re.compile(r"clock: clock [45]\.\d+ s ahead of the submitting host")  # planted 5 s ahead
    assert v["node2"]["verdict"] == "reject" and any(ahead.match(r) for r in v["node2"]["reasons"])
    assert v["node1"]["verdict"] == "accept" and v["node3"]["verdict"] == "accept"
    assert {"cluster.clock", "cluster.storage", "cluster.limits", "cluster.hosts"} <= set(cross)
    assert p.returncode == 3, p.stderr[-2000:]  # a run with --plant is a test


def queued(job: str) -> dict[str, str]:
    """The array's tasks: {"JOB_I": "STATE|REASON"} (held tasks are PENDING|JobHeldUser)."""
    return squeue("%i|%T|%r", "-j", job)


def test_a_failed_pin_cancels_the_held_array_and_names_the_node(local_slurm, tmp_path):
    from trainready.cluster.control import slurm
    from trainready.errors import SlurmError

    def held() -> str:
        job = slurm.submit(["sbatch", "--parsable", "--hold", "--array=0-2", "--time=1:00", "-o", "/dev/null",
                            "--wrap", "sleep 30"])
        assert set(queued(job).values()) == {"PENDING|JobHeldUser"}, queued(job)
        return job

    bad = held()
    with pytest.raises(SlurmError) as e:
        slurm.pin(bad, ["node1", "node-unknown", "node3"])
    assert "(node-unknown)" in str(e.value) and f"scancel {bad}" in str(e.value), e.value
    assert "\n" not in str(e.value)
    deadline = time.monotonic() + 20
    while queued(bad) and time.monotonic() < deadline:  # scancel is asynchronous; the tasks leave the queue soon
        time.sleep(0.5)
    assert queued(bad) == {}, f"the held array is still queued: {queued(bad)}"
    good = held()
    try:
        slurm.pin(good, ["node3", "node2", "node1"])
        asked = {i: subprocess.run(["scontrol", "show", "job", f"{good}_{i}"], capture_output=True, text=True).stdout
                 for i in range(3)}
        assert [("ReqNodeList=" + n) in asked[i] for i, n in enumerate(["node3", "node2", "node1"])] == [True] * 3
        assert not any("JobHeldUser" in s for s in queued(good).values()), queued(good)
    finally:
        subprocess.run(["scancel", good])


def test_a_node_slow_only_in_its_first_measurement_is_measured_again_and_accepted(local_slurm, tmp_path):
    """cluster.slow_once: node2's figures are 1/50 of the others' in the acceptance array, as they are in a
    healthy node's first run beside bursty work; the second array (node2 alone, train_step alone) clears it."""
    p = run_cli("cluster", "run", "--nodelist", "node[1-3]", "--drain", "--spec", SPEC, "--only", "versions,train_step",
                "--no-collective", "--time", "5:00", "--results", str(tmp_path / "r"), "--json", str(tmp_path / "f.json"),
                "--plant", "cluster.slow_once=node2:0.02")
    doc = json.loads((tmp_path / "f.json").read_text())
    v = by_node(doc)
    assert p.returncode == 3, p.stderr[-2000:]  # a planted run: never evidence
    assert "slow in the acceptance run: node2; measuring again (train_step)" in p.stderr
    assert [n for n, x in v.items() if x["verdict"] != "accept"] == [], {n: x["reasons"] for n, x in v.items()}
    assert any("measured again" in w and "not a fault" in w for w in v["node2"]["warnings"]), v["node2"]["warnings"]
    assert doc["drain_list"] == [] and "drain" not in sinfo("node2")[0]
    run_dir = Path(doc["context"]["run"])
    assert (run_dir / "remeasure" / "nodes" / "node2.json").is_file()
    assert not (run_dir / "remeasure" / "nodes" / "node1.json").exists()  # only the suspect ran again


def test_a_record_another_node_rewrote_is_not_judged_and_its_node_not_drained(local_slurm, tmp_path):
    """node3's task rewrites node2's record as failing once node2 wrote it (cluster.forge, a rogue node writing
    through the shared folder): the record is held to Slurm's exit code of node2's own task (0), so node2 is not
    judged and not drained, both named; node3 itself passed its checks and is accepted."""
    try:
        p = run_cli("cluster", "run", "--nodelist", "node[1-3]", "--drain", "--spec", SPEC, "--only", "versions",
                    "--no-collective", "--time", "5:00", "--results", str(tmp_path / "r"), "--json",
                    str(tmp_path / "f.json"), "--plant", "cluster.forge=node3:node2")
        doc = json.loads((tmp_path / "f.json").read_text())
        forged = json.loads(next((tmp_path / "r" / "runs").glob("*/nodes/node2.json")).read_text())
        assert forged["report"]["results"][0]["message"] == "wrong answers (written by another node)"  # it was rewritten
        v = by_node(doc)
        assert v["node2"]["verdict"] == "not tested", v["node2"]
        assert re.match(r"its record says FAIL \(its task would exit 1\), but Slurm says task \d+ exited 0: written by "
                        r"another process than this node's task", v["node2"]["not_tested"]), v["node2"]
        assert "drain" not in sinfo("node2")[0] and doc["drain_list"] == []
        assert v["node1"]["verdict"] == v["node3"]["verdict"] == "accept", (v["node1"], v["node3"])
        assert p.returncode == 3, p.stderr[-2000:]  # planted: a test, never evidence
    finally:
        resume("node2")
