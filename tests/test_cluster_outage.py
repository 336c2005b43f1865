"""A fleet run outlives its control plane, on a real local cluster of its own (`scripts/local-slurm.sh up --cluster
outage --own-munge`: its own slurmctld, slurmd and munged, so stopping them disturbs no other test): slurmctld
stopped longer than a poll and started again, its munged restarted, one node's slurmd restarted under its running
task, the collector SIGKILLed and the run attached to, a run started --detach'ed, and a controller silent past
--controller-wait.  Each run's verdicts are those of an undisturbed run, and no node's task runs twice.

Each run: `cluster run -N 3 --only versions --no-collective`, disturbed as soon as its tasks run (they run ~10 s);
"no task twice" is read from Slurm's own records (scontrol show job: the cluster's MinJobAge=600 keeps them)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SRC, local_slurm_script, run_cli

CLUSTER = "outage"  # local-slurm.sh: k = cksum % 6 + 1 = 1, apart from alt (4), scale (3), hostset (6), site (2)
CONF = f"/etc/slurm-{CLUSTER}/slurm.conf"
ENV = {"SLURM_CONF": CONF}
CTLD_PID = Path(f"/var/run/slurmctld-trainready-{CLUSTER}.pid")
MUNGE_PID = Path(f"/var/lib/trainready-{CLUSTER}-slurm/munge/munged.pid")
RUN = ("--nodes", "3", "--spec", "example:local-slurm", "--only", "versions", "--no-collective",
       "--time", "3:00")
QUIET_S = 15.0  # slurmctld stopped this long: longer than the collector's polls (2 s at first, run.POLL_MIN_S)


@pytest.fixture(scope="module")
def outage():  # type: ignore[no-untyped-def]
    p = local_slurm_script("up", "--cluster", CLUSTER, "--own-munge", timeout=300)
    if p.returncode == 3:
        pytest.skip((p.stdout.strip() or p.stderr.strip()).splitlines()[-1])
    assert p.returncode == 0, p.stderr[-2000:]
    yield
    local_slurm_script("down", "--cluster", CLUSTER, timeout=300)


def slurm(*argv: str) -> str:
    return subprocess.run(list(argv), capture_output=True, text=True, env={**os.environ, **ENV}).stdout


def start(res: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, **ENV, "PYTHONPATH": str(SRC), "COLUMNS": "160"}
    return subprocess.Popen([sys.executable, "-m", "trainready", "cluster", "run", "--results", str(res), *RUN,
                             "--json", f"{res}.json", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def task_running(within_s: float = 120.0) -> None:
    """Until one acceptance task runs."""
    end = time.monotonic() + within_s
    while not slurm("squeue", "-h", "-n", "trainready-accept", "-t", "R", "-o", "%i").strip():
        assert time.monotonic() < end, "no acceptance task started"
        time.sleep(0.5)


def stop(pidfile: Path) -> None:
    pid = int(pidfile.read_text())
    os.kill(pid, signal.SIGTERM)
    while Path(f"/proc/{pid}").exists():
        time.sleep(0.1)


def verdicts(res: Path) -> tuple[dict[str, tuple[str, tuple[str, ...]]], dict[str, str]]:
    """({node: (verdict, reasons)}, {cross check: status}) of the run's JSON record."""
    doc = json.loads(Path(f"{res}.json").read_text())
    return ({n["node"]: (n["verdict"], tuple(n["reasons"])) for n in doc["nodes"]},
            {c["name"]: c["status"] for c in doc["cross"]})


def tasks_of(res: Path) -> list[str]:
    """'JOB_INDEX node' of every acceptance task Slurm ran for this run (its records name the run's folder)."""
    out = slurm("scontrol", "show", "jobs", "-o")
    return sorted(f"{m['a']}_{m['i']} {m['n']}" for line in out.splitlines() if "JobName=trainready-accept" in line
                  and str(res) in line and (m := re.search(r"ArrayJobId=(?P<a>\d+) ArrayTaskId=(?P<i>\d+)\b", line))
                  and (m := {**m.groupdict(), "n": re.search(r" NodeList=(\S+)", line).group(1)}))  # type: ignore[union-attr]


