"""Shared test helpers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"


def _has_gpu() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        return False


HAS_GPU = _has_gpu()
# For tests that assert what happens on a machine WITHOUT GPUs (CI's machine).
cpu_machine_only = pytest.mark.skipif(HAS_GPU, reason="asserts the behaviour of a machine without GPUs")


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


def trained_cpu(steps: int, batch: int = 4, seq: int = 64):  # type: ignore[no-untyped-def]
    """A CPU Trainer after `steps` optimizer steps on seeded random tokens [batch, seq] (vocab 512)."""
    import numpy as np
    import torch

    from trainready.train.loop import TrainConfig, Trainer

    tr = Trainer(TrainConfig(steps=20), torch.device("cpu"), 1, 0)
    rs = np.random.RandomState(0)
    for _ in range(steps):
        x = rs.randint(0, 512, (batch, seq)).astype(np.int64)
        tr.step(x, x)
    return tr


def params(tr) -> dict:  # type: ignore[no-untyped-def, type-arg]
    """A detached copy of the model's state dict (name -> tensor)."""
    return {k: v.clone() for k, v in tr.model.state_dict().items()}
