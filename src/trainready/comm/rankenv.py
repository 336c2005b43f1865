"""What a sweep rank runs under: the cores it is pinned to, and the NCCL version and environment in force."""

from __future__ import annotations

import os
from typing import Any


def bind_cpus(rank: int, world: int) -> str | None:
    """Pin this rank to a fixed share of the cores this process may use, the same on every launch: one core
    each, round-robin, when ranks >= cores (8 gloo ranks on 2 cores: rank r on core r mod 2), else a block of
    cores // ranks each (Slurm's --cpu-bind=cores, block distribution).  Which ranks share a core changes how
    a ring exchange and a collective compete for it; left to the scheduler it changes at every launch (on a
    2-core x86 VM the efficiency's run-to-run spread was 3.7% unpinned, 2.0% round-robin; 8 runs each)."""
    try:
        cores = sorted(os.sched_getaffinity(0))
        k = max(1, len(cores) // world)
        mine = {cores[rank % len(cores)]} if world >= len(cores) else set(cores[rank * k:(rank + 1) * k])
        os.sched_setaffinity(0, mine)
    except (AttributeError, OSError):  # no affinity API (macOS) or not allowed: the scheduler places ranks
        return None
    rule = f"rank r on core r mod {len(cores)}" if world >= len(cores) else f"{k} cores per rank, in blocks"
    return f"{rule} of {cores}"


def versions() -> dict[str, Any]:
    """NCCL version and the NCCL_*/TORCH_NCCL_* environment in force (NVLS on/off changes busbw ~30%)."""
    import torch

    nccl = None
    try:
        if torch.cuda.is_available():
            v = torch.cuda.nccl.version()
            nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception:  # noqa: BLE001
        nccl = None
    env = {k: v for k, v in sorted(os.environ.items()) if k.startswith(("NCCL_", "TORCH_NCCL_"))}
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "nccl": nccl, "nccl_env": env}
