"""A full disk, on a real small tmpfs mounted by the test: the free-space
pre-check refuses in one line (exit 2) naming the directory, bytes free and bytes needed; a
disk that fills during the save is reported as such with the path and leaves no `step-N`
directory and no `latest` pointer that looks valid."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest
import torch

from trainready.ckpt.load import resolve_latest, verify
from trainready.ckpt.save import LATEST, save_state
from trainready.errors import CheckpointError, CheckpointWriteError


def _can_mount() -> str:
    if os.geteuid() != 0:
        return "needs root to mount a tmpfs (mount -t tmpfs -o size=2m tmpfs DIR)"
    return ""


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                         capture_output=True, text=True)
    if res.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip() or res.returncode}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


needs_mount = pytest.mark.skipif(bool(_can_mount()), reason=_can_mount() or "root")


def _state(nbytes: int) -> dict:
    return {"model": {f"w{i}": torch.full((nbytes // 4 // 4,), float(i)) for i in range(4)}}


@needs_mount
@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_save_that_fills_the_disk_publishes_nothing(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "mnt", "2m") as mnt:
        root = mnt / "ckpt"
        with pytest.raises(CheckpointWriteError) as info:  # 4 MB into 2 MB
            save_state(root, 7, _state(4 << 20), {})
        msg = str(info.value)
        assert "no space left on device (ENOSPC" in msg and str(root / "step-7.tmp") in msg and "\n" not in msg
        assert sorted(p.name for p in root.iterdir()) == []  # no step-7(.tmp) directory, no latest
        with pytest.raises(CheckpointError):
            resolve_latest(root)
        # A previous checkpoint survives a later save that fills the disk, and stays the one `latest` names.
        save_state(root, 1, _state(64 << 10), {})
        with pytest.raises(CheckpointWriteError):
            save_state(root, 2, _state(4 << 20), {})
        assert sorted(p.name for p in root.iterdir()) == [LATEST, "step-1"]
        verify(resolve_latest(root))


@needs_mount
def test_precheck_refuses_a_small_dir_in_one_line(cli, tmp_path: Path) -> None:
    with tmpfs(tmp_path / "mnt", "2m") as mnt:
        res = cli("resume", "--cpu", "--dir", str(mnt / "ck"), "--steps", "4", "--checkpoint-step", "2")
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert res.returncode == 2, res.stdout + res.stderr
        assert len(lines) == 1 and "Traceback" not in res.stderr
        assert f"--dir {mnt / 'ck'}" in lines[0] and "bytes free" in lines[0] and "expected at least" in lines[0]
        free, need = [int(w) for w in lines[0].replace("(", " ").split() if w.isdigit()][:2]
        assert 0 < free < need
        assert not any((mnt / "ck").rglob("step-*"))  # nothing was written before the refusal


@needs_mount
@pytest.mark.slow
def test_disk_that_fills_during_the_save_is_named(cli, tmp_path: Path) -> None:
    """Big enough to pass the pre-check; the plant then fills it just before run B saves."""
    with tmpfs(tmp_path / "mnt", "16m") as mnt:
        out = tmp_path / "r.json"
        res = cli("resume", "--cpu", "--dir", str(mnt / "ck"), "--steps", "4", "--checkpoint-step", "2",
                  "--plant", "resume.fill_disk=1", "--json", str(out))
        assert "Traceback" not in res.stderr, res.stderr
        r = json.loads(out.read_text())["results"][0]
        assert r["status"] == "fail"
        assert "run B could not save its checkpoint at step 2" in r["message"]
        assert "no space left on device (ENOSPC" in r["message"] and "step-2.tmp" in r["message"]
        ckpt = Path(r["details"]["run_dir"]) / "ckpt"
        assert not (ckpt / LATEST).exists() and not any(ckpt.glob("step-*"))
