"""What each rank of the resume protocol's runs A, B and C is handed: one typed record."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trainready.resume.compare import Tolerance
from trainready.workload.loop import TrainConfig


@dataclass(frozen=True)
class RankJob:
    """One run's instructions for every one of its ranks (pickled to each by `ranks.launch`)."""

    role: str
    """"A" (0→N uninterrupted), "B" (0→K, then save) or "C" (fresh, load K, K→N); see resume/worker.py."""
    train: TrainConfig
    """The run: model preset, vocabulary, seed, batch, steps, precision, DDP or FSDP."""
    data: str
    """Token data (absolute path or Megatron prefix), validated by `prepare` before any rank starts."""
    dtype: str | None
    """Token dtype of a flat .bin; None for Megatron files and .npy (they carry their own)."""
    ckpt_dir: Path
    """Where B saves and C loads the checkpoint."""
    out_dir: Path
    """Where A leaves its states at K and N for C to compare with."""
    checkpoint_step: int
    """K: the step at which B saves and C resumes."""
    tolerance: Tolerance
    """Declared before the runs: bitwise (0, 0) or atol/rtol."""
    plants: tuple[str, ...] = ()
    """Planted faults (resume/protocol.py PLANTS), for tests and `--plant`."""
    go: Path | None = None
    """C only: the parent's word file (resume/protocol.py GO_FILE); C waits for it before loading B's
    checkpoint, and for the same name + "-A" before comparing with A's files.  None: A and B have ended."""
