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
        if world_size < 1 or (be == "nccl" and world_size > gpus):
            raise UsageError(f"--world-size {world_size}: expected 1..{gpus if be == 'nccl' else 'N'} for {be}")
        return world_size, be
    spec_be = spec.comm.backend if spec.comm.backend != "auto" else ("nccl" if gpus else "gloo")
    ws = spec.comm.world_size if be == spec_be else None
    if be == "nccl":
        return min(ws or gpus, gpus), "nccl"
    return ws or CPU_DEFAULT_RANKS, "gloo"
