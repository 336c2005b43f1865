"""`scripts/local-slurm.sh down` leaves nothing of its cluster running, whatever state the cluster is in: a slurmd
whose pid file is gone, a slurmd SIGKILLed under a running job (its slurmstepd and the job's processes left
without it), every slurmd of a cluster stopped together.  At 640 nodes, `down` by pid file one at a time left
slurmd and slurmstepd running; the next `up` of another cluster then met their ports.  On the benchmark's own
cluster (`--cluster big`: slurmctld 16830, slurmd 6001..), which no other test uses."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import local_slurm_script

CLUSTER, NODES = "big", 3
ENV = {"SLURM_CONF": f"/etc/slurm-{CLUSTER}/slurm.conf"}


def ours() -> list[str]:
    """'pid cmdline' of every process of the cluster: its slurmd, its step daemons, its jobs' processes."""
    found = []
    for d in Path("/proc").iterdir():
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            env = (d / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if (cmd.startswith(f"slurmd -f /etc/slurm-{CLUSTER}/") or cmd.startswith("slurmctld -f /etc/slurm-big/")
                or f"SLURM_CLUSTER_NAME=trainready-{CLUSTER}".encode() in env
                or (cmd.startswith("slurmstepd") and f"SLURM_CONF={ENV['SLURM_CONF']}".encode() in env)):
            found.append(f"{d.name} {cmd}")
    return found


def test_down_stops_a_slurmd_without_pid_file_and_what_a_killed_slurmd_left(tmp_path: Path) -> None:
    if Path(ENV["SLURM_CONF"]).exists():
        pytest.skip("the 'big' cluster is up here (benchmarks/cluster_scale.py)")
    p = local_slurm_script("up", "--cluster", CLUSTER, "--nodes", str(NODES), timeout=300)
    if p.returncode == 3:
        pytest.skip((p.stdout.strip() or p.stderr.strip()).splitlines()[-1])
    try:
        assert p.returncode == 0, p.stderr[-2000:]
        subprocess.run(["sbatch", f"--array=1-{NODES}", "--output=/dev/null", "--wrap", "sleep 600"], check=True,
                       cwd=tmp_path, env={**os.environ, **ENV}, capture_output=True)
        deadline = time.monotonic() + 60
        while sum("sleep 600" in line for line in ours()) < NODES:
            assert time.monotonic() < deadline, ours()
            time.sleep(0.5)
        Path(f"/var/run/slurmd-{CLUSTER}2.pid").unlink()  # a slurmd whose pid file is gone
        os.kill(int(Path(f"/var/run/slurmd-{CLUSTER}3.pid").read_text()), signal.SIGKILL)  # its step runs on alone
        assert any("slurmstepd" in line for line in ours()) and sum("sleep 600" in line for line in ours()) == NODES
    finally:
        d = local_slurm_script("down", "--cluster", CLUSTER, timeout=300)
    assert d.returncode == 0, d.stderr[-2000:]
    assert ours() == []
