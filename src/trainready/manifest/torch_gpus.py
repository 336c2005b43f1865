"""The GPUs torch (the CUDA runtime) sees, for matching against NVML's.

Bring-up checks the GPUs on the host, then again inside the container, and the two
views must correspond.  NVML reports every GPU the driver exposes to this
(container) namespace; the CUDA runtime honours CUDA_VISIBLE_DEVICES, so torch's
set must be a subset of NVML's, and equal to it when CUDA_VISIBLE_DEVICES is unset.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from trainready.manifest import unavailable


@dataclass(frozen=True)
class TorchGpu:
    index: int
    name: str
    uuid: str  # as torch prints it: "xxxxxxxx-xxxx-..." (no "GPU-" prefix), or "unavailable: ..."
    memory_total_mib: int  # total_memory // 2**20


@dataclass(frozen=True)
class TorchGpus:
    available: bool
    reason: str  # why not available ("" when available)
    cuda_visible_devices: str | None  # the env var as this process saw it (None = unset)
    devices: tuple[TorchGpu, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "available": self.available,
            "reason": self.reason,
            "cuda_visible_devices": self.cuda_visible_devices,
            "count": len(self.devices),
            "devices": [d.__dict__ for d in self.devices],
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> "TorchGpus":
        return TorchGpus(
            available=bool(d["available"]),
            reason=str(d.get("reason", "")),
            cuda_visible_devices=d.get("cuda_visible_devices"),
            devices=tuple(TorchGpu(**x) for x in d.get("devices", [])),
        )


def norm_uuid(u: str) -> str:
    """NVML says "GPU-<hex uuid>", torch prints "<hex uuid>": compare lower-case without the prefix."""
    u = u.strip().lower()
    return u[4:] if u.startswith("gpu-") else u


def collect_torch() -> TorchGpus:
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        import torch
    except ImportError as exc:
        return TorchGpus(False, unavailable(f"torch not importable: {exc}"), cvd)
    if torch.version.cuda is None:
        return TorchGpus(False, unavailable(f"torch {torch.__version__} is a CPU-only build (torch.version.cuda is None)"), cvd)
    try:
        if not torch.cuda.is_available():
            return TorchGpus(False, unavailable("torch.cuda.is_available() is False (no driver or no visible GPU)"), cvd)
        devs = []
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            raw = getattr(p, "uuid", None)  # _CudaDeviceProperties.uuid: absent in older torch
            uuid = str(raw) if raw is not None else unavailable(f"torch {torch.__version__} does not expose device UUIDs")
            devs.append(TorchGpu(i, str(p.name), uuid, int(p.total_memory) // 2**20))
    except Exception as exc:  # noqa: BLE001 - CUDA init errors (e.g. driver too old) are findings
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return TorchGpus(False, unavailable(f"CUDA initialisation failed: {first}"), cvd)
    return TorchGpus(True, "", cvd, tuple(devs))
