"""`trainready cluster sweep` on a real local Slurm with real preemption (`scripts/local-slurm.sh up --preempt
--cluster sweep --nodes 4`: slurm.conf(5) PreemptType=preempt/partition_prio, PreemptMode=CANCEL, a low-tier
partition `sweep` and a high-tier `batch` over the same nodes sweep1..sweep4).

A job already on a node: that node untouched, the cap respected.  A batch job submitted mid-sweep preempts the
sweep's task: `unknown: preempted by job N`, nothing drained; a second sweep started meanwhile says the first runs
and exits.  A planted failure once: warned; twice: drained with its dated, prefixed reason; an administrator's
drain untouched.  Each sweep's own record says what it did (RESULTS/sweep/last.json)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import SRC, own_cluster, run_cli, undrain

pytestmark = pytest.mark.slow

CLUSTER = "sweep"
CONF = f"/etc/slurm-{CLUSTER}/slurm.conf"
NODES = [f"{CLUSTER}{k}" for k in (1, 2, 3, 4)]
BASE = ("cluster", "sweep", "-p", "sweep", "--spec", "example:local-slurm", "--time", "5:00")


@pytest.fixture(scope="module")
def cluster():  # type: ignore[no-untyped-def]
    yield from own_cluster(CLUSTER, "--preempt", "--nodes", "4", nodes=NODES, after=lambda: undrain(*NODES))


def _sbatch(*args: str) -> str:
    out = subprocess.run(["sbatch", "--parsable", "--output=/dev/null", *args], capture_output=True, text=True,
                         check=True).stdout
    return out.strip().split(";")[0]


def _state(job: str) -> str:
    out = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True).stdout
    m = re.search(r"JobState=(\S+)", out)
    return m.group(1) if m else "GONE"


def _reason(node: str) -> tuple[str, str]:
    out = subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T|%E"], capture_output=True, text=True).stdout
    state, _, reason = out.strip().splitlines()[0].partition("|")
    return state, reason


def _wait_running(node: str, deadline_s: float = 120, partition: str = "sweep") -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        out = subprocess.run(["squeue", "-h", "-p", partition, "-w", node, "-t", "R", "-o", "%i"], capture_output=True,
                             text=True).stdout
        if out.strip():
            return
        time.sleep(0.5)
    raise AssertionError(f"no {partition} job ran on {node} within {deadline_s} s")


def _last(results: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((results / "sweep" / "last.json").read_text())


def test_a_node_with_a_job_is_untouched_and_the_cap_is_kept(cluster, tmp_path: Path) -> None:
    job = _sbatch("-p", "batch", "-w", "sweep1", "--wrap", "sleep 600")
    try:
        _wait_running("sweep1", partition="batch")  # a job pending on a loaded host leaves its node idle
        p = run_cli(*BASE, "--results", str(tmp_path), "--level", "light", "--max-nodes", "2")
        assert p.returncode == 0, p.stdout + p.stderr
        doc = _last(tmp_path)
        assert doc["schema"] == "trainready.sweep/1" and doc["cap"] == 2
        assert "sweep1" not in doc["swept"] and len(doc["swept"]) == 2
        assert doc["left"]["sweep1"].startswith("busy: a job runs on it")
        assert "sweep1: not swept: busy" in p.stderr
        assert _state(job) == "RUNNING"  # the job was never touched
        assert {o["verdict"] for o in doc["outcomes"]} == {"pass"}
    finally:
        subprocess.run(["scancel", job])


def test_a_batch_job_preempts_the_sweep_task_unknown_never_drained_and_sweeps_never_overlap(cluster,
                                                                                              tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "trainready", *BASE, "--results", str(tmp_path), "--level", "light", "--drain",
            "--strikes", "1", "--plant", "cluster.hang=sweep2"]
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    first = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    batch = ""
    try:
        _wait_running("sweep2")
        second = run_cli(*BASE, "--results", str(tmp_path), "--level", "light")
        assert second.returncode == 0 and "a sweep is already running" in second.stderr, second.stderr
        t0 = time.monotonic()
        batch = _sbatch("-p", "batch", "-w", "sweep2", "--wrap", "sleep 30")
        out, err = first.communicate(timeout=300)
        assert first.returncode == 3, out + err  # planted: a test, never evidence
        assert time.monotonic() - t0 < 120  # the hang ended by preemption, not by --time
    finally:
        if first.poll() is None:
            first.kill()
        if batch:
            subprocess.run(["scancel", batch])
    by = {o["node"]: o for o in _last(tmp_path)["outcomes"]}
    assert by["sweep2"]["verdict"] == "unknown", by["sweep2"]
    assert re.fullmatch(rf"preempted by job {batch} after \d+ s", by["sweep2"]["text"]), by["sweep2"]
    assert f"sweep2: unknown: preempted by job {batch}" in err
    assert "drain" not in _reason("sweep2")[0]


def test_a_failure_warns_once_and_drains_when_it_repeats_never_an_admin_drain(cluster, tmp_path: Path) -> None:
    subprocess.run(["scontrol", "update", "nodename=sweep4", "state=drain", "reason=admin: psu"], check=True)
    try:
        prom = tmp_path / "sweep.prom"
        argv = (*BASE, "--results", str(tmp_path), "--level", "quick", "--only", "matmul", "--drain",
                "--prometheus", str(prom), "--plant", "cluster.fail=sweep3")
        p = run_cli(*argv)
        assert p.returncode == 3, p.stdout + p.stderr
        assert "sweep3: WARN (failed 1 of 2 sweeps in a row" in p.stderr and "check matmul" in p.stderr
        assert "drain" not in _reason("sweep3")[0]
        assert "sweep4: not swept: drained (admin: psu)" in p.stderr
        p = run_cli(*argv)
        assert p.returncode == 3, p.stdout + p.stderr
        state, reason = _reason("sweep3")
        assert "drain" in state and re.match(r"trainready:sweep/hw \d{4}-\d\d-\d\d: check matmul", reason), reason
        index = (tmp_path / "rma" / "sweep3" / "INDEX.md").read_text()  # the RMA folder, from its newest record
        assert "| matmul | fail | hardware |" in index and "Drained** " in index and "trainready:sweep/hw" in index
        assert run_cli("bundle", "--verify", str(tmp_path / "rma" / "sweep3")).returncode == 0
        h = run_cli("cluster", "history", "sweep3", "--results", str(tmp_path)).stdout.splitlines()
        assert h[0].startswith("sweep3: DRAINED by the sweep on ") and h[1] == f"  why: {reason}", h
        assert _reason("sweep4") == ("drained", "admin: psu")
        by = {o["node"]: o for o in _last(tmp_path)["outcomes"]}
        assert by["sweep3"]["action"] == "drain" and by["sweep3"]["strikes"] == 2
        assert {by[n]["verdict"] for n in ("sweep1", "sweep2")} == {"pass"}
        text = prom.read_text()  # for node_exporter's textfile collector
        assert 'trainready_sweep_verdict{node="sweep3",verdict="fail"} 1.0' in text
        assert 'trainready_sweep_drained{node="sweep3"} 1.0' in text
        assert 'trainready_sweep_drained{node="sweep4"} 0.0' in text  # an administrator's drain is not ours
        assert re.search(r'trainready_sweep_drained_info\{node="sweep3",reason="trainready:sweep/hw [^"]+"\} 1', text)
        assert 'trainready_sweep_strikes{node="sweep3"} 2.0' in text
    finally:
        undrain("sweep3", "sweep4")


def test_a_planted_slow_decline_is_a_trend_warning_naming_node_figure_and_runs(cluster, tmp_path: Path) -> None:
    argv = (*BASE, "--results", str(tmp_path), "--nodelist", "sweep1,sweep2", "--level", "quick", "--only",
            "train_step", "--plant", "cluster.decline=sweep2:5")
    warned = []
    for k in range(5):  # 5% a sweep: 9.75% below the median at the fourth, 12% at the fifth (fleet.trend_fraction 0.10)
        p = run_cli(*argv)
        assert p.returncode == 3, p.stdout + p.stderr
        warned.append([w for o in _last(tmp_path)["outcomes"] if o["node"] == "sweep2" for w in o["trend"]])
    assert warned[:4] == [[], [], [], []], warned
    assert len(warned[4]) == 1 and re.match(r"train_tokens_per_s@cpu: [\d.]+ tokens/s is 12% below this node's median "
                                            r"[\d.]+ of its last 4 sweep\(s\) \(\d{4}-\d\d-\d\d", warned[4][0]), warned
    assert "sweep2: TREND WARN: train_tokens_per_s@cpu" in p.stderr
    h = run_cli("cluster", "history", "sweep2", "--results", str(tmp_path))
    assert h.returncode == 0, h.stderr
    rows = h.stdout.splitlines()
    head = next(i for i, r in enumerate(rows) if r.startswith("when (UTC)"))
    assert head > 0 and rows[0].startswith("sweep2"), rows  # the node's state first, then its sweeps
    assert rows[head].split()[:4] == ["when", "(UTC)", "verdict", "train_tokens_per_s@cpu"] and len(rows) - head == 7
    assert rows[-1].strip().startswith("WARN: train_tokens_per_s@cpu")
    assert run_cli("cluster", "history", "sweep9", "--results", str(tmp_path)).returncode == 2


def _count_running(stop: threading.Event, seen: list[int]) -> None:
    """How many sweep tasks run at once, every 0.2 s until `stop`."""
    while not stop.is_set():
        out = subprocess.run(["squeue", "-h", "-p", "sweep", "-t", "R", "-n", "trainready-accept", "-o", "%i"],
                             capture_output=True, text=True).stdout
        seen.append(len(out.split()))
        time.sleep(0.2)


def test_a_license_caps_the_nodes_under_sweep_at_once(cluster, tmp_path: Path) -> None:
    """Three idle nodes: without --licenses their tasks run side by side; with --licenses trainready_sweep (one
    in slurm.conf's Licenses=) one at a time, the others pending until the license is free."""
    def swept(name: str, *extra: str) -> tuple[subprocess.CompletedProcess, int]:
        stop, seen = threading.Event(), []
        watch = threading.Thread(target=_count_running, args=(stop, seen))
        watch.start()
        try:
            p = run_cli(*BASE, "--results", str(tmp_path / name), "--level", "light", "--nodelist", "sweep[1-3]", *extra)
        finally:
            stop.set()
            watch.join()
        assert p.returncode == 0, p.stdout + p.stderr
        assert sorted(_last(tmp_path / name)["swept"]) == NODES[:3]
        return p, max(seen, default=0)

    _, free = swept("free")
    assert free >= 2, free  # the tasks overlap where nothing caps them
    _, capped = swept("capped", "--licenses", "trainready_sweep")
    assert capped == 1, capped
    bad = run_cli(*BASE, "--results", str(tmp_path / "bad"), "--licenses", "two words")
    assert bad.returncode == 2 and "--licenses two words: expected NAME or NAME:COUNT" in bad.stderr, bad.stderr



def test_a_nodes_nul_surrogate_esc_and_bel_are_cleaned_before_slurm_prometheus_and_the_terminal(cluster,
                                                                                               tmp_path: Path) -> None:
    """cluster.text: sweep3's record holds NUL, a lone surrogate, ESC and BEL in its messages.  Read plainly, the
    NUL ended the sweep in `ValueError: embedded null byte` (scontrol's argv) before the state was saved."""
    prom = tmp_path / "sweep.prom"
    try:
        p = run_cli(*BASE, "--results", str(tmp_path), "--nodelist", "sweep3", "--level", "quick", "--only", "matmul",
                    "--drain", "--strikes", "1", "--prometheus", str(prom), "--plant", "cluster.text=sweep3")
        assert p.returncode == 3 and "internal error" not in p.stderr, p.stdout + p.stderr
        record = (tmp_path / "runs").glob("*/nodes/sweep3.json")
        assert "\\u0000\\ud800\\u001b[2J\\u0007" in next(record).read_text()  # what the node wrote, as it wrote it
        state, reason = _reason("sweep3")
        assert "drain" in state and re.match(r"trainready:sweep/hw \d{4}-\d\d-\d\d: check matmul: FAIL", reason)
        assert "\ufffd\ufffd\ufffd[2J\ufffd" in reason, repr(reason)
        for out in (p.stdout + p.stderr, reason, prom.read_text(encoding="utf-8")):
            assert not {"\x00", "\x1b", "\x07"} & set(out), repr(out)
        saved = json.loads((tmp_path / "sweep" / "state.json").read_text())["nodes"]["sweep3"]
        assert saved["strikes"] == 1 and saved["drained"]["reason"] == reason
        assert 'trainready_sweep_drained{node="sweep3"} 1.0' in prom.read_text(encoding="utf-8")
    finally:
        undrain("sweep3")


def test_a_drain_slurm_refuses_is_said_for_that_node_and_the_others_are_drained_and_kept(cluster,
                                                                                         tmp_path: Path) -> None:
    """The first node's drain fails (a name Slurm does not know): it is said for that node, the next is drained,
    and the state and ledger keep both.  Before, the first SlurmError ended the sweep there."""
    from trainready.cluster.repair import ledger
    from trainready.cluster.judge.guard import parse_max_drain
    from trainready.cluster.judge.verdict import FleetVerdict, NodeVerdict
    from trainready.cluster.options import FleetOptions
    from trainready.cluster.sweep import judge, run, state

    doc = state.load(tmp_path)
    outs = [judge.Outcome(n, "fail", "check matmul: FAIL", 2, "drain") for n in ("nosuch7", "sweep2")]
    said: list[str] = []
    opts = FleetOptions(results=tmp_path, drain=True, max_drain=parse_max_drain("10"))
    try:
        got = run.act(opts, doc, outs, 4, run.SweepOptions(), state.now(), said.append)
        assert [o.action for o in got] == ["drain-failed", "drain"], got
        assert any(s.startswith("nosuch7: NOT drained: scontrol update") for s in said), said
        assert "drain" in _reason("sweep2")[0]
        assert [d["node"] for d in doc["drains"]] == ["sweep2"] and "drained" not in doc["nodes"].get("nosuch7", {})
        assert [(e["action"], e["node"]) for e in ledger.read(tmp_path)] == [("drain-failed", "nosuch7"),
                                                                            ("drain", "sweep2")]
        undrain("sweep2")  # `cluster run --drain`'s own drains (ledger.drain_rejected): the same
        rejected = tuple(NodeVerdict(n, False, ("check matmul: FAIL",), (), "", {}) for n in ("nosuch7", "sweep2"))
        said.clear()
        drained = ledger.drain_rejected(tmp_path / "run", FleetVerdict(rejected, (), (), "", {}), said.append)
        assert drained == ["sweep2"] and "drain" in _reason("sweep2")[0], said
        assert any(s.startswith("nosuch7: NOT drained: scontrol update") for s in said), said
    finally:
        undrain("sweep2")
