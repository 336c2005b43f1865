"""Job impact from Slurm accounting, on a real slurmdbd over Debian's MariaDB (`scripts/local-slurm.sh up --cluster
acct --nodes 2 --accounting`: both on 127.0.0.1; skipped with the script's one line where slurmdbd or
mariadb-server is missing).

A healthy `cluster run` passes acct1; then a user's job runs on it; then a run rejects it (a planted matmul
failure): the fleet record lists that job, of its user, and not the job that ran before the last pass, nor
trainready's own; `cluster history acct1` says the same."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import own_cluster, run_cli

pytestmark = pytest.mark.slow

CLUSTER = "acct"
CONF = f"/etc/slurm-{CLUSTER}/slurm.conf"
RUN = ("cluster", "run", "--nodelist", "acct[1-2]", "--spec", "example:local-slurm", "--only", "versions,matmul",
       "--time", "5:00", "--no-collective")


@pytest.fixture(scope="module")
def cluster():  # type: ignore[no-untyped-def]
    yield from own_cluster(CLUSTER, "--nodes", "2", "--accounting", nodes=[f"{CLUSTER}1", f"{CLUSTER}2"])


def _job(name: str, user: str = "nobody") -> str:
    """A user's job on acct1, run to its end (as `nobody`: another user than the one running trainready)."""
    cmd = (f"cd /tmp && SLURM_CONF={CONF} sbatch --parsable -w acct1 -J {name} -o /dev/null --wrap 'sleep 1'")
    job = subprocess.run(["su", "-s", "/bin/sh", user, "-c", cmd], capture_output=True, text=True, check=True).stdout.strip()
    for _ in range(60):
        out = subprocess.run(["sacct", "-a", "-X", "-n", "-P", "-j", job, "--format=State"], capture_output=True,
                             text=True, env={**os.environ, "SLURM_CONF": CONF}).stdout
        if "COMPLETED" in out:
            return job
        time.sleep(1)
    raise AssertionError(f"job {job} did not complete in accounting")


def test_rejected_node_lists_the_jobs_since_its_last_pass(cluster, tmp_path: Path):
    before = _job("before-pass")
    first = run_cli(*RUN, "--results", str(tmp_path))
    assert first.returncode == 0, first.stderr[-3000:]
    time.sleep(1.5)  # sacct's times are whole seconds: the next job starts after the pass
    after = _job("pretrain-70b")
    second = run_cli(*RUN, "--results", str(tmp_path), "--plant", "cluster.fail=acct1")
    doc = json.loads((tmp_path / "fleet.json").read_text())
    imp = doc["context"]["job_impact"]["acct1"]
    assert imp["known"] is True, (imp, second.stderr[-2000:])
    ids = [j["job_id"] for j in imp["jobs"]]
    assert before not in ids  # it ran before acct1's last pass: not this failure's
    assert ids == [after] and imp["jobs"][0]["user"] == "nobody" and imp["jobs"][0]["name"] == "pretrain-70b"
    assert not any(j["name"].startswith("trainready") for j in imp["jobs"])
    assert "acct2" not in doc["context"]["job_impact"]  # accepted: not asked about
    assert f"{after} (nobody, pretrain-70b, COMPLETED)" in second.stdout + second.stderr
    hist = run_cli("cluster", "history", "acct1", "--results", str(tmp_path))
    assert hist.returncode == 0 and f"{after} (nobody, pretrain-70b" in hist.stdout, hist.stderr
    # coverage over the partition: both passed the first run (active), neither has a passive health record
    cov = run_cli("cluster", "history", "--coverage", "--partition", "debug", "--results", str(tmp_path))
    assert cov.returncode == 1, cov.stderr
    assert "acct1: active" not in cov.stdout and "acct2: active" not in cov.stdout
    assert "acct1: passive: never passed" in cov.stdout and "acct2: passive: never passed" in cov.stdout


STATE = f"/var/lib/trainready-{CLUSTER}-slurm"
DBD = ["bash", "scripts/local-slurmdbd.sh", "up", f"/etc/slurm-{CLUSTER}", STATE, f"/var/log/trainready-{CLUSTER}-slurm",
       "16829"]  # the acct cluster's slurmctld port (scripts/local-slurm.sh): slurmdbd on +100, MariaDB on +101


def _stop_slurmdbd() -> None:
    pid = int(Path(STATE, "slurmdbd.pid").read_text().split()[0])
    os.kill(pid, 15)


def test_a_slurmdbd_stopped_mid_run_is_not_known_and_the_run_goes_on(cluster, tmp_path: Path):
    """slurmdbd stops while the run's tasks run: the run ends in its usual time, each rejected node's job impact
    'not known (slurmdbd not answering ...)', no wait for slurmctld (whose words sacct's 'Connection refused'
    shares).  --controller-wait 60: a run that mistook it for a silent controller would give up (exit 2)."""
    import threading

    from conftest import REPO

    t0 = time.monotonic()
    first = run_cli(*RUN, "--results", str(tmp_path))
    usual = time.monotonic() - t0
    assert first.returncode == 0, first.stderr[-3000:]
    stop = threading.Timer(2.0, _stop_slurmdbd)  # mid-run: after the submission, while the tasks run
    try:
        stop.start()
        t0 = time.monotonic()
        second = run_cli(*RUN, "--results", str(tmp_path), "--plant", "cluster.fail=acct1", "--controller-wait", "60")
        took = time.monotonic() - t0
    finally:
        stop.join()
        subprocess.run(DBD, cwd=REPO, check=True, capture_output=True, timeout=120)
    out = second.stdout + second.stderr
    assert "slurmctld not answering" not in out, out[-3000:]
    assert second.returncode == 3, out[-3000:]  # a planted run's verdict (judge/verdict.py PLANTED_EXIT)
    imp = json.loads((tmp_path / "fleet.json").read_text())["context"]["job_impact"]["acct1"]
    assert imp["known"] is False and imp["why"].startswith("not known (slurmdbd not answering: "), imp
    assert "Problem talking to the database: Connection refused" in imp["why"]
    assert "acct1: job impact: not known (slurmdbd not answering" in out
    # no wait for a controller that answers: a run that took sacct's refusal for a silent slurmctld waits out
    # --controller-wait (60 s) beyond its usual time before it gives up (exit 2, asserted against above)
    assert took < usual + 60, (took, usual)


def test_a_reason_ending_in_a_quote_is_kept_whole(cluster):
    """scontrol drops one leading and one trailing '"' of a reason's value (scontrol/update_node.c): the drain
    quotes it, so Slurm keeps the text as trainready wrote it."""
    from trainready.cluster.control import slurm

    reason = 'trainready:run/sw 2026-12-07: versions: FAIL: torch "2.4.0", the spec pins "2.5.1"'
    try:
        slurm.drain("acct2", reason)
        got = slurm.nodes(["acct2"])["acct2"].reason
    finally:
        slurm.undrain("acct2")
    assert got == reason, got
