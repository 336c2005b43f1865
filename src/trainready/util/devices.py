"""Which local world to use: one rank per GPU with NCCL, else gloo on CPU."""

from __future__ import annotations

from trainready.errors import UsageError
from trainready.spec.model import NodeSpec

CPU_DEFAULT_RANKS = 8  # the seed's 8-GPU server, emulated by 8 gloo ranks
GLOO_RANKS_PER_CORE = 4  # each gloo rank is a process with torch loaded (~0.3 GB RSS); more than this many per
# core only measures the scheduler (200 ranks on 2 cores printed nothing for minutes)
GLOO_LIMIT_RULE = f"{GLOO_RANKS_PER_CORE} per CPU core, at least {CPU_DEFAULT_RANKS}"


def gloo_rank_limit() -> int:
    """Most gloo ranks a local run may start: max(8, 4 x the CPU cores this process may use)."""
    import os

    try:
        cores = len(os.sched_getaffinity(0))  # a 2-core container on a 64-core host has 2
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(CPU_DEFAULT_RANKS, GLOO_RANKS_PER_CORE * cores)


def cuda_count() -> int:
    try:
        import torch

        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001
        return 0


def local_world(spec: NodeSpec, backend: str = "auto", world_size: int | None = None) -> tuple[int, str]:
    """(world_size, backend) for node-local collectives.

    A flag (`backend` other than "auto", `world_size`) wins over the spec's comm.backend /
    comm.world_size; "auto" means NCCL with one rank per visible GPU, else gloo with 8 ranks.
    The spec's world size applies only to the spec's own backend.
    """
    gpus = cuda_count()
    flag = backend != "auto"
    want = backend if flag else spec.comm.backend
    be = want if want != "auto" else ("nccl" if gpus else "gloo")
    if be == "nccl" and gpus == 0:
        where = "--backend nccl:" if flag else "spec comm.backend = 'nccl' but"
        raise UsageError(f"{where} no CUDA GPU is visible here")
    if world_size is not None:
        top = gpus if be == "nccl" else gloo_rank_limit()
        if not 1 <= world_size <= top:
            why = "one rank per visible GPU" if be == "nccl" else GLOO_LIMIT_RULE
            raise UsageError(f"--world-size {world_size}: expected 1..{top} for {be} ({why})")
        return world_size, be
    spec_be = spec.comm.backend if spec.comm.backend != "auto" else ("nccl" if gpus else "gloo")
    ws = spec.comm.world_size if be == spec_be else None
    if be == "nccl":
        return min(ws or gpus, gpus), "nccl"
    return ws or CPU_DEFAULT_RANKS, "gloo"