def once_each(res: Path) -> None:
    """One array, one task per node: nothing resubmitted, no task run twice."""
    tasks = tasks_of(res)
    assert len(tasks) == 3 and len({t.split("_")[0] for t in tasks}) == 1, tasks
    assert sorted(t.split()[1] for t in tasks) == [f"{CLUSTER}{k}" for k in (1, 2, 3)], tasks


@pytest.fixture(scope="module")
def undisturbed(outage, tmp_path_factory):  # type: ignore[no-untyped-def]
    res = tmp_path_factory.mktemp("calm") / "r"
    p = start(res)
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err[-3000:]
    return verdicts(res)


def test_slurmctld_stopped_mid_run(undisturbed, tmp_path) -> None:  # type: ignore[no-untyped-def]
    res = tmp_path / "r"
    p = start(res)
    task_running()
    stop(CTLD_PID)
    time.sleep(QUIET_S)
    subprocess.run(["slurmctld", "-f", CONF], check=True, env={**os.environ, **ENV})
    _, err = p.communicate(timeout=600)
    assert p.returncode == 0, err[-3000:]
    assert err.count("slurmctld not answering since") == 1 and "answering again" in err, err[-3000:]
    assert verdicts(res) == undisturbed
    once_each(res)


def test_collector_killed_then_attached(undisturbed, tmp_path) -> None:  # type: ignore[no-untyped-def]
    res = tmp_path / "r"
    p = start(res)
    task_running()
    p.send_signal(signal.SIGKILL)
    p.communicate()
    a = run_cli("cluster", "attach", "--results", str(res), "--json", f"{res}.json", env=ENV)
    assert a.returncode == 0, a.stderr[-3000:]
    assert "nothing resubmitted" in a.stderr, a.stderr[-2000:]
    assert verdicts(res) == undisturbed
    once_each(res)
    again = run_cli("cluster", "attach", "--results", str(res), env=ENV)  # finished: its verdict, nothing run
    assert again.returncode == 0 and "finished at" in again.stderr, again.stderr[-2000:]
    once_each(res)


def test_detached_then_attached(undisturbed, tmp_path) -> None:  # type: ignore[no-untyped-def]
    res = tmp_path / "r"
    d = run_cli("cluster", "run", "--results", str(res), *RUN, "--detach", env=ENV)
    assert d.returncode == 0, d.stderr[-2000:]
    run_id = d.stdout.strip()
    assert (res / "runs" / run_id / "state.json").is_file() and f"cluster attach --results {res} {run_id}" in d.stderr
    a = run_cli("cluster", "run", "--results", str(res), *RUN, "--attach", "--json", f"{res}.json", env=ENV)
    assert a.returncode == 0, a.stderr[-3000:]
    assert verdicts(res) == undisturbed
    once_each(res)


def test_munge_restarted_mid_run(undisturbed, tmp_path) -> None:  # type: ignore[no-untyped-def]
    res = tmp_path / "r"
    p = start(res)
    task_running()
    stop(MUNGE_PID)
    time.sleep(5.0)
    assert local_slurm_script("up", "--cluster", CLUSTER, "--own-munge", timeout=300).returncode == 0  # munged again
    _, err = p.communicate(timeout=600)
    assert p.returncode == 0, err[-3000:]
    assert "Munge encode failed" in " ".join(err.split()) and "answering again" in err, err[-3000:]
    assert verdicts(res) == undisturbed
    once_each(res)


