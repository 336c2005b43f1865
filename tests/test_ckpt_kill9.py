"""`kill -9` during a save leaves the previous checkpoint and `latest` intact.

A child process saves step 1 (small), then starts saving step 2 (a ~100 MB state).
It stalls inside the first fsync of step 2's data (after DCP wrote it, before the
manifest/rename), announces that with a marker file, and is SIGKILLed there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from trainready.ckpt.load import resolve_latest, verify
from trainready.ckpt.save import save_state

CHILD = textwrap.dedent(
    """
    import os, sys, time, warnings
    warnings.filterwarnings("ignore")
    from pathlib import Path
    import torch
    from trainready.ckpt.save import save_state
    root, marker = Path(sys.argv[1]), Path(sys.argv[2])
    save_state(root, 1, {"model": {"w": torch.arange(1000, dtype=torch.float32)}}, {})
    real_fsync = os.fsync
    def stalling_fsync(fd):
        real_fsync(fd)
        if any(p.suffix == ".distcp" for p in (root / "step-2.tmp").glob("*")):
            marker.write_text("in save")
            time.sleep(600)
    os.fsync = stalling_fsync
    save_state(root, 2, {"model": {"w": torch.ones(25_000_000)}}, {})  # 100 MB
    """
)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_kill_9_mid_save_keeps_previous_checkpoint(tmp_path: Path) -> None:
    root, marker = tmp_path / "ckpt", tmp_path / "marker"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(root), str(marker)], env=env)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert child.poll() is None, f"child exited early with {child.returncode}"
            assert time.monotonic() < deadline, "child never reached the save"
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL
    tmp = root / "step-2.tmp"
    assert tmp.is_dir() and any(tmp.glob("*.distcp"))  # the save really was under way
    assert not (root / "step-2").exists()
    assert resolve_latest(root) == root / "step-1"  # `latest` untouched, .tmp never picked
    verify(root / "step-1")
    with pytest.raises(Exception):
        verify(tmp)  # the half-written directory has no manifest
    into = {"model": {"w": torch.zeros(1000)}}
    import torch.distributed.checkpoint as dcp

    dcp.load(into, checkpoint_id=str(root / "step-1"))
    assert torch.equal(into["model"]["w"], torch.arange(1000, dtype=torch.float32))
    # The next save of step 2 clears the stale .tmp and completes.
    save_state(root, 2, {"model": {"w": torch.ones(10)}}, {})
    assert resolve_latest(root) == root / "step-2" and not tmp.exists()
