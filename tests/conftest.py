"""Shared test helpers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run `python -m trainready ARGS` in a subprocess (the real CLI, real exit codes)."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(SRC) + os.pathsep + e.get("PYTHONPATH", "")
    e.setdefault("COLUMNS", "160")
    if env:
        e.update(env)
    return subprocess.run(
        [sys.executable, "-m", "trainready", *args], capture_output=True, text=True, env=e, timeout=timeout
    )


@pytest.fixture
def cli():
    return run_cli
