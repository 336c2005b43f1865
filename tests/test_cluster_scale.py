"""Faults at scale in ONE `cluster run --drain` on 64 real slurmd (scripts/local-slurm.sh up --nodes 64): four
nodes drained by an administrator, two DOWN (their slurmd stopped), two tasks SIGKILLed mid-run, one node in
someone else's reservation, one planted failing check, one planted slow node.  Every node's verdict is exactly
what it should be (accepted / rejected with its reason / not tested with Slurm's reason), no healthy node and no
untested node is drained, the administrator's reasons are untouched, and the run ends within 2 minutes of the
last task that could run.  The cluster goes back to its default 3 nodes afterwards.

Cost: 409 s on a quiet 2-core x86 VM (745 CPU s: 57 tasks of versions+matmul+train_step at 4 at a time, ~13 CPU
s each; the cross-node step without the all_reduce, 46 s from the last task to the verdict; up and back to 3
nodes included); 64 nodes is the smallest scale at which many nodes fail in different ways at once."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import SLURM_SCRIPT, run_cli

# ~7 minutes and ~750 CPU s on a 2-core machine: the suite would pass its 15-minute budget, so it runs where
# asked for (TRAINREADY_SCALE_TESTS=1, e.g. `TRAINREADY_SCALE_TESTS=1 pytest tests/test_cluster_scale.py`).
pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.environ.get("TRAINREADY_SCALE_TESTS") != "1", reason=(
    "faults at scale on 64 slurmd take ~7 min on 2 cores: set TRAINREADY_SCALE_TESTS=1 to run them"))]

N = 64
ADMIN = {f"node{k}": f"hw: DIMM ticket {40 + k}" for k in (5, 6, 7, 8)}
DOWN = ("node10", "node11")
RESERVED, RESV = "node12", "other_team"
FAIL, SLOW = "node20", "node30"
KILL = ("node40", "node50")
CHECKS = "versions,matmul,train_step"  # matmul carries the planted failure, train_step the tokens/s figure
GRACE_S = 120.0  # the run ends within 2 minutes of the last task that could run


def sinfo(node: str) -> tuple[str, str]:
    out = subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T|%E"], capture_output=True, text=True).stdout
    state, _, reason = out.strip().splitlines()[0].partition("|")
    return state, reason


def scontrol(*args: str) -> None:
    subprocess.run(["scontrol", *args], check=True, capture_output=True, text=True)


def wait_reserved(node: str, within_s: float = 30.0) -> None:
    """Until sinfo says `node` is reserved: a reservation starting 'now' shows in the node's state a moment
    later, and a run that looks before then sees an idle node (the fault not yet planted)."""
    deadline = time.monotonic() + within_s
    while "resv" not in sinfo(node)[0] and "reserved" not in sinfo(node)[0]:
        assert time.monotonic() < deadline, f"{node} not reserved after {within_s:.0f} s: {sinfo(node)}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def sixty_four(local_slurm):  # type: ignore[no-untyped-def]
    """64 slurmd with the faults an on-call engineer meets in a week; back to the default 3 nodes after."""
    p = subprocess.run(["bash", str(SLURM_SCRIPT), "up", "--nodes", str(N)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    try:
        for node, why in ADMIN.items():
            scontrol("update", f"nodename={node}", "state=drain", f"reason={why}")
        for node in DOWN:  # this fixture's own slurmd, stopped; Slurm's DOWN state said at once (not after
            pid = int(Path(f"/var/run/slurmd-{node}.pid").read_text())  # SlurmdTimeout=60 s of silence)
            os.kill(pid, signal.SIGTERM)
            scontrol("update", f"nodename={node}", "state=down", "reason=slurmd stopped")
        scontrol("create", "reservation", f"reservationname={RESV}", "starttime=now", "duration=30",
                 f"nodes={RESERVED}", "users=nobody")
        wait_reserved(RESERVED)
        yield
    finally:
        subprocess.run(["bash", str(SLURM_SCRIPT), "up"], capture_output=True, text=True, timeout=600)


def kill_mid_run(nodes: tuple[str, ...], stop: threading.Event, killed: dict[str, float]) -> None:
    """SIGKILL the acceptance process of each node as soon as it runs (found by its SLURMD_NODENAME)."""
    while not stop.is_set() and len(killed) < len(nodes):
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            node = next((e[16:].decode() for e in env if e.startswith(b"SLURMD_NODENAME=")), "")
            if b"node-task" in cmd and node in nodes and node not in killed:
                os.kill(int(pid), signal.SIGKILL)
                killed[node] = time.time()
        time.sleep(0.1)


def last_task_end(since: float) -> float:
    out = subprocess.run(["scontrol", "show", "jobs", "-o"], capture_output=True, text=True).stdout
    ends = [dt.datetime.fromisoformat(m.group(1)).timestamp() for line in out.splitlines()
            if "JobName=trainready-accept" in line and (m := re.search(r"EndTime=(\S+)", line))
            and m.group(1)[0].isdigit()]
    return max(e for e in ends if e >= since)


@pytest.fixture(scope="module")
def run(sixty_four, tmp_path_factory):  # type: ignore[no-untyped-def]
    res = tmp_path_factory.mktemp("scale") / "r"
    stop, killed = threading.Event(), {}
    th = threading.Thread(target=kill_mid_run, args=(KILL, stop, killed), daemon=True)
    th.start()
    t0 = time.time()
    p = run_cli("cluster", "run", "--nodelist", f"node[1-{N}]", "--results", str(res), "--spec", "example:local-slurm",
                "--only", CHECKS, "--max-parallel", "4", "--time", "10:00", "--drain", "--no-collective",
                "--json", str(res) + ".json",
                "--plant", f"cluster.fail={FAIL}", "--plant", f"cluster.slow={SLOW}:0.02", timeout=1200)
    t1 = time.time()
    stop.set()
    th.join()
    doc = json.loads(Path(str(res) + ".json").read_text()) if p.returncode in (0, 1, 3) else None
    assert doc is not None, p.stderr[-3000:]
    return p, {n["node"]: n for n in doc["nodes"]}, doc, killed, last_task_end(t0), t1


def test_every_verdict_exact_at_64_nodes(run) -> None:  # type: ignore[no-untyped-def]
    p, v, doc, killed, _, _ = run
    assert sorted(killed) == sorted(KILL), "the killer never found the tasks it was to kill"
    untested = {n for n, e in v.items() if e["verdict"] == "not tested"}
    assert untested == set(ADMIN) | set(DOWN) | {RESERVED}, untested
    for node, why in ADMIN.items():
        assert v[node]["not_tested"].startswith("drained by an administrator") and f"reason '{why}'" in v[node]["not_tested"]
    for node in DOWN:
        assert v[node]["not_tested"].startswith("down or not responding"), v[node]
    assert v[RESERVED]["not_tested"].startswith(f"in reservation {RESV}"), v[RESERVED]
    assert [r for r in v[FAIL]["reasons"] if r.startswith("check matmul: FAIL")], v[FAIL]
    assert [r for r in v[SLOW]["reasons"] if r.startswith("slow:")], v[SLOW]
    for node in KILL:
        assert any("signal 9" in r for r in v[node]["reasons"]), v[node]  # "exit code 137 = killed by signal 9"
    rejected = {n for n, e in v.items() if e["verdict"] == "reject"}
    assert rejected == {FAIL, SLOW, *KILL}, {n: v[n]["reasons"] for n in rejected}
    accepted = {n for n, e in v.items() if e["verdict"] == "accept"}
    assert len(accepted) == N - 7 - 4 and accepted.isdisjoint(rejected | untested)
    assert p.returncode == 3  # a run with --plant is a test, never evidence


def test_nothing_healthy_or_untested_drained_admin_reasons_kept(run) -> None:  # type: ignore[no-untyped-def]
    _, v, doc, _, _, _ = run
    drained = {f"node{k}" for k in range(1, N + 1) if "drain" in sinfo(f"node{k}")[0]}
    assert set(doc["drain_list"]) <= {FAIL, SLOW, *KILL}
    assert drained - set(ADMIN) == set(doc["drain_list"])  # trainready drained its own list, nothing else
    for node, why in ADMIN.items():
        assert sinfo(node) == ("drained", why)
    for node in DOWN:
        assert sinfo(node)[0].startswith("down"), sinfo(node)


def test_run_ends_within_2_minutes_of_the_last_task(run) -> None:  # type: ignore[no-untyped-def]
    _, _, _, _, last_end, t1 = run
    print(f"run ended {t1 - last_end:.0f} s after the last task that ran")
    assert t1 - last_end <= GRACE_S
