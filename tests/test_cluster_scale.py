"""Faults at scale in ONE `cluster run --drain` on 64 real slurmd (a second local cluster,
`scripts/local-slurm.sh up --nodes 64 --cluster scale`, beside the 3-node one the other Slurm tests use): four
nodes drained by an administrator, two DOWN (their slurmd stopped), two tasks SIGKILLed mid-run, one node in
someone else's reservation, one planted failing check, one planted slow node, and slurmctld stopped mid-run
for 20 s, then started again (a restart for a config change).  Every node's verdict is exactly what it should be
(accepted / rejected with its reason / not tested with Slurm's reason), no healthy node and no untested node is
drained, the administrator's reasons are untouched, the collector said once that the controller was silent and
when it answered again, Slurm ran one task per tested node (nothing resubmitted), and the run ends within 2
minutes of the last task that could run.  The cluster is taken down afterwards.

Cost: 197 s and 335 CPU s alone on a quiet 2-core x86 VM (54 tasks of versions+train_step, 4 at a time,
one intra-op thread each; the cross-node step without the all_reduce; up and down included); 64 nodes is the
smallest scale at which many nodes fail in different ways at once."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import local_slurm_script, run_cli

pytestmark = pytest.mark.slow

N = 64
CLUSTER = "scale"  # scripts/local-slurm.sh --cluster scale: its own slurmctld beside the 3-node test cluster
# SLURM_CONF: where every Slurm command here (and in the jobs, which inherit it) finds that cluster.
# OMP_NUM_THREADS=1: 4 tasks share 2 cores; torch's default of one intra-op thread per core would have the
# tasks' threads contend for the same 2 cores.
ENV = {"SLURM_CONF": f"/etc/slurm-{CLUSTER}/slurm.conf", "OMP_NUM_THREADS": "1"}
ADMIN = {f"scale{k}": f"hw: DIMM ticket {40 + k}" for k in (5, 6, 7, 8)}
DOWN = ("scale10", "scale11")
RESERVED, RESV = "scale12", "other_team"
FAIL, SLOW = "scale20", "scale30"
KILL = ("scale40", "scale50")
CHECKS = "versions,train_step"  # train_step: the tokens/s figure of the slow rule, and the planted failure
SLOW_FRACTION, PLANTED = 0.05, 0.005  # the fleet floor of the slow rule, the slow node's planted factor (below)
GRACE_S = 120.0  # the run ends within 2 minutes of the last task that could run
CTLD_PID = Path(f"/var/run/slurmctld-trainready-{CLUSTER}.pid")  # scripts/local-slurm.sh's pid file for the cluster
QUIET_S = 20.0  # slurmctld stopped this long (the collector polls every N/16 = 4 s), once RESTART_AFTER are done
RESTART_AFTER = 8  # node records written before the stop: the run is well under way, most tasks still to run


def sinfo(node: str) -> tuple[str, str]:
    out = subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T|%E"], capture_output=True, text=True,
                         env={**os.environ, **ENV}).stdout
    state, _, reason = out.strip().splitlines()[0].partition("|")
    return state, reason


def scontrol(*args: str) -> None:
    subprocess.run(["scontrol", *args], check=True, capture_output=True, text=True, env={**os.environ, **ENV})


def wait_reserved(node: str, within_s: float = 30.0) -> None:
    """Until sinfo says `node` is reserved: a reservation starting 'now' shows in the node's state a moment
    later, and a run that looks before then sees an idle node (the fault not yet planted)."""
    deadline = time.monotonic() + within_s
    while "resv" not in sinfo(node)[0] and "reserved" not in sinfo(node)[0]:
        assert time.monotonic() < deadline, f"{node} not reserved after {within_s:.0f} s: {sinfo(node)}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def sixty_four():  # type: ignore[no-untyped-def]
    """64 slurmd of a second local cluster, with the faults an on-call engineer meets in a week; taken down after."""
    p = local_slurm_script("up", "--nodes", str(N), "--cluster", CLUSTER, timeout=600)
    if p.returncode == 3:  # "local-slurm: cannot start: <what is missing>"
        pytest.skip((p.stdout.strip() or p.stderr.strip()).splitlines()[-1])
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
        local_slurm_script("down", "--cluster", CLUSTER, timeout=600)


def task_node(pid: str) -> str:
    """The node whose acceptance process `pid` is (its SLURMD_NODENAME), or '' for any other process.  A child
    the task forks for a probe (`timedatectl`, ...) carries the task's command line and environment until its
    exec, and may be gone a moment later: it is told apart by its parent, the task itself."""
    try:  # the command line first: most processes are not a node task, and their environ is not read
        if b"node-task" not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return ""
        ppid = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
        if b"node-task" in Path(f"/proc/{ppid}/cmdline").read_bytes():
            return ""
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return ""
    return next((e[16:].decode() for e in env if e.startswith(b"SLURMD_NODENAME=")), "")


def kill_mid_run(nodes: tuple[str, ...], stop: threading.Event, killed: dict[str, float]) -> None:
    """SIGKILL the acceptance process of each node as soon as it runs (found by its SLURMD_NODENAME)."""
    while not stop.is_set() and len(killed) < len(nodes):
        for pid in filter(str.isdigit, os.listdir("/proc")):
            node = task_node(pid)
            if node in nodes and node not in killed:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:  # ended between the look and the kill: looked for again
                    continue
                killed[node] = time.time()
        time.sleep(0.25)


def restart_controller(res: Path, stop: threading.Event, when: dict[str, float]) -> None:
    """Once RESTART_AFTER node records are written: SIGTERM slurmctld, QUIET_S of silence, start it again (the
    tasks run on in slurmd meanwhile, as in a restart for a config change)."""
    while not stop.is_set():
        if sum(1 for p in res.glob("runs/*/nodes/*.json") if not p.name.endswith(".progress.json")) >= RESTART_AFTER:
            break
        time.sleep(0.5)
    else:
        return
    pid = int(CTLD_PID.read_text())
    when["stopped"] = time.time()
    os.kill(pid, signal.SIGTERM)
    while Path(f"/proc/{pid}").exists():
        time.sleep(0.1)
    time.sleep(QUIET_S)
    subprocess.run(["slurmctld", "-f", ENV["SLURM_CONF"]], check=True, env={**os.environ, **ENV})
    when["started"] = time.time()


def jobcomp() -> list[dict[str, str]]:
    """Every acceptance task's completion record, from the cluster's jobcomp/filetxt log (scripts/local-slurm.sh:
    JobCompLoc): written once per task end, kept whatever its age.  `scontrol show jobs` is not read here: it
    forgets a task MinJobAge (600 s) after its end, and under the whole suite's load this run can take longer
    than that (its first tasks were gone from scontrol's answer by the time it ended)."""
    log = Path(f"/var/log/trainready-{CLUSTER}-slurm/jobcomp.log")
    return [dict(f.split("=", 1) for f in line.split() if "=" in f) for line in log.read_text().splitlines()
            if " Name=trainready-accept " in line]


def first_array_tasks(job: str) -> dict[str, int]:
    """Node → how many tasks Slurm ran for it in the run's first array, `job` (the run's record names it; the
    re-measurement of a slow suspect is a second array, over the suspects only); a task run twice (requeued,
    resubmitted) counts twice."""
    counts: dict[str, int] = {}
    for r in jobcomp():
        if r.get("ArrayJobId") == job:
            counts[r["NodeList"]] = counts.get(r["NodeList"], 0) + 1
    return counts


def last_task_end(since: float) -> float:
    ends = [dt.datetime.fromisoformat(r["EndTime"]).timestamp() for r in jobcomp() if r.get("EndTime", "")[:1].isdigit()]
    return max(e for e in ends if e >= since)


def spec(folder: Path) -> Path:
    """example:local-slurm with the slow rule's fleet floor at 0.05 x median (it says 0.2, for 3 nodes): here 54
    tasks share 2 cores with the rest of the test suite, and a healthy node measured 0.12 x the fleet median
    tokens/s (one run, the whole suite at once); the slow node is planted at 0.005 x."""
    text = (Path(__file__).parents[1] / "src/trainready/spec/examples/local-slurm.toml").read_text()
    assert "slow_fraction = 0.2\n" in text
    (folder / "scale.toml").write_text(text.replace("slow_fraction = 0.2\n", f"slow_fraction = {SLOW_FRACTION}\n"))
    return folder / "scale.toml"


@pytest.fixture(scope="module")
def run(sixty_four, tmp_path_factory):  # type: ignore[no-untyped-def]
    res = tmp_path_factory.mktemp("scale") / "r"
    stop, killed, ctld = threading.Event(), {}, {}
    th = threading.Thread(target=kill_mid_run, args=(KILL, stop, killed), daemon=True)
    th.start()
    restart = threading.Thread(target=restart_controller, args=(res, stop, ctld), daemon=True)
    restart.start()
    t0 = time.time()
    p = run_cli("cluster", "run", "--nodelist", f"{CLUSTER}[1-{N}]", "--results", str(res), "--spec", str(spec(res.parent)),
                "--only", CHECKS, "--max-parallel", "4", "--time", "10:00", "--drain", "--no-collective",
                "--json", str(res) + ".json",
                "--plant", f"cluster.fail={FAIL}:train_step", "--plant", f"cluster.slow={SLOW}:{PLANTED}", env=ENV, timeout=1200)
    t1 = time.time()
    stop.set()
    th.join()
    restart.join()
    assert "started" in ctld, f"slurmctld was not restarted mid-run ({ctld}): {p.stderr[-2000:]}"
    doc = json.loads(Path(str(res) + ".json").read_text()) if p.returncode in (0, 1, 3) else None
    assert doc is not None, p.stderr[-3000:]
    return p, {n["node"]: n for n in doc["nodes"]}, doc, killed, last_task_end(t0), t1


def test_the_collector_waited_for_the_restarted_controller_and_resubmitted_nothing(run) -> None:  # type: ignore[no-untyped-def]
    p, v, doc, _, _, _ = run
    assert p.stderr.count("slurmctld not answering since") == 1 and "answering again" in p.stderr, p.stderr[-3000:]
    tested = sorted(n for n, e in v.items() if e["verdict"] != "not tested")
    assert first_array_tasks(str(doc["context"]["job_id"])) == {n: 1 for n in tested}  # one task per tested node, none for an untested one


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
    assert [r for r in v[FAIL]["reasons"] if r.startswith("check train_step: FAIL")], v[FAIL]
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
    drained = {f"{CLUSTER}{k}" for k in range(1, N + 1) if "drain" in sinfo(f"{CLUSTER}{k}")[0]}
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
