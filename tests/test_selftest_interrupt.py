"""`trainready selftest` interrupted at any moment stops its cases, unmounts what it mounted, removes its scratch and
exits 128 + the signal with one line: never "internal error", never a tmpfs left mounted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _mounts_under(root: Path) -> list[str]:
    return [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines() if str(root) in line.split()[1]]


@pytest.mark.skipif(os.geteuid() != 0, reason="the fill_disk case mounts a tmpfs of its own: needs root")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_selftest_interrupted_with_its_disk_mounted_unmounts_it_and_exits_with_one_line(
        tmp_path: Path, sig: signal.Signals) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    p = subprocess.Popen([sys.executable, "-m", "trainready", "selftest", "--only", "resume.fill_disk"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        end = time.monotonic() + 120
        while not _mounts_under(tmp_path) and time.monotonic() < end and p.poll() is None:
            time.sleep(0.05)
        assert _mounts_under(tmp_path), "the case's tmpfs was never mounted"
        time.sleep(0.5)  # the case's command is running on it
        p.send_signal(sig)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    lines = err.strip().splitlines()
    assert p.returncode == 128 + sig, (p.returncode, err)
    assert "internal error" not in err and "Traceback" not in err, err
    assert lines[-1].startswith(f"trainready: interrupted ({sig.name}) during selftest (0 of 1 case(s) done)"), err
    assert "mounts undone" in lines[-1], err
    assert _mounts_under(tmp_path) == [], Path("/proc/mounts").read_text()
    assert not list(tmp_path.glob("trainready-selftest-*")), list(tmp_path.iterdir())
