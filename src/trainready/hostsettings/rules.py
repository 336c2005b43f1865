"""Host settings known to break or slow training on any one node, each rule with its public source.

Pure: a node's settings (manifest/hostset.py, key → value as text) in, findings out.  The `host` node check and
the fleet verdict (hostsettings/drift.py) both apply these, so a node is named for them without a reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from trainready.manifest import is_unavailable

NCCL_MEMORY_DOC = ("NCCL User Guide, Troubleshooting > Runtime and MPI issues > Memory issues > Shared memory "
                   "(docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/runtime_and_mpi_issues.html): "
                   "'If insufficient shared memory is available, NCCL will fail to initialize'; in containers "
                   "'--shm-size=1g --ulimit memlock=-1'")
TORCH_SHM_DOC = ("PyTorch README, Docker image: 'PyTorch uses shared memory to share data between processes ... "
                 "increase shared memory size either with --ipc=host or --shm-size' (torch multiprocessing, "
                 "DataLoader workers)")
PERSISTENCE_DOC = ("NVIDIA Driver Persistence (docs.nvidia.com/deploy/driver-persistence): without persistence the "
                   "driver deinitializes the GPUs when the last client exits, and every job start initializes them "
                   "again")
SHM_MIN_GIB = 1.0  # GiB: NCCL's documented container setting --shm-size=1g (Docker's default is 64 MiB)


@dataclass(frozen=True)
class Bad:
    """One known-bad value on one node."""

    key: str  # the setting's key (manifest/hostset.py)
    fatal: bool  # True: fails the node (FAIL); False: a warning
    text: str  # what is wrong, with the value
    source: str  # the public document that says so


def has_rdma(settings: Mapping[str, str]) -> bool:
    """An InfiniBand or RoCE port is ACTIVE (ib.DEV/PORT.state)."""
    return any(k.startswith("ib.") and k.endswith(".state") and v == "ACTIVE" for k, v in settings.items())


def has_gpus(settings: Mapping[str, str]) -> bool:
    """NVML answered for this node's GPUs (a CPU node's gpu.* settings are 'unavailable: ...')."""
    v = settings.get("gpu.persistence_mode")
    return v is not None and not is_unavailable(v)


def _shm(settings: Mapping[str, str]) -> list[Bad]:
    raw = settings.get("shm.size_gib")
    try:
        gib = float(raw) if raw is not None else None
    except ValueError:
        gib = None
    if gib is None or gib >= SHM_MIN_GIB:
        return []
    if has_gpus(settings):
        return [Bad("shm.size_gib", True, f"/dev/shm is {gib:g} GiB < {SHM_MIN_GIB:g} GiB: NCCL puts its intra-node "
                    "buffers there and fails to initialize when it cannot extend them", NCCL_MEMORY_DOC)]
    return [Bad("shm.size_gib", False, f"/dev/shm is {gib:g} GiB < {SHM_MIN_GIB:g} GiB: torch multiprocessing and "
                "DataLoader workers share tensors through it", TORCH_SHM_DOC)]


def _memlock(settings: Mapping[str, str]) -> list[Bad]:
    v = settings.get("ulimit.memlock")
    if v is None or v == "unlimited" or not has_rdma(settings):
        return []
    return [Bad("ulimit.memlock", True, f"ulimit -l (memlock) is {v} KiB, not unlimited, on a node with active "
                "InfiniBand/RoCE ports: RDMA registers (pins) its buffers within this limit", NCCL_MEMORY_DOC)]


def _persistence(settings: Mapping[str, str]) -> list[Bad]:
    v = settings.get("gpu.persistence_mode")
    if v is None or is_unavailable(v) or v == "enabled":
        return []
    return [Bad("gpu.persistence_mode", False, f"GPU persistence mode {v}", PERSISTENCE_DOC)]


def known_bad(settings: Mapping[str, str]) -> list[Bad]:
    """Every known-bad value among this node's settings."""
    return [*_memlock(settings), *_shm(settings), *_persistence(settings)]
