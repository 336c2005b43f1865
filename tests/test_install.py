"""Installing trainready into an image that already has torch leaves that torch alone
(seed 000: adding a package must not swap the official PyTorch).

A fresh venv gets torch 2.13.0, then `pip install <this repo>`; torch's version and
its dist-info (the RECORD of every installed file, with hashes) must be unchanged.
The source is copied first so the in-tree build never writes into the work tree.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _run(*cmd: str | Path, timeout: float = 900) -> str:
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{cmd}: exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    return r.stdout


def _torch_state(py: Path) -> tuple[str, str, str]:
    """(torch.__version__, dist-info directory name, sha256 of its RECORD)."""
    version = _run(py, "-c", "import torch; print(torch.__version__)").strip()
    site = Path(_run(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    infos = sorted(site.glob("torch-*.dist-info"))
    assert len(infos) == 1, infos
    return version, infos[0].name, hashlib.sha256((infos[0] / "RECORD").read_bytes()).hexdigest()


@pytest.mark.slow
def test_pip_install_keeps_the_images_torch(tmp_path):
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv)
    py, pip = venv / "bin" / "python", venv / "bin" / "pip"
    _run(pip, "install", "-q", "torch==2.13.0")
    before = _torch_state(py)
    assert before[0].startswith("2.13.0")
    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".git", ".venv", "venv", "build", "*.egg-info", "__pycache__", "tests"))
    log = _run(pip, "install", src)
    after = _torch_state(py)
    assert "Uninstalling torch" not in log and after == before
    helptext = _run(venv / "bin" / "trainready", "--help")
    assert "trainready" in helptext and "env" in helptext and "node" in helptext