def test_slurmd_restarted_under_its_task(undisturbed, tmp_path) -> None:  # type: ignore[no-untyped-def]
    res = tmp_path / "r"
    p = start(res)
    task_running()
    node = slurm("squeue", "-h", "-n", "trainready-accept", "-t", "R", "-o", "%N").split()[0]
    stop(Path(f"/var/run/slurmd-{node}.pid"))
    subprocess.run(["slurmd", "-f", CONF, "-N", node], check=True, env={**os.environ, **ENV})
    _, err = p.communicate(timeout=600)
    assert p.returncode == 0, err[-3000:]
    assert verdicts(res) == undisturbed
    once_each(res)


def test_silent_past_the_bound_then_attached(undisturbed, tmp_path) -> None:  # type: ignore[no-untyped-def]
    res = tmp_path / "r"
    p = start(res, "--controller-wait", "5")
    task_running()
    stop(CTLD_PID)
    try:
        _, err = p.communicate(timeout=300)
    finally:
        subprocess.run(["slurmctld", "-f", CONF], check=True, env={**os.environ, **ENV})
    assert p.returncode == 2, err[-3000:]
    last = " ".join(err.split()).split("trainready: error: ")[-1]
    assert "past --controller-wait 5 s" in last and "running" in last, last  # what is known: the last progress line
    pick = re.search(r"pick it up with `(trainready cluster attach [^`]+)`", last)
    assert pick, last
    a = run_cli(*pick.group(1).split()[1:], "--json", f"{res}.json", env=ENV)
    assert a.returncode == 0, a.stderr[-3000:]
    assert verdicts(res) == undisturbed
    once_each(res)


