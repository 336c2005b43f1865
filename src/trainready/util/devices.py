"""Which local world to use: one rank per GPU with NCCL, else gloo on CPU."""

from __future__ import annotations

from trainready.errors import UsageError
from trainready.spec.model import NodeSpec

CPU_DEFAULT_RANKS = 8  # the seed's 8-GPU server, emulated by 8 gloo ranks


def cuda_count() -> int:
    try:
        import torch

        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001
        return 0


def local_world(spec: NodeSpec) -> tuple[int, str]:
    """(world_size, backend) for node-local collectives, per spec comm.backend / comm.world_size."""
    n = cuda_count()
    backend = spec.comm.backend
    if backend == "nccl" and n == 0:
        raise UsageError("spec comm.backend = 'nccl' but no CUDA GPU is visible here")
    if backend == "nccl" or (backend == "auto" and n > 0):
        ws = spec.comm.world_size or n
        return min(ws, n), "nccl"
    return spec.comm.world_size or CPU_DEFAULT_RANKS, "gloo"
