"""A real host-setting difference on the local Slurm cluster: one node's slurmd (what its tasks start in) runs
in a private mount namespace with a 16 MiB /dev/shm and a 64 KiB locked-memory limit it cannot raise (no
CAP_SYS_RESOURCE, as a slurmd whose systemd unit sets LimitMEMLOCK=64K), so its job's task really has both;
`cluster run` names that node against the fleet majority and by the spec's /dev/shm pin, and only it.
On its own cluster (scripts/local-slurm.sh --cluster hostset), so no other test's nodes are touched."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import local_slurm_script, run_cli
from trainready.spec.load import example_path

CLUSTER = "hostset"  # its ports (local-slurm.sh: k = cksum % 6 + 1 = 6) are apart from alt's (4) and scale's (3)
CONF = f"/etc/slurm-{CLUSTER}/slurm.conf"
ENV = {"SLURM_CONF": CONF, "OMP_NUM_THREADS": "1"}
ODD = f"{CLUSTER}2"
SHM_MIB, MEMLOCK_KIB = 16, 64  # the odd node's /dev/shm (MiB) and locked-memory limit (KiB)
PIDFILE = Path(f"/var/run/slurmd-{ODD}.pid")  # scripts/local-slurm.sh: SlurmdPidFile=/var/run/slurmd-%n.pid


def _state(node: str) -> str:
    return subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T"], capture_output=True, text=True,
                          env={**os.environ, **ENV}).stdout.strip()


def _stop_slurmd() -> None:
    pid = int(PIDFILE.read_text().strip())
    os.kill(pid, 15)
    for _ in range(100):
        if not Path(f"/proc/{pid}").exists():
            return
        time.sleep(0.1)


def _wait_idle(node: str, within_s: float = 60.0) -> None:
    deadline = time.monotonic() + within_s
    while _state(node) not in ("idle", "mixed"):
        assert time.monotonic() < deadline, f"{node}: {_state(node)} after {within_s:.0f} s"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def odd_node():  # type: ignore[no-untyped-def]
    """The hostset cluster up, its second node's slurmd restarted inside the odd settings; restored after."""
    missing = [t for t in ("unshare", "setpriv", "prlimit") if shutil.which(t) is None]
    if os.geteuid() != 0 or missing:
        pytest.skip(f"needs root and util-linux's unshare, setpriv, prlimit (missing: {', '.join(missing) or 'root'})")
    p = local_slurm_script("up", "--cluster", CLUSTER, timeout=300)
    if p.returncode == 3:
        pytest.skip((p.stdout.strip() or p.stderr.strip()).splitlines()[-1])
    assert p.returncode == 0, p.stderr[-2000:]
    _stop_slurmd()
    start = (f"mount -t tmpfs -o size={SHM_MIB}m tmpfs /dev/shm && exec prlimit --memlock={MEMLOCK_KIB * 1024}:"
             f"{MEMLOCK_KIB * 1024} setpriv --bounding-set=-sys_resource --inh-caps=-sys_resource "
             f"slurmd -f {CONF} -N {ODD}")
    subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", start], check=True, timeout=60,
                   env={**os.environ, **ENV})
    try:
        _wait_idle(ODD)
        yield ODD
    finally:
        _stop_slurmd()
        local_slurm_script("down", "--cluster", CLUSTER, timeout=120)


def test_a_node_whose_task_starts_with_other_limits_and_shm_is_named(odd_node, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(example_path("local-slurm").read_text() + '\n[host]\npins = { "shm.size_gib" = ">= 1" }\n')
    res = tmp_path / "r"
    p = run_cli("cluster", "run", "-N", "3", "--spec", str(spec), "--only", "versions", "--time", "3:00",
                "--no-collective", "--results", str(res), "--json", str(tmp_path / "f.json"), env=ENV, timeout=600)
    doc = json.loads((tmp_path / "f.json").read_text())
    v = {n["node"]: n for n in doc["nodes"]}
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-2000:]
    odd = v[odd_node]
    assert odd["verdict"] == "reject", odd
    assert any(re.fullmatch(rf"host: ulimit\.memlock \S+ \(fleet majority\) ≠ {MEMLOCK_KIB}", r) for r in odd["reasons"]), odd
    assert f"host: shm.size_gib {round(SHM_MIB / 1024, 3)} misses the pin >= 1" in odd["reasons"], odd
    assert {c for c in odd["causes"]} >= {"host ulimit.memlock", "host pin shm.size_gib"}, odd
    others = [n for n in v if n != odd_node]
    assert all(v[n]["verdict"] == "accept" for n in others), {n: v[n] for n in others}
    record = json.loads(next(res.glob(f"runs/*/nodes/{odd_node}.json")).read_text())
    got = record["manifest"]["host_settings"]
    assert got["ulimit.memlock"]["value"] == MEMLOCK_KIB and got["ulimit.memlock"]["source"].startswith("getrlimit")
    assert got["shm.size_gib"]["value"] == round(SHM_MIB / 1024, 3)