def test_rollout_survives_a_controller_restart_inside_a_wave(outage, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """slurmctld stopped while wave 2's tasks run, the rollout collector SIGKILLed meanwhile, slurmctld started,
    the same rollout command again: wave 1 not redone, wave 2's run picked up (not submitted again), every node
    accepted."""
    res = tmp_path / "roll"
    argv = ["cluster", "rollout", "--nodelist", f"{CLUSTER}[1-3]", "--waves", "1,all", "--results", str(res),
            "--spec", "example:local-slurm", "--only", "versions", "--no-collective", "--time", "3:00"]
    env = {**os.environ, **ENV, "PYTHONPATH": str(SRC), "COLUMNS": "160"}
    p = subprocess.Popen([sys.executable, "-m", "trainready", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    end = time.monotonic() + 300
    while not list(res.glob("waves/wave-2/runs/*/state.json")):
        assert p.poll() is None and time.monotonic() < end, p.communicate()[1][-3000:]
        time.sleep(0.5)
    task_running()
    stop(CTLD_PID)
    time.sleep(5.0)
    p.send_signal(signal.SIGKILL)
    p.communicate()
    subprocess.run(["slurmctld", "-f", CONF], check=True, env=env)
    again = run_cli(*argv, env=ENV)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "wave 1/2: done earlier" in again.stderr and "picking up its unfinished run" in again.stderr
    doc = json.loads((res / "rollout.json").read_text())
    assert [w["state"] for w in doc["waves"]] == ["done", "done"]
    assert sorted(n for w in doc["waves"] for n in w["accepted"]) == [f"{CLUSTER}{k}" for k in (1, 2, 3)]
    for wave in ("wave-1", "wave-2"):
        assert len(list(res.glob(f"waves/{wave}/runs/*"))) == 1  # one run per wave: nothing submitted again
        assert len(tasks_of(res / "waves" / wave)) == (1 if wave == "wave-1" else 2)


def test_resume_collector_killed_then_attached(outage, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """`cluster resume` of two nodes trainready drained (outage3 planted to die: no result), its collector
    SIGKILLed while they are accepted again inside its reservation, then `cluster attach`: what an undisturbed
    resume does (outage2 back in service, outage3 drained again for its missing record), the reservation
    deleted, one task per node."""
    from conftest import undrain

    monkeypatch.setenv("SLURM_CONF", CONF)
    res, good, bad = tmp_path / "r", f"{CLUSTER}2", f"{CLUSTER}3"
    for n in (good, bad):
        slurm("scontrol", "update", f"nodename={n}", "state=drain", "reason=trainready: drained by the test")
    try:
        env = {**os.environ, **ENV, "PYTHONPATH": str(SRC), "COLUMNS": "160"}
        p = subprocess.Popen([sys.executable, "-m", "trainready", "cluster", "resume", good, bad, "--results", str(res),
                              *RUN[2:], "--plant", f"cluster.kill={bad}"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
        task_running()
        p.send_signal(signal.SIGKILL)
        p.communicate()
        assert "trainready-revalidate" in slurm("scontrol", "show", "reservation")
        a = run_cli("cluster", "attach", "--results", str(res), "--json", f"{res}.json", env=ENV)
        assert a.returncode == 3, a.stderr[-3000:]  # records.PLANTED_EXIT: judged, and a planted run
        v, _ = verdicts(res)
        assert v[good][0] == "accept" and v[bad][0] == "reject", v
        state = {n: slurm("sinfo", "-h", "-N", "-n", n, "-o", "%T|%E").strip() for n in (good, bad)}
        assert "drain" not in state[good] and state[bad].startswith("drain") and "|trainready:" in state[bad], state
        assert "trainready-revalidate" not in slurm("scontrol", "show", "reservation")
        tasks = tasks_of(res)
        assert sorted(t.split()[1] for t in tasks) == [good, bad] and len({t.split("_")[0] for t in tasks}) == 1
    finally:
        undrain(good, bad)


def pair_steps(res: Path) -> list[str]:
    """'round-R NODES' of every pair step Slurm ran for this search (its --comment names the round's folder)."""
    out, steps = slurm("scontrol", "show", "jobs", "-o"), []
    for line in out.splitlines():
        m = re.search(rf"Comment=trainready-pairs {re.escape(str(res))}/pairs/(round-\d+)", line)
        n = re.search(r" NodeList=(\S+)", line)
        if "JobName=trainready-pair" in line and m and n:
            steps.append(f"{m.group(1)} {n.group(1)}")
    return sorted(steps)


def test_pairs_controller_stopped_then_attached(outage, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`cluster pairs` over the three nodes (outage2 planted slow; 3 round-robin rounds of one pair): slurmctld
    stopped QUIET_S as round 2's step ends, then the collector SIGKILLed in round 3 and `cluster attach --results R pairs`: outage2 named
    as in an undisturbed search, no finished pair run again."""
    res = tmp_path / "p"
    argv = ["cluster", "pairs", "--nodelist", f"{CLUSTER}[1-3]", "--results", str(res), "--spec", "example:local-slurm",
            "--time", "3:00", "--plant", f"cluster.slow={CLUSTER}2"]
    env = {**os.environ, **ENV, "PYTHONPATH": str(SRC), "COLUMNS": "160"}
    p = subprocess.Popen([sys.executable, "-m", "trainready", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    end = time.monotonic() + 300
    while not list(res.glob("pairs/round-2/*.json")):  # round 2's step done: round 3's srun starts next
        assert p.poll() is None and time.monotonic() < end, p.communicate()[1][-3000:]
        time.sleep(0.1)
    stop(CTLD_PID)
    time.sleep(QUIET_S)
    subprocess.run(["slurmctld", "-f", CONF], check=True, env=env)
    while not any(s.startswith("round-3") for s in pair_steps(res)):
        assert p.poll() is None and time.monotonic() < end, p.communicate()[1][-3000:]
        time.sleep(0.5)
    p.send_signal(signal.SIGKILL)
    p.communicate()
    a = run_cli("cluster", "attach", "--results", str(res), "pairs", "--json", f"{res}.json", env=ENV)
    assert a.returncode == 1, a.stderr[-3000:]
    assert json.loads(Path(f"{res}.json").read_text())["culprits"] == [f"{CLUSTER}2"]
    assert "round 1: measured earlier" in a.stderr and "round 2: measured earlier" in a.stderr, a.stderr[-3000:]
    steps = pair_steps(res)
    assert len(steps) == len(set(steps)) == 3, steps  # one step per pair: none run twice
